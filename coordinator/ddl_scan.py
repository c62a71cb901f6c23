"""The statements of a binlog range that change which tables exist (CREATE, DROP,
RENAME, TRUNCATE, partition drops: :mod:`cdc_source.binlog.ddl`), read on the driver so
that the tables of a batch follow them (:mod:`coordinator.table_set`).

Only QUERY events are parsed; row images are never looked at. The result is a pure
function of the range and the binlog, so a batch planned again after a driver restart
sees the same statements."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cdc_source.binlog import constants as c
from cdc_source.binlog.ddl import TableChange, logged_table_changes
from cdc_source.binlog.transport import DumpSource
from cdc_source.offsets import BinlogPosition
from cdc_source.online_schema_change import near_miss, swap_changes
from cdc_source.retry import RetryPolicy
from coordinator.range_pass import Listener, RangePass, Where, query_of

log = logging.getLogger("cdc_mysql")
STATEMENT_EVENTS = frozenset({c.QUERY, c.QUERY_COMPRESSED})  # the events a scan parses


class DdlScanError(RuntimeError):
    """The binlog ended before a planned position while its statements were read."""


@dataclass(frozen=True)
class PlacedChange:
    """A statement's effect on a table and where its event ends (file number, position)."""

    where: tuple[int, int]
    change: TableChange


class DdlScan:
    """The table statements of ranges, read on the driver's dump connection (server id:
    the range's last, shared with the driver's other passes, which never read at once).
    The last range read is kept: planning a batch and building its tasks ask for the
    same. The driver's planning hands a :meth:`listener` to its one pass over a batch's
    range (:mod:`coordinator.range_pass`), or keeps what the follower read
    (:meth:`keep`); :meth:`changes` reads a range of its own only when neither did."""

    def __init__(
        self,
        connect: Callable[[], object],
        server_id: int,
        policy: RetryPolicy | None = None,
        lower_case_names: Callable[[], bool] = lambda: False,
        source: DumpSource | None = None,
        online_schema_changes: bool = False,
    ) -> None:
        # A tool's swap is one "swap" change (scan.parse.online.schema.changes.enabled).
        self.online_schema_changes = online_schema_changes
        self._source = source or DumpSource(connect, server_id, policy=policy or RetryPolicy(0))
        self._lower_case_names = lower_case_names  # the server's, read when first needed
        self._last: tuple[tuple, tuple, tuple[PlacedChange, ...]] | None = None
        self.scans = 0

    def changes(self, start: BinlogPosition, end: BinlogPosition) -> tuple[PlacedChange, ...]:
        """The table statements in ``(start, end]``, in binlog order."""
        key_start, key_end = start.coordinates, end.coordinates
        if key_start >= key_end:
            return ()
        if self.known(start, end):
            return self._last[2]
        self.scans += 1
        collector = self.listener(start, end)
        RangePass(self._source).run((start.file, start.pos), end, [collector])
        return self._last[2]

    def known(self, start: BinlogPosition, end: BinlogPosition) -> bool:
        """Whether the statements of ``(start, end]`` are kept."""
        return self._last is not None and self._last[:2] == (start.coordinates, end.coordinates)

    def keep(
        self, start: BinlogPosition, end: BinlogPosition, found: tuple[PlacedChange, ...]
    ) -> None:
        """``found`` are the statements of ``(start, end]``, read by a pass that read that
        whole range (the follower's)."""
        self._last = (start.coordinates, end.coordinates, tuple(found))

    def forget(self) -> None:
        """Drop the range kept (a fail-over: positions now name another server's events)."""
        self._last = None

    def listener(self, start: BinlogPosition, end: BinlogPosition | None) -> RangeStatements:
        """A listener that collects the statements of ``(start, end]`` in a pass over that
        range and, when the pass finishes, keeps them as if this scan had read them
        (``end`` None: a follower's, which reads on without an end)."""
        return RangeStatements(self, start, end, self._lower_case_names())


class RangeStatements(Listener):
    """The table statements of one range, from the events of a pass over it (a listener
    of :mod:`coordinator.range_pass`). ``end`` None: the statements from ``start`` on,
    for a follower that reads without an end."""

    kinds = STATEMENT_EVENTS
    plain_kinds = frozenset({c.QUERY})  # BEGIN, folded, changes no table

    def __init__(
        self,
        scan: DdlScan,
        start: BinlogPosition,
        end: BinlogPosition | None,
        lower_case_names: bool,
    ) -> None:
        self._scan, self.start, self.end = scan, start, end
        self._lower_case_names = lower_case_names
        self._from = start.coordinates
        self._until = end.coordinates if end is not None else (1 << 62, 0)
        self.reached = start.coordinates
        self.found: list[PlacedChange] = []
        self.began_before = False  # the pass read events at or before ``start``

    def see(self, event, reader, where: Where) -> None:
        if where > self._until:
            return
        if where <= self._from:
            self.began_before = True  # not a pass from ``start``: its statements are not kept
            return
        self.reached = where
        if event.type in STATEMENT_EVENTS:
            query = query_of(event, reader)
            changes = logged_table_changes(
                query.query, query.schema or "", self._lower_case_names, event.where
            )
            if self._scan.online_schema_changes:
                reason = near_miss(changes)
                if reason is not None:
                    log.info(
                        "%s: %s; read as renames: a captured table among them leaves and "
                        "joins again",
                        event.where,
                        reason,
                    )
                changes = swap_changes(changes)
            self.found.extend(PlacedChange(where, change) for change in changes)

    def finish(self, end: Where, reached: Where) -> None:
        """The pass read every event up to ``reached`` (where its last event ends, past
        the range's end when an event crosses it) and the batch ends at ``end``: keep
        ``(start, end]``'s statements for the scan."""
        if self.end is None:
            return
        if reached > self._until:
            raise DdlScanError(
                f"the planned position {self.end} is not where an event ends (an event ends "
                f"at {reached}) while its table statements were read; the binlog changed "
                "under the query"
            )
        self.reached = max(self.reached, reached)
        if end < self._until:
            self.narrow(end)
        self.done()

    def narrow(self, end: Where) -> None:
        """The batch ends at ``end``, a transaction boundary before this collector's end:
        keep the range up to it and its statements."""
        self._until = end
        self.reached = min(self.reached, end)
        self.found = [placed for placed in self.found if placed.where <= end]

    def rebase(self, end: Where) -> None:
        """A follower's next batch starts at ``end``: the statements before it are gone."""
        self._from = end
        self.found = [placed for placed in self.found if placed.where > end]

    def up_to(self, end: Where) -> tuple[PlacedChange, ...]:
        """The statements found up to ``end`` (a follower's batch end)."""
        return tuple(placed for placed in self.found if placed.where <= end)

    @property
    def complete(self) -> bool:
        """Whether the pass read exactly the range: from ``start`` to ``end``."""
        return not self.began_before and self.reached >= self._until

    def done(self) -> None:
        """The pass read the whole range: its statements are the scan's for it."""
        if self.began_before:
            # a broken invariant of the caller (a pass hands this the range's events only)
            raise ValueError(f"a pass from before {self.start} cannot give its statements")
        if self.reached < self._until:
            raise DdlScanError(
                f"the binlog ended at {self.reached} before the planned position {self.end} "
                "while its table statements were read; the server lost binlog events it had "
                "reported"
            )
        self._scan._last = (self._from, self._until, tuple(self.found))
