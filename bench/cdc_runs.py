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
    chunk_size: int
    chunks_per_batch: int
    fetch_size: int | None = None  # None: the source's default

    @property
    def label(self) -> str:
        text = f"chunk={self.chunk_size} x{self.chunks_per_batch}"
        if self.fetch_size is not None:
            text += f" fetch={self.fetch_size}"
        return text

    def options(self) -> dict[str, str]:
        options = {
            "scan.incremental.snapshot.chunk.size": str(self.chunk_size),
            "scan.snapshot.chunks-per-batch": str(self.chunks_per_batch),
        }
        if self.fetch_size is not None:
            options["scan.snapshot.fetch.size"] = str(self.fetch_size)
        return options

    @staticmethod
    def parse(text: str) -> SnapshotConfig:
        """``CHUNKxPER_BATCH`` or ``CHUNKxPER_BATCHxFETCH``, e.g. ``8096x16``."""
        parts = [int(p) for p in text.lower().split("x")]
        if len(parts) not in (2, 3):
            raise ValueError(f"snapshot config '{text}' is not CHUNKxPER_BATCH[xFETCH]")
        return SnapshotConfig(*parts)


def _summed_durations(progress) -> dict[str, int]:
    """Spark's per-phase durations (addBatch, latestOffset, ...) summed over the batches."""
    total: dict[str, int] = {}
    for report in progress:
        for phase, millis in (report.durationMs or {}).items():
            total[phase] = total.get(phase, 0) + int(millis)
    return dict(sorted(total.items()))


def run_available_now(
    spark,
    options: dict[str, str],
    checkpoint: str,
    name: str,
    details: dict | None = None,
) -> Measurement:
    """One availableNow query on ``checkpoint``; returns rows counted and wall seconds."""
    reader = spark.readStream.format("cdc-mysql")
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
    progress = query.recentProgress
    rows = sum(int(p.numInputRows) for p in progress)
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
    return Measurement(name, "cdc-mysql", rows, seconds, info)
