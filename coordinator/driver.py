"""The driver side of a query run (docs/design.md, 'Micro-batches' and 'Hand-over and
split metadata'): plans each micro-batch from the binlog head and the snapshot frontier,
builds its tasks, keeps the coordinator's split metadata until Spark commits past it, and
carries the XA watermark into the offsets."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace

from cdc_source.binlog.gtid_scan import executed_before_binlog
from cdc_source.binlog.row_count import RowCounter
from cdc_source.binlog.transport import DumpSource
from cdc_source.catalog import TableSchema
from cdc_source.failover import relocate, server_binlog
from cdc_source.gtid import expand, parse_state
from cdc_source.mysql_client import (
    SameServer,
    ServerChangedError,
    ServerChangeFollowed,
    binary_logs,
    connect,
    read_head,
    variables,
)
from cdc_source.offsets import (
    BinlogPosition,
    SnapshotCursor,
    SourceOffset,
    owns_any_of,
    same_progress,
    table_fingerprint,
)
from cdc_source.options import SourceOptions
from cdc_source.output_schema import is_envelope
from cdc_source.partitions import BinlogTask, ChunkSpec, ChunkTask, TableResetTask
from cdc_source.preflight import BinlogPurgedError
from cdc_source.retry import Reconnecting
from cdc_source.visibility import ServerTraits, describe, read_traits
from coordinator import startup
from coordinator.batch_end import BatchEnds, StreamLimit
from coordinator.captured_tables import CapturedTables
from coordinator.ddl_scan import DdlScan
from coordinator.gtid_tracker import GtidTracker
from coordinator.planner import BatchBudget, Planner
from coordinator.splitter import ServerBoundarySource
from coordinator.table_set import Membership, RangeEffect
from coordinator.xa_watermark import XaWatermark

log = logging.getLogger("cdc_mysql")

STATE_DIR_ENV = "CDC_MYSQL_STATE_DIR"
# Server changes one planning step follows before it gives up (each starts it again).
_FOLLOWED_CHANGES = 4


class SourceStateError(RuntimeError):
    """The checkpoint and the current options or server disagree."""


class QueryDriver:
    """The driver-side state of one query run: planning, the coordinator's metadata, the
    head connection, the availableNow target and the XA watermark. The Spark glue
    (``cdc_source.datasource``) turns Spark's calls into calls of this class and its
    tasks into partitions; everything here is plain Python over offsets and tasks."""

    def __init__(
        self,
        options: SourceOptions,
        tables: list[TableSchema],
    ) -> None:
        self.options = options
        self.tables = tables
        policy = options.retry_policy()
        # Every connection of the driver must reach the server the offsets' positions
        # belong to; the tasks carry its identity so that executors check it too.
        self.server = SameServer("the driver's connection", on_change=self._server_changed)
        open_session = lambda: self.server.checked(connect(options.connection_kwargs()))  # noqa: E731
        # One connection for head reads and checks, re-opened after a fault (a restarted
        # server or a cut connection leaves a dead one that PyMySQL cannot tell from a live
        # one until it is used).
        self.session = Reconnecting(open_session, policy, "the driver's head read or check")
        self.boundaries = ServerBoundarySource(open_session, policy)
        self.planner = Planner(tables, self.boundaries, options.chunk_size)
        # Every pass of the driver over the binlog (statements, XA, GTIDs, batch ends,
        # the start's resolution) reads with the range's last server id, one at a time.
        self._dump = DumpSource(
            open_session, options.server_ids.last, options.binlog_decoder, policy
        )
        # Which tables are captured at each offset, as statements create, drop and rename
        # them (coordinator/table_set.py); one output table means typed output.
        self.ddl = DdlScan(
            open_session,
            options.server_ids.last,
            policy,
            lambda: self.traits().lower_case_names,
            source=self._dump,
        )
        self.captured = CapturedTables(
            options, tables, self.session.run, self.ddl, typed=not is_envelope(tables)
        )
        # The driver reads the binlog only between batches, with the range's last id.
        self.xa = XaWatermark(open_session, options.server_ids.last, policy, self._dump)
        self.fingerprint = table_fingerprint([t.name for t in tables])
        self.target: BinlogPosition | None = None
        self._available: BinlogPosition | None = None  # the last batch start found on the server
        self._open_session = open_session
        self._server: ServerTraits | None = None
        self._gtids: GtidTracker | None = None
        self._server_checked = False
        self._relocated: dict[BinlogPosition, BinlogPosition] = {}
        self._refreeze = False
        self.batch_ends = BatchEnds(
            open_session,
            options.server_ids.last,
            {t.name for t in tables},
            policy,
            self._dump,
            RowCounter(options.binlog_decoder),
        )
        self._start: BinlogPosition | None = None  # the resolved start of this run's mode
        self.finished: SourceOffset | None = None  # snapshot mode, once past the hand-over

    def traits(self) -> ServerTraits:
        """What the server is and offers, read once per query run: its flavor, whether it
        has GTIDs (then offsets carry the exact GTID state) and the visibility proof of
        snapshot tasks (:mod:`cdc_source.visibility`)."""
        if self._server is None:
            self._server = self.session.run(
                lambda conn: read_traits(conn, self.options.snapshot_visibility)
            )
            log.info(
                "server: %s, GTIDs %s; snapshot visibility: %s",
                self._server.flavor,
                "tracked in offsets" if self._server.gtids else "off",
                describe(self._server.visibility),
            )
            if self._server.gtids:
                self._gtids = GtidTracker(
                    self._open_session,
                    self.options.server_ids.last,
                    self._server.flavor,
                    self.options.retry_policy(),
                    self._dump,
                )
        return self._server

    def head(self) -> BinlogPosition:
        """The binlog head (its GTID state is filled in by :meth:`_with_gtids`), of the
        server reached now."""
        return self._following(self._head)

    def _head(self) -> BinlogPosition:
        file, pos, _, ts = self.session.run(read_head)
        return BinlogPosition(file, pos, "", ts)

    def _with_gtids(self, start: BinlogPosition | None, end: BinlogPosition) -> BinlogPosition:
        """``end`` with its exact GTID state (:mod:`coordinator.gtid_tracker`). The pass
        over ``(start, end]`` that finds it also reads the range's table statements, which
        the planning asks for next (:meth:`coordinator.ddl_scan.DdlScan.riding`): one pass
        instead of two (0.32 s and 0.39 s for a 44 MB range)."""
        self.traits()
        if self._gtids is None:
            return end
        if end.gtids and start is not None and start.coordinates <= end.coordinates:
            return end  # read with the end itself (_stream_end): a function of the position
        riding = self.ddl.riding(start, end) if start is not None else None
        gtids = self._gtids.at(start, end, riding)
        if riding is not None and riding.complete:
            riding.done()
        return replace(end, gtids=gtids)

    def _stream_end(
        self, start: BinlogPosition, head: BinlogPosition, limit: StreamLimit
    ) -> BinlogPosition:
        """Where a stream batch from ``start`` ends (:mod:`coordinator.batch_end`). Where
        that reads the range, the end's GTID state and the range's statements are read in
        the same pass, and :meth:`_with_gtids` finds them done."""
        if not self.batch_ends.reads(start, head, limit):
            return head
        self.traits()
        if self._gtids is None or not start.gtids:
            return self.batch_ends.end(start, head, limit)
        state = parse_state(start.gtids, self._server.flavor)
        riding = self.ddl.riding(start, head)
        end = self.batch_ends.end_with(start, head, limit, state, riding)
        return replace(end, gtids=self._gtids.stored(state))

    def freeze_target(self) -> None:
        self.target = self.head()

    def _ensure_available(self, position: BinlogPosition | None) -> None:
        """The start of every batch exists on the server (one ``SHOW BINARY LOGS``): a
        purge, a fail-over or a crash that lost events is an error before data moves."""
        if position is None or position == self._available:
            return  # latest() and tasks() of one batch share its start: checked once
        from cdc_source.preflight import check_binlog_available

        self.session.run(lambda conn: check_binlog_available(conn, position))
        self._available = position

    def server_identity(self) -> str:
        """The server the offsets' positions belong to (connecting once if need be)."""
        if self.server.identity is None:
            self.session.run(lambda conn: None)
        return self.server.identity or ""

    def _budget(self, max_rows: int | None, max_bytes: int | None) -> BatchBudget:
        """The next snapshot batch's size: the options' budget (an explicit chunk count, or
        rows and bytes), within Spark's ReadMaxRows / ReadMaxBytes if it passed one."""
        options = self.options
        if options.chunks_per_batch is not None:
            rows, size = None, None
        else:
            rows, size = options.rows_per_batch, options.bytes_per_batch
        if max_rows is not None:
            rows = max_rows if rows is None else min(rows, max_rows)
        if max_bytes is not None:
            size = max_bytes if size is None else min(size, max_bytes)
        return BatchBudget(options.chunks_per_batch, rows, size)

    def _stream_limit(self, max_rows: int | None, max_bytes: int | None) -> StreamLimit:
        """A stream batch's limit: ``scan.binlog.max-rows-per-batch``, within Spark's
        ReadMaxRows / ReadMaxBytes if it passed one."""
        rows = self.options.binlog_rows_per_batch
        if max_rows is not None:
            rows = max_rows if rows is None else min(rows, max_rows)
        return StreamLimit(rows, max_bytes)

    def _server_changed(self, before: str, after: str) -> None:
        """A connection of the driver reached another server than before (a fail-over):
        followed where positions can be found there by their GTID state, else an error."""
        if self._server is not None and not self._server.gtids:
            raise ServerChangedError(
                f"the driver's connection reached another server ({after}; the query's binlog "
                f"positions are those of {before}), and without GTIDs (gtid_mode=OFF) they "
                "cannot be found there. Start a new query with a new checkpoint location"
            )
        log.warning(
            "fail-over: the driver now reaches %s (was %s); the next batch starts at the "
            "checkpoint's position found there by its GTID state",
            after,
            before,
        )
        self._server_checked = False
        self._available = None
        self.ddl.forget()  # the same coordinates name other events there
        self._server = None
        self._gtids = None
        self._start = None  # a resolved start of the old server: resolved again here
        if self.target is not None:  # availableNow: the head to reach is the new server's
            self._refreeze = True
        # The step that met the new server holds positions of the old one (a batch start
        # relocated before the change, a file name): it starts again from its offsets.
        raise ServerChangeFollowed(f"the driver's connection reached {after} (was {before})")

    def _following(self, step, *args):
        """``step(*args)``, done again from the start while a server change met during it
        is followed (:meth:`_server_changed`): every pass over the binlog then starts
        from positions found on the server reached, never from another server's file."""
        for _ in range(_FOLLOWED_CHANGES - 1):
            try:
                return step(*args)
            except ServerChangeFollowed as change:
                log.warning("fail-over during the step: %s; done again there", change)
        return step(*args)

    def _on_this_server(self, offset: SourceOffset) -> SourceOffset:
        """``offset`` with its position in the binlog of the server reached now: itself on
        the same server; found by its GTID state on another one (:mod:`cdc_source.failover`),
        one epoch later. Checked against the server's GTIDs once per query run.

        One round trip first: a connection cut by a fail-over is only found dead when used,
        and the identity it reopens with decides what the offset means."""
        self.session.run(_ping)
        identity = self.server_identity()
        position = offset.binlog
        if offset.server and offset.server != identity and position is not None:
            if not (self.traits().gtids and position.gtids):
                raise ServerChangedError(
                    f"the checkpoint's binlog positions are of another server "
                    f"({offset.server}) than the one reached now ({identity}), and carry no "
                    "GTID state to find them there (gtid_mode=OFF). Start a new query with a "
                    "new checkpoint location"
                )
            moved = self._relocated.get(position)
            if moved is None:
                traits = self.traits()
                files, before = self.session.run(lambda conn: server_binlog(conn, traits.flavor))
                moved = relocate(position, self._dump.open, files, traits.flavor, before)
                self._relocated[position] = moved
                log.warning(
                    "fail-over: the checkpoint's position %s on %s is %s on %s (GTIDs %s), "
                    "epoch %d",
                    position,
                    offset.server,
                    moved,
                    identity,
                    expand(position.gtids),
                    moved.epoch,
                )
            return replace(offset, binlog=moved, server=identity)
        if not self._server_checked:
            if position is not None and position.gtids and self.traits().gtids:
                traits = self.traits()
                self.session.run(lambda conn: check_gtid_history(conn, position, traits))
            self._server_checked = True
        return offset

    def latest(
        self, start: SourceOffset, max_rows: int | None = None, max_bytes: int | None = None
    ) -> SourceOffset:
        """The end of the next batch (``start`` when there is nothing new). ``max_rows``,
        ``max_bytes``: Spark's ReadMaxRows / ReadMaxBytes limit, if it passed one."""
        return self._following(self._latest, start, max_rows, max_bytes)

    def _latest(
        self, start: SourceOffset, max_rows: int | None, max_bytes: int | None
    ) -> SourceOffset:
        if self.options.startup_mode == "snapshot" and start.handed_over and start.binlog:
            # Snapshot only: the stream ends at the hand-over. No batch is planned after it,
            # so availableNow finishes and other triggers idle without reading on.
            self.finished = start
            return start
        start = self._on_this_server(start)
        if start.binlog is None and start.snapshot is None and self._resolves_start():
            return self._startup_offset()
        if start.binlog is not None and self._purged(start.binlog):
            return self._resnapshot(start, max_rows, max_bytes)
        self._ensure_available(start.binlog)
        if self._refreeze:
            self.target, self._refreeze = self._head(), False
        head = self.target or self._head()
        head = replace(head, epoch=start.binlog.epoch if start.binlog is not None else 0)
        server = self.server_identity()
        budget = self._budget(max_rows, max_bytes)
        if start.snapshot is not None:
            head = self._with_gtids(start.binlog, self._with_xa(start.binlog, head))
            members, effect = self._members_after(start, head)
            main = self._main_start(start, members, effect)
            if main.snapshot is None:  # every table left to snapshot was dropped
                end = SourceOffset(head, None, members.fingerprint, server)
                chunks = 0
            else:
                batch = self.planner.plan(main, head, budget)
                end = replace(batch.end, tables=members.fingerprint, server=server)
                chunks = len(batch.chunks)
            self.captured.log_effect(effect, head)
            self.captured.remember(end, members)
            self._log_plan(start, end, chunks, head)
            self._write_state()
            return end
        members = self.captured.at(start)
        if start.binlog is not None and head.coordinates < start.binlog.coordinates:
            return start  # availableNow target behind a restored start: nothing more to do
        moved = start.binlog is None or head.coordinates != start.binlog.coordinates
        if not moved and start.added is None and not members.pending:
            return start
        if start.binlog is not None and moved:
            self.batch_ends.tables = members.names
            head = self._stream_end(start.binlog, head, self._stream_limit(max_rows, max_bytes))
        elif start.binlog is not None:
            head = start.binlog  # no new binlog: a batch of the joining table's snapshot only
        head = self._with_gtids(start.binlog, self._with_xa(start.binlog, head))
        members, effect = self._members_after(start, head)
        members, added = self._plan_added(start, members, budget)
        end = SourceOffset(head, None, members.fingerprint, server, added)
        if start.binlog is not None and same_progress(start, end):
            return start
        self.captured.log_effect(effect, head)
        self.captured.remember(end, members)
        self._log_plan(start, end, 0, head)
        return end

    def _members_after(
        self, start: SourceOffset, head: BinlogPosition
    ) -> tuple[Membership, RangeEffect]:
        """The tables at the end ``head`` of the batch being planned from ``start``."""
        if start.binlog is None:  # a run's first position: the tables matching at it
            return self.captured.at_first_head(start, head)
        members, effect, _ = self.captured.after(start, head)
        return members, effect

    def _members_of_batch(
        self, start: SourceOffset, end: SourceOffset
    ) -> tuple[Membership, RangeEffect]:
        """The tables at the end of the planned batch (start, end]. A batch from a run's
        first position has no range to read statements from: its tables are those of its
        end offset, found again from it after a restart, so that the batch's tasks are the
        same whenever they are asked for."""
        if start.binlog is not None:
            members, effect, _ = self.captured.after(start, end.binlog)
            return members, effect
        members = self.captured.at(end)
        cursor = start.snapshot
        gone = cursor is not None and cursor.table not in members.owned
        return members, RangeEffect(restart_cursor_table=gone)

    def _main_start(
        self, start: SourceOffset, members: Membership, effect: RangeEffect
    ) -> SourceOffset:
        """``start`` for the main snapshot's planner, which walks the tables owned at the
        range's end: the cursor's table starts again when it was dropped (and maybe
        created again) in the range, or the next table does when it is gone."""
        self.planner.set_tables([self.captured.schema(n) for n in members.owned])
        cursor = start.snapshot
        if cursor is not None and effect.restart_cursor_table:
            if cursor.table in members.owned:
                cursor = SnapshotCursor(cursor.table, None)
            else:
                cursor = self.planner.next_cursor(cursor.table)
        return replace(start, snapshot=cursor)

    def _added_table(self, start: SourceOffset, members: Membership):
        """The table joining the capture whose snapshot the batch from ``start`` reads, the
        key its snapshot is done to, and the tables after this batch's statements."""
        current = start.added if start.added and start.added.table == members.added else None
        members = members.next_added()
        return members, members.added, (current.after if current else None)

    def _plan_added(
        self, start: SourceOffset, members: Membership, budget: BatchBudget
    ) -> tuple[Membership, SnapshotCursor | None]:
        """The next chunks of a table joining the capture (after the hand-over; one table
        at a time): the tables at the batch's end and its ``added`` cursor."""
        members, table, after = self._added_table(start, members)
        if table is None:
            return members, None
        _, done_to = self.planner.plan_table(self.captured.schema(table), after, budget)
        if done_to is None:
            log.info("%s: the snapshot of the table joining the capture is done", table)
            return members.finish_added(), None
        return members, SnapshotCursor(table, done_to)

    def _added_chunks(self, start: SourceOffset, end: SourceOffset, members: Membership):
        """The chunks of the joining table read by the batch (start, end]."""
        if start.snapshot is not None:
            return ()
        members, table, after = self._added_table(start, members)
        if table is None:
            return ()
        until = end.added.after if end.added and end.added.table == table else None
        return self.planner.table_chunks(self.captured.schema(table), after, until)

    def _purged(self, position: BinlogPosition) -> bool:
        """Whether ``position``'s binlog file was purged and the query snapshots again
        (``scan.on-binlog-purged=resnapshot``); with ``fail`` a purge is the error."""
        try:
            self._ensure_available(position)
        except BinlogPurgedError:
            if self.options.on_binlog_purged != "resnapshot":
                raise
            return True
        return False

    def _resnapshot(
        self, start: SourceOffset, max_rows: int | None, max_bytes: int | None
    ) -> SourceOffset:
        """The batch after a purge: every table reset (``t``, by :meth:`tasks`) and the
        first chunks of a new snapshot, as of the head R now. R starts a new epoch, so every
        ``_seq`` from here on sorts after every earlier one, whatever the file numbers."""
        head = replace(self._head(), epoch=start.binlog.epoch + 1)
        if self.target is not None and self.target.coordinates < head.coordinates:
            self.target = head  # availableNow: the new snapshot ends at R
        head = self._with_gtids(None, self._with_xa(None, head))
        fresh = self._fresh_snapshot(head, start)
        batch = self.planner.plan(fresh, head, self._budget(max_rows, max_bytes))
        log.warning(
            "the binlog from %s was purged (scan.on-binlog-purged=resnapshot): every captured "
            "table is reset ('t') and snapshotted again as of %s, epoch %d",
            start.binlog,
            head,
            head.epoch,
        )
        self._write_state()
        return replace(batch.end, server=self.server_identity())

    def _fresh_snapshot(self, head: BinlogPosition, start: SourceOffset) -> SourceOffset:
        """A snapshot of every captured table from the start, as of ``head`` (after a
        purge): the tables this run followed to ``start``, or, in a run that starts there,
        the tables matching now (the statements since the checkpoint are gone with the
        binlog)."""
        known = self.captured.remembered(start)
        names = sorted(known.names if known else self.captured.matching_at_start)
        self.planner.set_tables([self.captured.schema(n) for n in names])
        fresh = SourceOffset(head, self.planner.initial_cursor(), table_fingerprint(names))
        self.captured.remember(fresh, Membership(frozenset(names)))
        return fresh

    def _resets(self, start: SourceOffset, end: SourceOffset) -> bool:
        """Whether (start, end] is the batch of :meth:`_resnapshot`: it enters a new epoch
        on the same server (a fail-over's batches are relocated into one epoch first)."""
        return (
            self.options.on_binlog_purged == "resnapshot"
            and start.binlog is not None
            and end.binlog is not None
            and end.binlog.epoch > start.binlog.epoch
        )

    def _resolves_start(self) -> bool:
        return self.options.startup_mode in ("earliest-offset", "specific-offset", "timestamp")

    def _startup_offset(self) -> SourceOffset:
        """The first batch of earliest-offset, specific-offset and timestamp mode: from the
        sentinel offset (no position) to the configured start, found in the binlog
        (:mod:`coordinator.startup`). The batch emits nothing; Spark logs its end, so later
        batches and restarts start there."""
        if self._start is None:
            traits = self.traits()
            files, now_ms, before = self.session.run(
                lambda conn: (*_files_and_clock(conn), executed_before_binlog(conn, traits.flavor))
            )
            position = startup.resolve(
                self.options.startup_mode,
                self.options.startup,
                self._dump.open,
                files,
                traits.flavor,
                traits.gtids,
                now_ms,
                before if traits.gtids else "",
            )
            position = self._with_xa(None, position)
            log.info(
                "scan.startup.mode=%s%s: the stream starts at %s (GTIDs %s)",
                self.options.startup_mode,
                f" ({self.options.startup.describe()})" if self.options.startup else "",
                position,
                expand(position.gtids) or "none",
            )
            self._start = position
        return SourceOffset(self._start, None, self.fingerprint, self.server_identity())

    def _with_xa(self, start: BinlogPosition | None, head: BinlogPosition) -> BinlogPosition:
        """``head`` with its XA watermark (coordinator/xa_watermark.py)."""
        watermark = self.xa.at(start, head)
        if watermark is not None:
            log.info("XA transaction prepared at %s:%s is unresolved at %s", *watermark, head)
        return replace(head, xa=watermark)

    def tasks(self, start: SourceOffset, end: SourceOffset) -> list[BinlogTask | ChunkTask]:
        """The tasks of the batch (start, end]: a pure function of the two offsets."""
        return self._following(self._tasks, start, end)

    def _tasks(self, start: SourceOffset, end: SourceOffset) -> list[BinlogTask | ChunkTask]:
        if same_progress(start, end):
            return []
        start, end = self._on_this_server(start), self._on_this_server(end)
        parts: list[BinlogTask | ChunkTask | TableResetTask] = []
        if self._resets(start, end):
            start = self._fresh_snapshot(end.binlog, start)
            tables = tuple(self.planner.tables)
            parts.append(TableResetTask(tables, tuple(range(len(tables))), end.binlog))
        else:
            self._ensure_available(start.binlog)
        members = self.captured.at(start)
        after, effect = self._members_of_batch(start, end)
        ids = self.options.server_ids
        server = self.server_identity()
        traits = self.traits()
        # Server ids: binlog tasks first, then snapshot tasks; never more tasks than ids.
        # One id serves a binlog-only batch (options._check_single_server_id): a batch
        # with no binlog range gives every id to its snapshot tasks.
        reads_binlog = (
            start.binlog is not None
            and end.binlog is not None
            and (start.binlog.coordinates < end.binlog.coordinates)
        )
        binlog_tasks = (
            min(self.options.binlog_parallelism, max(1, ids.size - 1)) if reads_binlog else 0
        )
        if reads_binlog:
            # Only the tables the stream owns any of travel (partitions stay small), and
            # those created in the range that it streams from their CREATE.
            names = [n for n in members.owned if owns_any_of(start.snapshot, n)]
            if start.added is not None and start.added.after is not None:
                names.append(start.added.table)
            owned = tuple(self.captured.schema(n) for n in sorted(names))
            created = tuple(self.captured.schema(n) for n in sorted(effect.streamed_from_creation))
            for slot in range(binlog_tasks):
                task = BinlogTask(
                    start.binlog,
                    end.binlog,
                    owned,
                    start.snapshot,
                    ids.first + slot,
                    binlog_tasks,
                    slot,
                    self.options.binlog_decoder,
                    server,
                    start.added,
                    created,
                    traits.lower_case_names,
                )
                parts.append(task)
        if start.snapshot is not None:
            chunks = self.planner.chunks_between(self._main_start(start, after, effect), end)
        else:
            chunks = self._added_chunks(start, end, after)
        if chunks:
            # Few tasks, each reading several chunks in one consistent snapshot: every chunk
            # task decodes the binlog from the planned position to its snapshot, so more
            # tasks than cores only multiply that work and widen the windows.
            slots = min(ids.size - binlog_tasks, self.options.snapshot_parallelism)
            if slots < 1:
                raise RuntimeError(
                    f"server-id '{ids}' leaves no id for the snapshot tasks of a batch that "
                    f"snapshots {chunks[0].table.name} next to its binlog task; give "
                    f"'server-id' a range such as '{ids.first}-{ids.first + 8}'"
                )
            groups = _spread(chunks, min(len(chunks), slots))
            for i, group in enumerate(groups):
                task = ChunkTask(
                    group,
                    end.binlog,
                    ids.first + binlog_tasks + i,
                    self.options.fetch_size,
                    self.options.snapshot_client,
                    self.options.binlog_decoder,
                    server,
                    traits.visibility,
                    traits.flavor,
                    self.options.gtid_wait_timeout,
                    traits.lower_case_names,
                )
                parts.append(task)
        return parts

    def snapshot_tasks(self) -> list[BinlogTask | ChunkTask]:
        """The tasks of a batch read (``spark.read``): every captured table's rows as of
        the binlog head now, read and normalized exactly as the stream's snapshot batches
        read them, all in one batch (split metadata lives only for this call)."""
        return self._following(self._snapshot_tasks)

    def _snapshot_tasks(self) -> list[BinlogTask | ChunkTask]:
        start = SourceOffset(None, self.planner.initial_cursor(), self.fingerprint)
        head = self._with_gtids(None, self._with_xa(None, self._head()))
        batch = self.planner.plan(start, head, BatchBudget())
        self._log_plan(start, batch.end, len(batch.chunks), head)
        return self._tasks(start, batch.end)

    def commit(self, end: SourceOffset) -> None:
        self.planner.registry.commit(end)
        self._write_state()

    def _log_plan(
        self, start: SourceOffset, end: SourceOffset, chunks: int, head: BinlogPosition
    ) -> None:
        lag = "unknown"
        if start.binlog is not None and start.binlog.file == head.file:
            lag = f"{max(0, head.pos - start.binlog.pos)} bytes"
        if end.snapshot is None and start.snapshot is None:
            log.info(
                "planned batch: phase=stream %s -> %s, binlog lag %s", start.binlog, end.binlog, lag
            )
            return
        progress = self.planner.registry.progress_snapshot()
        current = end.snapshot.table if end.snapshot else "hand-over"
        parts = [
            f"{p.table} {p.chunks_planned}/{p.estimated_chunks} chunks "
            f"{p.rows_per_second():.0f} rows/s"
            for p in progress
        ]
        log.info(
            "planned batch: phase=snapshot table=%s chunks=%d (%s), binlog lag %s",
            current,
            chunks,
            "; ".join(parts),
            lag,
        )

    def _write_state(self) -> None:
        """Test and operator hook: the coordinator's holdings, as a small JSON file."""
        directory = os.environ.get(STATE_DIR_ENV)
        if not directory:
            return
        registry = self.planner.registry
        state = {
            "pid": os.getpid(),
            "snapshot_metadata_entries": registry.snapshot_metadata_entries(),
            "released": None if registry.released is None else registry.released.__dict__,
        }
        path = os.path.join(directory, f"coordinator-{os.getpid()}.json")
        with open(path + ".tmp", "w") as handle:
            json.dump(state, handle)
        os.replace(path + ".tmp", path)

    def close(self) -> None:
        self.boundaries.close()
        self.session.close()


def _files_and_clock(conn) -> tuple[list[tuple[str, int]], int]:
    """``SHOW BINARY LOGS`` and the server's clock (ms), for resolving a start position."""
    files = binary_logs(conn)
    with conn.cursor() as cur:
        cur.execute("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")
        (now_ms,) = cur.fetchone()
    return files, int(now_ms)


def _ping(conn) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchall()


def check_gtid_history(conn, position: BinlogPosition, traits: ServerTraits) -> None:
    """The server's GTID state contains the one at ``position``: else its binlog was reset
    (``RESET BINARY LOGS AND GTIDS``, ``RESET MASTER``) or it is another server, and the
    same file and offset would name other events."""
    name = "gtid_binlog_pos" if traits.flavor == "mariadb" else "gtid_executed"
    now = parse_state(variables(conn, [name]).get(name, ""), traits.flavor)
    then = parse_state(position.gtids, traits.flavor)
    if not now.contains(then):
        raise SourceStateError(
            f"the server's GTIDs ({name}={now.text() or 'empty'}) do not include those of the "
            f"checkpoint's position {position} ({then.text()}): the server's binlog was reset "
            "or this is another server, so the checkpoint's positions name other events. "
            "Start a new query with a new checkpoint location"
        )


def _spread(chunks: tuple[ChunkSpec, ...], groups: int) -> list[tuple[ChunkSpec, ...]]:
    """Split chunks into ``groups`` contiguous runs of near-equal length."""
    size, extra = divmod(len(chunks), groups)
    result, index = [], 0
    for g in range(groups):
        take = size + (1 if g < extra else 0)
        result.append(tuple(chunks[index : index + take]))
        index += take
    return result
