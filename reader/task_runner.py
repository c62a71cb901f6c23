"""Runs one partition's task on an executor and yields Arrow record batches."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa

from cdc_source.binlog.transport import DumpSource
from cdc_source.catalog import TableSchema
from cdc_source.column_policy import ALL_COLUMNS, ColumnPolicy
from cdc_source.failover import relocate, server_binlog
from cdc_source.mysql_client import ServerChangedError, connect, server_flavor, server_identity
from cdc_source.partitions import BinlogTask, ChunkTask, TableResetTask
from cdc_source.retry import RetryPolicy
from cdc_source.sequence import snapshot_seq_prefix
from reader.arrow_output import ArrowWriter, Emitted, RowOrigins
from reader.binlog_reader import BinlogReader
from reader.chunk_reader import ChunkReader
from reader.native_columns import native_wanted

log = logging.getLogger("cdc_mysql")


def run_task(
    task: BinlogTask | ChunkTask,
    connection_kwargs: dict,
    tables: tuple[TableSchema, ...],
    policy: RetryPolicy | None = None,
    metadata: tuple[str, ...] = (),
    columns: ColumnPolicy = ALL_COLUMNS,
) -> Iterator[pa.RecordBatch]:
    """The task's batches (with the ``metadata.list`` columns ``metadata``, the columns
    and masks of ``columns``); transient
    faults are retried within ``policy`` (a task that still fails is retried whole by
    Spark, up to ``spark.task.maxFailures``).

    A task planned against a server that is no longer the one reached (a fail-over
    while its batch ran) is relocated there by its positions' GTID states before it
    emits anything (:func:`relocated`); a task that had emitted rows fails, and Spark's
    next attempt relocates it from the start."""
    if isinstance(task, TableResetTask):  # no server: nothing to relocate
        yield from _batches(task, connection_kwargs, tables, policy, metadata, columns)
        return
    emitted = False
    try:
        for batch in _batches(task, connection_kwargs, tables, policy, metadata, columns):
            emitted = True
            yield batch
        return
    except ServerChangedError:
        if emitted:
            raise
    moved = relocated(task, connection_kwargs, policy)
    yield from _batches(moved, connection_kwargs, tables, policy, metadata, columns)


def relocated(
    task: BinlogTask | ChunkTask, connection_kwargs: dict, policy: RetryPolicy | None
) -> BinlogTask | ChunkTask:
    """``task`` with its positions found on the server reached now, one epoch later
    (:mod:`cdc_source.failover`). A binlog task that is one of several of its batch
    cannot be: the others may have read the old server, and the rows of one batch must
    all be of one epoch for ``_seq`` to order them."""
    if isinstance(task, BinlogTask) and task.stride > 1:
        raise ServerChangedError(
            f"the binlog task {task.slot + 1} of {task.stride} of a batch planned on "
            f"{task.server} met another server (a fail-over during the batch); its sibling "
            "tasks may have read the old one, so the batch cannot be finished here. Restart "
            "the query: it resumes exactly on the new server from its checkpoint"
        )
    conn = connect(connection_kwargs)
    try:
        identity, flavor = server_identity(conn), server_flavor(conn)
        files, before = server_binlog(conn, flavor)
    finally:
        conn.close()
    source = DumpSource(lambda: connect(connection_kwargs), task.server_id, policy=policy)
    if isinstance(task, BinlogTask):
        start = relocate(task.start, source.open, files, flavor, before)
        end = relocate(task.end, source.open, files, flavor, before)
        moved = replace(task, start=start, end=end, server=identity)
        log.warning("fail-over: binlog task reads %s..%s on %s", start, end, identity)
    else:
        target = relocate(task.target, source.open, files, flavor, before)
        moved = replace(task, target=target, server=identity, server_flavor=flavor)
        log.warning("fail-over: snapshot task reads as of %s on %s", target, identity)
    return moved


def _batches(
    task: BinlogTask | ChunkTask,
    connection_kwargs: dict,
    tables: tuple[TableSchema, ...],
    policy: RetryPolicy | None,
    metadata: tuple[str, ...] = (),
    columns: ColumnPolicy = ALL_COLUMNS,
) -> Iterator[pa.RecordBatch]:
    native_text = isinstance(task, ChunkTask) and native_wanted(task.decoder)
    writer = ArrowWriter(tables, metadata=metadata, columns=columns, native_text=native_text)
    if isinstance(task, TableResetTask):
        return table_resets(task, writer)
    if isinstance(task, BinlogTask):
        return BinlogReader(task, connection_kwargs, connect, policy).batches(writer)
    batches = ChunkReader(task, connection_kwargs, connect, policy).record_batches(writer)
    return (batch for batch in batches if batch.num_rows)


def table_resets(task: TableResetTask, writer: ArrowWriter) -> Iterator[pa.RecordBatch]:
    """One ``t`` row per table. Its ``_seq`` is the prefix every snapshot row of the table
    as of ``position`` starts with (:func:`cdc_source.sequence.snapshot_seq_prefix`): it
    sorts after every earlier row (an earlier epoch) and before the table's new snapshot
    rows and every later change."""
    position = task.position
    rows = [
        Emitted(
            table,
            "t",
            None,
            None,
            snapshot_seq_prefix(position.file_number, position.pos, index, position.epoch),
            position.ts,
        )
        for table, index in zip(task.tables, task.table_indexes)
    ]
    return writer.batches(rows, RowOrigins.snapshot(position, pa.nulls(len(rows), pa.binary())))
