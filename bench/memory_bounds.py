"""Memory of a task and of the driver's planning against what they read: a single huge
LONGBLOB value, a stream far behind (a backlog of single-row transactions, at two sizes
ten times apart), and a snapshot of 100 KiB rows (two table sizes ten times apart).
Measurement only.

    python bench/memory_bounds.py                        # a 1 GiB value, 1 hour at 100 writes/s
    python bench/memory_bounds.py --blob-mib 256 --backlog 36000

Each case runs in a fresh process: one binlog task over the range, its batches made
ahead on a thread as in Spark's worker (peak RSS sampled per Arrow batch), and the
driver's planning of the batch over it (QueryDriver.latest and .tasks). The server is a
throwaway MariaDB with max_allowed_packet=1G.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cdc_source.embedded_server import EmbeddedServer  # noqa: E402
from cdc_source.mysql_client import read_head  # noqa: E402

DATABASE = "membench"

PROBE = r"""
import json, os, sys, time
sys.path[:0] = [{repo!r}]
import pyarrow as pa
from cdc_source.catalog import discover_tables
from cdc_source.mysql_client import connect
from cdc_source.offsets import BinlogPosition, SourceOffset, table_fingerprint
from cdc_source.options import parse_options
from cdc_source.partitions import BinlogTask, ChunkSpec, ChunkTask
from coordinator.driver import QueryDriver
from reader.read_ahead import read_ahead
from reader.task_runner import run_task

def task_batches(task):
    # as Spark's worker gets them (cdc_source.spark_readers): made ahead on a thread
    return read_ahead(run_task(task, options.connection_kwargs(), tables, options.retry_policy()))

def rss_mib():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def peak_mib():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

options = parse_options(json.loads(sys.argv[1]))
start, end, role = json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
conn = connect(options.connection_kwargs())
tables = tuple(discover_tables(conn, lambda d, t: d == {db!r} and t == sys.argv[5]))
conn.close()
baseline = rss_mib()
began = time.perf_counter()
result = {{}}
if role == "snapshot":  # the whole table as one chunk, at P = start
    rows = batches = 0
    largest = 0
    samples = []
    target = BinlogPosition(*start)
    task = ChunkTask((ChunkSpec(tables[0], 0, None, None),), target, 6402, options.fetch_size)
    for batch in task_batches(task):
        rows += batch.num_rows
        batches += 1
        largest = max(largest, batch.nbytes)
        del batch
        samples.append([rows, round(rss_mib())])
    result = {{"rows": rows, "batches": batches, "largest_batch_mib": largest / 2**20,
              "rss_by_rows": samples[:: max(1, len(samples) // 8)]}}
elif role == "task":
    rows = batches = 0
    largest = 0
    task = BinlogTask(BinlogPosition(*start), BinlogPosition(*end), tables, None, 6401)
    samples = []
    for batch in task_batches(task):
        rows += batch.num_rows
        batches += 1
        largest = max(largest, batch.nbytes)
        del batch
        if batches % 20 == 0:
            samples.append([rows, round(rss_mib())])
    result = {{"rows": rows, "batches": batches, "largest_batch_mib": largest / 2**20,
              "rss_by_rows": samples[:: max(1, len(samples) // 8)]}}
else:
    driver = QueryDriver(options, list(tables))
    offset = SourceOffset(BinlogPosition(*start), None, table_fingerprint([t.name for t in tables]))
    end_offset = driver.latest(offset)
    tasks = driver.tasks(offset, end_offset)
    result = {{"tasks": len(tasks), "end": [end_offset.binlog.file, end_offset.binlog.pos]}}
result.update(seconds=time.perf_counter() - began, baseline_mib=baseline, peak_mib=peak_mib())
print(json.dumps(result))
"""


def _probe(server: EmbeddedServer, table: str, start, end, role: str) -> dict:
    options = {
        **server.info.source_options(),
        "username": "root",
        "password": "",
        "database-name": DATABASE,
        "table-name": rf"{DATABASE}\.{table}",
    }
    code = PROBE.format(repo=str(REPO), db=DATABASE)
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(options), json.dumps(start), json.dumps(end)]
        + [role, table],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _head(cur) -> list:
    file, pos, _, _ = read_head(cur.connection)
    return [file, pos]


def blob_case(server: EmbeddedServer, mib: int) -> dict:
    """One row whose LONGBLOB holds ``mib`` MiB, inserted in one transaction."""
    with server.info.admin_connect(DATABASE, max_allowed_packet=2**30) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE big (id INT PRIMARY KEY, b LONGBLOB)")
            start = _head(cur)
            cur.execute("INSERT INTO big VALUES (1, REPEAT('x', %s))", (mib * 2**20,))
            end = _head(cur)
    binlog_mib = (end[1] - start[1]) / 2**20 if start[0] == end[0] else float("nan")
    return {
        "value_mib": mib,
        "binlog_mib": round(binlog_mib, 1),
        "task": _probe(server, "big", start, end, "task"),
    }


def backlog_case(server: EmbeddedServer, table: str, transactions: int) -> dict:
    """``transactions`` single-row autocommit updates not yet read (a stream behind)."""
    with server.info.admin_connect(DATABASE) as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT, note VARCHAR(100), at DATETIME(6))"
        )
        cur.execute(
            f"INSERT INTO {table} SELECT seq, 0, REPEAT('n', 60), NOW(6) FROM seq_1_to_10000"
        )
        start = _head(cur)
        for i in range(transactions):
            cur.execute(f"UPDATE {table} SET qty = qty + 1 WHERE id = {i % 10000 + 1}")
        end = _head(cur)
    return {
        "transactions": transactions,
        "task": _probe(server, table, start, end, "task"),
        "driver": _probe(server, table, start, end, "driver"),
    }


def wide_rows_case(server: EmbeddedServer, rows: int, row_kib: int) -> dict:
    """A snapshot task over a table of ``rows`` rows of about ``row_kib`` KiB each, read
    as one chunk: its memory is bounded by the fetch (rows and 32 MiB), not the table."""
    table = f"wide{rows}"
    with server.info.admin_connect(DATABASE) as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40), payload MEDIUMBLOB, "
            "at DATETIME(6))"
        )
        cur.execute(
            f"INSERT INTO {table} SELECT seq, CONCAT('row ', seq), "
            f"REPEAT(CHAR(65 + seq % 26), {row_kib * 1024}), NOW(6) FROM seq_1_to_{rows}"
        )
        start = _head(cur)
    return {
        "rows": rows,
        "row_kib": row_kib,
        "table_mib": round(rows * row_kib / 1024),
        "task": _probe(server, table, start, start, "snapshot"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blob-mib", type=int, default=1023, help="LONGBLOB value size (0: skip)")
    parser.add_argument(
        "--backlog", type=int, default=360_000, help="transactions behind (1 hour at 100/s)"
    )
    parser.add_argument(
        "--wide-rows",
        type=int,
        default=4000,
        help="rows of 100 KiB read by one snapshot task, and a tenth of that (0: skip)",
    )
    args = parser.parse_args(argv)
    server = EmbeddedServer(
        buffer_pool="2G",
        extra_args=("--max-allowed-packet=1G", "--innodb-log-file-size=4G"),
    )
    server.start(timeout=300)
    results: dict = {}
    try:
        with server.info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DATABASE}")
        for transactions in (args.backlog // 10, args.backlog) if args.backlog else ():
            case = backlog_case(server, f"behind{transactions}", transactions)
            results.setdefault("backlog", []).append(case)
            task, driver = case["task"], case["driver"]
            print(
                f"stream {transactions:,} transactions behind: binlog task peak RSS "
                f"{task['peak_mib']:.0f} MiB (before reading {task['baseline_mib']:.0f}), "
                f"{task['rows']:,} rows in {task['seconds']:.1f} s, largest Arrow batch "
                f"{task['largest_batch_mib']:.1f} MiB (RSS by rows read: {task['rss_by_rows']}); "
                f"driver planning peak RSS "
                f"{driver['peak_mib']:.0f} MiB (before {driver['baseline_mib']:.0f})",
                flush=True,
            )
        for rows in (args.wide_rows // 10, args.wide_rows) if args.wide_rows else ():
            case = wide_rows_case(server, rows, 100)
            results.setdefault("wide_rows", []).append(case)
            task = case["task"]
            print(
                f"snapshot of {rows:,} rows of 100 KiB ({case['table_mib']:,} MiB) in one "
                f"task: peak RSS {task['peak_mib']:.0f} MiB (before reading "
                f"{task['baseline_mib']:.0f}), {task['batches']} Arrow batches, largest "
                f"{task['largest_batch_mib']:.1f} MiB, {task['seconds']:.1f} s "
                f"(RSS by rows read: {task['rss_by_rows']})",
                flush=True,
            )
        if args.blob_mib:
            case = blob_case(server, args.blob_mib)
            results["blob"] = case
            task = case["task"]
            print(
                f"one {args.blob_mib} MiB LONGBLOB value ({case['binlog_mib']} MiB of binlog): "
                f"binlog task peak RSS {task['peak_mib']:.0f} MiB (before reading "
                f"{task['baseline_mib']:.0f}), {task['seconds']:.1f} s",
                flush=True,
            )
    finally:
        server.stop()
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "memory-bounds.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
