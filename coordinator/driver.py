"""The driver side of a query run (docs/design.md, 'Micro-batches' and 'Hand-over and
split metadata'): plans each micro-batch from the binlog head and the snapshot frontier,
builds its tasks, keeps the coordinator's split metadata until Spark commits past it, and
carries the XA watermark into the offsets."""

from __future__ import annotations

import logging
from dataclasses import replace

from cdc_source.binlog.gtid_scan import executed_before_binlog
from cdc_source.catalog import TableSchema
from cdc_source.gtid import expand
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
from cdc_source.partitions import BinlogTask, ChunkTask, TableResetTask
from cdc_source.preflight import BinlogPurgedError
from cdc_source.visibility import ServerTraits
from coordinator import startup
from coordinator.batch_end import stream_limit
from coordinator.captured_tables import CapturedTables
from coordinator.ddl_scan import DdlScan
from coordinator.joining import joining_chunks, plan_joining
from coordinator.plan_log import log_plan, write_state
from coordinator.planner import BatchBudget, Planner, batch_budget
from coordinator.range_ends import RangeEnds
from coordinator.rereading import RequestInbox, plan_reread, reread_chunks, rereads_run
from coordinator.server_link import ServerLink, SourceStateError
from coordinator.splitter import ServerBoundarySource
from coordinator.table_set import Membership, RangeEffect
from coordinator.task_assembly import binlog_task_count, binlog_tasks, chunk_tasks

log = logging.getLogger("cdc_mysql")

__all__ = ["QueryDriver", "SourceStateError"]


class QueryDriver:
    """The planning of one query run: each batch's end offset and its tasks, the
    coordinator's split metadata, the availableNow target and the XA watermark. Its
    connections and the following of a fail-over are :class:`ServerLink`'s; the tasks are
    assembled by :mod:`coordinator.task_assembly`. The Spark glue
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
        self.link = ServerLink(options, on_change=self._forget_server)
        self.session = self.link.session
        open_session = self.link.open_session
        self.boundaries = ServerBoundarySource(open_session, policy)
        self.planner = Planner(tables, self.boundaries, options.chunk_size)
        # Every pass of the driver over the binlog (a batch's range, the start's resolution,
        # a table listing's statements) reads with the range's last server id, one at a
        # time; a batch's range is read once for all that planning needs from it.
        self._dump = self.link.dump
        # Which tables are captured at each offset, as statements create, drop and rename
        # them (coordinator/table_set.py); one output table means typed output.
        self.ddl = DdlScan(
            open_session,
            options.server_ids.last,
            policy,
            lambda: self.traits().lower_case_names,
            source=self._dump,
            online_schema_changes=options.online_schema_changes,
        )
        self.captured = CapturedTables(
            options, tables, self.session.run, self.ddl, typed=not is_envelope(tables)
        )
        self.fingerprint = table_fingerprint([t.name for t in tables])
        self.target: BinlogPosition | None = None
        self._refreeze = False
        self.ends = RangeEnds(
            options=options,
            open_session=open_session,
            dump=self._dump,
            ddl=self.ddl,
            traits=self.traits,
            tables={t.name for t in tables},
            signal_written=lambda: self.inbox.signal_table_written(),
        )
        self._start: BinlogPosition | None = None  # the resolved start of this run's mode
        # Snapshots on demand: requests taken from files and the signal table.
        self.inbox = RequestInbox(options, self._select)
        self.finished: SourceOffset | None = None  # snapshot mode, once past the hand-over

    def _select(self, sql: str, params: tuple) -> list[tuple]:
        """A query's rows on the driver's connection, read as the server holds them now
        (the read's transaction ends with it)."""

        def query(conn):
            with conn.cursor() as cur:
                cur.execute(sql, params)
                rows = list(cur.fetchall())
            conn.commit()
            return rows

        return self.session.run(query)

    def traits(self) -> ServerTraits:
        """What the server is and offers (:meth:`ServerLink.traits`)."""
        return self.link.traits()

    def head(self) -> BinlogPosition:
        """The binlog head (its GTID state is filled in by :meth:`RangeEnds.ended`), of the server
        reached now."""
        return self.link.following(self.link.head)

    def _ceiling(self) -> tuple[int, int] | None:
        """availableNow's frozen head, past which the follower reads nothing."""
        return self.target.coordinates if self.target is not None else None

    def freeze_target(self) -> None:
        self.target = self.head()

    def server_identity(self) -> str:
        """The server the offsets' positions belong to (connecting once if need be)."""
        return self.link.identity()

    def _forget_server(self) -> None:
        """A fail-over is followed (:class:`ServerLink`): what was read from the old
        server's binlog is forgotten, so that every pass starts again on the new one."""
        self.ends.forget()
        self._start = None  # a resolved start of the old server: resolved again here
        if self.target is not None:  # availableNow: the head to reach is the new server's
            self._refreeze = True

    def latest(
        self, start: SourceOffset, max_rows: int | None = None, max_bytes: int | None = None
    ) -> SourceOffset:
        """The end of the next batch (``start`` when there is nothing new). ``max_rows``,
        ``max_bytes``: Spark's ReadMaxRows / ReadMaxBytes limit, if it passed one."""
        return self.link.following(self._latest, start, max_rows, max_bytes)

    def _latest(
        self, start: SourceOffset, max_rows: int | None, max_bytes: int | None
    ) -> SourceOffset:
        if self.options.startup_mode == "snapshot" and start.handed_over and start.binlog:
            # Snapshot only: the stream ends at the hand-over. No batch is planned after it,
            # so availableNow finishes and other triggers idle without reading on.
            self.finished = start
            return start
        start = self.link.on_this_server(start)
        if start.binlog is None and start.snapshot is None and self._resolves_start():
            return self._startup_offset()
        if start.binlog is not None and self._purged(start.binlog):
            return self._resnapshot(start, max_rows, max_bytes)
        self.link.ensure_available(start.binlog)
        if self._refreeze:
            self.target, self._refreeze = self.link.head(), False
        head = self.target or self.link.head()
        head = replace(head, epoch=start.binlog.epoch if start.binlog is not None else 0)
        server = self.server_identity()
        budget = batch_budget(self.options, max_rows, max_bytes)
        if start.snapshot is not None:
            head = self.ends.ended(start.binlog, head)
            members, effect = self._members_after(start, head)
            main = self._main_start(start, members, effect)
            if main.snapshot is None:  # every table left to snapshot was dropped
                end = SourceOffset(head, None, members.fingerprint, server)
                chunks = 0
            else:
                batch = self.planner.plan(main, head, budget)
                end = replace(batch.end, tables=members.fingerprint, server=server)
                chunks = len(batch.chunks)
            # Requests wait for the hand-over; what was taken before carries on.
            end = replace(end, rereads=start.rereads)
            self.captured.log_effect(effect, head)
            self.captured.remember(end, members)
            log_plan(self.planner.registry, start, end, chunks, head)
            write_state(self.planner.registry)
            return end
        members = self.captured.at(start)
        if start.binlog is not None and head.coordinates < start.binlog.coordinates:
            return start  # availableNow target behind a restored start: nothing more to do
        moved = start.binlog is None or head.coordinates != start.binlog.coordinates
        rereads = None
        if not moved and start.added is None and not members.pending:
            rereads = self.inbox.take(start.rereads)
            if not rereads.queue:  # maybe a request file taken: the offset says so
                return start if rereads == start.rereads else replace(start, rereads=rereads)
        limit = stream_limit(self.options, max_rows, max_bytes)
        if start.binlog is not None and moved:
            head = self.ends.stream_end(
                start.binlog, head, limit, frozenset(members.names), self._ceiling(), server=server
            )
        elif start.binlog is not None:
            head = start.binlog  # no new binlog: a batch of the joining table's snapshot only
        else:
            head = self.ends.at_first(head)
        members, effect = self._members_after(start, head)
        members, added = plan_joining(self.planner, self.captured, start, members, budget)
        if rereads is None:  # after the range's pass: a request in it takes effect at its end
            rereads = self.inbox.take(start.rereads)
        if rereads_run(start, added, members):
            # Re-reads come after the joining tables' snapshots, one at a time.
            rereads = plan_reread(self.planner, self.captured, rereads, members, budget)
        end = SourceOffset(head, None, members.fingerprint, server, added, rereads)
        if start.binlog is not None and same_progress(start, end):
            return start
        self.captured.log_effect(effect, head)
        self.captured.remember(end, members)
        log_plan(self.planner.registry, start, end, 0, head)
        self.ends.follow(
            end.binlog, frozenset(members.names), limit, server=server, ceiling=self._ceiling()
        )
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

    def _purged(self, position: BinlogPosition) -> bool:
        """Whether ``position``'s binlog file was purged and the query snapshots again
        (``scan.on-binlog-purged=resnapshot``); with ``fail`` a purge is the error."""
        try:
            self.link.ensure_available(position)
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
        self.ends.stop_following()  # a snapshot again: the stream phase starts anew after it
        head = replace(self.link.head(), epoch=start.binlog.epoch + 1)
        if self.target is not None and self.target.coordinates < head.coordinates:
            self.target = head  # availableNow: the new snapshot ends at R
        head = self.ends.at_first(head)
        fresh = self._fresh_snapshot(head, start)
        batch = self.planner.plan(fresh, head, batch_budget(self.options, max_rows, max_bytes))
        log.warning(
            "the binlog from %s was purged (scan.on-binlog-purged=resnapshot): every captured "
            "table is reset ('t') and snapshotted again as of %s, epoch %d",
            start.binlog,
            head,
            head.epoch,
        )
        write_state(self.planner.registry)
        # A new snapshot reads every table again: re-reads asked for are moot, the
        # requests taken stay taken.
        rereads = replace(start.rereads, queue=())
        return replace(batch.end, server=self.server_identity(), rereads=rereads)

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
            files, now_ms = self.link.files_and_clock()
            before = self.session.run(lambda conn: executed_before_binlog(conn, traits.flavor))
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
            position = self.ends.with_xa(position)
            log.info(
                "scan.startup.mode=%s%s: the stream starts at %s (GTIDs %s)",
                self.options.startup_mode,
                f" ({self.options.startup.describe()})" if self.options.startup else "",
                position,
                expand(position.gtids) or "none",
            )
            self._start = position
        return SourceOffset(self._start, None, self.fingerprint, self.server_identity())

    def tasks(self, start: SourceOffset, end: SourceOffset) -> list[BinlogTask | ChunkTask]:
        """The tasks of the batch (start, end]: a pure function of the two offsets."""
        return self.link.following(self._tasks, start, end)

    def _tasks(self, start: SourceOffset, end: SourceOffset) -> list[BinlogTask | ChunkTask]:
        if same_progress(start, end):
            return []
        start, end = self.link.on_this_server(start), self.link.on_this_server(end)
        parts: list[BinlogTask | ChunkTask | TableResetTask] = []
        if self._resets(start, end):
            start = self._fresh_snapshot(end.binlog, start)
            tables = tuple(self.planner.tables)
            parts.append(TableResetTask(tables, tuple(range(len(tables))), end.binlog))
        else:
            self.link.ensure_available(start.binlog)
        members = self.captured.at(start)
        after, effect = self._members_of_batch(start, end)
        server, traits = self.server_identity(), self.traits()
        reads_binlog = (
            start.binlog is not None
            and end.binlog is not None
            and (start.binlog.coordinates < end.binlog.coordinates)
        )
        binlog_count = binlog_task_count(self.options, reads_binlog)
        if reads_binlog:
            # Only the tables the stream owns any of travel (partitions stay small), and
            # those created in the range that it streams from their CREATE.
            names = [n for n in members.owned if owns_any_of(start.snapshot, n)]
            if start.added is not None and start.added.after is not None:
                names.append(start.added.table)
            parts += binlog_tasks(
                start=start.binlog,
                end=end.binlog,
                tables=tuple(self.captured.schema(n) for n in sorted(names)),
                owned_at=start.snapshot,
                added=start.added,
                created=tuple(
                    self.captured.schema(n) for n in sorted(effect.streamed_from_creation)
                ),
                count=binlog_count,
                options=self.options,
                server=server,
                traits=traits,
            )
        if start.snapshot is not None:
            chunks = self.planner.chunks_between(self._main_start(start, after, effect), end)
        else:
            chunks = joining_chunks(self.planner, self.captured, start, end, after)
            chunks += reread_chunks(self.planner, self.captured, start, end)
        parts += chunk_tasks(
            chunks=chunks,
            target=end.binlog,
            ids_taken=binlog_count,
            options=self.options,
            server=server,
            traits=traits,
        )
        return parts

    def snapshot_tasks(self) -> list[BinlogTask | ChunkTask]:
        """The tasks of a batch read (``spark.read``): every captured table's rows as of
        the binlog head now, read and normalized exactly as the stream's snapshot batches
        read them, all in one batch (split metadata lives only for this call)."""
        return self.link.following(self._snapshot_tasks)

    def _snapshot_tasks(self) -> list[BinlogTask | ChunkTask]:
        start = SourceOffset(None, self.planner.initial_cursor(), self.fingerprint)
        head = self.ends.at_first(self.link.head())
        batch = self.planner.plan(start, head, BatchBudget())
        log_plan(self.planner.registry, start, batch.end, len(batch.chunks), head)
        return self._tasks(start, batch.end)

    def commit(self, end: SourceOffset) -> None:
        self.planner.registry.commit(end)
        self.inbox.committed(end)
        write_state(self.planner.registry)

    def close(self) -> None:
        self.ends.close()
        self.boundaries.close()
        self.link.close()
