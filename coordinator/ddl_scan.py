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
from cdc_source.binlog.ddl import DdlParseError, TableChange, table_changes
from cdc_source.binlog.events import parse_query
from cdc_source.binlog.transport import DumpSource
from cdc_source.offsets import BinlogPosition
from cdc_source.offsets import file_number as _file_number
from cdc_source.retry import RetryPolicy


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
    ) -> None:
        self._source = DumpSource(connect, server_id, policy=policy or RetryPolicy(0))
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
        found = tuple(self._read(start, end))
        self._last = (key_start, key_end, found)
        return found

    def _read(self, start: BinlogPosition, end: BinlogPosition):
        self.scans += 1
        until = end.coordinates
        lower_case_names = self._lower_case_names()
        reader, events, close = self._source.open(start.file, start.pos, until)
        reached = start.coordinates
        try:
            for event in events:
                where = (_file_number(event.file), event.end_pos)
                if where > until:
                    break
                reached = where
                if event.type in (c.QUERY, c.QUERY_COMPRESSED):
                    query = parse_query(event, reader.format)
                    try:
                        changes = table_changes(query.query, query.schema or "", lower_case_names)
                    except DdlParseError as err:
                        raise DdlParseError(f"{event.where}: {err}") from None
                    for change in changes:
                        yield PlacedChange(where, change)
                if where == until:
                    break
        finally:
            close()
        if reached < until:
            raise DdlScanError(
                f"the binlog ended at {reached} before the planned position {end} while its "
                "table statements were read; the server lost binlog events it had reported"
            )
