"""Snapshots on demand on the driver (docs/design.md, 'Re-reads'): the requests a batch
takes, and the chunks of the re-read in progress, planned after the main snapshot and
the joining tables' ones, next to the stream.

A re-read's table stays owned by the stream: its binlog tasks go on emitting every change
of it, and the re-read's chunk tasks emit ``r`` rows as of the batch's end P, which
restate each key's state there and sort at P (:mod:`cdc_source.sequence`). The chunks of
a batch are a function of its two offsets (:func:`cdc_source.rereads.read_between`).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from cdc_source.offsets import SourceOffset
from cdc_source.options import SourceOptions
from cdc_source.partitions import ChunkSpec
from cdc_source.rereads import (
    Request,
    RequestError,
    Rereads,
    delete_request_files,
    parse_signal,
    read_between,
    read_request_file,
    request_files,
)
from coordinator.captured_tables import CapturedTables
from coordinator.planner import BatchBudget, Planner
from coordinator.table_set import Membership

log = logging.getLogger("cdc_mysql")

SIGNAL_ROWS_PER_LOOK = 16  # signal rows read at a time (a request that finds no room waits)
# Batches that look at the signal table after a range wrote it: a row in the binlog may
# become visible to a SELECT a moment later (the engine commits after the binlog write).
LOOKS_AFTER_A_WRITE = 3


class RequestInbox:
    """Where a running query takes requests: the files of ``signal.directory`` and the
    rows of ``signal.data.collection``. ``select(sql, params)`` runs a query on the
    driver's connection (the signal table is read by ``SELECT``: the driver decodes no
    row value of the binlog)."""

    def __init__(self, options: SourceOptions, select) -> None:
        self.directory = options.signal_directory
        self.table = options.signal_table
        self.select = select
        # How many more batches look at the signal table: one at a run's start (a request
        # may have found no room before), a few after a range that wrote it, and while a
        # request waits for room.
        self.looks = 1 if self.table is not None else 0

    def signal_table_written(self) -> None:
        if self.table is not None:
            self.looks = LOOKS_AFTER_A_WRITE

    def take(self, rereads: Rereads) -> Rereads:
        """``rereads`` with the waiting requests applied, oldest first, while there is
        room (one that finds none waits, and those after it)."""
        rereads = rereads.without_finished()
        if self.directory:
            for name in request_files(self.directory, after=rereads.file):
                try:
                    request = read_request_file(self.directory, name)
                except (OSError, RequestError) as err:
                    log.error("signal file %s is ignored: %s", name, err)
                    rereads = replace(rereads, file=name)
                    continue
                if not rereads.fits(request):
                    queued = len(rereads.queue)
                    log.debug("signal file %s waits: %d re-reads are queued", name, queued)
                    break
                rereads = replace(_applied(rereads, request, f"signal file {name}"), file=name)
        if self.table is not None and self.looks > 0:
            rereads = self._take_rows(rereads)
        return rereads

    def _take_rows(self, rereads: Rereads) -> Rereads:
        rows = self.select(
            f"SELECT id, type, data FROM {quoted(self.table)} WHERE id > %s ORDER BY id LIMIT %s",
            (rereads.signal_id, SIGNAL_ROWS_PER_LOOK),
        )
        waiting = len(rows) == SIGNAL_ROWS_PER_LOOK  # more rows than one look reads
        for row_id, kind, data in rows:
            row_id = signal_id(row_id, self.table)
            what = f"signal row {row_id} of {self.table}"
            if str(kind).lower() not in ("execute-snapshot", "stop-snapshot"):
                rereads = replace(rereads, signal_id=row_id)  # another tool's signal
                continue
            try:
                request = parse_signal(kind, data)
            except RequestError as err:
                log.error("%s is ignored: %s", what, err)
                rereads = replace(rereads, signal_id=row_id)
                continue
            if not rereads.fits(request):
                waiting = True
                break
            rereads = replace(_applied(rereads, request, what), signal_id=row_id)
        # A write's rows may become visible a moment after the binlog has them: look again.
        self.looks = max(1, self.looks - 1) if waiting else self.looks - 1
        return rereads

    def committed(self, end: SourceOffset) -> None:
        """The batch ending at ``end`` is committed: the request files it took go."""
        if self.directory:
            delete_request_files(self.directory, end.rereads.file)


def signal_id(value, table: str) -> int:
    """A signal row's ``id``: the offset remembers the highest taken, so it must be an
    integer that grows with each new row (Debezium allows any text; here it may not)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RequestError(
            f"the signal table {table} has a row whose id {value!r} is not an integer: "
            "give the table an increasing integer id (AUTO_INCREMENT)"
        ) from None


def quoted(table: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in table.split(".", 1))


def _applied(rereads: Rereads, request: Request, what: str) -> Rereads:
    # The condition is not logged: it may hold values the user keeps out of logs.
    log.info(
        "%s: %s of %s%s",
        what,
        request.kind,
        ", ".join(request.tables) or "every table",
        " (with a condition)" if request.conditions else "",
    )
    return rereads.taking(request)


def rereads_run(start: SourceOffset, added, members: Membership) -> bool:
    """Whether the batch from ``start`` may read a re-read's chunks: only after the
    hand-over, and once no joining table waits for its own snapshot (``added``: the
    joining table's cursor at the batch's end), so that re-reads never delay the
    snapshots the stream's exactness needs."""
    return start.snapshot is None and start.added is None and added is None and not members.pending


def plan_reread(
    planner: Planner,
    captured: CapturedTables,
    rereads: Rereads,
    members: Membership,
    budget: BatchBudget,
) -> Rereads:
    """The next chunks of the re-read in progress, as many as ``budget`` allows (at
    least one). A re-read of a table that is not captured is dropped with a warning."""
    while (current := rereads.current) is not None and current.table not in members.owned:
        log.warning(
            "re-read #%d of %s is dropped: the table is not captured (or not yet wholly "
            "owned by the stream)",
            current.n,
            current.table,
        )
        rereads = rereads.dropped(current.n)
    if current is None:
        return rereads
    _, done_to = planner.plan_table(captured.schema(current.table), current.after, budget)
    if done_to is None:
        log.info("re-read #%d of %s is done", current.n, current.table)
    return rereads.advanced(done_to)


def reread_chunks(
    planner: Planner, captured: CapturedTables, start: SourceOffset, end: SourceOffset
) -> tuple[ChunkSpec, ...]:
    """The chunks of a re-read the batch (start, end] reads, with its condition."""
    read = read_between(start.rereads, end.rereads)
    if read is None:
        return ()
    reread, after = read
    until = None if reread.done else reread.after
    chunks = planner.table_chunks(captured.schema(reread.table), after, until)
    return tuple(replace(chunk, condition=reread.condition, reread=reread.n) for chunk in chunks)
