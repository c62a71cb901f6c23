"""Where a stream batch ends when its range holds more than a batch may take (issue 9
item 2): after a restart behind the head, catch-up comes in bounded batches instead of
one batch of everything the server wrote meanwhile.

A batch ends at the last transaction boundary at which it holds at most
``scan.binlog.max-rows-per-batch`` row changes of the captured tables (and at most
Spark's ``ReadMaxRows`` / ``ReadMaxBytes``, bytes of binlog), but always takes at least
one whole transaction: a transaction is never split, so one larger than the limit is a
batch of its own. A boundary is where a transaction's first event (its GTID event,
which MySQL 5.7+ and MariaDB 10+ write for every transaction, DDL included) begins.

The end is a pure function of the start, the limits and the binlog: a batch planned
again after a driver restart ends at the same position. Only row events of captured
tables are looked at, and only their lengths (:mod:`cdc_source.binlog.row_count`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import unwrap_payload
from cdc_source.binlog.row_count import count_rows, value_sizes
from cdc_source.binlog.rows_event import parse_rows_event
from cdc_source.binlog.table_map import TableMap, TableMaps, table_id_of
from cdc_source.binlog.transport import DumpSource
from cdc_source.offsets import BinlogPosition
from cdc_source.offsets import file_number as _file_number
from cdc_source.retry import RetryPolicy

log = logging.getLogger("cdc_mysql")

TRANSACTION_STARTS = {c.GTID, c.ANONYMOUS_GTID, c.GTID_TAGGED, c.MARIADB_GTID}


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
    ) -> None:
        self.tables = tables
        self._source = source or DumpSource(connect, server_id, policy=policy or RetryPolicy(0))
        # Parsed once per distinct TABLE_MAP body across scans; a scan starts at a
        # transaction boundary, so every row event it reads follows its own table map.
        self._maps = TableMaps()
        self._sizes: dict[int, tuple[TableMap, tuple]] = {}  # by id() of a table map

    def end(
        self, start: BinlogPosition, head: BinlogPosition, limit: StreamLimit
    ) -> BinlogPosition:
        """``head``, or the last transaction boundary in ``(start, head)`` within
        ``limit`` (at least one transaction past ``start``)."""
        if limit.unbounded or start.coordinates >= head.coordinates:
            return head
        if start.file == head.file and limit.within(head.pos - start.pos, head.pos - start.pos):
            return head  # a row change takes at least a byte of binlog: nothing to count
        boundary = self._last_boundary(start, head, limit)
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
        self, start: BinlogPosition, head: BinlogPosition, limit: StreamLimit
    ) -> tuple[str, int, int, int] | None:
        until = head.coordinates
        rows = size = 0
        best: tuple[str, int, int, int] | None = None
        transactions = 0  # transaction starts seen past ``start``
        previous = (start.file, start.pos)
        reader, events, close = self._source.open(start.file, start.pos, until)
        try:
            for event in events:
                where = (_file_number(event.file), event.end_pos)
                if where > until:
                    break
                if event.type in TRANSACTION_STARTS:
                    if transactions and previous[0] == event.file:
                        here = (previous[0], previous[1], rows, size)
                        if not limit.within(rows, size):
                            return best or here  # at least one whole transaction
                        best = here
                    transactions += 1
                size += event.end_pos - (previous[1] if previous[0] == event.file else 0)
                rows += self._rows(event, reader.format)
                previous = (event.file, event.end_pos)
                if where == until:
                    break
        finally:
            close()
        if transactions and not limit.within(rows, size):
            return best
        return None

    def _value_sizes(self, table_map: TableMap) -> tuple:
        """:func:`value_sizes` of a table map, once per parsed map (kept with it, so
        its id is not reused while cached)."""
        cached = self._sizes.get(id(table_map))
        if cached is None or cached[0] is not table_map:
            if len(self._sizes) > 10_000:
                self._sizes.clear()
            cached = self._sizes[id(table_map)] = (table_map, value_sizes(table_map))
        return cached[1]

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
            return count_rows(rows_event, table_map, self._value_sizes(table_map))
        if t == c.TRANSACTION_PAYLOAD:
            return sum(self._rows(inner, fmt) for inner in unwrap_payload(event))
        return 0
