"""The ``foreachBatch`` function that writes a change stream into lake tables.

A batch already wholly in every lake table is skipped without reading it. Otherwise it
is staged by the executors and read in ``_seq`` order in slices of at most ``slice_rows``
rows (:mod:`cdc_source.delta.slices`), and each slice is applied to each table in one commit
that carries the slice's application transaction (:mod:`cdc_source.delta.transactions`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from cdc_source.delta.changes import KEY, ROW_KEY
from cdc_source.delta.lake_table import LakeTable, Outcome
from cdc_source.delta.slices import (
    BATCH_DIRECTORY,
    cut,
    read_staged,
    remove_batches_before,
    remove_staged,
    stage,
)
from cdc_source.delta.table_set import TableSet
from cdc_source.delta.transactions import app_id_of

log = logging.getLogger("cdc_mysql.delta")
QUERY_ID = "sql.streaming.queryId"  # the local property Spark sets while a batch runs
SLICE_ROWS = 200_000  # rows per slice: one MERGE's source, the driver's working set


def keyed(part: pa.Table) -> pa.Table:
    """A single table's slice with the source's ``row_key`` as the lake's ``_key``."""
    if ROW_KEY not in part.column_names:
        raise ValueError(
            f"the stream has no {ROW_KEY} column: add '{ROW_KEY}' to the source's "
            "'metadata.list' (the lake tables match rows on it)"
        )
    index = part.column_names.index(ROW_KEY)
    return part.set_column(index, pa.field(KEY, pa.binary()), part.column(index))


@dataclass(frozen=True)
class Applied:
    """One table's slice of a batch, applied (handed to ``on_apply``)."""

    batch_id: int
    table: str
    index: int  # the slice's index in the batch
    last: bool  # the batch's last slice
    outcome: Outcome
    later: tuple[str, ...]  # tables with changes in this slice not applied yet


class LakeWriter:
    """Applies change batches to the lake tables of one query: ``lake`` for a single
    source table (its columns as the stream gives them), ``table_set`` for several (the
    envelope schema). Call it as ``foreachBatch``'s function. Rows are matched on the
    source's ``row_key`` (kept as ``_key``), so the writer needs no server connection.
    ``staging`` is the directory a batch is staged in while it is applied (a
    subdirectory per query and writer, and in it one per batch, removed once the batch
    is applied or found applied)."""

    def __init__(
        self,
        lake: LakeTable | None = None,
        table_set: TableSet | None = None,
        *,
        staging: str,
        slice_rows: int = SLICE_ROWS,
        on_apply: Callable[[Applied], None] | None = None,
    ) -> None:
        if (lake is None) == (table_set is None):
            raise ValueError("a writer needs one lake table or one table set")
        self.staging = staging
        self.lake = lake
        self.table_set = table_set
        self.slice_rows = slice_rows
        self.on_apply = on_apply
        self.source_schema: pa.Schema | None = None

    @property
    def lakes(self) -> list[LakeTable]:
        return [self.lake] if self.lake is not None else list(self.table_set.lakes.values())

    def create(self) -> None:
        """Every lake table, empty if it is new (so each can be read before a change)."""
        for lake in self.lakes:
            lake.table()

    def bind(self, batch_df) -> str:
        """Names this query's commits by Spark's id of the query running the batch;
        returns this writer's staging directory for the query (its own, even where
        several queries or writers share ``staging``)."""
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty(QUERY_ID)
        if not query_id:
            raise RuntimeError(
                "the lake writer runs as the foreachBatch function of a streaming query"
            )
        for lake in self.lakes:
            lake.bind(app_id_of(query_id, lake.mode, lake.name))
        tables = "\0".join(sorted(f"{lake.mode}:{lake.path}" for lake in self.lakes))
        return f"{self.staging}/{query_id}-{hashlib.sha1(tables.encode()).hexdigest()[:12]}"

    def __call__(self, batch_df, batch_id: int) -> None:
        staging = self.bind(batch_df)
        remove_batches_before(staging, batch_id)  # Spark committed those
        directory = f"{staging}/{BATCH_DIRECTORY}{batch_id}"
        if all(lake.batch_applied(batch_id) for lake in self.lakes):
            for lake in self.lakes:
                log.info("batch %d: %s: already applied", batch_id, lake.name)
            remove_staged(directory)
            return
        if self.source_schema is None and self.lake is not None:
            from pyspark.sql.pandas.types import to_arrow_schema

            self.source_schema = to_arrow_schema(batch_df.schema, timezone="UTC")
        from pyspark import StorageLevel

        batch_df.persist(StorageLevel.DISK_ONLY)
        try:
            parts = stage(batch_df, self.slice_rows, directory)
        finally:
            batch_df.unpersist()
        for index, part, last in cut(read_staged(directory, parts), self.slice_rows):
            self.apply_slice(part, batch_id, index, last)
            del part  # not held while the next slice is gathered
        remove_staged(directory)

    def apply_slice(self, part: pa.Table, batch_id: int, index: int, last: bool) -> None:
        """Applies slice ``index`` of a batch (``last``: its last) to every lake table."""
        if self.lake is not None:
            parts = {self.lake.name: keyed(part.cast(self.source_schema))}
            lakes = {self.lake.name: self.lake}
        else:
            parts = self.table_set.parts(part, batch_id)
            lakes = self.table_set.lakes
        where = "" if index == 0 and last else f" (slice {index})"
        names = list(lakes)
        for i, name in enumerate(names):
            changes = parts[name]
            outcome = lakes[name].apply(changes, batch_id, index, last)
            if not changes.num_rows:
                continue
            log.info("batch %d: %s: %s%s", batch_id, name, outcome.text, where)
            if self.on_apply is not None:
                later = tuple(n for n in names[i + 1 :] if parts[n].num_rows)
                self.on_apply(Applied(batch_id, name, index, last, outcome, later))
