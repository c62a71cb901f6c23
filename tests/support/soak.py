"""A long run under a steady write load with faults at random (seeded) moments, sampling
memory and offsets; ends with an exact rebuild. The suite runs a short version
(test_soak.py); ``python bench/soak.py`` runs it for 30 minutes on either server,
measurement only.

Spark runs on local[2,4] there (a failed task is retried, as on a cluster); it prints one
line per sample, one per fault with the lag it caused, and a summary, and writes the
results to bench/results/soak-<time>.json.

Faults, each kind in turn in an order the seed shuffles, at gaps drawn from the seed
around ``fault_every``: the server SIGKILLed and restarted on its data directory, every
source connection reset by the proxy in front of the server, every Spark Python worker
killed, the query stopped and started again from its checkpoint (a driver restart), and
the binlog rotated with the files the stream has committed past purged (within the
retention the source needs). A fault's lag is how long the stream took to commit past
the binlog head as it was when the fault struck.

Sampled: the RSS of the driver-side source process (the Python process Spark runs the
offset methods in; it writes its pid to ``CDC_MYSQL_STATE_DIR``), the largest RSS among
the Python workers, the JVM's RSS, the server's, and the size of the last offset.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.support.faults import CuttingProxy, EnduringWriter, kill_python_workers
from tests.support.server import TestServer
from tests.support.streams import (
    StreamRun,
    committed_batches,
    committed_position,
    read_output,
    server_head,
    source_offsets,
    wait_caught_up,
)
from tests.support.workload import AUTO_INCREMENT, check_exactly_once, load

FAULTS = (
    "server restart",
    "connections cut",
    "workers killed",
    "driver restart",
    "binlog rotated and purged",
)


@dataclass
class Sample:
    seconds: float
    batches: int
    driver_mib: float
    worker_mib: float
    jvm_mib: float
    server_mib: float
    offset_bytes: int

    def line(self) -> str:
        return (
            f"{self.seconds:7.0f} s  batches {self.batches:5d}  driver {self.driver_mib:6.1f} MiB"
            f"  worker {self.worker_mib:6.1f} MiB  jvm {self.jvm_mib:7.1f} MiB"
            f"  server {self.server_mib:6.1f} MiB  offset {self.offset_bytes:4d} B"
        )


@dataclass
class Fault:
    """One fault: when (seconds into the run), which, and the stream's lag after it (the
    seconds until it committed past the head seen when it struck; None if it never did)."""

    seconds: float
    kind: str
    head: tuple[int, int]
    lag: float | None = None


@dataclass
class SoakReport:
    samples: list[Sample] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    rows: int = 0
    writes: int = 0
    still_running: bool = False

    def growth(self, attribute: str) -> float:
        """Last sample's value minus the median of the first half's (MiB or bytes)."""
        values = [getattr(s, attribute) for s in self.samples]
        if len(values) < 4:
            return 0.0
        early = sorted(values[: len(values) // 2])[len(values) // 4]
        return values[-1] - early


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _driver_pid(state_dir: Path) -> int | None:
    newest = max(state_dir.glob("coordinator-*.json"), key=os.path.getmtime, default=None)
    return None if newest is None else json.loads(newest.read_text())["pid"]


def _workers_mib() -> float:
    from tests.support.faults import python_workers

    return max((rss_mib(pid) for pid in python_workers()), default=0.0)


def _jvm_mib() -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"org.apache.spark" in (entry / "cmdline").read_bytes():
                    total = max(total, rss_mib(int(entry.name)))
            except OSError:
                continue
    return total


def _server_mib(server: TestServer) -> float:
    process = getattr(server.embedded, "process", None) if server.embedded else None
    return rss_mib(process.pid) if process is not None and process.poll() is None else 0.0


def fault_plan(seed: int, seconds: float, fault_every: float) -> list[tuple[float, str]]:
    """When each fault strikes and which: every kind once per round, the rounds' order
    shuffled by ``seed``, the gaps drawn between half and one and a half ``fault_every``."""
    rng = random.Random(seed)
    plan, at, kinds = [], 0.0, []
    while True:
        at += rng.uniform(0.5, 1.5) * fault_every
        if at >= seconds:
            return plan
        if not kinds:
            kinds = list(FAULTS)
            rng.shuffle(kinds)
        plan.append((at, kinds.pop()))


def _offset_bytes(checkpoint: Path) -> int:
    offsets = source_offsets(checkpoint)
    if not offsets:
        return 0
    return len(json.dumps(offsets[max(offsets)], separators=(",", ":")))


def run_soak(
    spark,
    server: TestServer,
    work_dir: Path,
    state_dir: Path,
    seconds: float,
    fault_every: float,
    rows: int = 50_000,
    writes_per_second: float = 200.0,
    sample_every: float = 10.0,
    say: Callable[[str], None] = print,
    seed: int = 1,
) -> SoakReport:
    """Stream a table for ``seconds`` with faults about every ``fault_every`` seconds
    (:func:`fault_plan`), then let the query catch up with the head and check the output
    against the table."""
    database = server.fresh_database("soak")
    load(server, database, AUTO_INCREMENT, rows)
    proxy = CuttingProxy(server.info.port, interval=10**9, target_host=server.info.host).start()
    options = server.source_options(database, rf"{database}\.orders")
    options["port"] = str(proxy.port)
    run = StreamRun(spark, options, work_dir / "checkpoint", work_dir / "out")
    writer = EnduringWriter(
        server, database, AUTO_INCREMENT, rows, ops_per_second=writes_per_second
    )
    report = SoakReport()
    writer.start()
    query = run.start()
    began = time.monotonic()
    plan = fault_plan(seed, seconds, fault_every)
    next_sample = 0.0
    try:
        while (now := time.monotonic() - began) < seconds:
            if not query.isActive:
                raise AssertionError(f"the query died at {now:.0f} s: {query.exception()}")
            if plan and now >= plan[0][0]:
                _, kind = plan.pop(0)
                fault = Fault(now, kind, server_head(server))
                query = _inject(kind, server, proxy, run, query)
                report.faults.append(fault)
                say(f"{now:7.0f} s  fault: {kind}")
            for fault in report.faults:
                if fault.lag is None and committed_position(run.checkpoint) >= fault.head:
                    fault.lag = time.monotonic() - began - fault.seconds
                    say(f"{now:7.0f} s  caught up {fault.lag:.1f} s after the {fault.kind}")
            if now >= next_sample:
                pid = _driver_pid(state_dir)
                sample = Sample(
                    now,
                    max(committed_batches(run.checkpoint), default=-1) + 1,
                    rss_mib(pid) if pid else 0.0,
                    _workers_mib(),
                    _jvm_mib(),
                    _server_mib(server),
                    _offset_bytes(run.checkpoint),
                )
                report.samples.append(sample)
                say(sample.line())
                next_sample += sample_every
            time.sleep(0.5)
        writer.stop()
        wait_caught_up(server, run.checkpoint, query, 300)
        report.still_running = query.isActive
        for fault in report.faults:
            if fault.lag is None:  # caught up at the end: the lag is at most that long
                fault.lag = time.monotonic() - began - fault.seconds
    finally:
        writer.stop()
        query.stop()
        proxy.stop()
    output = read_output(spark, run.out)
    check_exactly_once(server, database, AUTO_INCREMENT, output)
    report.rows, report.writes = len(output), writer.operations
    longest_lag = max((f.lag or 0.0 for f in report.faults), default=0.0)
    say(
        f"exact: {report.rows} rows for {report.writes} writes and {rows} loaded rows; "
        f"{len(report.faults)} faults, the longest lag after one {longest_lag:.1f} s; "
        f"driver RSS growth {report.growth('driver_mib'):+.1f} MiB, "
        f"worker {report.growth('worker_mib'):+.1f} MiB, "
        f"offset {report.growth('offset_bytes'):+.0f} B"
    )
    return report


def _inject(kind: str, server: TestServer, proxy: CuttingProxy, run: StreamRun, query):
    """Strikes one fault; returns the running query (a new one after a driver restart)."""
    if kind == "server restart":
        server.embedded.kill()
        time.sleep(3)
        server.embedded.restart()
    elif kind == "connections cut":
        proxy.cut()
    elif kind == "workers killed":
        kill_python_workers()
    elif kind == "driver restart":
        query.stop()
        query = run.start()
    else:
        _rotate_and_purge(server, run.checkpoint)
    return query


def _rotate_and_purge(server: TestServer, checkpoint: Path) -> None:
    """A new binlog file, and every file before the one the last committed batch ended in
    purged: the stream never reads behind its committed position again."""
    server.execute("FLUSH BINARY LOGS")
    file_number, _ = committed_position(checkpoint)
    if file_number:
        head_file, _ = server.binlog_head()
        base = head_file.rsplit(".", 1)[0]
        server.execute(f"PURGE BINARY LOGS TO '{base}.{file_number:06d}'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--fault-every", type=float, default=180.0, help="seconds")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--writes-per-second", type=float, default=200.0)
    parser.add_argument("--seed", type=int, default=1, help="picks the faults' order and moments")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="cdc-mysql-soak-"))
    state_dir = work / "state"
    state_dir.mkdir()
    os.environ["CDC_MYSQL_STATE_DIR"] = str(state_dir)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("cdc-mysql-soak")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    server = TestServer()
    try:
        report = run_soak(
            spark,
            server,
            work,
            state_dir,
            args.minutes * 60,
            args.fault_every,
            rows=args.rows,
            writes_per_second=args.writes_per_second,
            seed=args.seed,
        )
    finally:
        server.stop()
        spark.stop()
    results = Path(__file__).resolve().parents[2] / "bench" / "results"
    results.mkdir(exist_ok=True)
    name = results / f"soak-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    name.write_text(json.dumps(asdict(report), indent=1))
    print(f"written {name}")
    return 0 if report.still_running else 1


if __name__ == "__main__":
    sys.exit(main())
