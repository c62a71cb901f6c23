"""The binlog phase under three shapes of writes, each measured five ways in one run:

- ``cdc-mysql``: the source in Spark (availableNow on a checkpoint pinned before the
  writes, so the query reads exactly the range), into the noop sink, after warm-up
  queries of the same table have started Spark's Python workers and had the JVM compile
  the table's paths (:func:`warm_workers`), as in a stream that has been running;
- ``following while written``: the source in Spark already following the head when the
  same shape of changes is written again, every batch planned from the follower
  (:func:`measure_following`);
- ``reader, no Spark``: one binlog task of the source in this process (``run_task``):
  transport, decoding, ownership, ``_seq`` and Arrow output, without Spark around it;
- ``decode only``: the range reader's decoded change blocks, no output conversion;
- the peer, ``pymysqlreplication``: one raw mysql-replication loop over the same range.

Shapes: 1,000-row transactions (batch jobs), single-row autocommit changes (OLTP), and a
wide typed table (25 columns of the types users ask about).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kept_data
import workload
from cdc_runs import run_available_now
from cpu_use import CpuMeter, DriverCpuSampler, describe, jvm_pid
from peers import binlog_raw
from report import Measurement, load_average, render

from cdc_source.mysql_client import read_head

WIDE_TABLE = "wide"
WIDE_DDL = f"""
CREATE TABLE {WIDE_TABLE} (
    id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    t TINYINT, su SMALLINT UNSIGNED, m MEDIUMINT, i INT, b BIGINT,
    flag TINYINT(1), d DECIMAL(18, 4), big DECIMAL(40, 10), f FLOAT, dbl DOUBLE,
    bits BIT(12), c CHAR(8), v VARCHAR(64), tx TEXT, bin BINARY(8), vb VARBINARY(32),
    bl BLOB, dt DATE, dtm DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME(3), yr YEAR,
    e ENUM('new', 'paid', 'shipped'), s SET('a', 'b', 'c')
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""
WIDE_ROW = (
    "{k}, {k} % 100, {k} % 60000, {k} % 8000000, {k}, {k} * 1000003, {k} % 2, "
    "{k} / 7, {k} * 1.0000000001, {k} / 3, {k} / 9, {k} % 4096, LPAD({k}, 8, 'x'), "
    "CONCAT('value-', {k}), REPEAT('text ', 8), UNHEX(LPAD(HEX({k}), 16, '0')), "
    "UNHEX(MD5({k})), UNHEX(SHA1({k})), DATE('2020-01-01') + INTERVAL {k} % 3000 DAY, "
    "TIMESTAMP('2020-01-01 00:00:00.123456') + INTERVAL {k} SECOND, "
    "TIMESTAMP('2021-01-01 00:00:00.5') + INTERVAL {k} SECOND, "
    "SEC_TO_TIME({k} % 86400) + INTERVAL 0.25 SECOND, 1901 + {k} % 200, "
    "ELT(1 + {k} % 3, 'new', 'paid', 'shipped'), ELT(1 + {k} % 3, 'a', 'a,b', 'a,b,c')"
)


@dataclass(frozen=True)
class Shape:
    label: str
    table: str
    changes: int
    rows_per_txn: int


def create_wide(cur, rows: int) -> None:
    cur.execute(f"DROP TABLE IF EXISTS {WIDE_TABLE}")
    cur.execute(WIDE_DDL)
    step = 10_000
    for first in range(1, rows + 1, step):
        last = min(rows, first + step - 1)
        values = ", ".join(f"({WIDE_ROW.format(k=k)})" for k in range(first, last + 1))
        cur.execute(f"INSERT INTO {WIDE_TABLE} VALUES {values}")


WIDE_UPDATE_SET = "i = i + 1, dtm = dtm + INTERVAL 1 SECOND"


def update_rows(cur, table: str, table_rows: int, changes: int, rows_per_txn: int) -> float:
    """``changes`` updated rows, ``rows_per_txn`` per transaction (autocommit statements)."""
    set_clause = WIDE_UPDATE_SET if table == WIDE_TABLE else workload.UPDATE_SET
    return workload.apply_updates(cur, table, table_rows, changes, rows_per_txn, set_clause)


def _head(cur) -> tuple[str, int]:
    file, pos, _, _ = read_head(cur.connection)
    return file, pos


def binlog_bytes(cur, start: tuple[str, int], end: tuple[str, int]) -> int:
    """Bytes of binlog between two positions, across files (``SHOW BINARY LOGS`` sizes)."""
    if start[0] == end[0]:
        return end[1] - start[1]
    cur.execute("SHOW BINARY LOGS")
    sizes = {str(row[0]): int(row[1]) for row in cur.fetchall()}
    names = sorted(sizes, key=lambda name: int(name.rsplit(".", 1)[1]))
    inside = [n for n in names if start[0] < n < end[0]]
    return sizes[start[0]] - start[1] + sum(sizes[n] for n in inside) + end[1]


def _captured(bench, table: str) -> tuple:
    """``table`` as the source's Spark queries capture it (their options, so their types:
    a TINYINT(1) is a boolean there, as the replayed batches must be)."""
    from profiling import in_process_reader

    return in_process_reader(bench, table).tables


def _in_process(bench, tables: tuple, start, end, decode_only: bool) -> Measurement:
    """One binlog task over the range in this process (``tables``: :func:`_captured`'s),
    or only its range reader's decoding."""
    from cdc_source.binlog.transport import DumpSource
    from cdc_source.mysql_client import connect
    from cdc_source.offsets import BinlogPosition
    from cdc_source.partitions import BinlogTask
    from reader.binlog_range import RangeReader
    from reader.task_runner import run_task

    kwargs = bench.raw_kwargs()
    s, e = BinlogPosition(*start), BinlogPosition(*end)
    began = time.perf_counter()
    if decode_only:
        # framed as a binlog task frames it (in C where built): the Python framing alone
        # made this case slower than the whole task it is a part of
        source = DumpSource(lambda: connect(kwargs), 6201, "auto")
        rows = sum(b.num_rows for b in RangeReader(source, s, e, {tables[0].name}).blocks())
        name = "decode only, no Spark"
    else:
        task = BinlogTask(s, e, tables, None, 6202)
        rows = sum(b.num_rows for b in run_task(task, kwargs, tables))
        name = "reader, no Spark"
    return Measurement(
        name, "cdc-mysql", rows, time.perf_counter() - began, {"load_1m": round(load_average(), 2)}
    )


# The replay runs twice and keeps the faster: its first query may start a Python worker
# for the replay's source (seconds, against a fraction of a second of ingest).
REPLAY_ROUNDS = 2


def replay_ceiling(bench, spark, shape: Shape, tables: tuple, start, end, options) -> Measurement:
    """Spark ingesting one binlog task's own Arrow batches of the range from memory, as
    one partition of an availableNow query (bench/ceiling.py), timed as the source's
    batches are (the sum of ``triggerExecution``): what Spark spends around a binlog
    task's output of this shape, with reading it costing nothing. A binlog task in Spark
    pays this on top of its reading, on the same two cores. ``tables``: the shape's
    table as :func:`_captured` gives it."""
    from ceiling import (
        REPLAY_FORMAT,
        register_replay_source,
        replay_options,
        source_schema_json,
        write_batches,
    )

    from cdc_source.offsets import BinlogPosition
    from cdc_source.partitions import BinlogTask
    from reader.task_runner import run_task

    task = BinlogTask(BinlogPosition(*start), BinlogPosition(*end), tables, None, 6203)
    path = bench.work_dir / f"replay-binlog-{shape.table}-{shape.rows_per_txn}.arrow"
    written = write_batches(run_task(task, bench.raw_kwargs(), tables), path)
    register_replay_source(spark)
    replay = replay_options(path, source_schema_json(spark, options), 1)
    load = load_average()
    queries = []
    for _ in range(REPLAY_ROUNDS):
        query = run_available_now(
            spark, replay, bench.checkpoint(), "ceiling: replay in Spark", source=REPLAY_FORMAT
        )
        if query.rows != written:
            raise RuntimeError(f"the replay read {query.rows:,} rows of {written:,}")
        queries.append(query)
    path.unlink(missing_ok=True)
    all_ms = [q.details["duration_ms"].get("triggerExecution", 0) for q in queries]
    fastest = queries[all_ms.index(min(all_ms))]
    return Measurement(
        "ceiling: replay in Spark, batches",
        "ceiling",
        fastest.rows,
        min(all_ms) / 1000,
        {
            "load_1m": round(load, 2),
            "replay": True,
            "partitions": 1,
            "duration_ms": fastest.details["duration_ms"],
            "all_batch_ms": all_ms,
        },
    )


def measure_shape(
    bench, spark, shape: Shape, table_rows: int, floor_cpu_s: float
) -> tuple[str, dict[str, Any]]:
    options = bench.source_options(shape.table, **{"scan.startup.mode": "latest-offset"})
    checkpoint, without_follower = bench.checkpoint(), bench.checkpoint()
    run_available_now(spark, options, checkpoint, "pin the head")
    run_available_now(spark, options, without_follower, "pin the head")
    warm_up = warm_workers(bench, spark, shape, table_rows, options, (checkpoint, without_follower))
    with bench.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
        start = _head(cur)
        seconds = update_rows(cur, shape.table, table_rows, shape.changes, shape.rows_per_txn)
        end = _head(cur)
        size_bytes = binlog_bytes(cur, start, end)
    print(
        f"[bench] binlog {shape.label}: {shape.changes:,} changes written in {seconds:.1f} s",
        flush=True,
    )
    if bench.args.binlog_parallelism:
        options["scan.binlog.parallelism"] = str(bench.args.binlog_parallelism)
    load = load_average()
    jvm = jvm_pid(spark)
    with DriverCpuSampler(jvm) as driver, CpuMeter(bench.server_pid, jvm) as meter:
        query = run_available_now(spark, options, checkpoint, "cdc-mysql in Spark, whole query")
    query.details["load_1m"] = round(load, 2)
    query.details["driver_cpu_s"] = driver.seconds
    query.details["cpu_seconds"] = meter.seconds
    query.details["jit_cpu_seconds"] = meter.jit_seconds
    passes = {**options, "scan.binlog.follower.enabled": "false"}
    with DriverCpuSampler(jvm) as driver:
        by_passes = run_available_now(
            spark, passes, without_follower, "cdc-mysql in Spark, whole query, follower off"
        )
    by_passes.details["driver_cpu_s"] = driver.seconds
    # The binlog phase runs as a sequence of batches in one long query: its cost is the
    # batches' execution time. Starting and stopping the query is a one-time cost.
    batch_ms = query.details["duration_ms"].get("triggerExecution", 0)
    run = Measurement(
        "cdc-mysql in Spark, batches",
        "cdc-mysql",
        query.rows,
        batch_ms / 1000,
        {
            "load_1m": round(load, 2),
            "from": "sum of triggerExecution of the query's batches, Python workers running",
        },
    )
    following = measure_following(bench, spark, shape, table_rows)
    tables = _captured(bench, shape.table)
    ceiling = replay_ceiling(bench, spark, shape, tables, start, end, options)
    reader = _in_process(bench, tables, start, end, decode_only=False)
    decode = _in_process(bench, tables, start, end, decode_only=True)
    load = load_average()
    peer = binlog_raw(bench.raw_kwargs(), 6001, start, end, workload.DATABASE, shape.table)
    peer.details["load_1m"] = round(load, 2)
    title = (
        f"Binlog, {shape.label}: {shape.changes:,} updated rows "
        f"({size_bytes / 1e6:.1f} MB of binlog)"
    )
    runs = [run, query, following, ceiling, reader, decode]
    text = "\n".join(
        [
            render(title, runs, [peer]),
            _phases(query.details["duration_ms"]),
            _against_one_task(run, ceiling, reader),
            _query_cpu(query),
            f"the warm-up query before it ({WARM_UP_CHANGES:,} changes): addBatch {warm_up:.2f} s "
            "(it starts Spark's Python worker where none runs, and loads the source in it)",
            _driver_cpu(query, by_passes, shape.changes, floor_cpu_s),
            f"following while written: the writer took {following.details['writer_seconds']} s, "
            f"the stream ended {following.details['lag_after_writer_s']} s after it, in "
            f"{following.details['batches_with_rows']} batches with rows",
        ]
    )
    return text, {
        "shape": shape.__dict__,
        "range": [list(start), list(end)],
        "runs": [r.to_json() for r in runs],
        "follower_off": by_passes.to_json(),
        "warm_up_add_batch_s": warm_up,
        "floor_driver_cpu_s": floor_cpu_s,
        "peers": [peer.to_json()],
    }


def _query_cpu(query: Measurement) -> str:
    """What the whole query cost each process, against what the machine's cores could
    spend in its time: where the two are near, the batches are held by the cores, not by
    a wait."""
    cores = os.cpu_count() or 1
    return (
        f"the whole query's CPU ({query.seconds:.2f} s on {cores} cores: "
        f"{query.seconds * cores:.2f} CPU s to spend): "
        f"{describe(query.details['cpu_seconds'], query.rows, query.details['jit_cpu_seconds'])}"
    )


def _against_one_task(batches: Measurement, ceiling: Measurement, task: Measurement) -> str:
    """The batches' rate and the ceiling's as shares of one binlog task alone."""
    alone = task.rows_per_second or 1.0
    return (
        f"against one binlog task alone: the batches in Spark "
        f"{batches.rows_per_second / alone:.0%}, Spark ingesting that task's batches from "
        f"memory {ceiling.rows_per_second / alone:.0%}"
    )


WARM_UP_CHANGES = 100_000
WARM_UP_ROWS_PER_TXN = 1_000


def warm_workers(bench, spark, shape: Shape, table_rows: int, options, checkpoints) -> float:
    """Changes of the shape's table read on each of ``checkpoints`` before the measured
    queries, so that those run as a running stream's batches do: on Python workers Spark
    has started already (it keeps a finished task's worker for the next task, across
    queries), and with the JVM's code for the table's columns compiled (a query's first
    hundred thousand rows otherwise pay seconds of the JIT compilers' CPU, which a
    running stream paid once). The changes come in 1,000-row transactions whatever the
    shape: what warms is the table's columns, not the transactions' size.
    Returns the first warm-up query's ``addBatch`` seconds: with the worker's start where
    none was running, and the source's first load in it."""
    with bench.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
        update_rows(cur, shape.table, table_rows, WARM_UP_CHANGES, WARM_UP_ROWS_PER_TXN)
    first = None
    for checkpoint in checkpoints:
        query = run_available_now(spark, options, checkpoint, "warm the Python workers")
        if query.rows != WARM_UP_CHANGES:
            raise RuntimeError(f"the warm-up query read {query.rows} rows, not {WARM_UP_CHANGES}")
        if first is None:
            first = query.details["duration_ms"].get("addBatch", 0) / 1000
    return first


def _committed_binlog(query) -> tuple[int, int]:
    """(file number, position) the query's last finished batch ended at; (0, 0) before."""
    progress = query.lastProgress
    if not progress or not progress["sources"]:
        return (0, 0)
    end = progress["sources"][0].get("endOffset")
    end = json.loads(end) if isinstance(end, str) else end
    binlog = (end or {}).get("binlog")
    if not binlog:
        return (0, 0)
    return int(binlog["file"].rsplit(".", 1)[1]), int(binlog["pos"])


def measure_following(bench, spark, shape: Shape, table_rows: int) -> Measurement:
    """The stream already following when the changes are written: a query (processing
    time 0, the noop sink) idle at the head, then ``shape``'s changes written; rows over the
    seconds from the first write until a batch has ended at the last one's position. Every
    batch is planned from the follower. The writer's own time is in the details: a stream
    that keeps up ends soon after it."""
    options = bench.source_options(shape.table, **{"scan.startup.mode": "latest-offset"})
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    query = (
        spark.readStream.format("cdc-mysql")
        .options(**options)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", bench.checkpoint())
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 300
        while query.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.2)
        before = len(query.recentProgress)
        load = load_average()
        with bench.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
            began = time.perf_counter()
            written = update_rows(cur, shape.table, table_rows, shape.changes, shape.rows_per_txn)
            file, pos = _head(cur)
        end = (int(file.rsplit(".", 1)[1]), pos)
        while _committed_binlog(query) < end:
            if time.monotonic() > deadline + 600 or query.exception() is not None:
                raise RuntimeError(f"the following stream did not reach {end}: {query.exception()}")
            time.sleep(0.05)
        seconds = time.perf_counter() - began
        progress = query.recentProgress[before:]
    finally:
        query.stop()
    rows = sum(int(p.numInputRows) for p in progress)
    busy = [p for p in progress if p.numInputRows]
    return Measurement(
        "cdc-mysql in Spark, following while written",
        "cdc-mysql",
        rows,
        seconds,
        {
            "load_1m": round(load, 2),
            "writer_seconds": round(written, 2),
            "lag_after_writer_s": round(seconds - written, 2),
            "batches_with_rows": len(busy),
            "from": "first write to a batch ending at the last write's position",
        },
    )


def _driver_cpu(
    followed: Measurement, by_passes: Measurement, changes: int, floor_cpu_s: float
) -> str:
    """The driver's CPU per million row changes (the source's planner process), with the
    follower and, over the same range, with each batch's range read when it is planned;
    and what the same process costs a source that reads nothing (``floor_cpu_s``: Spark
    starts it per query, importing PySpark), which every figure includes."""

    def per_million(run: Measurement) -> str:
        seconds = run.details["driver_cpu_s"]
        batches = run.details["batches_total"]
        beyond = (seconds - floor_cpu_s) / changes * 1e6
        return (
            f"{seconds / changes * 1e6:.2f} CPU s per million changes ({batches} batches; "
            f"{beyond:.2f} beyond the floor's)"
        )

    return (
        f"the driver: {per_million(followed)} with the follower; "
        f"{per_million(by_passes)} with scan.binlog.follower.enabled=false "
        f"({by_passes.rows / by_passes.seconds:,.0f} rows/s whole query); the floor's "
        f"planner process, a source that reads nothing: {floor_cpu_s:.2f} CPU s per query"
    )


def floor_driver_cpu(bench, spark) -> float:
    """CPU seconds of the planner process of a query whose source reads nothing (the
    least of three): Spark's own, per streaming query."""
    from cdc_runs import streaming_floor

    readings = []
    for _ in range(3):
        with DriverCpuSampler(jvm_pid(spark)) as driver:
            streaming_floor(spark, bench.checkpoint())
        readings.append(driver.seconds)
    return min(readings)


def _phases(duration_ms: dict[str, int]) -> str:
    """Where the query's batches spent their time: the driver's planning of each batch
    (its pass over the range: batch end, GTIDs, statements) against the tasks reading it."""
    total = duration_ms.get("triggerExecution", 0) / 1000
    planning = duration_ms.get("latestOffset", 0) / 1000
    tasks = duration_ms.get("addBatch", 0) / 1000
    return (
        f"in Spark, batches: {total:.2f} s, of which the driver's planning (latestOffset) "
        f"{planning:.2f} s and the tasks (addBatch) {tasks:.2f} s"
    )


MEMORY_PROBE = r"""
import json, os, sys, time
sys.path[:0] = {paths!r}
import pyarrow as pa
from cdc_source.catalog import discover_tables
from cdc_source.mysql_client import connect
from cdc_source.offsets import BinlogPosition
from cdc_source.partitions import BinlogTask
from reader.read_ahead import read_ahead
from reader.task_runner import run_task

def rss_kib():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

kwargs = json.loads(sys.argv[1])
start, end = json.loads(sys.argv[2]), json.loads(sys.argv[3])
conn = connect(kwargs)
tables = tuple(discover_tables(conn, lambda d, t: d == {db!r} and t == {table!r}))
conn.close()
baseline = peak = rss_kib()
arrow_peak = 0
began = time.perf_counter()
rows = batches = 0
task = BinlogTask(BinlogPosition(*start), BinlogPosition(*end), tables, None, 6301)
for batch in read_ahead(run_task(task, kwargs, tables)):  # as Spark's worker takes them
    rows += batch.num_rows
    batches += 1
    peak = max(peak, rss_kib())
    arrow_peak = max(arrow_peak, pa.total_allocated_bytes())
print(json.dumps({{"rows": rows, "batches": batches, "seconds": time.perf_counter() - began,
                  "baseline_kib": baseline, "peak_kib": peak,
                  "arrow_peak_bytes": arrow_peak}}))
"""


def measure_big_transaction(bench, rows: int) -> tuple[str, dict[str, Any]]:
    """RSS of one binlog task (a fresh process) reading a single transaction of
    ``rows // 10`` rows and of ``rows`` rows: bounded by the task's block size (the peak
    stays flat), not by the transaction's size."""
    lines, results = [], []
    for size in (max(1, rows // 10), rows):
        text, result = _one_big_transaction(bench, size)
        lines.append(text)
        results.append(result)
    return "\n".join(lines), {"runs": results}


def _one_big_transaction(bench, rows: int) -> tuple[str, dict[str, Any]]:
    table = f"big{rows}"
    with bench.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
        workload.create_table(cur, table)
        workload.load(cur, table, rows)
        start = _head(cur)
        cur.execute(f"UPDATE {table} SET qty = qty + 1")
        end = _head(cur)
        size_bytes = binlog_bytes(cur, start, end)
    here = Path(__file__).resolve().parents[1]
    code = MEMORY_PROBE.format(paths=[str(here)], db=workload.DATABASE, table=table)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            json.dumps(bench.raw_kwargs()),
            json.dumps(start),
            json.dumps(end),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    )
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    with bench.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE {table}")  # loaded anew each run: no room taken in a kept dir
    binlog_mb = size_bytes / 1e6
    text = (
        f"One binlog task over a single {rows:,}-row transaction "
        f"({binlog_mb:.0f} MB of binlog): {probe['rows']:,} rows in {probe['seconds']:.1f} s, "
        f"{probe['batches']} Arrow batches; RSS {probe['baseline_kib'] / 1024:.0f} MiB before "
        f"reading, at most {probe['peak_kib'] / 1024:.0f} MiB while reading (sampled per "
        f"batch); Arrow memory at most {probe['arrow_peak_bytes'] / 2**20:.0f} MiB"
    )
    return text, {**probe, "transaction_rows": rows, "binlog_mb": binlog_mb}


def measure_snapshot_under_writes(bench, spark, writes_per_second: int) -> tuple[str, dict]:
    """The default snapshot while a writer commits single-row updates at a steady rate:
    every snapshot task also decodes the binlog written meanwhile (normalization). The
    updated rows get their loaded values back afterwards (bench/kept_data.py), so the next
    run's snapshot of a kept table reads what this run's read."""
    import threading

    stop = threading.Event()
    done = [0]
    table_rows = bench.results["table"]["rows"]
    with bench.info.admin_connect() as conn, conn.cursor() as cur:
        kept_data.forget(cur, workload.DATABASE, workload.TABLE)

    def writer() -> None:
        with bench.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
            began = time.perf_counter()
            key = 1
            while not stop.is_set():
                cur.execute(f"UPDATE {workload.TABLE} SET qty = qty + 1 WHERE id = {key}")
                done[0] += 1
                key = key % table_rows + 1
                lag = done[0] / writes_per_second - (time.perf_counter() - began)
                if lag > 0:
                    stop.wait(lag)

    thread = threading.Thread(target=writer)
    thread.start()
    began = time.perf_counter()
    try:
        run = run_available_now(
            spark,
            bench.source_options(workload.TABLE),
            bench.checkpoint(),
            "cdc-mysql snapshot under writes",
        )
    finally:
        stop.set()
        thread.join()
    seconds = time.perf_counter() - began
    _restore_orders(bench, min(done[0], table_rows), table_rows)
    rate = done[0] / seconds
    text = (
        f"Snapshot of {table_rows:,} rows while a writer commits {rate:,.0f} single-row "
        f"updates/s: {run.rows:,} rows in {run.seconds:.1f} s = {run.rows_per_second:,.0f} rows/s"
    )
    return text, {"run": run.to_json(), "writes": done[0], "writes_per_second": round(rate, 1)}


def _restore_orders(bench, last_key: int, table_rows: int) -> None:
    """Keys 1..``last_key`` of the orders table back to their loaded values."""
    with bench.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
        kept_data.restore(
            cur,
            workload.DATABASE,
            workload.TABLE,
            table_rows,
            lambda: workload.restore_updated(cur, workload.TABLE, last_key),
        )
