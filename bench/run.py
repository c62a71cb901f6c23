"""cdc-mysql throughput against its peers, all measured in one run on a throwaway server.

    python bench/run.py                    # 1,000,000 rows, 200,000 binlog changes
    python bench/run.py --rows 100000 --changes 20000

Measurement only: nothing here passes or fails on a number. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import workload
from cdc_runs import SnapshotConfig, run_available_now
from peers import find_jdbc_jar, jdbc_read, pymysql_scan, short_error
from report import Measurement, best_of, load_average, render, skipped

HERE = Path(__file__).resolve().parent
DEFAULT_CONFIGS = "8096x16,8096x128,16384x64,32768x32"
WARMUP_ROWS = 20_000
PROFILE_SERVER_IDS = (6101, 6102)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="snapshot table rows")
    parser.add_argument(
        "--changes", type=int, default=1_000_000, help="row updates for the binlog phase"
    )
    parser.add_argument(
        "--txn-rows", type=int, default=1000, help="updated rows per transaction (binlog phase)"
    )
    parser.add_argument(
        "--binlog-parallelism",
        type=int,
        default=0,
        help="scan.binlog.parallelism of the binlog runs (default: the source's default)",
    )
    parser.add_argument(
        "--single-changes",
        type=int,
        default=100_000,
        help="single-row autocommit updates for the binlog phase's OLTP shape (0: skip)",
    )
    parser.add_argument(
        "--wide-rows",
        type=int,
        default=100_000,
        help="rows of the 25-column typed table, all updated in 1,000-row transactions (0: skip)",
    )
    parser.add_argument(
        "--big-txn-rows",
        type=int,
        default=1_000_000,
        help="rows of the single transaction whose binlog task memory is measured (0: skip)",
    )
    parser.add_argument(
        "--writes-per-second",
        type=int,
        default=2000,
        help="steady single-row write rate during a second snapshot run (0: skip)",
    )
    parser.add_argument(
        "--configs",
        default=DEFAULT_CONFIGS,
        help="snapshot configs CHUNKxPER_BATCH[xFETCH], comma separated; the defaults "
        "(8096x64) are always measured (default: %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure every case this many times (rounds interleaved) and keep the fastest",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--jdbc-jar", default=None, help="JDBC driver jar (default: search)")
    parser.add_argument("--jdbc-fetchsize", type=int, default=10_000)
    parser.add_argument(
        "--jdbc-partitions",
        default="1,2",
        help="JDBC reader partition counts to measure, comma separated (default 1,2)",
    )
    parser.add_argument("--pymysql-fetch", type=int, default=4096, help="PyMySQL fetchmany size")
    parser.add_argument("--skip-snapshot", action="store_true")
    parser.add_argument("--skip-binlog", action="store_true")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run the source's chunk and binlog readers in-process (no Spark) under "
        "cProfile and print where the time goes",
    )
    parser.add_argument("--results-dir", default=str(HERE / "results"))
    return parser.parse_args(argv)


def snapshot_configs(text: str) -> list[SnapshotConfig]:
    from cdc_source.options import DEFAULT_CHUNK_SIZE, DEFAULT_CHUNKS_PER_BATCH

    default = SnapshotConfig(DEFAULT_CHUNK_SIZE, DEFAULT_CHUNKS_PER_BATCH)
    configs = [SnapshotConfig.parse(t.strip()) for t in text.split(",") if t.strip()]
    if default not in configs:
        configs.insert(0, default)
    return configs


def build_spark(master: str, jar: str | None):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("cdc-mysql-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
        .config("spark.driver.memory", "2g")
    )
    if jar:
        builder = builder.config("spark.jars", jar)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(call: Callable[[], Measurement]) -> Measurement:
    """Run one measurement, noting the machine's load average when it started."""
    load = load_average()
    measurement = call()
    measurement.details["load_1m"] = round(load, 2)
    return measurement


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Bench:
    def __init__(self, args: argparse.Namespace, info, work_dir: Path) -> None:
        self.args = args
        self.info = info
        self.work_dir = work_dir
        self.results: dict[str, Any] = {}
        self._checkpoints = 0

    def checkpoint(self) -> str:
        self._checkpoints += 1
        return str(self.work_dir / f"checkpoint-{self._checkpoints}")

    def source_options(self, table: str, **extra: str) -> dict[str, str]:
        options = dict(self.info.source_options())
        options["database-name"] = workload.DATABASE
        options["table-name"] = f"{workload.DATABASE}\\.{table}"
        options.update(extra)
        return options

    def raw_kwargs(self) -> dict[str, Any]:
        return {
            "host": self.info.host,
            "port": self.info.port,
            "user": self.info.user,
            "password": self.info.password,
        }

    # -- setup ----------------------------------------------------------------------------
    def load(self) -> None:
        args = self.args
        with self.info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {workload.DATABASE}")
            cur.execute(f"USE {workload.DATABASE}")
            cur.execute("SELECT VERSION()")
            self.results["server_version"] = str(cur.fetchone()[0])
            for name in (workload.TABLE, workload.WARMUP_TABLE):
                workload.create_table(cur, name)
            say(f"loading {args.rows:,} rows into {workload.DATABASE}.{workload.TABLE}")
            seconds = workload.load(cur, workload.TABLE, args.rows)
            workload.load(cur, workload.WARMUP_TABLE, WARMUP_ROWS)
            stats = workload.table_stats(cur, workload.TABLE)
            say(f"loaded in {seconds:.1f} s: {stats}")
            self.results["table"] = {**stats, "load_seconds": round(seconds, 2)}

    def warm_up(self, spark, jar: str | None) -> str | None:
        """Start Spark's Python workers and the JVM paths once, on a small table.

        Returns why the JDBC peer cannot run, or None when it can."""
        say(f"warm-up: cdc-mysql and JDBC on a {WARMUP_ROWS:,}-row table")
        run_available_now(
            spark, self.source_options(workload.WARMUP_TABLE), self.checkpoint(), "warm-up"
        )
        if not jar:
            return None
        try:
            self._jdbc(spark, jar, workload.WARMUP_TABLE, WARMUP_ROWS, 1)
        except Exception as err:  # the peer is optional: say why it is missing
            return f"the JDBC reader failed on the warm-up table: {short_error(err)}"
        return None

    # -- snapshot -------------------------------------------------------------------------
    def _jdbc(self, spark, jar: str, table: str, rows: int, partitions: int) -> Measurement:
        return jdbc_read(
            spark,
            jar,
            self.info.host,
            self.info.port,
            self.info.user,
            self.info.password,
            workload.DATABASE,
            table,
            rows,
            self.args.jdbc_fetchsize,
            partitions,
        )

    def _snapshot_peers(self, spark, jar: str | None, jar_problem: str) -> list[Measurement]:
        args = self.args
        rows = self.results["table"]["rows"]
        say("snapshot peer: PyMySQL SSCursor")
        peers = [
            timed(
                lambda: pymysql_scan(
                    self.raw_kwargs(), workload.DATABASE, workload.TABLE, args.pymysql_fetch
                )
            )
        ]
        for count in [int(p) for p in args.jdbc_partitions.split(",") if p.strip()]:
            name = f"jdbc x{count}" if count > 1 else "jdbc"
            if not jar:
                peers.append(skipped(name, jar_problem))
                continue
            say(f"snapshot peer: Spark JDBC, {count} partition(s)")
            try:
                peers.append(timed(lambda c=count: self._jdbc(spark, jar, workload.TABLE, rows, c)))
            except Exception as err:  # the peer is optional: say why it is missing
                peers.append(skipped(name, short_error(err)))
        return peers

    def _snapshot_source(self, spark, config: SnapshotConfig) -> Measurement:
        rows = self.results["table"]["rows"]
        say(f"snapshot: cdc-mysql {config.label}")
        run = timed(
            lambda: run_available_now(
                spark,
                self.source_options(workload.TABLE, **config.options()),
                self.checkpoint(),
                f"cdc-mysql {config.label}",
                {"config": config.__dict__},
            )
        )
        if run.rows != rows:
            run.details["warning"] = f"counted {run.rows:,} rows, the table has {rows:,}"
            say(f"WARNING: {run.name} counted {run.rows:,} rows, the table has {rows:,}")
        return run

    def snapshot(self, spark, jar: str | None, jar_problem: str) -> str:
        """Peers and every source config, ``--repeat`` rounds interleaved, best of each."""
        args = self.args
        configs = snapshot_configs(args.configs)
        peer_rounds: list[list[Measurement]] = []
        run_rounds: list[list[Measurement]] = []
        for _ in range(args.repeat):
            peer_rounds.append(self._snapshot_peers(spark, jar, jar_problem))
            run_rounds.append([self._snapshot_source(spark, c) for c in configs])
        peers = [best_of(list(group)) for group in zip(*peer_rounds)]
        runs = [best_of(list(group)) for group in zip(*run_rounds)]
        default = runs[0]
        best = max(runs, key=lambda r: r.rows_per_second)
        table_info = self.results["table"]
        title = (
            f"Snapshot: {table_info['rows']:,} rows (~{table_info['avg_row_text_bytes']:.0f} "
            f"bytes/row as text), Spark {args.master}, noop sink"
        )
        if args.repeat > 1:
            title += f", best of {args.repeat}"
        table = render(title, runs, peers)
        table += f"\ndefault config: {default.name}  {default.rows_per_second:,.0f} rows/s"
        table += f"\nbest config:    {best.name}  {best.rows_per_second:,.0f} rows/s"
        self.results["snapshot"] = {
            "runs": [r.to_json() for r in runs],
            "peers": [p.to_json() for p in peers],
            "default": default.name,
            "best": best.name,
        }
        return table

    # -- binlog ---------------------------------------------------------------------------
    def binlog(self, spark) -> str:
        from binlog_cases import Shape, create_wide, measure_shape

        args = self.args
        rows = self.results.get("table", {}).get("rows", args.rows)
        shapes = [
            (
                Shape(
                    f"{args.txn_rows}-row transactions", workload.TABLE, args.changes, args.txn_rows
                ),
                rows,
            )
        ]
        if args.single_changes:
            shapes.append(
                (
                    Shape("single-row autocommit changes", workload.TABLE, args.single_changes, 1),
                    rows,
                )
            )
        if args.wide_rows:
            with self.info.admin_connect(workload.DATABASE) as conn, conn.cursor() as cur:
                say(f"loading {args.wide_rows:,} rows into the 25-column typed table")
                create_wide(cur, args.wide_rows)
            shapes.append(
                (
                    Shape("wide typed table, 1000-row transactions", "wide", args.wide_rows, 1000),
                    args.wide_rows,
                )
            )
        tables, results = [], []
        for shape, table_rows in shapes:
            text, result = measure_shape(self, spark, shape, table_rows)
            tables.append(text)
            results.append(result)
        self.results["binlog"] = results
        return "\n\n".join(tables)

    def extras(self, spark) -> str:
        from binlog_cases import measure_big_transaction, measure_snapshot_under_writes

        args, lines = self.args, []
        if args.writes_per_second and not args.skip_snapshot:
            say(f"snapshot under a steady writer ({args.writes_per_second}/s)")
            text, result = measure_snapshot_under_writes(self, spark, args.writes_per_second)
            self.results["snapshot_under_writes"] = result
            lines.append(text)
        if args.big_txn_rows:
            say(f"binlog task memory over one {args.big_txn_rows:,}-row transaction")
            text, result = measure_big_transaction(self, args.big_txn_rows)
            self.results["big_transaction"] = result
            lines.append(text)
        return "\n".join(lines)


def write_results(args: argparse.Namespace, results: dict[str, Any]) -> Path:
    import pymysqlreplication
    import pyspark

    directory = Path(args.results_dir)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = directory / f"bench-{stamp}.json"
    document = {
        "when": dt.datetime.now().isoformat(timespec="seconds"),
        "args": vars(args),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "pyspark": pyspark.__version__,
            "mysql_replication": getattr(pymysqlreplication, "__version__", "unknown"),
        },
        **results,
    }
    path.write_text(json.dumps(document, indent=2, default=str))
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from cdc_source.embedded_server import EmbeddedServer

    jar = find_jdbc_jar(args.jdbc_jar)
    jar_problem = (
        "no JDBC driver jar found (install one with 'apt-get install -y libmariadb-java', "
        "or pass --jdbc-jar)"
    )
    work_dir = Path(tempfile.mkdtemp(prefix="cdc-mysql-bench-"))
    tables: list[str] = []
    began = time.perf_counter()
    server = EmbeddedServer(buffer_pool="1G")
    try:
        # start() inside the try: a server that fails half-way is stopped too (a `with`
        # block would not call __exit__ when __enter__ raises).
        bench = Bench(args, server.start(), work_dir)
        bench.load()
        spark = build_spark(args.master, jar)
        try:
            problem = bench.warm_up(spark, jar)
            if problem:
                jar, jar_problem = None, problem
            if not args.skip_snapshot:
                tables.append(bench.snapshot(spark, jar, jar_problem))
            if not args.skip_binlog:
                tables.append(bench.binlog(spark))
            extras = bench.extras(spark)
            if extras:
                tables.append(extras)
        finally:
            spark.stop()
        if args.profile:
            from profiling import profile_readers

            binlog = bench.results.get("binlog") or [{}]
            span = binlog[0].get("range")
            bench.results["profile"] = profile_readers(
                bench, PROFILE_SERVER_IDS, tuple(map(tuple, span)) if span else None
            )
    finally:
        server.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    bench.results["total_seconds"] = round(time.perf_counter() - began, 1)
    path = write_results(args, bench.results)
    print()
    print("\n\n".join(tables))
    print(f"\ntotal {bench.results['total_seconds']:.0f} s; results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
