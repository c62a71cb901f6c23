"""The follower (docs/design.md, 'Micro-batches'): one background thread of a streaming
query run on the driver, holding a blocking binlog dump from the last planned batch's
end and handing each event, as the server writes it, to the listeners of
:mod:`coordinator.range_pass` (the GTID state, the table statements, the row count of a
bounded batch, the XA transactions) through the same :class:`~coordinator.range_pass.Walk`
a pass uses. When Spark asks for the next batch, planning's state is current: the batch
ends where the follower reached, at a transaction boundary, and the driver reads no
binlog for it.

The answer is the one a pass over the same range would give: the walk, the listeners
and the boundaries are the same, only fed earlier. The follower answers only for the
batch start it follows, with the limit and the captured tables it counts for; the driver
starts it from a stream batch's start where it follows from nowhere or from elsewhere (a
run's first stream batch, a restarted driver catching up from a checkpoint, a fail-over,
a snapshot batch before), and reads the range in one pass only where it cannot answer.
Under availableNow it reads nothing past the frozen head (its ceiling), so that every
batch it answers ends there or before, as a pass to that head would.

Where the batch ends: at the head, once every event up to it is read; at the boundary
where the row limit ended it; or, while catching up, at the last boundary it handed. A
follower that has read the batch for :data:`CATCH_UP_S` and is still behind the head
after the driver waited :data:`GRACE_S` is catching up: the batch's tasks then run while
it reads on, instead of the driver waiting for the head. A batch end is recorded by Spark
before the batch runs, so a batch planned again after a restart is the same batch; the
end depends on when the batch is planned, as the head it is planned to does.

What it holds is bounded by one batch, never by how far behind the stream is: the GTID
state at the last transaction boundary and the GTIDs read past it, the table statements
since the batch start, two row counts (past the batch start, and at the last boundary),
the open XA transactions. When a batch's row limit is reached it stops reading until the
driver plans that batch: a follower far behind the head reads at most one batch ahead.

Its dump has a server id of its own, which no task and no pass of the driver uses
(:func:`follower_server_id`): two dumps with the same id at once make the server end one.
It is reopened after a fault with the query's retry policy, and stopped by
:meth:`Follower.stop` (a server change, the end of the stream phase) and
:meth:`Follower.close`.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from cdc_source.binlog.row_count import RowCounter
from cdc_source.binlog.transport import DumpSource
from cdc_source.gtid import compact, parse_state
from cdc_source.offsets import BinlogPosition
from cdc_source.options import SourceOptions
from coordinator.batch_end import RowCount, RowLimit, StreamLimit
from coordinator.ddl_scan import DdlScan, PlacedChange, RangeStatements
from coordinator.gtid_tracker import GtidListener
from coordinator.range_pass import Listener, Walk
from coordinator.xa_watermark import XaListener, XaWatermark

log = logging.getLogger("cdc_mysql")

STALL_S = 5.0  # a follower behind the head that reads nothing for this long is not waited for
# A follower far behind the head (catching up) answers with the last boundary it handed
# once it has read a batch for CATCH_UP_S and still lags after GRACE_S of waiting: the
# batch's tasks run while it reads on, instead of the driver waiting for the head.
CATCH_UP_S = 0.25
GRACE_S = 0.05
HOLD_EVENTS = 256  # events the follower feeds under one hold of its lock


class FollowerStopped(RuntimeError):
    """The follower was stopped: its dump is not opened again."""

    transient = False


def follower_server_id(options: SourceOptions) -> int | None:
    """The follower's server id: the one before the range's last (the driver's passes),
    where the range leaves it to no task (binlog tasks and snapshot tasks take the first
    ids, at most one per task); None where it does not."""
    ids = options.server_ids
    tasks = options.binlog_parallelism + options.snapshot_parallelism
    if ids.size < tasks + 2:
        return None
    return ids.last - 1


@dataclass(frozen=True)
class Reached:
    """A batch end the follower answers with: the position (a transaction boundary), its
    GTID state and XA watermark, the range's table statements, and whether the row limit
    ended the batch there (then ``rows`` is its count)."""

    file: str
    pos: int
    gtids: str
    xa: tuple[str, int] | None
    statements: tuple[PlacedChange, ...]
    bounded: bool
    rows: int


class _Run:
    """One follower thread, from one batch start (``base``) on."""

    def __init__(
        self,
        base: BinlogPosition,
        tables: frozenset[str],
        limit: StreamLimit,
        flavor: str | None,
        statements: RangeStatements,
        count: RowCount,
        ceiling: tuple[int, int] | None,
        watchers: list[Listener] | None = None,
    ) -> None:
        self.base = base
        self.ceiling = ceiling  # availableNow's frozen head: read nothing past it
        self.tables = tables
        self.limit = limit
        self.gtids = GtidListener(parse_state(base.gtids, flavor), None) if flavor else None
        self.statements = statements
        self.rows = RowLimit(limit, count)
        self.xa = XaListener((base.file, base.pos))
        listeners = [x for x in (self.gtids, statements, self.rows, self.xa) if x is not None]
        listeners += watchers or []
        self.walk = Walk((base.file, base.pos), listeners)
        self.cond = threading.Condition()
        self.frozen: tuple | None = None  # the end a limit set, until the driver takes it
        self.parked = False  # read up to the ceiling: the dump is closed
        self.stopping = False
        self.ended: BaseException | None = None  # the thread ended (an error, or stopped)
        self.want: tuple[int, int] | None = None  # the driver waits for this position
        self.began = time.monotonic()  # since when it reads the batch from ``base``
        self.conn = None
        self.thread: threading.Thread | None = None

    def serves(
        self,
        start: BinlogPosition,
        limit: StreamLimit,
        tables: frozenset[str],
        ceiling: tuple[int, int] | None,
    ) -> bool:
        base = self.base
        return (
            self.ended is None
            and ceiling == self.ceiling
            and (start.file, start.pos, start.gtids, start.xa, start.epoch)
            == (base.file, base.pos, base.gtids, base.xa, base.epoch)
            and limit == self.limit
            and tables == self.tables
        )

    def take_best(self, head: BinlogPosition) -> Reached:
        """The batch ends at the last boundary handed: its result, and the follower goes
        on from there (called with ``cond`` held)."""
        walk = self.walk
        file, pos, where = walk.best
        reached = Reached(
            file,
            pos,
            compact(self.gtids.state) if self.gtids is not None else "",
            self.xa.oldest_unresolved(),
            self.statements.up_to(where),
            self.frozen is not None,
            self.rows.taken,
        )
        walk.rebase()
        self.base = replace(head, file=file, pos=pos, gtids=reached.gtids, xa=reached.xa)
        self.began = time.monotonic()
        self.frozen = None
        self.cond.notify_all()
        return reached


class Follower:
    """The follower of one query run (see the module's docstring)."""

    def __init__(
        self,
        source: DumpSource,
        ddl: DdlScan,
        decoder: str | None = "auto",
        extra_listeners: Callable[[], list[Listener]] = list,
        catch_up_s: float | None = CATCH_UP_S,
        grace_s: float = GRACE_S,
    ) -> None:
        self._source = source
        # None: the answer always waits for the head (a batch takes everything written).
        self.catch_up_s = catch_up_s
        self.grace_s = grace_s
        # Listeners that only watch (the signal table's writes): they end no batch.
        self._extra_listeners = extra_listeners
        self._ddl = ddl
        self._counter = RowCounter(decoder)  # its own: the driver's passes count in another thread
        self._run: _Run | None = None
        self.answers = 0  # batches planned from what the follower reached (tests and logs)
        self.starts = 0  # dumps started

    # -- the driver's side ---------------------------------------------------------------
    def follow(
        self,
        base: BinlogPosition,
        tables: frozenset[str],
        limit: StreamLimit,
        flavor: str | None,
        server: str,
        ceiling: tuple[int, int] | None = None,
    ) -> None:
        """Follow from the batch start ``base`` (a planned batch's end on the server
        ``server``, with its GTID state when ``flavor`` is given and its XA watermark),
        counting the rows of ``tables`` against ``limit``, and reading nothing past
        ``ceiling`` (availableNow's frozen head) where there is one. Nothing changes
        where the follower is there already."""
        run = self._run
        if run is not None and run.serves(base, limit, tables, ceiling):
            return
        self.stop()
        if flavor is not None and not base.gtids:
            return  # no state to build on: the driver's passes plan
        self._source.server = server  # a dump that reaches another server ends
        count = RowCount(set(tables), self._counter)
        statements = self._ddl.listener(base, None)
        run = _Run(base, tables, limit, flavor, statements, count, ceiling, self._extra_listeners())
        run.thread = threading.Thread(
            target=self._read, args=(run,), name="cdc-mysql follower", daemon=True
        )
        self._run = run
        self.starts += 1
        run.thread.start()

    def answer(
        self,
        start: BinlogPosition,
        head: BinlogPosition,
        limit: StreamLimit,
        tables: frozenset[str],
        ceiling: tuple[int, int] | None = None,
    ) -> Reached | None:
        """Where the batch from ``start`` ends, for the head ``head`` read now: the last
        boundary the follower handed, at or past the head; the boundary where the limit
        ended the batch; or, catching up (it has read this batch for :data:`CATCH_UP_S`
        and is still behind the head after :data:`GRACE_S`), the last boundary it handed.
        None where the follower cannot tell (another start, limit or table set; it
        failed, or reads nothing for :data:`STALL_S` while behind the head). The follower
        then goes on from the end answered."""
        run = self._run
        if run is None:
            return None
        until = head.coordinates
        with run.cond:
            if not run.serves(start, limit, tables, ceiling):
                return None
            last, since = run.walk.reached, time.monotonic()
            grace = since + self.grace_s
            while run.frozen is None and run.walk.reached < until:
                if run.ended is not None or run.parked:
                    return None
                now = time.monotonic()
                if self._caught_up_to_here(run, start, now, grace):
                    break
                run.want = until
                run.cond.wait(self._wait_s(run, now, grace))
                run.want = None
                if run.walk.reached != last:
                    last, since = run.walk.reached, time.monotonic()
                elif time.monotonic() - since > STALL_S:
                    log.info("the follower is behind the head at %s: the driver reads", last)
                    return None
            if run.ended is not None:
                return None
            walk = run.walk
            if run.frozen is None and walk.reached == until:
                # The head is a boundary: the batch takes every event read, unless that is
                # over the limit and an earlier boundary is within it.
                if not (walk.over_at_end() and walk.best is not None):
                    walk.take((walk.reached_file, walk.reached[1], walk.reached))
            if walk.best is None or walk.best[2] <= start.coordinates:
                return None
            self.answers += 1
            return run.take_best(head)

    def _caught_up_to_here(
        self, run: _Run, start: BinlogPosition, now: float, grace: float
    ) -> bool:
        """Whether a follower behind the head answers with what it has read: it has read
        this batch for :attr:`catch_up_s`, the driver waited :attr:`grace_s`, and it
        handed a boundary past ``start``."""
        if self.catch_up_s is None or now < grace or now < run.began + self.catch_up_s:
            return False
        best = run.walk.best
        return best is not None and best[2] > start.coordinates

    def _wait_s(self, run: _Run, now: float, grace: float) -> float:
        """How long the driver waits before it looks again (it is woken sooner when the
        follower reaches the head)."""
        if self.catch_up_s is None:
            return 0.2
        return min(0.2, max(grace - now, run.began + self.catch_up_s - now, 0.01))

    def stop(self) -> None:
        """End the follower's thread and dump (it is started again by :meth:`follow`)."""
        run, self._run = self._run, None
        if run is None:
            return
        with run.cond:
            run.stopping = True
            run.cond.notify_all()
            conn = run.conn
        _cut(conn)
        if run.thread is not None and run.thread is not threading.current_thread():
            run.thread.join(timeout=0.2)  # cut: it feeds nothing more

    def close(self) -> None:
        self.stop()

    # -- the follower's thread -----------------------------------------------------------
    def _read(self, run: _Run) -> None:
        def connected(conn) -> None:
            with run.cond:
                run.conn = conn
                stopping = run.stopping
            if stopping:
                _cut(conn)
                raise FollowerStopped("the follower was stopped")

        origin = XaWatermark.origin(run.base)
        try:
            reader, runs, close = self._source.open_runs(
                origin[0], origin[1], blocking=True, connected=connected
            )
            run.walk.attach(reader, origin, run.ceiling)
            try:
                for events in runs:
                    if not self._feed(run, reader, iter(events)):
                        return
            finally:
                close()
        except BaseException as err:  # noqa: BLE001 - the driver's passes take over
            if not run.stopping:
                log.warning("the follower stopped (%s); the driver reads each batch's range", err)
            with run.cond:
                run.ended = err
                run.cond.notify_all()
            return
        with run.cond:
            run.ended = FollowerStopped("the follower's dump ended")
            run.cond.notify_all()

    @staticmethod
    def _feed(run: _Run, reader, events) -> bool:
        """Hands ``events`` to the run's walk, holding the run's lock for at most
        :data:`HOLD_EVENTS` events at a time (the driver's answer waits for it); False
        where the run stops reading (stopped, or past its ceiling)."""
        walk = run.walk
        file, number = "", 0
        while True:
            with run.cond:
                if run.stopping:
                    return False
                held = 0
                for event in events:
                    if event.file != file:  # (a per-event cost: every event is fed here)
                        file, number = event.file, walk.where(event)[0]
                    where = (number, event.end_pos)
                    if run.ceiling is not None and where > run.ceiling:
                        run.parked = True  # every event up to the ceiling is read
                        run.cond.notify_all()
                        return False
                    while walk.feed(event, reader, where) is not None:
                        run.frozen = walk.best
                        run.cond.notify_all()
                        while run.frozen is not None and not run.stopping:
                            run.cond.wait()
                        if run.stopping:
                            return False
                    if run.want is not None and where >= run.want:
                        run.cond.notify_all()
                    held += 1
                    if held == HOLD_EVENTS:
                        break
                else:
                    return True


def _cut(conn) -> None:
    """Cut a connection another thread is blocked reading."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
