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

The count is a listener of the driver's one pass over a batch's range
(:class:`RowLimit`, :mod:`coordinator.range_pass`), which also finds the end's GTID
state, the range's table statements and its XA transactions; :class:`BatchEnds` runs a
pass of the count alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import unwrap_payload
from cdc_source.binlog.plain_events import new_plain_events
from cdc_source.binlog.row_count import RowCounter
from cdc_source.binlog.rows_event import RowsEventHeaders
from cdc_source.binlog.table_map import TableMap, TableMaps, table_id_of
from cdc_source.binlog.transport import DumpSource
from cdc_source.offsets import BinlogPosition
from cdc_source.options import SourceOptions
from cdc_source.retry import RetryPolicy
from coordinator.range_pass import Listener, RangePass, Where

log = logging.getLogger("cdc_mysql")

_COUNTED = frozenset({c.TABLE_MAP, c.TRANSACTION_PAYLOAD, *c.ROW_EVENTS})  # what RowLimit reads


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


class RowCount:
    """Counts the row changes of captured tables in a stream of events, from their
    images' lengths (:mod:`cdc_source.binlog.row_count`). Table maps are parsed once per
    distinct TABLE_MAP body across passes; a pass starts at a transaction boundary, so
    every row event it reads follows its own table map."""

    def __init__(self, tables: set[str], counter: RowCounter | None = None) -> None:
        self.maps = TableMaps()
        self.counter = counter or RowCounter()
        self.headers = RowsEventHeaders()
        # event type -> (the header bytes last counted, its table map, its format): an
        # event of that type whose body starts with them, while that map is still the
        # one of its table id, has that header (RowsEventHeaders' rule, one lookup)
        self._last: dict[int, tuple[bytes, TableMap, object]] = {}
        # the same maps and headers, registered for the C splitter's plain events
        self.plain = new_plain_events("native") if self.counter.native is not None else None
        self._tables = tables

    @property
    def tables(self) -> set[str]:
        return self._tables

    @tables.setter
    def tables(self, names: set[str]) -> None:
        if names != self._tables:
            self._unregister()  # registered as captured or not under the tables before
        self._tables = names

    def forget(self) -> None:
        """Another server's binlog: its table ids name other tables."""
        self.maps = TableMaps()
        self._unregister()

    def _unregister(self) -> None:
        """The headers counted and the plain events' registry start again (together: a
        header is registered for the plain events when it is counted in Python)."""
        self._last.clear()
        if self.plain is not None:
            self.plain.clear()

    def mapped(self, body: bytes, fmt) -> None:
        """A TABLE_MAP event's ``body``: its table id now names that map."""
        maps = self.maps
        if len(maps.by_id) > 10_000:  # a long-lived follower sees ever new table ids
            maps.by_id.clear()
            self._unregister()
        table_map = maps.add(body, fmt.post_header_len(c.TABLE_MAP, 8), fmt.mariadb)
        if self.plain is not None:
            captured = table_map.name in self._tables
            packed, json_bitmap = self.counter.packed(table_map) if captured else (b"", -1)
            self.plain.table(table_map.table_id, body, captured, packed, json_bitmap)

    def rows(self, event, fmt) -> int:
        t = event.type
        last = self._last.get(t)
        if last is not None:
            header, table_map, last_fmt = last
            body = event.body
            if (
                fmt is last_fmt
                and body.startswith(header)
                and self.maps.by_id.get(table_map.table_id) is table_map
            ):
                if table_map.name not in self.tables:
                    return 0
                kind, _, _, partial = c.ROW_EVENTS[t]
                return self.counter.count_data(body, len(header), kind, partial, table_map)
        if t == c.TABLE_MAP:
            self.mapped(event.body, fmt)
            return 0
        if t in c.ROW_EVENTS:
            table_id = table_id_of(event.body, fmt.post_header_len(t, 8))
            table_map = self.maps.by_id.get(table_id)
            if table_map is None:
                return 0
            kind, _, compressed, partial = c.ROW_EVENTS[t]
            captured = table_map.name in self.tables
            if not captured and (self.plain is None or compressed):
                return 0  # (an uncaptured table's header is parsed only to be registered)
            rows_event = self.headers.parse(event, fmt, len(table_map.columns))
            if rows_event.data is event.body:  # (not a MariaDB compressed event)
                header = event.body[: rows_event.start]
                self._last[t] = (header, table_map, fmt)
                if self.plain is not None:
                    images = 2 if kind == c.UPDATE else 1
                    self.plain.rows_header(t, header, table_id, images, partial)
            return self.counter.count(rows_event, table_map) if captured else 0
        if t == c.TRANSACTION_PAYLOAD:
            return sum(self.rows(inner, fmt) for inner in unwrap_payload(event))
        return 0


class RowLimit(Listener):
    """The row changes of captured tables a batch takes, against its limit (a listener
    of :mod:`coordinator.range_pass`): full at a boundary when the rows and bytes before
    it exceed ``limit``. Two numbers, whatever the range's length: the rows past the
    start and those at the last boundary taken."""

    kinds = _COUNTED
    plain_kinds = frozenset({c.TABLE_MAP, *c.ROW_EVENTS})

    def __init__(self, limit: StreamLimit, count: RowCount) -> None:
        self.limit = limit
        self.count = count
        self.rows = 0  # past the start (a follower: past its batch start)
        self.taken = 0  # rows before the last boundary taken
        self.taken_size = 0

    def see(self, event, reader, where: Where) -> None:
        self.rows += self.count.rows(event, reader.format)

    def plain_events(self):
        return self.count.plain

    def take_plain(self, run, reader, where: Where) -> None:
        self.rows += run.rows

    def full(self, where: Where, size: int) -> bool:
        return not self.limit.within(self.rows, size)

    def boundary(self, where: Where) -> None:
        self.taken = self.rows

    def rebase(self, end: Where) -> None:
        self.rows -= self.taken
        self.taken = 0


class BatchEnds:
    """Finds bounded batch ends: :meth:`reads` says whether the range must be read for
    it; the driver then hands a :meth:`listener` to its one pass over the range, and
    :meth:`end` runs a pass of the count alone."""

    def __init__(
        self,
        connect: Callable[[], object],
        server_id: int,
        tables: set[str],
        policy: RetryPolicy | None = None,
        source: DumpSource | None = None,
        row_counter: RowCounter | None = None,
    ) -> None:
        self._source = source or DumpSource(connect, server_id, policy=policy or RetryPolicy(0))
        self.count = RowCount(tables, row_counter)

    @property
    def tables(self) -> set[str]:
        return self.count.tables

    @tables.setter
    def tables(self, names: set[str]) -> None:
        self.count.tables = names

    def reads(self, start: BinlogPosition, head: BinlogPosition, limit: StreamLimit) -> bool:
        """Whether the end must be found by reading ``(start, head]`` (else it is
        ``head``)."""
        if limit.unbounded or start.coordinates >= head.coordinates:
            return False
        # a row change takes at least a byte of binlog: within the limit in bytes, nothing
        # to count
        return start.file != head.file or not limit.within(
            head.pos - start.pos, head.pos - start.pos
        )

    def listener(self, limit: StreamLimit) -> RowLimit:
        return RowLimit(limit, self.count)

    def end(
        self, start: BinlogPosition, head: BinlogPosition, limit: StreamLimit
    ) -> BinlogPosition:
        """``head``, or the last transaction boundary in ``(start, head)`` within
        ``limit`` (at least one transaction past ``start``)."""
        if not self.reads(start, head, limit):
            return head
        rows = self.listener(limit)
        ended = RangePass(self._source).run((start.file, start.pos), head, [rows])
        return bounded(head, limit, ended, rows)


def bounded(
    head: BinlogPosition, limit: StreamLimit, ended: tuple[str, int] | None, rows: RowLimit
) -> BinlogPosition:
    """The batch's end: ``head``, or the boundary ``ended`` at which ``rows`` ended it."""
    if ended is None:
        return head
    file, pos = ended
    log.info(
        "stream batch bounded at %s:%d (%d row changes; limit %s rows, %s bytes); the head "
        "%s is read by the next batches",
        file,
        pos,
        rows.taken,
        limit.rows,
        limit.bytes,
        head,
    )
    return replace(head, file=file, pos=pos, gtids="", xa=None)
