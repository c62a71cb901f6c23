"""Runs one partition's task on an executor and yields Arrow record batches."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from cdc_source.catalog import TableSchema
from cdc_source.mysql_client import connect
from cdc_source.partitions import BinlogTask, ChunkTask
from cdc_source.retry import RetryPolicy
from reader.arrow_output import ArrowWriter
from reader.binlog_reader import BinlogReader
from reader.chunk_reader import ChunkReader


def run_task(
    task: BinlogTask | ChunkTask,
    connection_kwargs: dict,
    tables: tuple[TableSchema, ...],
    policy: RetryPolicy | None = None,
) -> Iterator[pa.RecordBatch]:
    """The task's batches; transient faults are retried within ``policy`` (a task that
    still fails is retried whole by Spark, up to ``spark.task.maxFailures``)."""
    writer = ArrowWriter(tables)
    if isinstance(task, BinlogTask):
        return BinlogReader(task, connection_kwargs, connect, policy).batches(writer)
    batches = ChunkReader(task, connection_kwargs, connect, policy).record_batches(writer)
    return (batch for batch in batches if batch.num_rows)
