"""The lake sink against the plain parquet sink: one snapshot batch of N rows written by
``cdc_source.delta`` (each mode asked for) and by ``writeStream.format("parquet")``, with
the peak RSS of the Python driver and of Spark's JVM. Measurement only.

    python bench/lake_sink.py                           # batches of 200,000, 2M and 4M rows
    python bench/lake_sink.py --rows 100000,1000000 --modes mirror

Each run is a fresh process (its own Spark, ``local[2]``), an availableNow query whose
snapshot is one batch (``scan.snapshot.rows-per-batch`` twice the table's rows, the byte
budget out of the way); then 20,000 rows spread over the table are updated and a second
query on the same checkpoint reads them as one binlog batch. The Python driver's peak RSS
(``VmHWM``) of the snapshot batch is the slice the sink holds (``slice_rows``, the same
for every size): its slices of snapshot reads are appended, not merged. The binlog batch
is merged, and delta-rs's MERGE takes memory that grows with the target table
(docs/design.md, 'The lake sink'). The table, ``lakebench.orders`` on a throwaway
MariaDB, has an INT key, three VARCHARs, a DECIMAL, an INT and a DATETIME, every value a
function of the key.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cdc_source.embedded_server import EmbeddedServer  # noqa: E402

DATABASE = "lakebench"

RUN = r"""
import json, os, sys, time
sys.path[:0] = [{repo!r}]
from pyspark.sql import SparkSession
from cdc_source import delta

def peak_mib(pid="self"):
    with open(f"/proc/{{pid}}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

def jvm_pid():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{{entry}}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                return entry

options, sink, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
spark = (
    SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "8")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
changes = spark.readStream.format("cdc-mysql").options(**options).load()
began = time.perf_counter()
if sink == "parquet":
    query = (
        changes.writeStream.format("parquet").option("path", out + "/table")
        .option("checkpointLocation", out + "/ck").trigger(availableNow=True).start()
    )
else:
    query = delta.mirror(
        changes, out + "/table", checkpoint=out + "/ck", mode=sink,
        trigger={{"availableNow": True}},
    )
query.awaitTermination()
seconds = time.perf_counter() - began
rows = sum(p["numInputRows"] for p in query.recentProgress)
batches = sum(1 for p in query.recentProgress if p["numInputRows"])
print(json.dumps({{
    "rows": rows, "batches": batches, "seconds": seconds,
    "driver_peak_mib": peak_mib(), "jvm_peak_mib": peak_mib(jvm_pid()),
}}))
"""


def load(server, rows: int) -> None:
    """``orders`` of ``rows`` rows, every value a function of the key."""
    with server.info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        cur.execute(f"DROP TABLE IF EXISTS {DATABASE}.orders")
        cur.execute(
            f"CREATE TABLE {DATABASE}.orders (id INT PRIMARY KEY, customer VARCHAR(40), "
            "status VARCHAR(16), note VARCHAR(120), amount DECIMAL(12,2), qty INT, "
            "created DATETIME)"
        )
        cur.execute(f"INSERT INTO {DATABASE}.orders VALUES (0, 'c0', 'new', 'n', 1.5, 1, NOW())")
        count = 1
        while count < rows:
            add = min(count, rows - count)
            cur.execute(
                f"INSERT INTO {DATABASE}.orders SELECT id + {count}, CONCAT('c', id + {count}), "
                f"ELT(1 + (id + {count}) % 3, 'new', 'paid', 'shipped'), "
                f"REPEAT('x', 1 + id % 100), amount + id, qty + id, created "
                f"FROM {DATABASE}.orders WHERE id < {add}"
            )
            count += add
        conn.commit()


CHANGES = 20_000  # rows the binlog batch updates, whatever the table's size


def change(server, rows: int) -> None:
    """Updates ``CHANGES`` rows spread over the whole key range, in one transaction."""
    step = max(1, rows // CHANGES)
    with server.info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute(f"UPDATE {DATABASE}.orders SET qty = qty + 1 WHERE id % {step} = 0")
        conn.commit()


def run(server, rows: int, sink: str) -> tuple[dict, dict]:
    """The snapshot batch of ``rows`` rows, then (same checkpoint and table, a new query)
    one binlog batch of ``CHANGES`` updates merged into the table the snapshot wrote."""
    options = {
        **server.info.source_options(),
        "database-name": DATABASE,
        "table-name": rf"{DATABASE}\.orders",
        "scan.snapshot.rows-per-batch": str(2 * rows),  # chunks count at their full size
        "scan.snapshot.bytes-per-batch": str(2**40),
        "metadata.list": "row_key",  # what the lake tables match rows on (both sinks carry it)
    }
    with tempfile.TemporaryDirectory(prefix="lake-bench-") as out:
        snapshot = _query(options, sink, out, f"{sink} at {rows} rows")
        change(server, rows)
        changes = _query(options, sink, out, f"{sink}, changes into {rows} rows")
    return snapshot, changes


def _query(options: dict, sink: str, out: str, what: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUN.format(repo=str(REPO)), json.dumps(options), sink, out],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if done.returncode:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rows", default="200000,2000000,4000000", help="batch sizes, comma-separated"
    )
    parser.add_argument("--modes", default="mirror,history,append", help="lake modes to run")
    args = parser.parse_args(argv)
    sinks = ["parquet", *args.modes.split(",")]
    server = EmbeddedServer(buffer_pool="1G")
    server.start(timeout=300)
    results = []
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            for sink in sinks:
                load(server, rows)  # each sink's changes start from the same table
                snapshot, changes = run(server, rows, sink)
                for kind, result in (("snapshot", snapshot), ("changes", changes)):
                    result = {"rows_asked": rows, "sink": sink, "batch": kind, **result}
                    results.append(result)
                    print(
                        f"{rows:>9,} rows, {sink:>8}, {kind:>8} batch: {result['rows']:,} rows "
                        f"in {result['batches']} batch(es), {result['seconds']:.1f} s "
                        f"({result['rows'] / result['seconds']:,.0f} rows/s); peak RSS: "
                        f"Python driver {result['driver_peak_mib']:.0f} MiB, JVM "
                        f"{result['jvm_peak_mib']:.0f} MiB",
                        flush=True,
                    )
    finally:
        server.stop()
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "lake-sink.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
