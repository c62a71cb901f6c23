"""The benchmark's CPU accounting (bench/cpu_use.py): pure parsing and grouping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import cpu_use  # noqa: E402
from cpu_use import (  # noqa: E402
    DriverCpuSampler,
    ProcessCpu,
    compiler_threads,
    daemon_children,
    descendants,
    describe,
    grown_seconds,
    parse_stat,
    split_by_group,
    vanished_seconds,
)


def _stat(pid, name, ppid, utime, stime, cutime, cstime, state="S"):
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime ...
    fields = [state, ppid, 1, 1, 0, -1, 0, 0, 0, 0, 0, utime, stime, cutime, cstime, 20, 0]
    return f"{pid} ({name}) " + " ".join(str(f) for f in fields)


def test_a_stat_line_whose_name_holds_spaces_and_parentheses_is_read_from_the_last_paren():
    cpu = parse_stat(_stat(42, "py (x) y", 7, 100, 50, 30, 20), 100.0)
    assert cpu == ProcessCpu(42, 7, "py (x) y", 1.5, 0.5)


def test_a_zombie_keeps_its_times_and_is_marked():
    cpu = parse_stat(_stat(8, "bash", 7, 0, 1, 7, 4, state="Z"), 100.0)
    assert cpu == ProcessCpu(8, 7, "bash", 0.01, 0.11, zombie=True)


def test_descendants_follow_every_generation_and_no_other_branch():
    processes = {
        pid: ProcessCpu(pid, parent, "p", 0.0, 0.0)
        for pid, parent in [(1, 0), (10, 1), (11, 10), (12, 11), (20, 1), (21, 20)]
    }
    assert descendants(processes, 10) == {11, 12}
    assert descendants(processes, 12) == set()


def test_groups_count_the_jvms_reaped_children_and_live_descendants_as_python():
    processes = {
        5: ProcessCpu(5, 1, "mariadbd", 3.0, 0.0),
        9: ProcessCpu(9, 1, "java", 7.0, 2.0),  # 2.0: a streaming runner it reaped
        12: ProcessCpu(12, 9, "python3", 0.5, 1.5),  # a daemon and its reaped workers
        13: ProcessCpu(13, 12, "python3", 0.25, 0.0),
        99: ProcessCpu(99, 1, "python3", 8.0, 0.0),  # not Spark's: not counted
    }
    assert split_by_group(processes, server=5, jvm=9) == {
        "server": 3.0,
        "jvm": 7.0,
        "spark python": 4.25,
    }


def test_a_server_or_jvm_that_is_gone_counts_nothing():
    assert split_by_group({}, server=5, jvm=9) == {"server": 0.0, "jvm": 0.0, "spark python": 0.0}


def test_the_driver_sampler_counts_a_planner_process_that_ran_and_exited_during_the_run():
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: 0"
    with DriverCpuSampler(os.getpid(), interval=0.01, scan_every=0.01) as sampler:
        subprocess.run(
            [sys.executable, "-c", burn, "pyspark.sql.streaming.python_streaming_source_runner"],
            check=True,
        )
    assert sampler.seconds > 0.1  # CPU the process itself reported (0.3 s), not wall time


def test_the_driver_sampler_ignores_a_process_of_another_name():
    burn = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    with DriverCpuSampler(os.getpid(), interval=0.01, scan_every=0.01) as sampler:
        subprocess.run([sys.executable, "-c", burn], check=True)
    assert sampler.seconds == 0.0


def test_the_workers_are_the_children_of_the_jvms_daemons_not_the_processes_it_reaps():
    processes = {
        9: ProcessCpu(9, 1, "java", 0.0, 0.0),
        12: ProcessCpu(12, 9, "python3", 0.0, 0.0),  # a worker daemon
        13: ProcessCpu(13, 12, "python3", 0.0, 0.0),  # its worker
        14: ProcessCpu(14, 9, "python3", 0.0, 0.0),  # a streaming runner: the JVM reaps it
        20: ProcessCpu(20, 1, "python3", 0.0, 0.0),
        21: ProcessCpu(21, 20, "python3", 0.0, 0.0),
    }
    assert daemon_children(processes, 9) == {13}


def test_a_worker_gone_during_a_run_counts_by_its_last_reading_and_one_still_there_not():
    before = {
        9: ProcessCpu(9, 1, "java", 5.0, 0.0),
        12: ProcessCpu(12, 9, "python3", 1.0, 0.0),
        13: ProcessCpu(13, 12, "python3", 4.0, 0.0),  # exits during the run
        15: ProcessCpu(15, 12, "python3", 2.0, 0.0),  # still there after it
    }
    after = {
        9: ProcessCpu(9, 1, "java", 6.0, 0.0),
        12: ProcessCpu(12, 9, "python3", 1.0, 0.0),
        15: ProcessCpu(15, 12, "python3", 3.0, 0.0),
    }
    last_seen = {13: 4.75, 15: 2.5}  # the kernel reaped 13: no parent's cutime has it
    groups_before = split_by_group(before, server=5, jvm=9)
    groups_after = split_by_group(after, server=5, jvm=9)
    python = (
        groups_after["spark python"]
        + vanished_seconds(last_seen, after)
        - groups_before["spark python"]
    )
    assert python == 0.75 + 1.0  # 13's 0.75 in the run, 15's 1.0


def test_the_jit_compilers_are_the_jvms_threads_of_hotspots_two_compiler_names(
    tmp_path, monkeypatch
):
    ticks = os.sysconf("SC_CLK_TCK")
    threads = {
        101: ("java", 50),
        102: ("C2 CompilerThre", 3 * ticks),
        103: ("C1 CompilerThre", ticks),
        104: ("Executor task l", 9 * ticks),
        105: ("GC Thread#0", ticks),
    }
    for tid, (name, utime) in threads.items():
        directory = tmp_path / "100" / "task" / str(tid)
        directory.mkdir(parents=True)
        (directory / "stat").write_text(_stat(tid, name, 1, utime, 0, 0, 0))
    monkeypatch.setattr(cpu_use, "PROC", tmp_path)
    assert compiler_threads(100) == {102: 3.0, 103: 1.0}
    assert compiler_threads(999) == {}  # a JVM that is gone


def test_a_compiler_thread_started_during_a_run_counts_from_zero_and_one_gone_by_its_last_reading():
    before = {1: 10.0, 2: 4.0}
    last = {1: 12.5, 2: 4.5, 3: 0.75}  # 2 stopped during the run; 3 started
    assert grown_seconds(before, last) == 2.5 + 0.5 + 0.75


def test_the_jit_share_is_shown_inside_the_jvms_seconds_and_not_added_to_the_total():
    seconds = {"server": 1.0, "jvm": 3.0, "spark python": 2.0}
    line = describe(seconds, 1_000_000, jit=1.25)
    assert "jvm 3.00 (3.00/M; JIT compilers 1.25)" in line
    assert line.endswith("total 6.00 CPU s (6.00 per million rows)")
    assert "JIT" not in describe(seconds, 1_000_000)
