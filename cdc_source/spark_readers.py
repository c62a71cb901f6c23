"""The objects Spark calls once a ``cdc-mysql`` query is planned: the stream reader
(``spark.readStream``), the snapshot reader (``spark.read``) and the partitions they hand
to executors.

The stream reader is the only place that sees the coordinator (driver side: offsets,
planning, commit) and the readers (executor side: ``read``). Spark calls the offset
methods, ``partitions`` and ``commit`` on one long-lived object in the driver's Python
process; ``read`` runs on an unpickled copy of the object as it was after ``__init__``,
so ``__init__`` keeps only plain, picklable values and connections are opened lazily.
The coordinator is imported only in the driver's process and the executor's readers only
in a task's: neither side loads the other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from cdc_source.catalog import TableSchema
from cdc_source.mysql_client import connect
from cdc_source.offsets import SnapshotCursor, SourceOffset, table_fingerprint
from cdc_source.options import SourceOptions
from cdc_source.output_schema import output_schema
from cdc_source.partitions import BinlogTask, ChunkTask
from cdc_source.retry import retrying
from cdc_source.source_logging import configure_logging

if TYPE_CHECKING:
    from coordinator.driver import QueryDriver

log = logging.getLogger("cdc_mysql")


@dataclass(frozen=True)
class CdcPartition(InputPartition):
    """A task and the tables of the query's output as the driver read them when the query
    started: an executor's reader is built anew for every batch and must not read the
    catalog again (a table altered since would give rows of another shape than the
    query's output schema)."""

    task: BinlogTask | ChunkTask
    tables: tuple[TableSchema, ...]


def discover(options: SourceOptions) -> list[TableSchema]:
    """Preflight the server and return the captured tables (driver only)."""
    from cdc_source.preflight import run_preflight

    def attempt() -> list[TableSchema]:
        conn = connect(options.connection_kwargs())
        try:
            return run_preflight(conn, lambda: connect(options.connection_kwargs()), options)
        finally:
            conn.close()

    tables = retrying(options.retry_policy(), "checking the server (preflight)", attempt)
    options.columns.check(tables)
    configure_logging(driver=True)
    for unmatched in options.columns.unmatched(tables):
        log.warning("%s matches no column of the captured tables", unmatched)
    return tables


def _read_task(options: SourceOptions, partition: InputPartition) -> Iterator:
    """Executor side of both readers: one task's Arrow batches, made on a thread of
    their own a few ahead of the one Spark's worker writes (:mod:`reader.read_ahead`),
    in a Python worker whose long-lived objects are kept out of the collector Spark runs
    after each task (:mod:`reader.worker_heap`)."""
    from reader.read_ahead import read_ahead
    from reader.task_runner import run_task
    from reader.worker_heap import freeze_long_lived

    configure_logging(driver=False)
    freeze_long_lived()
    return read_ahead(
        run_task(
            partition.task,
            options.connection_kwargs(),
            partition.tables,
            options.retry_policy(),
            options.metadata,
            columns=options.columns,
        )
    )


class CdcSnapshotReader(DataSourceReader):
    """``spark.read.format("cdc-mysql")``: the captured tables' rows (``_op`` 'r') as of
    the binlog head when the read is planned, exactly as a streaming query's snapshot
    phase reads them (chunks in consistent snapshots normalized to that position), in
    one Spark job: for loading a table once, where a streaming query would add its own
    start-up and per-batch costs. The rows' ``_seq`` and ``_ts_ms`` are those a stream
    started at that moment would give."""

    def __init__(self, options: SourceOptions, tables: list[TableSchema]) -> None:
        self.options = options
        self.tables = tuple(sorted(tables, key=lambda t: t.name))

    def partitions(self) -> list[InputPartition]:
        configure_logging(driver=True)
        driver = _query_driver(self.options, self.tables)
        try:
            return [CdcPartition(task, self.tables) for task in driver.snapshot_tasks()]
        finally:
            driver.close()

    def read(self, partition: InputPartition) -> Iterator:
        return _read_task(self.options, partition)


def _query_driver(options: SourceOptions, tables: Iterable[TableSchema]) -> QueryDriver:
    """The driver side of a query (imported here only: executors never load it). A
    ``scan.binlog.decoder=native`` that the driver cannot honour is refused first."""
    from coordinator.driver import QueryDriver
    from reader.row_decoding import decoder_name

    decoder_name(options.binlog_decoder)
    return QueryDriver(options, list(tables))


def _shape(schema: StructType) -> list[tuple[str, str]]:
    return [(field.name, field.dataType.simpleString()) for field in schema.fields]


class CdcStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(
        self,
        options: SourceOptions,
        tables: list[TableSchema] | None = None,
        schema: StructType | None = None,
    ) -> None:
        self.options = options
        self._tables = None if tables is None else tuple(sorted(tables, key=lambda t: t.name))
        self._schema = schema  # the query's output schema, as Spark planned it
        self._driver = None  # built lazily, never pickled in a usable state

    def __getstate__(self) -> dict:
        return {"options": self.options, "_tables": None, "_schema": None, "_driver": None}

    @property
    def tables(self) -> tuple[TableSchema, ...]:
        """The captured tables, read (with the server's preflight) on first use: in the
        driver-side process only. Their output schema must be the one Spark planned the
        query with: a table altered between ``load()`` and the start is refused."""
        if self._tables is None:
            tables = tuple(sorted(discover(self.options), key=lambda t: t.name))
            now = output_schema(tables, self.options.metadata, self.options.columns)
            if self._schema is not None and _shape(now) != _shape(self._schema):
                from reader.schema_drift import SchemaChangedError

                raise SchemaChangedError(
                    f"the captured tables changed between load() and the query's start (the "
                    f"output schema is now {now.simpleString()}); start "
                    "the query again"
                )
            self._tables = tables
        return self._tables

    # -- driver side ------------------------------------------------------------------
    @property
    def driver(self):
        if self._driver is None:
            from reader.row_decoding import decoder_name

            configure_logging(driver=True)
            log.info(
                "binlog row decoder: %s (scan.binlog.decoder=%s)",
                decoder_name(self.options.binlog_decoder),
                self.options.binlog_decoder,
            )
            self._driver = _query_driver(self.options, self.tables)
        return self._driver

    def initialOffset(self) -> dict:
        # Deterministic (docs/design.md, 'Spark's streaming contract'): a snapshot starts
        # before the first table; every other mode starts from the sentinel with no
        # position, which the first batch resolves to the head (latest-offset) or the
        # configured start (QueryDriver.latest).
        fingerprint = table_fingerprint([t.name for t in self.tables])
        if self.options.startup_mode in ("initial", "snapshot"):
            cursor = SnapshotCursor(self.tables[0].name, None)
            return SourceOffset(None, cursor, fingerprint).to_json_obj()
        return SourceOffset(None, None, fingerprint).to_json_obj()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.driver.freeze_target()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        offset = self.driver.latest(SourceOffset.from_json_obj(start), max_rows, max_bytes)
        return offset.to_json_obj()

    def reportLatestOffset(self) -> dict | None:
        if self.driver.finished is not None:  # snapshot mode: nothing after the hand-over
            return self.driver.finished.to_json_obj()
        head = self.driver.head()
        return SourceOffset(head, None).to_json_obj()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        tasks = self.driver.tasks(
            SourceOffset.from_json_obj(start), SourceOffset.from_json_obj(end)
        )
        return [CdcPartition(task, self.tables) for task in tasks]

    def commit(self, end: dict) -> None:
        self.driver.commit(SourceOffset.from_json_obj(end))

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()

    # -- executor side ----------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator:
        return _read_task(self.options, partition)
