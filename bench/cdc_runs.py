"""Runs of the cdc-mysql source: ``readStream.format("cdc-mysql")`` into the ``noop`` sink.

A run is one ``trigger(availableNow=True)`` query, timed from ``start()`` to the end of
``awaitTermination()``: planning, every micro-batch and Spark's per-batch bookkeeping are
all inside. Rows are the sum of ``numInputRows`` over the query's progress reports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from report import Measurement


@dataclass(frozen=True)
class SnapshotConfig:
    """A labelled set of source options for a snapshot run (none: the source's defaults)."""

    label: str
    settings: tuple[tuple[str, str], ...] = ()

    def options(self) -> dict[str, str]:
        return dict(self.settings)

    @staticmethod
    def defaults() -> SnapshotConfig:
        return SnapshotConfig("defaults")

    @staticmethod
    def tasks(count: int) -> SnapshotConfig:
        return SnapshotConfig(
            f"defaults, {count} task{'s' if count > 1 else ''}",
            (("scan.snapshot.parallelism", str(count)),),
        )

    @staticmethod
    def parse(text: str) -> SnapshotConfig:
        """``CHUNKxPER_BATCH`` or ``CHUNKxPER_BATCHxFETCH``, e.g. ``8096x16``."""
        parts = [int(p) for p in text.lower().split("x")]
        if len(parts) not in (2, 3):
            raise ValueError(f"snapshot config '{text}' is not CHUNKxPER_BATCH[xFETCH]")
        settings = [
            ("scan.incremental.snapshot.chunk.size", str(parts[0])),
            ("scan.snapshot.chunks-per-batch", str(parts[1])),
        ]
        label = f"chunk={parts[0]} x{parts[1]}"
        if len(parts) == 3:
            settings.append(("scan.snapshot.fetch.size", str(parts[2])))
            label += f" fetch={parts[2]}"
        return SnapshotConfig(label, tuple(settings))


def overhead_share(durations: dict[str, int]) -> float | None:
    """The share of the batches' time spent outside reading data: Spark's per-batch
    bookkeeping and the source's planning (``triggerExecution`` minus ``addBatch``)."""
    total = durations.get("triggerExecution")
    if not total:
        return None
    return (total - durations.get("addBatch", 0)) / total


def _summed_durations(progress) -> dict[str, int]:
    """Spark's per-phase durations (addBatch, latestOffset, ...) summed over the batches."""
    total: dict[str, int] = {}
    for report in progress:
        for phase, millis in (report.durationMs or {}).items():
            total[phase] = total.get(phase, 0) + int(millis)
    return dict(sorted(total.items()))


def timed_available_now(spark, source: str, options: dict[str, str], checkpoint: str, name: str):
    """One availableNow query of format ``source`` on ``checkpoint`` into the noop sink,
    timed from building the reader to the end of ``awaitTermination()``; returns the
    query and its seconds. A query that failed raises, naming ``name``."""
    reader = spark.readStream.format(source)
    for key, value in options.items():
        reader = reader.option(key, value)
    began = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - began
    if query.exception() is not None:
        raise RuntimeError(f"{name}: the query failed: {query.exception()}")
    return query, seconds


def timed_batch_read(spark, source: str, options: dict[str, str]) -> float:
    """Seconds of ``spark.read.format(source)`` into ``write.format("noop")``, timed like
    the JDBC peer."""
    reader = spark.read.format(source)
    for key, value in options.items():
        reader = reader.option(key, value)
    began = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - began


def counted_rows(query) -> int:
    """Rows the query read: ``numInputRows`` summed over its progress reports."""
    return sum(int(p.numInputRows) for p in query.recentProgress)


def run_available_now(
    spark,
    options: dict[str, str],
    checkpoint: str,
    name: str,
    details: dict | None = None,
    source: str = "cdc-mysql",
) -> Measurement:
    """One availableNow query of format ``source`` on ``checkpoint``; returns rows counted
    and wall seconds, with Spark's per-phase durations summed over the batches."""
    query, seconds = timed_available_now(spark, source, options, checkpoint, name)
    progress = query.recentProgress
    rows = counted_rows(query)
    busy = [p for p in progress if p.numInputRows]
    info = dict(details or {})
    info.update(
        {
            "batches_with_rows": len(busy),
            "batches_total": len(progress),
            "max_rows_per_batch": max((int(p.numInputRows) for p in busy), default=0),
            "duration_ms": _summed_durations(progress),
        }
    )
    info["batch_overhead_share"] = overhead_share(info["duration_ms"])
    return Measurement(name, "cdc-mysql", rows, seconds, info)


def run_batch_read(spark, options: dict[str, str], rows: int, name: str) -> Measurement:
    """``spark.read.format("cdc-mysql")`` (one consistent snapshot, one Spark job) into
    ``write.format("noop")``, timed like the JDBC peer; ``rows``: the table's row count
    (the noop sink reports none)."""
    seconds = timed_batch_read(spark, "cdc-mysql", options)
    return Measurement(name, "cdc-mysql", rows, seconds, {"batch_read": True})


def streaming_floor(spark, checkpoint: str) -> float:
    """Seconds Spark takes to start, run and stop an availableNow query of a Python data
    source that returns one row: the fixed cost of any such query, measured in the same
    run so that the source's own time can be told apart from it."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    class OneRowReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def initialOffset(self):
            return {"at": 0}

        def latestOffset(self, start, limit):
            return {"at": 1}

        def prepareForTriggerAvailableNow(self):
            pass

        def partitions(self, start, end):
            return [InputPartition(0)] if start["at"] < end["at"] else []

        def read(self, partition):
            yield (1,)

    class OneRow(DataSource):
        @classmethod
        def name(cls):
            return "bench-one-row"

        def schema(self):
            return "x int"

        def streamReader(self, schema):
            return OneRowReader()

    spark.dataSource.register(OneRow)
    return timed_available_now(spark, "bench-one-row", {}, checkpoint, "the one-row query")[1]
