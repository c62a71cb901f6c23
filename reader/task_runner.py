"""Runs one partition's task on an executor and yields Arrow record batches."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from cdc_source.catalog import TableSchema
from cdc_source.mysql_client import connect
from cdc_source.partitions import BinlogTask, ChunkTask
from reader.arrow_output import ArrowWriter
from reader.binlog_reader import BinlogReader
from reader.chunk_reader import ChunkReader


def run_task(
    task: BinlogTask | ChunkTask, connection_kwargs: dict, tables: tuple[TableSchema, ...]
) -> Iterator[pa.RecordBatch]:
    writer = ArrowWriter(tables)
    if isinstance(task, BinlogTask):
        return BinlogReader(task, connection_kwargs, connect).batches(writer)
    batches = ChunkReader(task, connection_kwargs, connect).record_batches(writer)
    return (batch for batch in batches if batch.num_rows)
