"""How soon a committed change reaches the sink, and the highest commit rate the stream keeps
up with, in a running stream after the hand-over.

    python bench/latency.py                       # 200, 1,000 and the writer's top rate
    python bench/latency.py --rates 200,1000,max --seconds 60
    python bench/latency.py --sustain 60          # also: the highest rate with a flat lag

A writer commits single-row autocommit INSERTs at a steady rate into a table the query
captures; the query runs with Spark's default trigger into a ``foreachBatch`` sink that
collects each batch's keys. A row's latency is the moment the sink holds it minus the
moment its commit returned to the writer (one process, one clock). ``max`` is the rate one
writer connection reaches committing as fast as it can.

Printed per rate: p50, p95, p99 and max, the rate reached, batches per second, and the
mean of each part of a batch's cycle as Spark reports it (``durationMs``): the source's
``latestOffset``, Spark's offset log write (``walCommit``), ``queryPlanning`` (which asks
the source for the batch's partitions), ``addBatch`` (the tasks and the sink) and
``commitOffsets`` (Spark's commit log and the source's ``commit``).

**The floor**, in the same run: the same sink and trigger over a Python data source that
reads nothing (its rows are the clock's milliseconds at the same rate, there the moment
they are due). Its latency is what Spark itself costs a Python source on this machine;
no source can go under it.

``--sustain S``: for rising rates (several writer connections), S seconds each, the lag
(rows committed and not yet in the sink) sampled every second; a rate is kept up with when
the lag in the last third of the run is no larger than in the first third (plus one
second of the rate's rows). Printed: each rate's lag at the thirds, and the highest rate
kept up with.

Measurement only: nothing here passes or fails on a number (bench/README.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from cdc_source.embedded_server import EmbeddedServer  # noqa: E402

DATABASE, TABLE = "latency", "events"
PHASES = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rates", default="200,1000,max", help="commits per second, comma-separated; max: top"
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="writing time per rate")
    parser.add_argument(
        "--follower",
        choices=("on", "off", "both"),
        default="on",
        help="scan.binlog.follower.enabled of the source's query; both: one query each, "
        "one after the other, in the same run (default on)",
    )
    parser.add_argument(
        "--sustain", type=float, default=0.0, help="seconds per rate of the sustained run (0: none)"
    )
    parser.add_argument(
        "--sustain-rates",
        default="2000,4000,6000,8000,12000,16000",
        help="commit rates the sustained run tries, rising",
    )
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


def write_at(info, rate: float, seconds: float, first_id: int) -> dict[int, float]:
    """Single-row autocommit INSERTs at ``rate`` per second (``inf``: as fast as one
    connection goes): id -> when its commit returned."""
    committed: dict[int, float] = {}
    with info.admin_connect(DATABASE) as conn, conn.cursor() as cur:
        start = time.monotonic()
        n = 0
        while True:
            due = start + (n / rate if rate != float("inf") else 0.0)
            if due - start >= seconds or time.monotonic() - start >= seconds + 5:
                break
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            cur.execute(f"INSERT INTO {TABLE} VALUES (%s, NOW(6))", (first_id + n,))
            committed[first_id + n] = time.time()
            n += 1
            if rate == float("inf") and time.monotonic() - start >= seconds:
                break
    return committed


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def phases(query, since: int) -> str:
    """The mean of each part of the cycle over the query's batches after ``since``."""
    progress = [p for p in query.recentProgress if p["batchId"] >= since and p["numInputRows"]]
    if not progress:
        return "no batch"
    parts = []
    for name in PHASES:
        parts.append(
            f"{name} {statistics.mean(p['durationMs'].get(name, 0) for p in progress):.0f}"
        )
    cycle = statistics.mean(p["durationMs"].get("triggerExecution", 0) for p in progress)
    return f"cycle {cycle:.0f} ms = " + ", ".join(parts) + " ms"


def summary(label: str, latencies: list[float], reached: float, batches_per_s: float) -> str:
    return (
        f"{label:>22}, {reached:8.0f}/s reached: "
        f"p50 {statistics.median(latencies):.3f} s, p95 {percentile(latencies, 0.95):.3f} s, "
        f"p99 {percentile(latencies, 0.99):.3f} s, max {max(latencies):.3f} s; "
        f"{batches_per_s:.1f} batches/s"
    )


def last_batch_id(query) -> int:
    progress = query.recentProgress
    return progress[-1]["batchId"] + 1 if progress else 0


def measure(query, info, rate: float, seconds: float, first_id: int, sink: Sink) -> str:
    batches_before, since = sink.batches, last_batch_id(query)
    started = time.monotonic()
    committed = write_at(info, rate, seconds, first_id)
    wrote = time.monotonic() - started
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(k in sink.seen for k in committed):
        time.sleep(0.05)
    missing = [k for k in committed if k not in sink.seen]
    latencies = [sink.seen[k] - t for k, t in committed.items() if k in sink.seen]
    elapsed = time.monotonic() - started
    label = "cdc-mysql, " + ("top rate" if rate == float("inf") else f"{rate:.0f}/s target")
    return (
        summary(label, latencies, len(committed) / wrote, (sink.batches - batches_before) / elapsed)
        + (f"; {len(missing)} rows never arrived" if missing else "")
        + "\n"
        + " " * 24
        + phases(query, since)
    )


def _write_into(into: dict, info, rate: float, seconds: float, first_id: int) -> None:
    into.update(write_at(info, rate, seconds, first_id))


def sustained(query, info, rates: list[int], seconds: float, first_id: int, sink: Sink) -> str:
    """The highest of ``rates`` at which the lag stays flat for ``seconds``."""
    lines, kept = [], None
    for rate in rates:
        writers = 4
        results: list[dict[int, float]] = [{} for _ in range(writers)]
        span = int(rate * seconds) + writers
        threads = [
            threading.Thread(
                target=_write_into,
                args=(results[i], info, rate / writers, seconds, first_id + i * span),
            )
            for i in range(writers)
        ]
        before = len(sink.seen)
        started = time.monotonic()
        for thread in threads:
            thread.start()
        lags = []
        while any(t.is_alive() for t in threads):
            time.sleep(1.0)
            due = int(min(time.monotonic() - started, seconds) * rate)
            lags.append(max(0, due - (len(sink.seen) - before)))
        for thread in threads:
            thread.join()
        reached = sum(len(r) for r in results) / seconds
        third = max(1, len(lags) // 3)
        early, late = statistics.mean(lags[:third]), statistics.mean(lags[-third:])
        flat = late <= early + rate and reached >= 0.9 * rate
        lines.append(
            f"{rate:>8}/s target ({reached:.0f}/s reached): lag {early:.0f} rows in the first "
            f"third, {late:.0f} in the last; {'kept up' if flat else 'fell behind'}"
        )
        first_id += writers * span
        deadline = time.monotonic() + 120  # let it catch up before the next rate
        while time.monotonic() < deadline and not all(k in sink.seen for r in results for k in r):
            time.sleep(0.2)
        if not flat:
            break
        kept = rate
    lines.append(f"highest rate kept up with: {kept if kept is not None else 'none tried'}/s")
    return "\n".join(lines)


class _ClockReader:
    """The floor's reader: offsets are the clock's milliseconds; the rows of (start, end] are
    the due times of a commit every ``1000 / rate`` ms, read from nothing."""

    def __init__(self, step_ms: float) -> None:
        self.step_ms = step_ms

    def initialOffset(self) -> dict:
        return {"ms": int(time.time() * 1000)}

    def latestOffset(self) -> dict:
        return {"ms": int(time.time() * 1000)}

    def partitions(self, start: dict, end: dict):
        from pyspark.sql.datasource import InputPartition

        return [InputPartition((start["ms"], end["ms"]))]

    def read(self, partition):
        first, last = partition.value
        n = int(first // self.step_ms) + 1
        while n * self.step_ms <= last:
            yield (int(n * self.step_ms * 1000),)  # microseconds: distinct keys
            n += 1

    def commit(self, end: dict) -> None:
        pass


def register_clock_source(spark) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader

    class ClockReader(_ClockReader, DataSourceStreamReader):
        pass

    class ClockSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-clock"

        def schema(self) -> str:
            return "id long"

        def streamReader(self, schema):
            return ClockReader(1000.0 / float(self.options.get("rate", "200")))

    spark.dataSource.register(ClockSource)


def floor(spark, rate: float, seconds: float) -> str:
    """The same sink and trigger over a source that reads nothing: Spark's own latency."""
    seen: list[float] = []
    batches = [0]
    measured_from = [float("inf")]  # rows due from here on count

    def sink(df, batch_id: int) -> None:
        keys = [row[0] for row in df.select("id").collect()]
        now = time.time()
        batches[0] += 1
        seen.extend(now - key / 1e6 for key in keys if key / 1e6 >= measured_from[0])

    query = (
        spark.readStream.format("bench-clock")
        .option("rate", str(rate))
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="cdc-mysql-floor-"))
        .start()
    )
    try:
        time.sleep(5)  # past the query's start
        seen.clear()
        measured_from[0] = time.time()
        batches[0], since, started = 0, last_batch_id(query), time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        label = f"floor, {rate:.0f}/s"
        return (
            summary(label, list(seen), len(seen) / elapsed, batches[0] / elapsed)
            + "\n"
            + " " * 24
            + phases(query, since)
        )
    finally:
        query.stop()


def run_source(spark, info, args, rates: list[float], follower: bool, first_id: int) -> int:
    """One query of the source into the collecting sink, measured at each rate (and the
    sustained run); returns the next free key."""
    with info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute(f"TRUNCATE TABLE {DATABASE}.{TABLE}")  # each query snapshots an empty table
    sink = Sink()
    reader = spark.readStream.format("cdc-mysql")
    options = {**info.source_options(), "database-name": DATABASE}
    options["table-name"] = rf"{DATABASE}\.{TABLE}"
    options["scan.binlog.follower.enabled"] = str(follower).lower()
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
        while not query.recentProgress:  # the snapshot of the table: the hand-over
            time.sleep(0.2)
        for rate in rates:
            print(measure(query, info, rate, args.seconds, first_id, sink), flush=True)
            first_id = max(sink.seen, default=first_id) + 1_000_000
        if args.sustain:
            steps = [int(r) for r in args.sustain_rates.split(",")]
            print(sustained(query, info, steps, args.sustain, first_id, sink), flush=True)
            first_id = max(sink.seen, default=first_id) + 1_000_000
    finally:
        query.stop()
    return first_id


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
        register_clock_source(spark)
        rates = [float("inf") if r == "max" else float(r) for r in args.rates.split(",")]
        for rate in rates:
            if rate != float("inf"):
                print(floor(spark, rate, args.seconds), flush=True)
        first_id = 1
        for follower in ("on", "off") if args.follower == "both" else (args.follower,):
            print(f"cdc-mysql, scan.binlog.follower.enabled={follower == 'on'}:", flush=True)
            first_id = run_source(spark, info, args, rates, follower == "on", first_id)
        spark.stop()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
