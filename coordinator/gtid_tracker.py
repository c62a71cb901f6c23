"""The exact GTID state at a planned position (``BinlogPosition.gtids``).

The state at E is the state at the batch start S plus the GTIDs of the transactions
whose GTID event lies in (S, E]; a batch's end is the binlog head, a transaction
boundary, so every GTID in the range is of a whole transaction. Without a state at S (the
first batch, or an offset written before GTIDs were tracked) it is built from E's file
alone: the GTID state every binlog file starts with (MySQL ``PREVIOUS_GTIDS``, the set of
all earlier transactions of the binlog, with ``gtid_purged``, those executed before it;
MariaDB ``GTID_LIST``, the last GTID of each domain) plus the GTID events of the file up
to E.

Only GTID events are looked at; row images are never decoded. So the state is a pure
function of E and the binlog, and an offset built twice (a batch planned again after a
driver restart) is the same string.

On MariaDB the state at E without a state at S is asked of the server instead:
``BINLOG_GTID_POS(file, pos)`` computes it from the same file, GTID_LIST plus GTID events
(MariaDB ``sql/sql_repl.cc``, ``gtid_state_from_binlog_pos``), in C: 15 ms for a 105 MB
file where this module's scan took 0.28 s, which was most of a first batch's planning.
It returns NULL where E is not where an event ends, or its file is purged; the scan then
gives the error.

Why not ``SHOW MASTER STATUS``'s ``Executed_Gtid_Set`` or ``@@gtid_executed``: they are
read apart from the position and can lag it, and ``gtid_executed`` grows only once the
engine has committed (MySQL ``sql/rpl_source.cc`` ``show_binlog_info`` takes
``global_tsid_lock`` and ``LOCK_log`` one after the other); a snapshot that waits for them
could miss a transaction at or before its position (docs/design.md, 'Visibility').
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cdc_source.binlog import constants as c
from cdc_source.binlog.gtid_scan import add_event, add_gtid, event_gtid, executed_before_binlog
from cdc_source.binlog.transport import DumpSource
from cdc_source.gtid import GtidSet, GtidState, MariaGtidPos, compact, parse_state
from cdc_source.offsets import BinlogPosition
from cdc_source.retry import RetryPolicy, retrying
from coordinator.range_pass import TRANSACTION_STARTS, Listener, RangePass, Where

log = logging.getLogger("cdc_mysql")

OFFSET_GTID_TARGET = 800  # characters: with the rest of the offset, under 1 KiB
_STARTING_STATES = frozenset({c.MARIADB_GTID_LIST, c.PREVIOUS_GTIDS})  # a file's state before it


class GtidTrackingError(RuntimeError):
    """The binlog's GTID events cannot give the exact state at a planned position."""


class GtidTracker:
    """Reads the GTID events between two planned positions on the driver's connection
    (server id: the range's last, as the XA watermark; the two never read at once)."""

    def __init__(
        self,
        connect: Callable[[], object],
        server_id: int,
        flavor: str,
        policy: RetryPolicy | None = None,
        source: DumpSource | None = None,
    ) -> None:
        self.flavor = flavor
        self._connect = connect
        self._policy = policy or RetryPolicy(0)
        self._source = source or DumpSource(connect, server_id, policy=self._policy)
        self.scans = 0
        self._warned = False

    def at(self, start: BinlogPosition | None, end: BinlogPosition) -> str:
        """The GTID state at ``end`` as an offset stores it (:func:`cdc_source.gtid.compact`).
        With a state at ``start`` it is read in a pass over ``(start, end]`` of its own; the
        driver's planning hands a :class:`GtidListener` to its one pass instead."""
        if start is not None and start.gtids and start.coordinates <= end.coordinates:
            if start.coordinates == end.coordinates:
                return start.gtids
            state = parse_state(start.gtids, self.flavor)
            self._scan(state, (start.file, start.pos), end)
            return self.stored(state)
        return self.without_start(end)

    def without_start(self, end: BinlogPosition) -> str:
        """The state at ``end`` with no state at a start to build on: asked of the server
        where it can tell (MariaDB), else read from ``end``'s file."""
        known = self._asked_of_server(end)
        if known is not None:
            return known
        return self.state_from_file(end)

    def state_from_file(self, end: BinlogPosition) -> str:
        """The state at ``end`` from its file alone, read here: what the server executed
        before its oldest binlog file (MySQL ``gtid_purged``, which no file's
        PREVIOUS_GTIDS names on a server built from a dump or a clone), the file's
        starting state (PREVIOUS_GTIDS, GTID_LIST) and its GTID events up to ``end``."""
        if self.flavor == "mariadb":
            state: GtidState = MariaGtidPos()
        else:
            state = GtidSet.parse(self._executed_before())
        self._scan(state, (end.file, 4), end)
        return self.stored(state)

    def _executed_before(self) -> str:
        if self._connect is None:
            return ""

        def ask() -> str:
            conn = self._connect()
            if conn is None:  # a test's stand-in for a server
                return ""
            try:
                return executed_before_binlog(conn, self.flavor)
            finally:
                conn.close()

        return retrying(self._policy, "reading the GTIDs executed before the binlog", ask)

    def _asked_of_server(self, end: BinlogPosition) -> str | None:
        """MariaDB's own ``BINLOG_GTID_POS`` at ``end``, None where the server has none
        (MySQL has no such function)."""
        if self.flavor != "mariadb" or self._connect is None:
            return None

        def ask() -> str | None:
            conn = self._connect()
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (end.file, end.pos))
                    (text,) = cur.fetchone()
            finally:
                conn.close()
            return None if text is None else (text.decode() if isinstance(text, bytes) else text)

        text = retrying(self._policy, "reading the GTID position of the batch's end", ask)
        return None if text is None else self.stored(parse_state(text, self.flavor))

    def stored(self, state: GtidState) -> str:
        """``state`` as an offset stores it (once a WARN when that is long)."""
        stored = compact(state)
        if len(stored) > OFFSET_GTID_TARGET and not self._warned:
            self._warned = True
            log.warning(
                "the server's GTID set takes %d characters in each offset (target: under "
                "1 KiB for the whole offset): it has %s; its size depends on the servers that "
                "wrote and the gaps in their numbers, not on the tables or the time",
                len(stored),
                _shape(state),
            )
        return stored

    def _scan(self, state: GtidState, origin: tuple[str, int], end: BinlogPosition) -> None:
        self.scans += 1
        RangePass(self._source).run(origin, end, [GtidListener(state, end)])


class GtidListener(Listener):
    """The GTID state at a batch's end, from the state at its start and the range's
    events (a listener of :mod:`coordinator.range_pass`).

    A transaction's GTID, and a file's starting state (GTID_LIST, PREVIOUS_GTIDS, which
    change nothing of a state read from an earlier file), are pending until the batch
    takes the transaction: at the boundary after it, or at the range's end. The end is
    where an event ends and the binlog holds every event up to it, else
    :class:`GtidTrackingError`."""

    kinds = TRANSACTION_STARTS | _STARTING_STATES

    def __init__(self, state: GtidState, until: BinlogPosition | None) -> None:
        self.state = state
        self.until = until  # None: a follower's, without an end
        self.pending: list[tuple | object] = []  # GTIDs and starting-state events, in order
        self.last: Where | None = None  # the last boundary taken

    def see(self, event, reader, where: Where) -> None:
        if event.type in _STARTING_STATES:
            self.pending.append(event)
            return
        gtid = event_gtid(self.state, event)
        if gtid is not None:
            self.pending.append(gtid)

    def boundary(self, where: Where) -> None:
        self.take_pending()
        self.last = where

    def finish(self, end: Where, reached: Where) -> None:
        if end == self.last:
            self.pending.clear()  # past the batch's end
            return
        if self.until is not None:
            check_reached(self.until, reached)
        self.take_pending()

    def take_pending(self) -> None:
        for change in self.pending:
            if isinstance(change, tuple):
                add_gtid(self.state, change)
            else:
                add_event(self.state, change)
        self.pending.clear()


def check_reached(end: BinlogPosition, reached: tuple[int, int]) -> None:
    """A pass that read the GTIDs up to ``end`` reached exactly ``end`` (``reached``:
    where the last event it read ends)."""
    if reached > end.coordinates:
        raise GtidTrackingError(
            f"the planned position {end} is not where an event ends (an event ends at "
            f"{reached}); the binlog changed under the query"
        )
    if reached < end.coordinates:
        raise GtidTrackingError(
            f"the binlog ended at {reached} before the planned position {end} while "
            "reading its GTIDs; the server lost binlog events it had reported"
        )


def _shape(state: GtidState) -> str:
    if isinstance(state, GtidSet):
        gaps = sum(len(v) - 1 for v in state.intervals.values())
        return f"{len(state.intervals)} transaction sources and {gaps} gaps"
    return f"{len(state.domains)} domains"
