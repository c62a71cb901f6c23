"""The quickstart: capture a live table end to end on a throwaway local server.

``python -m cdc_source quickstart`` (or ``cdc-mysql quickstart``, or
``python examples/quickstart.py``):

1. starts an embedded MariaDB with the binlog set up for CDC (nothing to configure);
2. creates ``shop.orders`` with ``--rows`` rows;
3. streams ``spark.readStream.format("cdc-mysql")`` into a parquet folder (the file sink
   is exactly once with its checkpoint), or with ``--delta MODE`` into a Delta table
   (``cdc_source.delta``, the ``lake`` extra), printing every micro-batch: its phase, the
   rows by ``_op`` (parquet) and the size of the source's offset;
4. once the first batch is done, starts a writer thread that inserts, updates and deletes
   orders for ``--seconds``, during the rest of the snapshot and after it;
5. once the writer has stopped and the stream has caught up with the binlog, replays the
   change log (per primary key the row with the highest ``_seq``, deletes dropped), or
   reads the Delta table back with Spark (a ``history`` table's current rows), and checks
   it equals ``SELECT *`` of the table.

The user-facing code is :func:`start_capture` and :func:`replay` (:func:`start_delta` and
:func:`read_delta` with ``--delta``); the rest is the demo's scaffolding.
``examples/quickstart.py`` shows the same two functions as a script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

from cdc_source.mysql_client import read_head
from cdc_source.quickstart_workload import DATABASE, TABLE, ChangeWriter, create_orders


# -- the user-facing code ------------------------------------------------------------------
def start_capture(
    spark,
    server: dict[str, str],
    out_dir: str,
    checkpoint_dir: str,
    chunk_size: int = 2500,
    chunks_per_batch: int = 2,
):
    """Stream every change of ``shop.orders`` into a parquet folder, exactly once."""
    orders = (
        spark.readStream.format("cdc-mysql")
        .option("hostname", server["hostname"])
        .option("port", server["port"])
        .option("username", server["username"])
        .option("password", server["password"])
        .option("database-name", "shop")
        .option("table-name", r"shop\.orders")  # a regex on 'db.table'
        .option("scan.incremental.snapshot.chunk.size", str(chunk_size))
        .option("scan.snapshot.chunks-per-batch", str(chunks_per_batch))
        .load()
    )
    return (
        orders.writeStream.format("parquet")
        .option("path", out_dir)
        .option("checkpointLocation", checkpoint_dir)
        .trigger(processingTime="1 second")
        .start()
    )


def start_delta(spark, options: dict[str, str], table_path: str, checkpoint_dir: str, mode: str):
    """Keep a Delta table of ``shop.orders`` in ``mode`` (``mirror``, ``history`` or
    ``append``), exactly once; ``options`` are the connection's and the snapshot's."""
    from cdc_source import delta

    orders = (
        spark.readStream.format("cdc-mysql")
        .options(**options)
        .option("database-name", "shop")
        .option("table-name", r"shop\.orders")
        .option("metadata.list", "row_key")  # the key bytes the Delta table matches rows on
        .load()
    )
    trigger = {"processingTime": "1 second"}
    return delta.mirror(orders, table_path, checkpoint=checkpoint_dir, mode=mode, trigger=trigger)


def read_delta(spark, table_path: str, mode: str):
    """The table as a Delta table of ``mode`` holds it, read by Spark from the table's
    current parquet files: a mirror as it is, a history's current versions, a change
    log replayed."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    files = DeltaTable(table_path).file_uris()
    table = spark.read.parquet(*files)
    if mode == "append":  # the changes after the last reset, folded
        last_reset = table.where("_op = 't'").agg(F.max("_seq")).first()[0]
        changes = table.where("_op != 't'")
        if last_reset is not None:
            changes = changes.where(F.col("_seq") > last_reset)
        return _latest(changes).drop("_key")
    if mode == "history":
        table = table.where("is_current").drop("valid_from", "valid_to", "is_current")
    return table.drop("_seq", "_key")


def _latest(changes):
    """Per key the change with the highest ``_seq``, deletes dropped."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest_first = Window.partitionBy("id").orderBy(F.col("_seq").desc())
    return (
        changes.withColumn("_rank", F.row_number().over(latest_first))
        .where("_rank = 1 AND _op != 'd'")
        .drop("_rank", "_op", "_seq", "_ts_ms")
    )


def replay(spark, out_dir: str):
    """The table rebuilt from its change log: per key the latest change, deletes dropped."""
    return _latest(spark.read.parquet(out_dir))


# -- printing the batches -----------------------------------------------------------------
def _coordinates(binlog: dict | None) -> tuple[int, int]:
    if not binlog:
        return (-1, -1)
    return (int(binlog["file"].rsplit(".", 1)[-1]), int(binlog["pos"]))


def _offset(value) -> dict | None:
    if value is None or isinstance(value, dict):
        return value
    return json.loads(value)


def _phase(start: dict | None, end: dict | None) -> str:
    snapshot = (end or {}).get("snapshot")
    if snapshot is not None:
        after = snapshot.get("after")
        where = "start" if after is None else "key " + ",".join(str(v) for v in after)
        return f"snapshot  {snapshot['table']} up to {where}"
    if start is None or start.get("snapshot") is not None:
        return "hand-over snapshot done, binlog from here on"
    binlog = end["binlog"]
    return f"binlog    up to {binlog['file']}:{binlog['pos']}"


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


class BatchPrinter:
    """Prints each finished micro-batch once: phase, rows by ``_op``, offset size.

    Rows by ``_op`` come from the files the batch committed to the sink's log
    (``_spark_metadata``), read with pyarrow: no extra Spark job. A Delta sink
    (``count_ops`` false) has no such log: its batches show their row count alone.
    """

    def __init__(self, out_dir: str, checkpoint_dir: str, count_ops: bool = True) -> None:
        self.count_ops = count_ops
        self.out_dir = Path(out_dir)
        self.checkpoint_dir = Path(checkpoint_dir)
        self.printed: set[int] = set()
        self.seen_files: set[str] = set()
        self.totals: Counter = Counter()
        self.last_end: dict | None = None

    def _new_files(self, batch_id: int) -> list[str]:
        """Files the sink committed up to ``batch_id`` that were not counted yet."""
        log_dir = self.out_dir / "_spark_metadata"
        files: list[str] = []
        if not log_dir.exists():
            return files
        for entry in log_dir.iterdir():
            number = entry.name.split(".", 1)[0]
            if not number.isdigit() or int(number) > batch_id:
                continue
            for line in entry.read_text().splitlines()[1:]:
                uri = json.loads(line).get("path", "")
                if uri and uri not in self.seen_files:
                    self.seen_files.add(uri)
                    files.append(uri)
        return files

    def _ops(self, batch_id: int) -> Counter:
        import pyarrow.parquet as pq

        ops: Counter = Counter()
        for uri in self._new_files(batch_id):
            ops.update(pq.read_table(_local_path(uri), columns=["_op"]).column("_op").to_pylist())
        return ops

    def _offset_bytes(self, batch_id: int) -> int:
        """Size of the source's offset as Spark logged it in ``offsets/<batch>``."""
        try:
            lines = (self.checkpoint_dir / "offsets" / str(batch_id)).read_text().splitlines()
        except OSError:
            return 0
        return len(lines[2].encode()) if len(lines) > 2 else 0

    def duplicate_seqs(self) -> int:
        """How many rows of the whole change log repeat another row's ``_seq``."""
        import pyarrow.parquet as pq

        seqs: list[str] = []
        for uri in self.seen_files:
            seqs += pq.read_table(_local_path(uri), columns=["_seq"]).column("_seq").to_pylist()
        return len(seqs) - len(set(seqs))

    def poll(self, query) -> None:
        for progress in query.recentProgress:
            data = json.loads(progress.json)
            batch_id = data["batchId"]
            if batch_id in self.printed or "addBatch" not in data.get("durationMs", {}):
                continue
            self.printed.add(batch_id)
            source = data["sources"][0]
            start, end = _offset(source.get("startOffset")), _offset(source.get("endOffset"))
            ops = self._ops(batch_id)
            self.totals.update(ops)
            self.last_end = end
            counts = " ".join(f"{op}={ops[op]:<5}" for op in "rcud") if self.count_ops else ""
            size = self._offset_bytes(batch_id)
            seconds = data["durationMs"].get("triggerExecution", 0) / 1000
            print(
                f"  batch {batch_id:>3}  {counts} rows={data['numInputRows']:<6} "
                f"offset {size:>3} B  {seconds:4.1f} s  {_phase(start, end)}",
                flush=True,
            )


def wait_until_caught_up(query, printer: BatchPrinter, head: tuple[int, int], timeout: float):
    """Until a finished batch ends at or past ``head`` with the snapshot done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        printer.poll(query)
        end = printer.last_end
        if end and end.get("snapshot") is None and _coordinates(end.get("binlog")) >= head:
            return
        time.sleep(0.5)
    raise TimeoutError(f"the stream did not reach binlog position {head} in {timeout:.0f} s")


# -- verification -------------------------------------------------------------------------
def verify(spark, out_dir: str, conn, replay: Callable = replay) -> list[str]:
    """Differences between the replayed change log and ``SELECT *``; empty when equal."""
    from pyspark.sql.types import BooleanType

    replayed = replay(spark, out_dir)
    columns = replayed.columns
    booleans = {f.name for f in replayed.schema.fields if isinstance(f.dataType, BooleanType)}
    got = {row["id"]: tuple(row) for row in replayed.collect()}
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")  # TIMESTAMP as UTC, like the source
        cur.execute(f"SELECT {', '.join(columns)} FROM {DATABASE}.{TABLE}")
        expected = {}
        for record in cur.fetchall():
            values = tuple(
                bool(v) if name in booleans and v is not None else v
                for name, v in zip(columns, record)
            )
            expected[values[0]] = values
    problems = []
    for key in sorted(expected.keys() - got.keys())[:5]:
        problems.append(f"missing id {key}: table has {expected[key]}")
    for key in sorted(got.keys() - expected.keys())[:5]:
        problems.append(f"extra id {key}: replay has {got[key]}")
    differing = [k for k in sorted(expected.keys() & got.keys()) if expected[k] != got[k]]
    for key in differing[:5]:
        problems.append(f"id {key} differs: table {expected[key]} vs replay {got[key]}")
    if problems:
        problems.insert(
            0,
            f"{len(expected)} rows in the table, {len(got)} replayed, "
            f"{len(expected.keys() - got.keys())} missing, "
            f"{len(got.keys() - expected.keys())} extra, {len(differing)} differing",
        )
    return problems


# -- the whole run ------------------------------------------------------------------------
def _delta_reader(mode: str) -> Callable:
    return lambda spark, table_path: read_delta(spark, table_path, mode)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cdc-mysql quickstart",
        description="Capture a live MySQL-compatible table with Spark on a throwaway local "
        "server, then verify the captured change log reproduces the table.",
    )
    parser.add_argument("--rows", type=int, default=30_000, help="initial rows (30000)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the writer runs (30)")
    parser.add_argument(
        "--out", help="folder for the output table and checkpoint (default: a new temp folder)"
    )
    parser.add_argument("--chunk-size", type=int, default=2500, help="snapshot chunk rows")
    parser.add_argument(
        "--chunks-per-batch", type=int, default=2, help="snapshot chunks per micro-batch"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for the stream to catch up"
    )
    parser.add_argument(
        "--delta",
        choices=("mirror", "history", "append"),
        help="write a Delta table in this mode instead of the parquet change log "
        "(needs the 'lake' extra: pip install 'cdc-mysql[lake]')",
    )
    args = parser.parse_args(argv)
    if args.rows < 0 or args.seconds < 0 or args.chunk_size < 1 or args.chunks_per_batch < 1:
        parser.error("--rows/--seconds must be >= 0, chunk settings >= 1")
    return args


def _spark():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("cdc-mysql-quickstart")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(
    argv: list[str] | None = None,
    start_capture: Callable = start_capture,
    replay: Callable = replay,
) -> int:
    """Run the quickstart; ``start_capture``/``replay`` let a script supply its own code."""
    args = _parse(argv)
    # Collected timestamps become naive datetimes in the process's zone: make it UTC, the
    # zone the source and the session use, so they compare with what the server returns.
    os.environ["TZ"] = "UTC"
    time.tzset()

    from cdc_source.embedded_server import EmbeddedServer
    from cdc_source.source_logging import LOG_LEVEL_ENV

    base = Path(args.out or tempfile.mkdtemp(prefix="cdc-mysql-quickstart-")).resolve()
    out_dir, checkpoint_dir = base / "orders", base / "checkpoint"
    if out_dir.exists() or checkpoint_dir.exists():
        print(f"{out_dir} or {checkpoint_dir} already exists: pass a new --out", file=sys.stderr)
        return 2
    started = time.monotonic()

    def elapsed() -> str:
        return f"[{time.monotonic() - started:5.1f} s]"

    print(f"{elapsed()} starting a throwaway MariaDB (binlog ROW, FULL row image) ...", flush=True)
    with EmbeddedServer() as server:
        print(f"{elapsed()} server on 127.0.0.1:{server.port}; CDC account '{server.user}'")
        admin = server.admin_connect(charset="utf8mb4")
        spark = None
        try:
            create_orders(admin, args.rows)
            print(f"{elapsed()} created {DATABASE}.{TABLE} with {args.rows} rows")
            print(f"{elapsed()} starting Spark (local[2]) ...", flush=True)
            # One line per batch: this program prints its own, so the source's INFO
            # planning lines (logged by Spark's Python processes) are left out.
            os.environ.setdefault(LOG_LEVEL_ENV, "WARNING")
            spark = _spark()
            if args.delta:
                options = {
                    **server.source_options(),
                    "scan.incremental.snapshot.chunk.size": str(args.chunk_size),
                    "scan.snapshot.chunks-per-batch": str(args.chunks_per_batch),
                }
                query = start_delta(spark, options, str(out_dir), str(checkpoint_dir), args.delta)
                replay = _delta_reader(args.delta)
            else:
                query = start_capture(
                    spark,
                    server.source_options(),
                    str(out_dir),
                    str(checkpoint_dir),
                    args.chunk_size,
                    args.chunks_per_batch,
                )
            sink = f"a Delta table ({args.delta})" if args.delta else "a parquet change log"
            print(f"{elapsed()} streaming {DATABASE}.{TABLE} into {sink} at {out_dir}", flush=True)
            printer = BatchPrinter(str(out_dir), str(checkpoint_dir), count_ops=not args.delta)
            try:
                # Spark's first batch pays for warming up; let the writer overlap the rest of
                # the snapshot and the binlog phase after it.
                while not printer.printed:
                    if query.exception() is not None:
                        raise RuntimeError(f"the query failed: {query.exception()}")
                    printer.poll(query)
                    time.sleep(0.5)
                writer = ChangeWriter(lambda: server.admin_connect(charset="utf8mb4"), args.seconds)
                writer.start()
                print(f"{elapsed()} writer: inserts, updates, deletes for {args.seconds:.0f} s")
                while writer.is_alive():
                    if query.exception() is not None:
                        raise RuntimeError(f"the query failed: {query.exception()}")
                    printer.poll(query)
                    time.sleep(0.5)
                if writer.error is not None:
                    raise RuntimeError(f"the writer failed: {writer.error}")
                file, pos, _, _ = read_head(admin)
                head = _coordinates({"file": file, "pos": pos})
                done = ", ".join(f"{n} {kind}" for kind, n in sorted(writer.statements.items()))
                print(
                    f"{elapsed()} writer done: {writer.transactions} transactions ({done}); "
                    f"waiting for the stream to reach the binlog head {file}:{pos}",
                    flush=True,
                )
                wait_until_caught_up(query, printer, head, args.timeout)
            finally:
                query.stop()
            printer.poll(query)
            totals = " ".join(f"{op}={printer.totals[op]}" for op in "rcud")
            totals = f": {totals}" if printer.count_ops else ""
            print(f"{elapsed()} caught up after {len(printer.printed)} batches{totals}")
            print(f"{elapsed()} verifying ...", flush=True)
            problems = verify(spark, str(out_dir), admin, replay)
            duplicates = printer.duplicate_seqs()
            if duplicates:
                problems.append(f"{duplicates} rows share a _seq with another row")
        finally:
            admin.close()
            if spark is not None:
                spark.stop()
    if problems:
        print(f"{elapsed()} verification FAILED:")
        for problem in problems:
            print(f"  {problem}")
        return 1
    what = (
        f"the Delta table ({args.delta}), read back by Spark,"
        if args.delta
        else "replaying the change log (latest _seq per id, deletes dropped)"
    )
    print(f"{elapsed()} verification OK: {what} equals SELECT * FROM {DATABASE}.{TABLE}")
    print(f"output table: {out_dir}")
    print(f"inspect the checkpoint: python -m cdc_source inspect {checkpoint_dir}")
    return 0
