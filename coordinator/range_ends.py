"""Where a batch's binlog range ends, and what is true there: the end itself (the head, or
the last transaction boundary within a row limit), its exact GTID state and its XA
watermark, with the range's table statements kept for the table set.

Two ways give the same answer for the same range. Where the follower
(:mod:`coordinator.follower`) reads on from the batch's start (it is started there where it
does not), the answer is what it reached, and nothing is read now; catching up, what it
reached may be short of the head. Else one pass over the range
(:mod:`coordinator.range_pass`) feeds every listener at once: the GTID listener, the table
statements, the row count of a bounded batch and the XA tracker. Either way, what is true at
an end is a function of the range: a driver that plans a logged batch (start, end] again
after a restart finds the same GTID state, watermark and statements.

The order of calls over a run: :meth:`RangeEnds.at_first` for a run's first position;
:meth:`RangeEnds.ended` or :meth:`RangeEnds.stream_end` for each batch; after each stream
batch is planned, :meth:`RangeEnds.follow` from its end; :meth:`RangeEnds.forget` when a
fail-over is followed; :meth:`RangeEnds.close` at the end."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from cdc_source.binlog.row_count import RowCounter
from cdc_source.binlog.transport import DumpSource
from cdc_source.gtid import parse_state
from cdc_source.mysql_client import connect
from cdc_source.offsets import BinlogPosition
from cdc_source.options import SourceOptions
from cdc_source.visibility import ServerTraits
from coordinator.batch_end import BatchEnds, StreamLimit, bounded
from coordinator.ddl_scan import DdlScan
from coordinator.follower import Follower, follower_server_id
from coordinator.gtid_tracker import GtidListener, GtidTracker
from coordinator.range_pass import Listener, RangePass
from coordinator.signal_writes import SignalWrites
from coordinator.xa_watermark import XaListener, XaWatermark

log = logging.getLogger("cdc_mysql")


class RangeEnds:
    """The ends of one query run's batch ranges on the server the run reaches now.
    ``traits`` tells what that server is (asked lazily: the first call connects);
    ``ddl`` keeps the table statements of every range read (the table set's source)."""

    def __init__(
        self,
        *,
        options: SourceOptions,
        open_session,
        dump,
        ddl: DdlScan,
        traits: Callable[[], ServerTraits],
        tables: set[str],
        signal_written: Callable[[], None] | None = None,
    ) -> None:
        self.options = options
        # Told when a range read writes the signal table (coordinator.signal_writes).
        self.signal_written = signal_written
        self._open_session = open_session
        self._dump = dump
        self._traits = traits
        self.ddl = ddl
        self.passes = RangePass(dump)
        policy = options.retry_policy()
        self.xa = XaWatermark(open_session, options.server_ids.last, policy, dump)
        self.batch_ends = BatchEnds(
            open_session,
            options.server_ids.last,
            tables,
            policy,
            dump,
            RowCounter(options.binlog_decoder),
        )
        self._gtids: GtidTracker | None = None
        self.follower = self._new_follower()

    def gtids(self) -> GtidTracker | None:
        """The tracker of the exact GTID state at each batch end, where the server has
        GTIDs."""
        if self._gtids is None and self._traits().gtids:
            self._gtids = GtidTracker(
                self._open_session,
                self.options.server_ids.last,
                self._traits().flavor,
                self.options.retry_policy(),
                self._dump,
            )
        return self._gtids

    def _new_follower(self) -> Follower | None:
        """The follower of the stream phase, with a server id of its own; None where it is
        turned off or the server-id range leaves no id for it."""
        options = self.options
        server_id = follower_server_id(options)
        if not options.binlog_follower or server_id is None:
            if options.binlog_follower:
                log.info(
                    "server-id '%s' leaves no id for the follower next to %d binlog and %d "
                    "snapshot tasks and the driver's passes: each batch's range is read when "
                    "it is planned",
                    options.server_ids,
                    options.binlog_parallelism,
                    options.snapshot_parallelism,
                )
            return None
        source = DumpSource(
            lambda: connect(options.connection_kwargs()),
            server_id,
            decoder=options.binlog_decoder,
            policy=options.retry_policy(),
        )
        return Follower(
            source, self.ddl, options.binlog_decoder, extra_listeners=self.signal_listeners
        )

    def signal_listeners(self) -> list[Listener]:
        """The listener that tells when a range writes the signal table, if there is one."""
        if self.options.signal_table is None or self.signal_written is None:
            return []
        return [SignalWrites(self.options.signal_table, self.signal_written)]

    def ended(
        self,
        start: BinlogPosition | None,
        head: BinlogPosition,
        limit: StreamLimit | None = None,
    ) -> BinlogPosition:
        """Where the batch from ``start`` ends: ``head``, or with ``limit`` the last
        transaction boundary within it, with the end's exact GTID state and XA watermark;
        the range's table statements are kept by :attr:`ddl`. All from one pass over
        ``(start, head]`` (from the XA watermark's origin when an XA transaction was open
        at ``start``)."""
        if start is None:  # a run's first position: no range before it
            return self.at_first(head)
        if start.coordinates == head.coordinates:
            return replace(head, gtids=start.gtids, xa=start.xa)  # functions of the position
        if start.coordinates > head.coordinates:  # availableNow's head behind a restored start
            return self.at_first(head)
        tracker = self.gtids()
        listeners: list[Listener] = []
        gtids = None
        if tracker is not None and start.gtids:
            gtids = GtidListener(parse_state(start.gtids, self._traits().flavor), head)
            listeners.append(gtids)
        listeners.append(self.ddl.listener(start, head))
        listeners += self.signal_listeners()
        rows = None
        if limit is not None and self.batch_ends.reads(start, head, limit):
            rows = self.batch_ends.listener(limit)
            listeners.append(rows)
        xa = XaListener((start.file, start.pos)) if self.xa.needed(start) else None
        origin = None
        if xa is not None:
            listeners.append(xa)
            origin = XaWatermark.origin(start)
        ended = self.passes.run((start.file, start.pos), head, listeners, origin)
        end = bounded(head, limit, ended, rows) if rows is not None else head
        if gtids is not None:
            state = tracker.stored(gtids.state)
        elif tracker is not None:
            state = tracker.without_start(end)
        else:
            state = ""
        return _watermarked(replace(end, gtids=state), xa.oldest_unresolved() if xa else None)

    def at_first(self, head: BinlogPosition) -> BinlogPosition:
        """``head`` with its GTID state and XA watermark, with no batch start before it."""
        tracker = self.gtids()
        if tracker is not None:
            head = replace(head, gtids=tracker.without_start(head))
        return self.with_xa(head)

    def with_xa(self, head: BinlogPosition) -> BinlogPosition:
        """``head``, a run's resolved start, with its XA watermark."""
        return _watermarked(head, self.xa.at(None, head))

    def stream_end(
        self,
        start: BinlogPosition,
        head: BinlogPosition,
        limit: StreamLimit,
        tables: frozenset[str],
        ceiling: tuple[int, int] | None,
        *,
        server: str,
    ) -> BinlogPosition:
        """Where a stream batch from ``start`` ends: what the follower reached, started
        from ``start`` (on the server ``server``) where it does not follow from there
        already; else found by one pass over the range (:meth:`ended`). ``ceiling``:
        availableNow's frozen head, past which nothing is read."""
        if self.follower is not None:
            self.follow(start, tables, limit, server=server, ceiling=ceiling)
            reached = self.follower.answer(start, head, limit, tables, ceiling)
            if reached is not None:
                end = replace(head, file=reached.file, pos=reached.pos, gtids=reached.gtids)
                self.ddl.keep(start, end, reached.statements)
                if reached.bounded:
                    log.info(
                        "stream batch bounded at %s:%d (%d row changes; limit %s rows, %s "
                        "bytes); the head %s is read by the next batches",
                        reached.file,
                        reached.pos,
                        reached.rows,
                        limit.rows,
                        limit.bytes,
                        head,
                    )
                return _watermarked(end, reached.xa)
        self.batch_ends.tables = set(tables)
        return self.ended(start, head, limit)

    def follow(
        self,
        end: BinlogPosition | None,
        tables: frozenset[str],
        limit: StreamLimit,
        *,
        server: str,
        ceiling: tuple[int, int] | None,
    ) -> None:
        """The follower follows from the stream batch end ``end`` just planned; with no end
        (a snapshot batch) it stops."""
        if self.follower is None:
            return
        if end is None:
            self.follower.stop()
            return
        traits = self._traits()
        flavor = traits.flavor if traits.gtids else None
        self.follower.follow(end, tables, limit, flavor, server, ceiling)

    def stop_following(self) -> None:
        """The stream phase starts anew later (a snapshot again): the follower stops."""
        if self.follower is not None:
            self.follower.stop()

    def forget(self) -> None:
        """A fail-over is followed: what was read from the old server's binlog is
        forgotten, so that every pass starts again on the new one."""
        self.ddl.forget()  # the same coordinates name other events there
        self.batch_ends.count.forget()  # and the same table ids other tables
        self.stop_following()  # it follows the old server's binlog
        self._gtids = None

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()


def _watermarked(head: BinlogPosition, watermark) -> BinlogPosition:
    if watermark is not None:
        log.info("XA transaction prepared at %s:%s is unresolved at %s", *watermark, head)
    return replace(head, xa=watermark)
