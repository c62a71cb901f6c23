"""cdc-mysql throughput against its peers, all measured in one run on an embedded server.

    python bench/run.py                    # 10,000,000 + 2,000,000 rows, 1,000,000 changes
    python bench/run.py --rows 100000 --typed-rows 20000 --changes 20000 --fresh-data

The tables are generated once, in a server directory kept between runs (--keep-data),
and reused by every later run that asks for the same rows (bench/kept_data.py).
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

import kept_data
import workload
from cdc_runs import SnapshotConfig, run_available_now, run_batch_read, streaming_floor
from ceiling import (
    register_replay_source,
    replay_batch,
    replay_options,
    replay_streaming,
    source_schema_json,
    write_replay_file,
)
from cpu_use import CpuMeter, describe, jvm_pid
from peers import find_jdbc_jar, jdbc_read, pymysql_scan, short_error
from report import Measurement, best_of, load_average, render, skipped
from typed_table import TYPED_TABLE, TYPED_WARMUP_ROWS, TYPED_WARMUP_TABLE, load_typed

HERE = Path(__file__).resolve().parent
DEFAULT_CONFIGS = "8096x64,32768x32"
WARMUP_ROWS = 200_000  # enough rows that the JVM has compiled the hot paths of a big read
PROFILE_SERVER_IDS = (6101, 6102)
WARM_UP_READS = 3
BUFFER_POOL = "6G"  # the default tables take 3.1 GB in InnoDB: all cached, with room
FLAVOUR = "mariadb"  # the embedded server this bench starts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rows",
        type=int,
        default=10_000_000,
        help="rows of the snapshot table, orders (default %(default)s)",
    )
    parser.add_argument(
        "--changes",
        type=int,
        default=1_000_000,
        help="row updates for the binlog phase, on a table of min(--rows, 1,000,000) rows of "
        "its own (default %(default)s)",
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
        help="snapshot configs CHUNKxPER_BATCH[xFETCH], comma separated; the defaults, "
        "and the defaults with 1, 2 and 4 tasks, are always measured (default: %(default)s)",
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
        default="1,auto",
        help="JDBC reader partition counts to measure, comma separated; 'auto' is the "
        "source's default snapshot parallelism (default %(default)s)",
    )
    parser.add_argument(
        "--typed-rows",
        type=int,
        default=2_000_000,
        help="rows of the 25-column typed table read by the source and by JDBC (0: skip; "
        "default %(default)s)",
    )
    parser.add_argument(
        "--keep-data",
        default=None,
        metavar="DIR",
        help="the server directory whose tables are generated once and reused by later "
        "runs (default: ~/.cache/cdc-mysql-bench/<flavour>); delete it to generate them anew",
    )
    parser.add_argument(
        "--fresh-data",
        action="store_true",
        help="a throwaway server directory instead, loaded in this run and removed after it",
    )
    parser.add_argument(
        "--buffer-pool",
        default=BUFFER_POOL,
        help="the server's InnoDB buffer pool, large enough to cache the tables "
        "(default %(default)s)",
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


def jdbc_partition_counts(text: str) -> list[int]:
    from cdc_source.options import default_snapshot_parallelism

    counts = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        count = default_snapshot_parallelism() if part == "auto" else int(part)
        if count not in counts:
            counts.append(count)
    return counts


def snapshot_configs(text: str) -> list[SnapshotConfig]:
    """The source's defaults first, then the given configs, then the defaults with 1, 2
    and 4 snapshot tasks (scaling on this machine)."""
    configs = [SnapshotConfig.defaults()]
    configs += [SnapshotConfig.parse(t.strip()) for t in text.split(",") if t.strip()]
    configs += [SnapshotConfig.tasks(n) for n in (1, 2, 4)]
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
    def __init__(self, args: argparse.Namespace, info, work_dir: Path, server_pid: int) -> None:
        self.args = args
        self.info = info
        self.work_dir = work_dir
        self.server_pid = server_pid
        self.results: dict[str, Any] = {}
        self._checkpoints = 0

    def metered(self, spark, call: Callable[[], Measurement]) -> Measurement:
        """``timed(call)``, with the CPU seconds of the server, the JVM and Spark's Python
        processes during it (bench/cpu_use.py) in ``details["cpu_seconds"]``."""
        if not os.path.isdir("/proc"):
            return timed(call)
        with CpuMeter(self.server_pid, jvm_pid(spark)) as meter:
            measurement = timed(call)
        measurement.details["cpu_seconds"] = meter.seconds
        measurement.details["jit_cpu_seconds"] = meter.jit_seconds
        return measurement

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
        """The load step: every table this run reads, each loaded unless a kept directory
        holds it already (bench/kept_data.py); then the row counts and sizes (a full scan,
        which also brings a reused table into the buffer pool before anything is timed),
        and the binlog files of earlier runs purged."""
        began = time.perf_counter()
        with self.info.admin_connect() as conn, conn.cursor() as cur:
            kept_data.prepare(cur)
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {workload.DATABASE}")
            cur.execute(f"USE {workload.DATABASE}")
            cur.execute("SELECT VERSION()")
            self.results["server_version"] = str(cur.fetchone()[0])
            loads = {t: self._ensure(cur, t, rows, fill) for t, rows, fill in self._tables(cur)}
            self.results["table"] = self._stats(cur, workload.TABLE, loads)
            if TYPED_TABLE in loads:
                self.results["typed_table"] = self._stats(cur, TYPED_TABLE, loads)
        self.purge_binary_logs()
        seconds = time.perf_counter() - began
        self.results["load_step_seconds"] = round(seconds, 2)
        say(f"load step: {seconds:.1f} s")

    def purge_binary_logs(self) -> None:
        """Rotate the binlog and remove the older files: before measuring (the loads and
        earlier runs wrote them) and after (this run's changes, up to gigabytes)."""
        with self.info.admin_connect() as conn, conn.cursor() as cur:
            kept_data.purge_binary_logs(cur)

    def _tables(self, cur) -> list[tuple[str, int, Callable[[], float]]]:
        """(table, rows, what fills it on ``cur`` and returns its seconds) of every table
        this run reads."""
        from binlog_cases import WIDE_TABLE, create_wide

        args = self.args

        def orders_like(name: str, rows: int) -> Callable[[], float]:
            def fill() -> float:
                workload.create_table(cur, name)
                return workload.load(cur, name, rows)

            return fill

        def wide() -> float:
            began = time.perf_counter()
            create_wide(cur, args.wide_rows)
            return time.perf_counter() - began

        tables = [
            (workload.TABLE, args.rows, orders_like(workload.TABLE, args.rows)),
            (workload.WARMUP_TABLE, WARMUP_ROWS, orders_like(workload.WARMUP_TABLE, WARMUP_ROWS)),
        ]
        if args.typed_rows and not args.skip_snapshot:
            tables.append((TYPED_TABLE, args.typed_rows, lambda: load_typed(cur, args.typed_rows)))
            tables.append(
                (
                    TYPED_WARMUP_TABLE,
                    TYPED_WARMUP_ROWS,
                    lambda: load_typed(cur, TYPED_WARMUP_ROWS, TYPED_WARMUP_TABLE),
                )
            )
        if not args.skip_binlog:
            rows = self.changes_rows()
            tables.append((workload.CHANGES_TABLE, rows, orders_like(workload.CHANGES_TABLE, rows)))
            if args.wide_rows:
                tables.append((WIDE_TABLE, args.wide_rows, wide))
        return tables

    def changes_rows(self) -> int:
        """Rows of the table the binlog phase updates: as many as the snapshot table up to
        1,000,000, so that a bigger snapshot table does not change the binlog phase."""
        return min(self.args.rows, workload.CHANGES_TABLE_ROWS)

    def _ensure(self, cur, table: str, rows: int, fill: Callable[[], float]) -> float | None:
        """Load ``table`` unless it is kept with ``rows`` rows; its load seconds, or None."""
        seconds = kept_data.ensure(cur, workload.DATABASE, table, rows, fill)
        if seconds is None:
            say(f"{workload.DATABASE}.{table}: {rows:,} rows kept from an earlier run")
        else:
            say(f"{workload.DATABASE}.{table}: loaded {rows:,} rows in {seconds:.1f} s")
        return seconds

    def _stats(self, cur, table: str, loads: dict[str, float | None]) -> dict[str, Any]:
        stats = workload.table_stats(cur, table)
        seconds = loads[table]
        say(f"{table}: {stats}")
        return {
            **stats,
            "load_seconds": None if seconds is None else round(seconds, 2),
            "reused": seconds is None,
        }

    def warm_up(self, spark, jar: str | None) -> str | None:
        """Start Spark's Python workers and have the JVM compile the paths of each table's
        columns, on a small table of each shape, read by the source (a streaming query and
        ``spark.read``, whose scans are compiled apart) and by JDBC: the first read of a
        shape otherwise pays that compiling (4-5 CPU s of the JIT compilers for the typed
        table's 25 columns on two cores), which a long-running query pays once. Each is
        read ``WARM_UP_READS`` times: after one read, the first measured streaming query
        of orders still cost the JIT compilers 2.2 CPU s, against 0.5-0.6 for the same
        query later in the round.

        Returns why the JDBC peer cannot run, or None when it can."""
        shapes = [(workload.WARMUP_TABLE, WARMUP_ROWS)]
        if self.args.typed_rows and not self.args.skip_snapshot:
            shapes.append((TYPED_WARMUP_TABLE, TYPED_WARMUP_ROWS))
        problem = None
        for table, rows in shapes:
            say(f"warm-up: cdc-mysql and JDBC on {table}, {rows:,} rows, {WARM_UP_READS} times")
            for _ in range(WARM_UP_READS):
                run_available_now(spark, self.source_options(table), self.checkpoint(), "warm-up")
                run_batch_read(spark, self.source_options(table), rows, "warm-up")
                if not jar or problem:
                    continue
                try:
                    self._jdbc(spark, jar, table, rows, 1)
                except Exception as err:  # the peer is optional: say why it is missing
                    problem = f"the JDBC reader failed on the warm-up table: {short_error(err)}"
        return problem

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

    def _raw_client_peers(self, table: str) -> list[Measurement]:
        """PyMySQL's unbuffered cursor over orders (none for the typed table)."""
        if table != workload.TABLE:
            return []
        say("snapshot peer: PyMySQL SSCursor")
        return [
            timed(
                lambda: pymysql_scan(
                    self.raw_kwargs(), workload.DATABASE, table, self.args.pymysql_fetch
                )
            )
        ]

    def _jdbc_peers(
        self, spark, jar: str | None, jar_problem: str, table: str, rows: int
    ) -> list[Measurement]:
        args = self.args
        peers = []
        for count in jdbc_partition_counts(args.jdbc_partitions):
            name = f"jdbc x{count}" if count > 1 else "jdbc"
            if not jar:
                peers.append(skipped(name, jar_problem))
                continue
            say(f"snapshot peer: Spark JDBC, {count} partition(s), {table}")
            try:
                peers.append(
                    self.metered(spark, lambda c=count: self._jdbc(spark, jar, table, rows, c))
                )
            except Exception as err:  # the peer is optional: say why it is missing
                peers.append(skipped(name, short_error(err)))
        return peers

    def _snapshot_source(self, spark, config: SnapshotConfig, table: str, rows: int) -> Measurement:
        say(f"snapshot: cdc-mysql {config.label}, {table}")
        run = self.metered(
            spark,
            lambda: run_available_now(
                spark,
                self.source_options(table, **config.options()),
                self.checkpoint(),
                f"cdc-mysql {config.label}",
                {"config": config.options()},
            ),
        )
        if run.rows != rows:
            run.details["warning"] = f"counted {run.rows:,} rows, the table has {rows:,}"
            say(f"WARNING: {run.name} counted {run.rows:,} rows, the table has {rows:,}")
        return run

    def snapshot(self, spark, jar: str | None, jar_problem: str) -> str:
        """For each table: the peers and every source config, ``--repeat`` rounds
        interleaved, best of each. The 200-byte table gets every config, the typed table
        the defaults."""
        from cdc_source.options import default_snapshot_parallelism

        floor = min(streaming_floor(spark, self.checkpoint()) for _ in range(3))
        self.results["streaming_floor_seconds"] = round(floor, 3)
        orders = self.results["table"]["rows"]
        tables = [(workload.TABLE, orders, snapshot_configs(self.args.configs))]
        if self.args.typed_rows:
            typed_rows = self.results["typed_table"]["rows"]
            tables.append((TYPED_TABLE, typed_rows, [SnapshotConfig.defaults()]))
        texts = []
        self.results["snapshot"] = {}
        for table, rows, configs in tables:
            text, result = self._snapshot_table(spark, jar, jar_problem, table, rows, configs)
            texts.append(text)
            self.results["snapshot"][table] = result
        texts.append(
            f"Spark's own fixed cost of an availableNow query of a Python data source (one "
            f"row, same run): {floor:.2f} s; the source's default snapshot parallelism here: "
            f"{default_snapshot_parallelism()} tasks"
        )
        return "\n\n".join(texts)

    def _snapshot_table(self, spark, jar, jar_problem, table, rows, configs) -> tuple[str, dict]:
        args = self.args
        replay = self._replay_options(spark, table, rows)
        peer_rounds: list[list[Measurement]] = []
        run_rounds: list[list[Measurement]] = []
        for _ in range(args.repeat):
            jdbc = self._jdbc_peers(spark, jar, jar_problem, table, rows)
            runs = [self._snapshot_source(spark, c, table, rows) for c in configs]
            say(f"snapshot: cdc-mysql spark.read (batch), {table}")
            runs.append(
                timed(
                    lambda: run_batch_read(
                        spark, self.source_options(table), rows, "cdc-mysql spark.read, defaults"
                    )
                )
            )
            say(f"snapshot ceiling: Spark ingesting the source's batches from memory, {table}")
            runs.append(
                self.metered(spark, lambda: replay_streaming(spark, replay, self.checkpoint()))
            )
            runs.append(timed(lambda: replay_batch(spark, replay, rows)))
            run_rounds.append(runs)
            peer_rounds.append(jdbc)
        # Once, after the rounds: the raw client reads for minutes without Spark, and Spark
        # stops Python workers idle for a minute, so the source's next query would start
        # its workers again (a query's start, not the rate of its batches).
        peers = self._raw_client_peers(table)
        peers += [best_of(list(group)) for group in zip(*peer_rounds)]
        runs = [best_of(list(group)) for group in zip(*run_rounds)]
        default = runs[0]
        best = max((r for r in runs if r.kind == "cdc-mysql"), key=lambda r: r.rows_per_second)
        stats = self.results["table"] if table == workload.TABLE else self.results["typed_table"]
        title = (
            f"Snapshot of {table}: {rows:,} rows (~{stats['avg_row_text_bytes']:.0f} bytes/row "
            f"as text), Spark {args.master}, noop sink"
        )
        if args.repeat > 1:
            title += f", best of {args.repeat}"
        text = render(title, runs, peers)
        share = default.details.get("batch_overhead_share")
        durations = default.details.get("duration_ms", {})
        batches = default.details.get("batches_with_rows", 0)
        in_batches = durations.get("triggerExecution", 0) / 1000
        text += f"\ndefaults: {default.rows_per_second:,.0f} rows/s over the whole query"
        if in_batches:
            text += (
                f"; {rows / in_batches:,.0f} rows/s inside its {batches} batch(es) "
                f"({in_batches:.2f} s)"
            )
        floor = self.results["streaming_floor_seconds"]
        text += (
            f"\nthe per-query floor ({floor:.2f} s, below) is {floor / default.seconds:.1%} "
            f"of the defaults' whole query ({default.seconds:.2f} s)"
        )
        if share is not None:
            text += f"\nper-batch overhead at the defaults: {share:.1%} of the batches' time"
        text += f"\nbest config: {best.name}  {best.rows_per_second:,.0f} rows/s"
        text += cpu_lines([default, *peers, *runs], rows)
        result = {
            "runs": [r.to_json() for r in runs],
            "peers": [p.to_json() for p in peers],
            "default": default.name,
            "best": best.name,
            "batch_overhead_share": share,
        }
        return text, result

    def _replay_options(self, spark, table: str, rows: int) -> dict[str, str]:
        """The ceiling's input (bench/ceiling.py): the source's batches of ``table`` in an
        Arrow file, its Spark schema, and the source's default snapshot parallelism."""
        from cdc_source.options import default_snapshot_parallelism

        say(f"snapshot ceiling: writing the source's batches of {table} to an Arrow file")
        path = self.work_dir / f"replay-{table}.arrow"
        written = write_replay_file(self, table, path)
        if written != rows:
            raise RuntimeError(f"the replay file of {table} holds {written:,} rows, not {rows:,}")
        schema = source_schema_json(spark, self.source_options(table))
        register_replay_source(spark)
        return replay_options(path, schema, default_snapshot_parallelism())

    # -- binlog ---------------------------------------------------------------------------
    def binlog(self, spark) -> str:
        from binlog_cases import WIDE_TABLE, Shape, floor_driver_cpu, measure_shape

        args = self.args
        rows, table = self.changes_rows(), workload.CHANGES_TABLE
        shapes = [
            (Shape(f"{args.txn_rows}-row transactions", table, args.changes, args.txn_rows), rows)
        ]
        if args.single_changes:
            shapes.append(
                (Shape("single-row autocommit changes", table, args.single_changes, 1), rows)
            )
        if args.wide_rows:
            shapes.append(
                (
                    Shape(
                        "wide typed table, 1000-row transactions", WIDE_TABLE, args.wide_rows, 1000
                    ),
                    args.wide_rows,
                )
            )
        tables, results = [], []
        floor_cpu_s = floor_driver_cpu(self, spark)
        for shape, table_rows in shapes:
            text, result = measure_shape(self, spark, shape, table_rows, floor_cpu_s)
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


def cpu_lines(measurements: list[Measurement], rows: int) -> str:
    """One line per run that was metered: whose CPU seconds it spent."""
    seen, lines = set(), []
    for run in measurements:
        seconds = run.details.get("cpu_seconds")
        if seconds is None or run.name in seen:
            continue
        seen.add(run.name)
        jit = run.details.get("jit_cpu_seconds")
        lines.append(f"  {run.name}: {describe(seconds, rows, jit)}")
    if not lines:
        return ""
    return "\nCPU seconds during the run (server, Spark's JVM, Spark's Python processes):\n" + (
        "\n".join(lines)
    )


def data_line(server, results: dict[str, Any]) -> str:
    """Where the tables were and whether this run loaded or reused them."""
    where = f"kept in {server.base_dir}" if server.kept else "in a throwaway directory"
    reused = results["table"]["reused"]
    return (
        f"tables {where}: orders {'reused' if reused else 'loaded'}; "
        f"load step {results['load_step_seconds']:.1f} s"
    )


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


def keep_dir(args: argparse.Namespace) -> Path | None:
    """The server directory kept between runs, or None for a throwaway one."""
    if args.fresh_data:
        return None
    if args.keep_data:
        return Path(args.keep_data).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "cdc-mysql-bench" / FLAVOUR


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
    server = EmbeddedServer(buffer_pool=args.buffer_pool, keep_dir=keep_dir(args))
    try:
        # start() inside the try: a server that fails half-way is stopped too (a `with`
        # block would not call __exit__ when __enter__ raises).
        info = server.start()
        bench = Bench(args, info, work_dir, server.process.pid)
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
        bench.purge_binary_logs()
    finally:
        server.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    bench.results["total_seconds"] = round(time.perf_counter() - began, 1)
    path = write_results(args, bench.results)
    print()
    print("\n\n".join(tables))
    print(f"\n{data_line(server, bench.results)}")
    print(f"\ntotal {bench.results['total_seconds']:.0f} s; results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
