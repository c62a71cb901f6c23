"""Plans micro-batches on the driver (docs/design.md, 'Micro-batches').

``plan`` moves the snapshot frontier forward by up to N chunks, possibly finishing a
table and starting the next, and pins the batch to the binlog head read now.
``chunks_between`` gives the chunks of a batch from its two offsets alone: from the
registry when this run planned it, else by walking the same boundaries again, which is
what a restarted driver does for a batch that was planned but never committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cdc_source.catalog import TableSchema
from cdc_source.keys import key_from_json, key_to_json
from cdc_source.offsets import BinlogPosition, SnapshotCursor, SourceOffset
from cdc_source.options import SourceOptions
from cdc_source.partitions import ChunkSpec
from coordinator.registry import PlannedBatch, SplitRegistry
from coordinator.splitter import BoundarySource

log = logging.getLogger("cdc_mysql.coordinator")


class PlanningError(RuntimeError):
    pass


ER_NO_SUCH_TABLE = 1146
CHUNK_BYTES = 16 << 20
MIN_CHUNK_ROWS = 1024
MAX_CHUNK_ROWS = 65536


def chunk_rows(schema: TableSchema, explicit: int | None) -> int:
    """Rows per chunk of ``schema``: ``scan.incremental.snapshot.chunk.size`` when set,
    else about 16 MiB of the table's rows, between 1,024 and 65,536. Each chunk costs a
    query whose start drains the task's stream (about 2 ms here), so narrow rows want big
    chunks; wide rows want small ones, so that a batch (at least one chunk) stays near
    its byte budget. Chunk ends need not be stable across restarts: a batch's rows are
    its key range, however it is cut into chunks."""
    if explicit is not None:
        return explicit
    if schema.avg_row_bytes <= 0:
        return MAX_CHUNK_ROWS
    return max(MIN_CHUNK_ROWS, min(MAX_CHUNK_ROWS, CHUNK_BYTES // schema.avg_row_bytes))


@dataclass(frozen=True)
class BatchBudget:
    """How much snapshot one micro-batch reads. A batch takes chunks until one of the
    limits is reached (always at least one chunk): ``chunks`` (an explicit
    ``scan.snapshot.chunks-per-batch``), ``rows`` (estimated as ``chunk.size`` per chunk)
    and ``bytes`` (those rows at the table's average row length)."""

    chunks: int | None = None
    rows: int | None = None
    bytes: int | None = None

    @classmethod
    def of_chunks(cls, chunks: int) -> BatchBudget:
        return cls(chunks=chunks)

    def allows(self, chunks: int, rows: int, size: int) -> bool:
        """Whether a batch may grow to ``chunks`` chunks of ``rows`` rows, ``size`` bytes."""
        return (
            (self.chunks is None or chunks <= self.chunks)
            and (self.rows is None or rows <= self.rows)
            and (self.bytes is None or size <= self.bytes)
        )


def batch_budget(
    options: SourceOptions, max_rows: int | None, max_bytes: int | None
) -> BatchBudget:
    """The next snapshot batch's size: the options' budget (an explicit chunk count, or
    rows and bytes), within Spark's ReadMaxRows / ReadMaxBytes if it passed one."""
    if options.chunks_per_batch is not None:
        rows, size = None, None
    else:
        rows, size = options.rows_per_batch, options.bytes_per_batch
    if max_rows is not None:
        rows = max_rows if rows is None else min(rows, max_rows)
    if max_bytes is not None:
        size = max_bytes if size is None else min(size, max_bytes)
    return BatchBudget(options.chunks_per_batch, rows, size)


class Planner:
    def __init__(
        self,
        tables: list[TableSchema],
        boundaries: BoundarySource,
        chunk_size: int | None,
        registry: SplitRegistry | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.set_tables(tables)
        self.boundaries = boundaries
        self.chunk_size = chunk_size
        self.registry = registry or SplitRegistry()

    def set_tables(self, tables: list[TableSchema]) -> None:
        """The tables the main snapshot walks (tables join and leave a running capture)."""
        self.tables = sorted(tables, key=lambda t: t.name)
        self._index = {t.name: i for i, t in enumerate(self.tables)}

    def next_cursor(self, name: str) -> SnapshotCursor | None:
        """The start of the first table after ``name`` (the hand-over if none is left)."""
        later = [t.name for t in self.tables if t.name > name]
        return SnapshotCursor(later[0], None) if later else None

    # -- a table joining a running capture, snapshotted alone ----------------------------
    def plan_table(
        self, schema: TableSchema, after: tuple | None, budget: BatchBudget
    ) -> tuple[tuple[ChunkSpec, ...], tuple | None]:
        """Chunks of ``schema`` after the key ``after`` (JSON form), as many as ``budget``
        allows (at least one); and the new ``after``, None when the table is done."""
        size_of_chunk = chunk_rows(schema, self.chunk_size)
        chunks: list[ChunkSpec] = []
        lo = None if after is None else key_from_json(schema, after)
        while True:
            rows = (len(chunks) + 1) * size_of_chunk
            if chunks and not budget.allows(
                len(chunks) + 1, rows, rows * max(schema.avg_row_bytes, 1)
            ):
                return tuple(chunks), tuple(key_to_json(schema, lo))
            hi = self._chunk_end(schema, lo, None, size_of_chunk)
            chunks.append(ChunkSpec(schema, 0, lo, hi))
            if hi is None:
                return tuple(chunks), None
            lo = hi

    def table_chunks(
        self, schema: TableSchema, after: tuple | None, until: tuple | None
    ) -> tuple[ChunkSpec, ...]:
        """The chunks of ``schema`` for keys in ``(after, until]`` (to its end if None),
        walked again from the offsets alone."""
        lo = None if after is None else key_from_json(schema, after)
        bound = None if until is None else key_from_json(schema, until)
        return tuple(self._key_range(schema, 0, lo, bound))

    def _chunk_end(
        self, schema: TableSchema, lo: tuple | None, bound: tuple | None, rows: int
    ) -> tuple | None:
        """The server's next chunk boundary; None (the rest is one chunk) for a table that
        is gone: dropped since the batch's head was read (error 1146), or before this
        driver could read its schema (a restart after it was dropped). Its task reads
        that chunk as no rows, and the stream's reset of the table follows."""
        if not schema.primary_key:
            return None
        try:
            return self.boundaries.chunk_end(schema, lo, bound, rows)
        except Exception as err:
            if getattr(err, "args", None) and err.args[0] == ER_NO_SUCH_TABLE:
                return None
            raise

    def _key_range(self, schema: TableSchema, index: int, lo: tuple | None, bound: tuple | None):
        """The chunks of ``schema`` for keys in ``(lo, bound]``, walked from the server's
        boundaries (a table gone: the rest of the range as one chunk)."""
        rows = chunk_rows(schema, self.chunk_size)
        while True:
            hi = self._chunk_end(schema, lo, bound, rows)
            if hi is None or hi == bound:
                yield ChunkSpec(schema, index, lo, bound)
                return
            yield ChunkSpec(schema, index, lo, hi)
            lo = hi

    def initial_cursor(self) -> SnapshotCursor | None:
        return SnapshotCursor(self.tables[0].name, None) if self.tables else None

    def table_index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise PlanningError(
                f"the checkpoint's snapshot is at table {name}, which is no longer captured "
                f"(captured now: {', '.join(self._index) or 'none'}); restore the table or "
                "start a new query with a new checkpoint location"
            ) from None

    # -- planning a new batch ------------------------------------------------------------
    def plan(
        self, start: SourceOffset, head: BinlogPosition, budget: BatchBudget | int
    ) -> PlannedBatch:
        """The next snapshot batch, as much as ``budget`` allows (an int: that many
        chunks), ending at ``head``."""
        if start.snapshot is None:
            raise PlanningError("plan() is for snapshot batches; the hand-over is done")
        if isinstance(budget, int):
            budget = BatchBudget.of_chunks(budget)
        chunks: list[ChunkSpec] = []
        rows = size = 0
        cursor: SnapshotCursor | None = start.snapshot
        while cursor is not None:
            index = self.table_index(cursor.table)
            schema = self.tables[index]
            size_of_chunk = chunk_rows(schema, self.chunk_size)
            rows += size_of_chunk
            size += size_of_chunk * max(schema.avg_row_bytes, 1)
            if chunks and not budget.allows(len(chunks) + 1, rows, size):
                break
            lo = None if cursor.after is None else key_from_json(schema, cursor.after)
            hi = self._chunk_end(schema, lo, None, size_of_chunk)
            chunks.append(ChunkSpec(schema, index, lo, hi))
            progress = self.registry.progress(schema.name, schema.estimated_rows, size_of_chunk)
            progress.chunks_planned += 1
            if hi is not None:
                cursor = SnapshotCursor(schema.name, tuple(key_to_json(schema, hi)))
            else:
                progress.finished = True
                cursor = (
                    SnapshotCursor(self.tables[index + 1].name, None)
                    if index + 1 < len(self.tables)
                    else None
                )
        batch = PlannedBatch(start, SourceOffset(head, cursor, start.tables), tuple(chunks))
        self.registry.record(batch)
        return batch

    # -- the chunks of a batch, from its offsets alone -----------------------------------
    def chunks_between(self, start: SourceOffset, end: SourceOffset) -> tuple[ChunkSpec, ...]:
        if start.snapshot is None:
            return ()
        planned = self.registry.planned(start, end)
        if planned is not None:
            return planned.chunks
        return tuple(self._walk(start.snapshot, end.snapshot))

    def _walk(self, start: SnapshotCursor, end: SnapshotCursor | None):
        first = self.table_index(start.table)
        last = len(self.tables) - 1 if end is None else self.table_index(end.table)
        for index in range(first, last + 1):
            schema = self.tables[index]
            lo = (
                key_from_json(schema, start.after)
                if index == first and start.after is not None
                else None
            )
            if end is not None and index == last:
                if end.after is None:
                    return
                bound = key_from_json(schema, end.after)
            else:
                bound = None
            yield from self._key_range(schema, index, lo, bound)
