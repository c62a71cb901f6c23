"""Where a stream batch ends when its range holds more than a batch may take: after a
restart behind the head, catch-up comes in bounded batches instead of one batch of
everything the server wrote meanwhile (docs/design.md, 'Bounded memory').

A batch ends at the last transaction boundary at which it holds at most
``scan.binlog.max-rows-per-batch`` row changes of the captured tables (and at most
Spark's ``ReadMaxRows`` / ``ReadMaxBytes``, bytes of binlog), but always takes at least
one whole transaction: a transaction is never split, so one larger than the limit is a
batch of its own. A boundary is where a transaction's first event (its GTID event,
which MySQL 5.7+ and MariaDB 10+ write for every transaction, DDL included) begins.

The end is a pure function of the start, the limits and the binlog: a batch planned
again after a driver restart ends at the same position. Only row events of captured
tables are looked at, and only their lengths (:mod:`cdc_source.binlog.row_count`).

The driver's other passes over a batch's range, its GTID state and its table statements,
ride on this one where it reads (:meth:`BatchEnds.end_with`): a range of many small
transactions is then read once, not twice (100K single-row transactions: 2.7 s of
planning in two passes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import unwrap_payload
from cdc_source.binlog.gtid_scan import add_event, add_gtid, event_gtid
from cdc_source.binlog.row_count import RowCounter
from cdc_source.binlog.rows_event import parse_rows_event
from cdc_source.binlog.table_map import TableMaps, table_id_of
from cdc_source.binlog.transport import DumpSource
from cdc_source.gtid import GtidState
from cdc_source.offsets import BinlogPosition
from cdc_source.offsets import file_number as _file_number
from cdc_source.options import SourceOptions
from cdc_source.retry import RetryPolicy
from coordinator.ddl_scan import STATEMENT_EVENTS, RangeStatements
from coordinator.gtid_tracker import check_reached

log = logging.getLogger("cdc_mysql")

TRANSACTION_STARTS = {c.GTID, c.ANONYMOUS_GTID, c.GTID_TAGGED, c.MARIADB_GTID}
_STARTING_STATES = {c.MARIADB_GTID_LIST, c.PREVIOUS_GTIDS}  # a file's state before it
_COUNTED = {c.TABLE_MAP, c.TRANSACTION_PAYLOAD, *c.ROW_EVENTS}  # what _rows looks at


@dataclass(frozen=True)
class StreamLimit:
    """What one stream batch may take: row changes of captured tables, binlog bytes."""

    rows: int | None = None
    bytes: int | None = None

    def within(self, rows: int, size: int) -> bool:
        rows_ok = self.rows is None or rows <= self.rows
        return rows_ok and (self.bytes is None or size <= self.bytes)

    @property
    def unbounded(self) -> bool:
        return self.rows is None and self.bytes is None


def stream_limit(
    options: SourceOptions, max_rows: int | None, max_bytes: int | None
) -> StreamLimit:
    """A stream batch's limit: ``scan.binlog.max-rows-per-batch``, within Spark's
    ReadMaxRows / ReadMaxBytes if it passed one."""
    rows = options.binlog_rows_per_batch
    if max_rows is not None:
        rows = max_rows if rows is None else min(rows, max_rows)
    return StreamLimit(rows, max_bytes)


class BatchEnds:
    """Finds bounded batch ends on the driver's dump connection (server id: the range's
    last, shared with the GTID tracker and the XA watermark, which never read at once)."""

    def __init__(
        self,
        connect: Callable[[], object],
        server_id: int,
        tables: set[str],
        policy: RetryPolicy | None = None,
        source: DumpSource | None = None,
        row_counter: RowCounter | None = None,
    ) -> None:
        self.tables = tables
        self._source = source or DumpSource(connect, server_id, policy=policy or RetryPolicy(0))
        # Parsed once per distinct TABLE_MAP body across scans; a scan starts at a
        # transaction boundary, so every row event it reads follows its own table map.
        self._maps = TableMaps()
        self._counter = row_counter or RowCounter()

    def reads(self, start: BinlogPosition, head: BinlogPosition, limit: StreamLimit) -> bool:
        """Whether :meth:`end` must read ``(start, head]`` to find the end (else it is
        ``head``)."""
        if limit.unbounded or start.coordinates >= head.coordinates:
            return False
        # a row change takes at least a byte of binlog: within the limit in bytes, nothing
        # to count
        return start.file != head.file or not limit.within(
            head.pos - start.pos, head.pos - start.pos
        )

    def end(
        self, start: BinlogPosition, head: BinlogPosition, limit: StreamLimit
    ) -> BinlogPosition:
        """``head``, or the last transaction boundary in ``(start, head)`` within
        ``limit`` (at least one transaction past ``start``)."""
        if not self.reads(start, head, limit):
            return head
        return self._bounded(start, head, limit, self._last_boundary(start, head, limit))

    def end_with(
        self,
        start: BinlogPosition,
        head: BinlogPosition,
        limit: StreamLimit,
        state: GtidState,
        statements: RangeStatements | None,
    ) -> BinlogPosition:
        """:meth:`end` (which must read: :meth:`reads`), in a pass that also leaves in
        ``state`` (the GTID state at ``start``) the state at the end found, and in
        ``statements`` (a collector of ``(start, head]``'s table statements) the
        statements up to it, kept for the end (``RangeStatements.done``).

        A transaction's GTID is added once the batch takes it: when the boundary after it
        is within the limit, or the pass reaches ``head``. The end is where an event ends
        and the binlog holds every event up to it, else :class:`GtidTrackingError`, as the
        GTID tracker's own pass would say."""
        riders = _Riders(state, statements)
        boundary = self._last_boundary(start, head, limit, riders)
        if boundary is None:  # the batch takes the whole range
            check_reached(head, riders.reached)
            riders.take_pending()
        end = self._bounded(start, head, limit, boundary)
        if statements is not None:
            statements.passed(riders.reached)  # it was handed the statement events only
            statements.narrow(end)
            statements.done()
        return end

    def _bounded(
        self,
        start: BinlogPosition,
        head: BinlogPosition,
        limit: StreamLimit,
        boundary: tuple[str, int, int, int] | None,
    ) -> BinlogPosition:
        if boundary is None:
            return head
        file, pos, rows, size = boundary
        log.info(
            "stream batch bounded at %s:%d (%d row changes, %d binlog bytes; limit %s rows, "
            "%s bytes); the head %s is read by the next batches",
            file,
            pos,
            rows,
            size,
            limit.rows,
            limit.bytes,
            head,
        )
        return replace(head, file=file, pos=pos, gtids="", xa=None)

    def _last_boundary(
        self,
        start: BinlogPosition,
        head: BinlogPosition,
        limit: StreamLimit,
        riders: _Riders | None = None,
    ) -> tuple[str, int, int, int] | None:
        until = head.coordinates
        rows = size = 0
        best: tuple[str, int, int, int] | None = None
        transactions = 0  # transaction starts seen past ``start``
        previous = (start.file, start.pos)
        file, number = "", 0
        reader, events, close = self._source.open(start.file, start.pos, until)
        try:
            for event in events:
                if event.file != file:  # a per-event cost: every event of the range is read
                    file, number = event.file, _file_number(event.file)
                where = (number, event.end_pos)
                if where > until:
                    if riders is not None:
                        check_reached(head, where)  # raises: not where an event ends
                    break
                kind = event.type
                if kind in TRANSACTION_STARTS:
                    if transactions and previous[0] == event.file:
                        here = (previous[0], previous[1], rows, size)
                        if not limit.within(rows, size):
                            if best is None and riders is not None:
                                riders.take_pending()  # the batch is what was read so far
                            return best or here  # at least one whole transaction
                        best = here
                        if riders is not None:
                            riders.take_pending()
                    transactions += 1
                if riders is not None:
                    riders.see(event, reader, where)
                size += event.end_pos - (previous[1] if previous[0] == event.file else 0)
                if kind in _COUNTED:
                    rows += self._rows(event, reader.format)
                previous = (event.file, event.end_pos)
                if where == until:
                    break
        finally:
            close()
        if transactions and not limit.within(rows, size):
            return best
        return None

    def _rows(self, event, fmt) -> int:
        t = event.type
        if t == c.TABLE_MAP:
            self._maps.add(event.body, fmt.post_header_len(c.TABLE_MAP, 8), fmt.mariadb)
            return 0
        if t in c.ROW_EVENTS:
            table_id = table_id_of(event.body, fmt.post_header_len(t, 8))
            table_map = self._maps.by_id.get(table_id)
            if table_map is None or table_map.name not in self.tables:
                return 0
            rows_event = parse_rows_event(event, fmt, len(table_map.columns))
            return self._counter.count(rows_event, table_map)
        if t == c.TRANSACTION_PAYLOAD:
            return sum(self._rows(inner, fmt) for inner in unwrap_payload(event))
        return 0


class _Riders:
    """The GTID state and the statement collector a batch-end pass carries."""

    def __init__(self, state: GtidState, statements: RangeStatements | None) -> None:
        self.state = state
        self.statements = statements
        # What changes the state since the last boundary the batch took, in binlog order:
        # GTIDs, and a file's starting-state event (GTID_LIST, PREVIOUS_GTIDS) as read.
        self.pending: list[tuple | object] = []
        self.reached: tuple[int, int] = (0, 0)

    def see(self, event, reader, where: tuple[int, int]) -> None:
        self.reached = where
        kind = event.type
        if kind in TRANSACTION_STARTS:
            gtid = event_gtid(self.state, event)
            if gtid is not None:
                self.pending.append(gtid)
        elif kind in _STARTING_STATES:
            self.pending.append(event)
        elif kind in STATEMENT_EVENTS and self.statements is not None:
            self.statements(event, reader)

    def take_pending(self) -> None:
        for change in self.pending:
            if isinstance(change, tuple):
                add_gtid(self.state, change)
            else:
                add_event(self.state, change)
        self.pending.clear()
