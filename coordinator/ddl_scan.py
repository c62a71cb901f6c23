"""The statements of a binlog range that change which tables exist (CREATE, DROP,
RENAME, TRUNCATE, partition drops: :mod:`cdc_source.binlog.ddl`), read on the driver so
that the tables of a batch follow them (:mod:`coordinator.table_set`).

Only QUERY events are parsed; row images are never looked at. The result is a pure
function of the range and the binlog, so a batch planned again after a driver restart
sees the same statements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cdc_source.binlog import constants as c
from cdc_source.binlog.ddl import TableChange, logged_table_changes
from cdc_source.binlog.events import parse_query
from cdc_source.binlog.transport import DumpSource
from cdc_source.offsets import BinlogPosition
from cdc_source.offsets import file_number as _file_number
from cdc_source.retry import RetryPolicy

STATEMENT_EVENTS = frozenset({c.QUERY, c.QUERY_COMPRESSED})  # the events a scan parses


class DdlScanError(RuntimeError):
    """The binlog ended before a planned position while its statements were read."""


@dataclass(frozen=True)
class PlacedChange:
    """A statement's effect on a table and where its event ends (file number, position)."""

    where: tuple[int, int]
    change: TableChange


class DdlScan:
    """Reads a range's table statements on the driver's dump connection (server id: the
    range's last, shared with the other driver scans, which never read at once). The
    last range read is kept: planning a batch and building its tasks ask for the same."""

    def __init__(
        self,
        connect: Callable[[], object],
        server_id: int,
        policy: RetryPolicy | None = None,
        lower_case_names: Callable[[], bool] = lambda: False,
        source: DumpSource | None = None,
    ) -> None:
        self._source = source or DumpSource(connect, server_id, policy=policy or RetryPolicy(0))
        self._lower_case_names = lower_case_names  # the server's, read when first needed
        self._last: tuple[tuple, tuple, tuple[PlacedChange, ...]] | None = None
        self.scans = 0

    def changes(self, start: BinlogPosition, end: BinlogPosition) -> tuple[PlacedChange, ...]:
        """The table statements in ``(start, end]``, in binlog order."""
        key_start, key_end = start.coordinates, end.coordinates
        if key_start >= key_end:
            return ()
        if self._last is not None and self._last[:2] == (key_start, key_end):
            return self._last[2]
        self._read(start, end)
        return self._last[2]

    def forget(self) -> None:
        """Drop the range kept (a fail-over: positions now name another server's events)."""
        self._last = None

    def riding(self, start: BinlogPosition, end: BinlogPosition) -> RangeStatements | None:
        """A collector of ``(start, end]``'s statements to hand to another pass over that
        range (the GTID scan): once that pass has read the whole range, ``done()`` keeps
        them as if this scan had read them. None when they are known already."""
        if start.coordinates >= end.coordinates:
            return None
        if self._last is not None and self._last[:2] == (start.coordinates, end.coordinates):
            return None
        return RangeStatements(self, start, end, self._lower_case_names())

    def _read(self, start: BinlogPosition, end: BinlogPosition) -> None:
        self.scans += 1
        collector = RangeStatements(self, start, end, self._lower_case_names())
        reader, events, close = self._source.open(start.file, start.pos, end.coordinates)
        try:
            for event in events:
                if not collector(event, reader):
                    break
        finally:
            close()
        collector.done()


class RangeStatements:
    """The table statements of one range, from the events of a pass over it."""

    def __init__(
        self, scan: DdlScan, start: BinlogPosition, end: BinlogPosition, lower_case_names: bool
    ) -> None:
        self._scan, self.start, self.end = scan, start, end
        self._lower_case_names = lower_case_names
        self._from, self._until = start.coordinates, end.coordinates  # read per event
        self.reached = start.coordinates
        self.found: list[PlacedChange] = []
        self.began_before = False  # the pass read events at or before ``start``

    def __call__(self, event, reader) -> bool:
        """Takes one event of the pass; False once past the range."""
        where = (_file_number(event.file), event.end_pos)
        until = self._until
        if where > until:
            return False
        if where <= self._from:
            self.began_before = True  # not a pass from ``start``: its statements are not kept
            return True
        self.reached = where
        if event.type in (c.QUERY, c.QUERY_COMPRESSED):
            query = parse_query(event, reader.format)
            changes = logged_table_changes(
                query.query, query.schema or "", self._lower_case_names, event.where
            )
            self.found.extend(PlacedChange(where, change) for change in changes)
        return where < until

    def passed(self, where: tuple[int, int]) -> None:
        """The pass that handed this its statement events (and no others) read every
        event of the range up to ``where``."""
        self.reached = max(self.reached, min(where, self._until))

    def narrow(self, end: BinlogPosition) -> None:
        """The pass went on past ``end``, where the batch ends (a transaction boundary
        before this collector's end): keep the range ``(start, end]`` and its statements."""
        if end.coordinates > self._until:
            raise ValueError(f"{end} is past the range's end {self.end}")  # internal
        self.end, self._until = end, end.coordinates
        self.reached = min(self.reached, self._until)
        self.found = [placed for placed in self.found if placed.where <= self._until]

    @property
    def complete(self) -> bool:
        """Whether the pass read exactly the range: from ``start`` to ``end``."""
        return not self.began_before and self.reached >= self.end.coordinates

    def done(self) -> None:
        """The pass read the whole range: its statements are the scan's for it."""
        if self.began_before:
            # a broken invariant of the caller (GtidTracker.at passes it one range only)
            raise ValueError(f"a pass from before {self.start} cannot give its statements")
        if self.reached < self.end.coordinates:
            raise DdlScanError(
                f"the binlog ended at {self.reached} before the planned position {self.end} "
                "while its table statements were read; the server lost binlog events it had "
                "reported"
            )
        key = (self.start.coordinates, self.end.coordinates)
        self._scan._last = (*key, tuple(self.found))
