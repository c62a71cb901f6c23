"""A long run under a steady write load with a fault every few minutes, sampling memory and
offsets; ends with an exact rebuild. The suite runs a short version (test_soak.py); as a
program it runs 30 minutes, measurement only:

    python -m tests.support.soak                       # 30 minutes, a fault every 3 minutes
    python -m tests.support.soak --minutes 10 --fault-every 60

Spark runs on local[2,4] there (a failed task is retried, as on a cluster); it prints one
line per sample and a summary, and writes the results to bench/results/soak-<time>.json.

Faults, in turn: the server SIGKILLed and restarted on its data directory, every source
connection reset by the proxy in front of the server, every Spark Python worker killed.
Sampled: the RSS of the driver-side source process (the Python process Spark runs the
offset methods in; it writes its pid to ``CDC_MYSQL_STATE_DIR``), the largest RSS among
the Python workers, the JVM's RSS, and the size of the last offset.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
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
    read_output,
    source_offsets,
    wait_caught_up,
)
from tests.support.workload import AUTO_INCREMENT, check_exactly_once, load

FAULTS = ("server restart", "connections cut", "workers killed")


@dataclass
class Sample:
    seconds: float
    batches: int
    driver_mib: float
    worker_mib: float
    jvm_mib: float
    offset_bytes: int

    def line(self) -> str:
        return (
            f"{self.seconds:7.0f} s  batches {self.batches:5d}  driver {self.driver_mib:6.1f} MiB"
            f"  worker {self.worker_mib:6.1f} MiB  jvm {self.jvm_mib:7.1f} MiB"
            f"  offset {self.offset_bytes:4d} B"
        )


@dataclass
class SoakReport:
    samples: list[Sample] = field(default_factory=list)
    faults: list[tuple[float, str]] = field(default_factory=list)
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
) -> SoakReport:
    """Stream a table for ``seconds`` with a fault every ``fault_every`` seconds, then let
    the same query catch up with the head and check the output against the table."""
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
    next_sample, next_fault, fault_index = 0.0, fault_every, 0
    try:
        while (now := time.monotonic() - began) < seconds:
            if not query.isActive:
                raise AssertionError(f"the query died at {now:.0f} s: {query.exception()}")
            if now >= next_fault:
                kind = FAULTS[fault_index % len(FAULTS)]
                _inject(kind, server, proxy)
                report.faults.append((now, kind))
                say(f"{now:7.0f} s  fault: {kind}")
                fault_index += 1
                next_fault += fault_every
            if now >= next_sample:
                pid = _driver_pid(state_dir)
                sample = Sample(
                    now,
                    max(committed_batches(run.checkpoint), default=-1) + 1,
                    rss_mib(pid) if pid else 0.0,
                    _workers_mib(),
                    _jvm_mib(),
                    _offset_bytes(run.checkpoint),
                )
                report.samples.append(sample)
                say(sample.line())
                next_sample += sample_every
            time.sleep(0.5)
        writer.stop()
        wait_caught_up(server, run.checkpoint, query, 300)
        report.still_running = query.isActive
    finally:
        writer.stop()
        query.stop()
        proxy.stop()
    output = read_output(spark, run.out)
    check_exactly_once(server, database, AUTO_INCREMENT, output)
    report.rows, report.writes = len(output), writer.operations
    say(
        f"exact: {report.rows} rows for {report.writes} writes and {rows} loaded rows; "
        f"{len(report.faults)} faults; driver RSS growth {report.growth('driver_mib'):+.1f} MiB, "
        f"worker {report.growth('worker_mib'):+.1f} MiB, "
        f"offset {report.growth('offset_bytes'):+.0f} B"
    )
    return report


def _inject(kind: str, server: TestServer, proxy: CuttingProxy) -> None:
    if kind == "server restart":
        server.embedded.kill()
        time.sleep(3)
        server.embedded.restart()
    elif kind == "connections cut":
        proxy.cut()
    else:
        kill_python_workers()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--fault-every", type=float, default=180.0, help="seconds")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--writes-per-second", type=float, default=200.0)
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
