"""The Spark glue: ``spark.readStream.format("cdc-mysql")``.

The stream reader is the only place that sees the coordinator (driver side: offsets,
planning, commit) and the readers (executor side: ``read``). Spark calls the offset
methods, ``partitions`` and ``commit`` on one long-lived object in the driver's Python
process; ``read`` runs on an unpickled copy of the object as it was after ``__init__``,
so ``__init__`` keeps only plain, picklable values and connections are opened lazily.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from cdc_source.catalog import TableSchema
from cdc_source.mysql_client import connect, read_head
from cdc_source.offsets import (
    BinlogPosition,
    SnapshotCursor,
    SourceOffset,
    owns_any_of,
    same_progress,
    table_fingerprint,
)
from cdc_source.options import SourceOptions, parse_options
from cdc_source.output_schema import output_schema
from cdc_source.partitions import BinlogTask, ChunkSpec, ChunkTask

log = logging.getLogger("cdc_mysql")

STATE_DIR_ENV = "CDC_MYSQL_STATE_DIR"


def _configure_logging() -> None:
    """INFO lines of the driver side to stderr (Spark's driver log), and with
    ``CDC_MYSQL_STATE_DIR`` set also to ``coordinator.log`` there."""
    if log.handlers:
        return
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    state_dir = os.environ.get(STATE_DIR_ENV)
    if state_dir:
        handlers.append(logging.FileHandler(os.path.join(state_dir, "coordinator.log")))
    for handler in handlers:
        handler.setFormatter(formatter)
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


class SourceStateError(RuntimeError):
    """The checkpoint and the current options or server disagree."""


@dataclass(frozen=True)
class CdcPartition(InputPartition):
    task: BinlogTask | ChunkTask


def discover(options: SourceOptions) -> list[TableSchema]:
    """Preflight the server and return the captured tables (driver only)."""
    from cdc_source.preflight import run_preflight

    conn = connect(options.connection_kwargs())
    try:
        return run_preflight(conn, options)
    finally:
        conn.close()


class CdcMySQLDataSource(DataSource):
    """Change data capture of MySQL/MariaDB tables: a chunked snapshot, then the binlog."""

    @classmethod
    def name(cls) -> str:
        return "cdc-mysql"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.source_options = parse_options(dict(options))

    def schema(self) -> StructType:
        return output_schema(discover(self.source_options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return CdcStreamReader(self.source_options, discover(self.source_options))


class CdcStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, tables: list[TableSchema]) -> None:
        self.options = options
        self.tables = tuple(sorted(tables, key=lambda t: t.name))
        self._driver = None  # built lazily, never pickled in a usable state

    def __getstate__(self) -> dict:
        return {"options": self.options, "tables": self.tables, "_driver": None}

    # -- driver side ------------------------------------------------------------------
    @property
    def driver(self) -> _Driver:
        if self._driver is None:
            _configure_logging()
            self._driver = _Driver(self.options, list(self.tables))
        return self._driver

    def initialOffset(self) -> dict:
        fingerprint = table_fingerprint([t.name for t in self.tables])
        if self.options.startup_mode == "initial":
            cursor = SnapshotCursor(self.tables[0].name, None)
            return SourceOffset(None, cursor, fingerprint).to_json_obj()
        return SourceOffset(None, None, fingerprint).to_json_obj()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.driver.freeze_target()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return self.driver.latest(SourceOffset.from_json_obj(start), limit).to_json_obj()

    def reportLatestOffset(self) -> dict | None:
        head = self.driver.head()
        return SourceOffset(head, None).to_json_obj()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return self.driver.partitions(
            SourceOffset.from_json_obj(start), SourceOffset.from_json_obj(end)
        )

    def commit(self, end: dict) -> None:
        self.driver.commit(SourceOffset.from_json_obj(end))

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()

    # -- executor side ----------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator:
        from reader.task_runner import run_task

        return run_task(partition.task, self.options.connection_kwargs(), self.tables)


class _Driver:
    """The driver-side state of one query run: coordinator, connection, availableNow target."""

    def __init__(self, options: SourceOptions, tables: list[TableSchema]) -> None:
        from coordinator.planner import Planner
        from coordinator.splitter import ServerBoundarySource

        self.options = options
        self.tables = tables
        self._conn = None
        from coordinator.xa_watermark import XaWatermark

        self.boundaries = ServerBoundarySource(lambda: connect(options.connection_kwargs()))
        self.planner = Planner(tables, self.boundaries, options.chunk_size)
        # The driver reads the binlog only between batches, with the range's last id.
        self.xa = XaWatermark(lambda: connect(options.connection_kwargs()), options.server_ids.last)
        self.fingerprint = table_fingerprint([t.name for t in tables])
        self.target: BinlogPosition | None = None
        self.checked_files: set[str] = set()
        from reader.row_decoding import decoder_name

        log.info(
            "binlog row decoder: %s (scan.binlog.decoder=%s)",
            decoder_name(options.binlog_decoder),
            options.binlog_decoder,
        )

    @property
    def conn(self):
        if self._conn is None or not self._conn.open:
            self._conn = connect(self.options.connection_kwargs())
        return self._conn

    def head(self) -> BinlogPosition:
        file, pos, gtids, ts = read_head(self.conn)
        return BinlogPosition(file, pos, gtids, ts)

    def freeze_target(self) -> None:
        self.target = self.head()

    def _ensure_available(self, position: BinlogPosition | None) -> None:
        if position is None or position.file in self.checked_files:
            return
        from cdc_source.preflight import check_binlog_available

        check_binlog_available(self.conn, position.file)
        self.checked_files.add(position.file)

    def _max_chunks(self, limit: ReadLimit) -> int:
        if isinstance(limit, ReadMaxRows):
            return max(1, limit.max_rows // self.options.chunk_size)
        return self.options.chunks_per_batch

    def _check_tables(self, offset: SourceOffset) -> None:
        if offset.tables and offset.tables != self.fingerprint:
            raise SourceStateError(
                "the tables matched by 'database-name'/'table-name' are not the ones this "
                f"checkpoint captured (now: {', '.join(t.name for t in self.tables)}). A table "
                "added to a running capture would have no snapshot and a removed one would "
                "stop silently; start a new query with a new checkpoint location, or restore "
                "the options and tables the checkpoint was started with"
            )

    def latest(self, start: SourceOffset, limit: ReadLimit) -> SourceOffset:
        self._check_tables(start)
        self._ensure_available(start.binlog)
        head = self.target or self.head()
        if start.snapshot is not None:
            head = self._with_xa(start.binlog, head)
            batch = self.planner.plan(start, head, self._max_chunks(limit))
            self._log_plan(start, batch.end, len(batch.chunks), head)
            self._write_state()
            return batch.end
        end = SourceOffset(head, None, self.fingerprint)
        if start.binlog is not None and same_progress(start, end):
            return start
        if start.binlog is not None and head.coordinates < start.binlog.coordinates:
            return start  # availableNow target behind a restored start: nothing more to do
        end = SourceOffset(self._with_xa(start.binlog, head), None, self.fingerprint)
        self._log_plan(start, end, 0, head)
        return end

    def _with_xa(self, start: BinlogPosition | None, head: BinlogPosition) -> BinlogPosition:
        """``head`` with its XA watermark (coordinator/xa_watermark.py)."""
        from dataclasses import replace

        watermark = self.xa.at(start, head)
        if watermark is not None:
            log.info("XA transaction prepared at %s:%s is unresolved at %s", *watermark, head)
        return replace(head, xa=watermark)

    def partitions(self, start: SourceOffset, end: SourceOffset) -> list[CdcPartition]:
        if same_progress(start, end):
            return []
        self._check_tables(start)
        self._ensure_available(start.binlog)
        ids = self.options.server_ids
        parts: list[CdcPartition] = []
        # Server ids: binlog tasks first, then snapshot tasks; never more tasks than ids.
        binlog_tasks = min(self.options.binlog_parallelism, ids.size - 1)
        if (
            start.binlog is not None
            and end.binlog is not None
            and (start.binlog.coordinates < end.binlog.coordinates)
        ):
            # Only the tables the stream owns any of travel (partitions stay small).
            owned = tuple(t for t in self.tables if owns_any_of(start.snapshot, t.name))
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
                )
                parts.append(CdcPartition(task))
        chunks = self.planner.chunks_between(start, end)
        if chunks:
            # Few tasks, each reading several chunks in one consistent snapshot: every chunk
            # task decodes the binlog from the planned position to its snapshot, so more
            # tasks than cores only multiply that work and widen the windows.
            slots = min(ids.size - binlog_tasks, self.options.snapshot_parallelism)
            groups = _spread(chunks, min(len(chunks), slots))
            for i, group in enumerate(groups):
                task = ChunkTask(
                    group,
                    end.binlog,
                    ids.first + binlog_tasks + i,
                    self.options.fetch_size,
                    self.options.snapshot_client,
                    self.options.binlog_decoder,
                )
                parts.append(CdcPartition(task))
        return parts

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
        if self._conn is not None:
            self._conn.close()


def _spread(chunks: tuple[ChunkSpec, ...], groups: int) -> list[tuple[ChunkSpec, ...]]:
    """Split chunks into ``groups`` contiguous runs of near-equal length."""
    size, extra = divmod(len(chunks), groups)
    result, index = [], 0
    for g in range(groups):
        take = size + (1 if g < extra else 0)
        result.append(tuple(chunks[index : index + take]))
        index += take
    return result
