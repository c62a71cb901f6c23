"""Running the source in real Spark queries and reading back what they produced."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import functions as F


class InjectedFailure(RuntimeError):
    """Raised inside a batch on purpose: its offset is logged, its commit never happens."""


def source_offsets(checkpoint: Path) -> dict[int, dict]:
    """Batch id -> this source's offset as logged in ``offsets/``."""
    result = {}
    directory = checkpoint / "offsets"
    if not directory.exists():
        return result
    for entry in directory.iterdir():
        if entry.name.isdigit():
            try:
                lines = entry.read_text().splitlines()
            except FileNotFoundError:  # Spark removed an old batch's file meanwhile
                continue
            if len(lines) >= 3 and lines[2].strip() not in ("", "-"):
                result[int(entry.name)] = json.loads(lines[2])
    return result


def committed_batches(checkpoint: Path) -> set[int]:
    directory = checkpoint / "commits"
    if not directory.exists():
        return set()
    return {int(e.name) for e in directory.iterdir() if e.name.isdigit()}


def batches_committed(checkpoint: Path) -> int:
    """How many batches the query committed: the last batch id + 1. Not the number of
    commit files, of which Spark keeps only the last 100 (minBatchesToRetain)."""
    return max(committed_batches(checkpoint), default=-1) + 1


def committed_position(checkpoint: Path) -> tuple[int, int]:
    """(file number, position) of the last committed batch's end once the stream owns
    every table; (0, 0) before that."""
    done = committed_batches(checkpoint)
    offsets = source_offsets(checkpoint)
    if not done or max(done) not in offsets:
        return (0, 0)
    offset = offsets[max(done)]
    binlog = offset.get("binlog")
    if not binlog or offset.get("snapshot") is not None:
        return (0, 0)
    return int(binlog["file"].rsplit(".", 1)[1]), int(binlog["pos"])


def server_head(server) -> tuple[int, int]:
    """The server's binlog head as (file number, position)."""
    file, pos = server.binlog_head()
    return int(file.rsplit(".", 1)[1]), pos


def wait_caught_up(server, checkpoint: Path, query, timeout: float) -> None:
    """Until the running query has committed a batch ending at the server's current head."""
    head = server_head(server)
    wait_for(
        lambda: committed_position(checkpoint) >= head,
        timeout,
        f"the running query to reach the head {head}",
        query,
    )


def handover_batch(checkpoint: Path) -> int | None:
    """The first batch whose end offset is past the hand-over."""
    for batch_id, offset in sorted(source_offsets(checkpoint).items()):
        if offset.get("snapshot") is None and offset.get("binlog") is not None:
            return batch_id
    return None


@dataclass
class StreamRun:
    """One query run writing each batch to ``out/batch=N`` (overwrite: a re-run batch
    replaces its files, as an exactly-once sink does)."""

    spark: object
    options: dict[str, str]
    checkpoint: Path
    out: Path
    fail_when: Callable[[int], bool] = lambda batch_id: False
    failed_attempts: Path | None = None
    batches_seen: list[int] = field(default_factory=list)

    def _write(self, df, batch_id: int) -> None:
        self.batches_seen.append(batch_id)
        df = df.withColumn("_batch", F.lit(batch_id))
        if self.fail_when(batch_id):
            if self.failed_attempts is not None:
                df.write.mode("overwrite").parquet(str(self.failed_attempts / f"batch={batch_id}"))
            raise InjectedFailure(f"injected failure in batch {batch_id}")
        df.write.mode("overwrite").parquet(str(self.out / f"batch={batch_id}"))

    def start(self, available_now: bool = False):
        reader = self.spark.readStream.format("cdc-mysql")
        for key, value in self.options.items():
            reader = reader.option(key, value)
        writer = (
            reader.load()
            .writeStream.foreachBatch(self._write)
            .option("checkpointLocation", str(self.checkpoint))
        )
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime="0 seconds")
        )
        return writer.start()

    def run_to_end(self) -> None:
        """availableNow: everything up to the head at start, then stop."""
        query = self.start(available_now=True)
        query.awaitTermination()


def wait_for(condition: Callable[[], bool], timeout: float, what: str, query=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if query is not None and not query.isActive:
            error = query.exception()
            raise AssertionError(f"query ended while waiting for {what}: {error}")
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read_output(spark, out: Path) -> list[dict]:
    if not out.exists() or not any(out.iterdir()):
        return []
    return [row.asDict() for row in spark.read.parquet(str(out)).collect()]


def largest_offset_bytes(checkpoint: Path) -> int:
    sizes = [len(json.dumps(o, separators=(",", ":"))) for o in source_offsets(checkpoint).values()]
    return max(sizes, default=0)


def coordinator_states(state_dir: str | None = None) -> list[dict]:
    directory = Path(state_dir or os.environ["CDC_MYSQL_STATE_DIR"])
    states = []
    for path in directory.glob("coordinator-*.json"):
        try:
            states.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return states


def stream_past_handover(run: StreamRun, writer, binlog_batches: int = 3) -> int:
    """Runs ``run`` while ``writer`` (started here, a thread with ``stop()``) writes, until
    the hand-over and ``binlog_batches`` more batches; then stops both and runs the query to
    the end. Returns how many batches the snapshot took."""
    writer.start()
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 300, "the hand-over", query)
        snapshot_batches = handover_batch(run.checkpoint)
        wait_for(
            lambda: len(run.batches_seen) >= snapshot_batches + binlog_batches,
            120,
            "binlog batches",
            query,
        )
    finally:
        writer.stop()
        query.stop()
    run.run_to_end()
    return snapshot_batches
