"""How soon a committed change reaches the sink, in a running stream after the hand-over.

    python bench/latency.py                       # 200 and 1,000 commits/s, 30 s each
    python bench/latency.py --rates 200,1000,5000 --seconds 60

A writer commits single-row autocommit INSERTs at a steady rate into a table the query
captures; the query runs with Spark's default trigger into a ``foreachBatch`` sink that
collects each batch's keys. A row's latency is the moment the sink holds it minus the
moment its commit returned to the writer (one process, one clock). Printed per rate:
p50, p95, p99 and max, the commits the writer reached, and batches per second.
Measurement only: nothing here passes or fails on a number (bench/README.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from cdc_source.embedded_server import EmbeddedServer  # noqa: E402

DATABASE, TABLE = "latency", "events"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="200,1000", help="commits per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="writing time per rate")
    return parser.parse_args(argv)


class Sink:
    """``foreachBatch``: when each key reached the sink, and how many batches came."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self.batches = 0

    def __call__(self, df, batch_id: int) -> None:
        keys = [row[0] for row in df.select("id").collect()]
        now = time.time()
        self.batches += 1
        for key in keys:
            self.seen.setdefault(key, now)


def write_at(info, rate: int, seconds: float, first_id: int) -> dict[int, float]:
    """Single-row autocommit INSERTs at ``rate`` per second: id -> when its commit returned."""
    committed: dict[int, float] = {}
    with info.admin_connect(DATABASE) as conn, conn.cursor() as cur:
        start = time.monotonic()
        for n in range(int(rate * seconds)):
            due = start + n / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            cur.execute(f"INSERT INTO {TABLE} VALUES (%s, NOW(6))", (first_id + n,))
            committed[first_id + n] = time.time()
    return committed


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(spark, info, rate: int, seconds: float, first_id: int, sink: Sink) -> str:
    batches_before = sink.batches
    started = time.monotonic()
    committed = write_at(info, rate, seconds, first_id)
    wrote = time.monotonic() - started
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(k in sink.seen for k in committed):
        time.sleep(0.05)
    missing = [k for k in committed if k not in sink.seen]
    latencies = [sink.seen[k] - t for k, t in committed.items() if k in sink.seen]
    elapsed = time.monotonic() - started
    return (
        f"{rate:>6}/s target, {len(committed) / wrote:8.0f}/s reached: "
        f"p50 {statistics.median(latencies):.3f} s, p95 {percentile(latencies, 0.95):.3f} s, "
        f"p99 {percentile(latencies, 0.99):.3f} s, max {max(latencies):.3f} s; "
        f"{(sink.batches - batches_before) / elapsed:.1f} batches/s"
        + (f"; {len(missing)} rows never arrived" if missing else "")
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    server = EmbeddedServer()
    info = server.start()
    try:
        with info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DATABASE}")
            cur.execute(f"CREATE TABLE {DATABASE}.{TABLE} (id BIGINT PRIMARY KEY, at DATETIME(6))")
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("cdc-mysql-latency")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        sink = Sink()
        reader = spark.readStream.format("cdc-mysql")
        options = {**info.source_options(), "database-name": DATABASE}
        options["table-name"] = rf"{DATABASE}\.{TABLE}"
        for key, value in options.items():
            reader = reader.option(key, value)
        checkpoint = tempfile.mkdtemp(prefix="cdc-mysql-latency-")
        query = (
            reader.load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .start()
        )  # Spark's default trigger: the next batch as soon as the last is done
        try:
            while not query.recentProgress:  # the snapshot of the empty table: the hand-over
                time.sleep(0.2)
            first_id = 1
            for rate in (int(r) for r in args.rates.split(",")):
                print(measure(spark, info, rate, args.seconds, first_id, sink), flush=True)
                first_id += int(rate * args.seconds) + 1
        finally:
            query.stop()
            spark.stop()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
