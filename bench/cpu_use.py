"""Where the cores go during one run: CPU seconds of the server, Spark's JVM and Spark's
Python processes, read from ``/proc`` before and after (Linux only).

On a machine where the server, the JVM and the Python workers share two cores, a read
that keeps both cores busy is decided by the CPU it spends per row in all three, not by
any one of them; these figures show that split for the source and for the JDBC peer.

Accounting: a process's CPU is its own ``utime + stime`` plus ``cutime + cstime``, the
CPU of children it has reaped. A Python process that ran and exited during the run (the
streaming source's planner, for one) is reaped by its parent, so its whole CPU shows up
as the difference of the parent's ``cutime + cstime``; the JVM's reaped children are
Python processes, so they are counted as Python, not JVM. Before and after a run the
meter waits (at most ``SETTLE_SECONDS``) until every child of the JVM is one of Spark's
long-lived worker daemons: the streaming source's runner, a process of its own per query,
is then gone and counted, not half in one run and half in the next.

A worker daemon (``pyspark.daemon``) ignores SIGCHLD, so the kernel reaps its workers
itself and their CPU never reaches the daemon's ``cutime``: a worker that exits during a
run (Spark stops workers idle for a minute, and any that fails) would take the CPU it
spent with it, and the reading before the run, which counted it, would then take its
earlier CPU off the run's. The meter therefore reads the daemons' children every
``WORKER_SAMPLE_SECONDS`` while the run lasts, and counts a worker gone by the end by
its last reading (:func:`vanished_seconds`): at most one interval of its CPU is lost.

Of the JVM's CPU, the part its JIT compilers spent is counted apart (its compiler
threads, ``C1 CompilerThread*`` and ``C2 CompilerThread*``, read from
``/proc/<jvm>/task``): each new query's generated classes, and Spark's own code not yet
compiled, cost a short run seconds of it, which a JVM running one query for weeks has paid
long before. HotSpot starts and stops compiler threads as their queue grows and shrinks,
so they are read with the workers, every ``WORKER_SAMPLE_SECONDS``, and a thread gone by
the end counts by its last reading (:func:`grown_seconds`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
SETTLE_SECONDS = 10.0
WORKER_SAMPLE_SECONDS = 0.1
WORKER_SCAN_SECONDS = 0.5  # a walk of every process, to find new workers


@dataclass(frozen=True)
class ProcessCpu:
    """One process's CPU seconds: its own, and its reaped children's."""

    pid: int
    parent: int
    name: str
    own: float
    children: float
    zombie: bool = False  # exited, not yet reaped: its times are still reported


def parse_stat(text: str, ticks_per_second: float) -> ProcessCpu:
    """``/proc/<pid>/stat``; the name sits in parentheses and may hold spaces."""
    head, _, tail = text.rpartition(")")
    pid_text, _, name = head.partition(" (")
    fields = tail.split()
    # after the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return ProcessCpu(
        int(pid_text),
        int(fields[1]),
        name,
        (utime + stime) / ticks_per_second,
        (cutime + cstime) / ticks_per_second,
        fields[0] == "Z",
    )


# The kernel keeps 15 bytes of a thread's name: HotSpot's "C2 CompilerThread0" reads so.
COMPILER_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def compiler_threads(jvm: int) -> dict[int, float]:
    """The CPU seconds so far of each of the JVM's JIT compiler threads, by thread id."""
    ticks = float(os.sysconf("SC_CLK_TCK"))
    found: dict[int, float] = {}
    try:
        entries = list((PROC / str(jvm) / "task").iterdir())
    except OSError:  # the JVM is gone
        return found
    for entry in entries:
        try:
            thread = parse_stat((entry / "stat").read_text(), ticks)
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
        if thread.name.startswith(COMPILER_THREADS):
            found[thread.pid] = thread.own
    return found


def grown_seconds(before: dict[int, float], last: dict[int, float]) -> float:
    """CPU seconds threads spent since ``before``, from each one's last reading
    (``last``): a thread started since counts from zero, and one gone since keeps the
    reading ``last`` holds of it."""
    return sum(seconds - before.get(tid, 0.0) for tid, seconds in last.items())


def read_processes() -> dict[int, ProcessCpu]:
    ticks = float(os.sysconf("SC_CLK_TCK"))
    found: dict[int, ProcessCpu] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found[int(entry.name)] = parse_stat((entry / "stat").read_text(), ticks)
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return found


def descendants(processes: dict[int, ProcessCpu], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for process in processes.values():
        children.setdefault(process.parent, []).append(process.pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def split_by_group(processes: dict[int, ProcessCpu], server: int, jvm: int) -> dict[str, float]:
    """CPU seconds so far of the server, the JVM and the JVM's Python descendants."""
    python = descendants(processes, jvm)
    groups = {"server": 0.0, "jvm": 0.0, "spark python": 0.0}
    if server in processes:
        groups["server"] = processes[server].own + processes[server].children
    if jvm in processes:
        groups["jvm"] = processes[jvm].own
        groups["spark python"] = processes[jvm].children
    for pid in python:
        groups["spark python"] += processes[pid].own + processes[pid].children
    return groups


def transient_children(processes: dict[int, ProcessCpu], jvm: int) -> list[int]:
    """Running children of the JVM that are not Spark's reused worker daemons
    (``pyspark.daemon``). A zombie is left out: it has stopped running, and the JVM may
    never reap it (a ``bash`` it started, here)."""
    found = []
    for process in processes.values():
        if process.parent != jvm or process.zombie:
            continue
        try:
            command = (PROC / str(process.pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if b"pyspark.daemon" not in command:
            found.append(process.pid)
    return found


def settled_processes(jvm: int) -> dict[int, ProcessCpu]:
    """The processes, once the JVM's per-query children have exited (or the wait ran out)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        processes = read_processes()
        if not transient_children(processes, jvm) or time.monotonic() > deadline:
            return processes
        time.sleep(0.05)


def daemon_children(processes: dict[int, ProcessCpu], jvm: int) -> set[int]:
    """The children of the JVM's children: the workers its worker daemons forked (and
    nothing the JVM reaps itself)."""
    daemons = {p.pid for p in processes.values() if p.parent == jvm}
    return {p.pid for p in processes.values() if p.parent in daemons}


def vanished_seconds(last_seen: dict[int, float], after: dict[int, ProcessCpu]) -> float:
    """The CPU seconds, by their last reading (``last_seen``: own and reaped children's),
    of daemon workers gone by a run's end: the reading before the run counted them, the
    one after it cannot, so the whole of each is added back."""
    return sum(seconds for pid, seconds in last_seen.items() if pid not in after)


def sample_until(
    stop,
    find: Callable[[], set[int]],
    last: dict[int, float],
    interval: float,
    scan_every: float,
    also: Callable[[], None] | None = None,
) -> None:
    """Until ``stop`` is set: every ``interval`` seconds, the CPU (own and reaped
    children's) of each process ``find`` named, into ``last``, whose readings of a process
    that is gone stay; ``find`` is called every ``scan_every`` seconds (a walk of every
    process, kept off each reading); ``also``, where given, with each reading."""
    ticks = float(os.sysconf("SC_CLK_TCK"))
    known: set[int] = set()
    next_scan = 0.0
    while not stop.is_set():
        if time.monotonic() >= next_scan:
            known |= find()
            next_scan = time.monotonic() + scan_every
        for pid in sorted(known):
            try:
                process = parse_stat((PROC / str(pid) / "stat").read_text(), ticks)
            except (OSError, ValueError, IndexError):  # gone: its last reading stays
                known.discard(pid)
                continue
            last[pid] = process.own + process.children
        if also is not None:
            also()
        stop.wait(interval)


class CpuMeter:
    """``with CpuMeter(server_pid, jvm_pid) as meter: ...``; then ``meter.seconds`` and
    ``meter.jit_seconds`` (the part of ``seconds["jvm"]`` the JIT compilers spent)."""

    def __init__(self, server: int, jvm: int) -> None:
        import threading

        self.server, self.jvm = server, jvm
        self.seconds: dict[str, float] = {}
        self.jit_seconds = 0.0
        self._before: dict[str, float] = {}
        self._compilers_before: dict[int, float] = {}
        self._compilers_last: dict[int, float] = {}
        self._last_seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_workers, daemon=True)

    def __enter__(self) -> CpuMeter:
        processes = settled_processes(self.jvm)
        self._before = split_by_group(processes, self.server, self.jvm)
        for pid in daemon_children(processes, self.jvm):  # a worker gone before its first sample
            self._last_seen[pid] = processes[pid].own + processes[pid].children
        self._compilers_before = compiler_threads(self.jvm)
        self._compilers_last = dict(self._compilers_before)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._compilers_last.update(compiler_threads(self.jvm))
        self.jit_seconds = round(grown_seconds(self._compilers_before, self._compilers_last), 2)
        processes = settled_processes(self.jvm)
        after = split_by_group(processes, self.server, self.jvm)
        after["spark python"] += vanished_seconds(self._last_seen, processes)
        self.seconds = {k: round(after[k] - self._before[k], 2) for k in after}

    def _sample_workers(self) -> None:
        sample_until(
            self._stop,
            lambda: daemon_children(read_processes(), self.jvm),
            self._last_seen,
            WORKER_SAMPLE_SECONDS,
            WORKER_SCAN_SECONDS,
            also=lambda: self._compilers_last.update(compiler_threads(self.jvm)),
        )


def jvm_pid(spark) -> int:
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())


def describe(seconds: dict[str, float], rows: int, jit: float | None = None) -> str:
    """Each process's CPU seconds and its seconds per million rows, then their total;
    ``jit``, where known, the part of the JVM's that its JIT compilers spent."""
    total = sum(seconds.values())

    def one(name: str, value: float) -> str:
        text = f"{name} {value:.2f} ({value / rows * 1e6 if rows else 0.0:.2f}/M"
        if name == "jvm" and jit is not None:
            text += f"; JIT compilers {jit:.2f}"
        return text + ")"

    parts = ", ".join(one(name, value) for name, value in seconds.items())
    per_million = total / rows * 1e6 if rows else 0.0
    return f"{parts}; total {total:.2f} CPU s ({per_million:.2f} per million rows)"


RUNNER = b"python_streaming_source_runner"


class DriverCpuSampler:
    """CPU seconds of the source's driver side during a run: the process Spark starts per
    streaming query to call the source's ``latestOffset``, ``partitions`` and ``commit``
    (``pyspark.sql.streaming.python_streaming_source_runner``), which plans every batch.

    It lives only while its query runs and is reaped by the JVM, so it is sampled from
    ``/proc`` every ``interval`` seconds and its last reading kept; the CPU of its last
    moments (at most one interval) is not counted. New such processes are looked for every
    ``scan_every`` seconds (a walk of every process, kept off each sample: the sampler runs
    beside the query it measures).

    Only processes under ``ancestor`` (Spark's JVM) count: other queries on the machine
    are not this run's.

    ``with DriverCpuSampler(jvm) as sampler: ...``; then ``sampler.seconds``."""

    def __init__(self, ancestor: int, interval: float = 0.05, scan_every: float = 0.5) -> None:
        import threading

        self.ancestor = ancestor
        self.interval = interval
        self.scan_every = scan_every
        self.seconds = 0.0
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> DriverCpuSampler:
        self._before = set(self._runners())
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.seconds = round(sum(self._last.values()), 2)

    def _runners(self) -> list[int]:
        mine = descendants(read_processes(), self.ancestor)
        found = []
        for pid in mine:
            try:
                if RUNNER in (PROC / str(pid) / "cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                continue
        return found

    def _sample(self) -> None:
        sample_until(
            self._stop,
            lambda: set(self._runners()) - self._before,  # not a query started before
            self._last,
            self.interval,
            self.scan_every,
        )
