"""The ceiling of any reader: Spark ingesting the source's own Arrow batches from memory.

The source's output for a table (its columns, ``_op``, ``_seq``, ``_ts_ms``, in the Arrow
batches its chunk reader yields) is written once to an Arrow IPC file. A Python data
source, ``bench-replay``, then hands those batches to Spark from a memory map, split
over as many partitions as the source has snapshot tasks, as a streaming availableNow
query and as ``spark.read``. Reading costs it nothing, so its time is what Spark spends
on a Python source's output of that shape and size: no reader of MySQL, however fast,
can do better inside Spark. It is a diagnostic, not a peer.
"""

from __future__ import annotations

from pathlib import Path

from cdc_runs import counted_rows, timed_available_now, timed_batch_read
from profiling import in_process_reader
from report import Measurement

REPLAY_FORMAT = "bench-replay"
REPLAY_SERVER_ID = 6103  # the chunk reader's binlog connection while it writes the file


def write_batches(batches, path: Path) -> int:
    """``batches`` (Arrow record batches of one schema) written to ``path`` as an Arrow
    IPC file, the replay's input; returns the rows written."""
    import pyarrow as pa

    rows = 0
    writer = None
    try:
        for batch in batches:
            if writer is None:
                writer = pa.ipc.new_file(str(path), batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def write_replay_file(bench, table: str, path: Path) -> int:
    """The source's Arrow batches of the whole of ``table`` (one chunk read by the
    source's chunk reader in this process, batches of its default fetch size), written
    to ``path``; returns the rows written."""
    from cdc_source.partitions import ChunkSpec, ChunkTask
    from reader.task_runner import run_task

    setup = in_process_reader(bench, table)
    task = ChunkTask(
        (ChunkSpec(setup.tables[0], 0, None, None),),
        setup.target,
        REPLAY_SERVER_ID,
        setup.options.fetch_size,
    )
    return write_batches(run_task(task, setup.kwargs, setup.tables), path)


def source_schema_json(spark, options: dict[str, str]) -> str:
    """Spark's JSON of the schema a ``cdc-mysql`` query with ``options`` has: the schema
    the replay declares, so that Spark checks the replayed batches against it."""
    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().schema.json()


def register_replay_source(spark) -> None:
    """``bench-replay``: options ``path`` (the IPC file), ``schema`` (Spark's JSON of the
    source's schema) and ``partitions``; batch ``b`` goes to partition ``b % partitions``."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    from pyspark.sql.types import StructType

    def replay(path: str, partition: int, partitions: int):
        import pyarrow as pa

        with pa.memory_map(path) as source:
            reader = pa.ipc.open_file(source)
            for index in range(partition, reader.num_record_batches, partitions):
                yield reader.get_batch(index)

    class ReplayReader(DataSourceReader):
        def __init__(self, path: str, partitions: int) -> None:
            self.path, self.count = path, partitions

        def partitions(self):
            return [InputPartition(i) for i in range(self.count)]

        def read(self, partition):
            yield from replay(self.path, partition.value, self.count)

    class ReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, path: str, partitions: int) -> None:
            self.path, self.count = path, partitions

        def initialOffset(self):
            return {"at": 0}

        def latestOffset(self, start=None, limit=None):
            return {"at": 1}

        def prepareForTriggerAvailableNow(self):
            pass

        def partitions(self, start, end):
            if start["at"] >= end["at"]:
                return []
            return [InputPartition(i) for i in range(self.count)]

        def read(self, partition):
            yield from replay(self.path, partition.value, self.count)

    class Replay(DataSource):
        @classmethod
        def name(cls):
            return REPLAY_FORMAT

        def schema(self):
            import json

            return StructType.fromJson(json.loads(self.options["schema"]))

        def reader(self, schema):
            return ReplayReader(self.options["path"], int(self.options["partitions"]))

        def streamReader(self, schema):
            return ReplayStreamReader(self.options["path"], int(self.options["partitions"]))

    spark.dataSource.register(Replay)


def replay_options(path: Path, schema_json: str, partitions: int) -> dict[str, str]:
    return {"path": str(path), "schema": schema_json, "partitions": str(partitions)}


def replay_streaming(spark, options: dict[str, str], checkpoint: str) -> Measurement:
    """The replay as an availableNow query into the noop sink, timed as the source's runs."""
    name = "ceiling: replay, streaming"
    query, seconds = timed_available_now(spark, REPLAY_FORMAT, options, checkpoint, name)
    return Measurement(name, "ceiling", counted_rows(query), seconds, {"replay": True})


def replay_batch(spark, options: dict[str, str], rows: int) -> Measurement:
    """The replay as ``spark.read`` into ``write.format("noop")``, timed as the JDBC peer;
    ``rows``: the table's row count (the noop sink reports none)."""
    seconds = timed_batch_read(spark, REPLAY_FORMAT, options)
    return Measurement("ceiling: replay, spark.read", "ceiling", rows, seconds, {"replay": True})
