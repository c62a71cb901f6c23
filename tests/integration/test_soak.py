"""Forty seconds of steady writes with a fault about every 7 seconds (server restart, every
connection cut, workers killed, a driver restart from the checkpoint, the binlog rotated
and purged behind the stream): exact at the end, the stream caught up after each fault,
and memory and offsets do not grow with the run. ``python bench/soak.py`` is the
30-minute version (CDC_MYSQL_SOAK_SECONDS lengthens this one); the suite keeps it short to
stay under its time budget."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.soak import FAULTS, run_soak

ONE_DECODER = True
SOAK_SECONDS = float(os.environ.get("CDC_MYSQL_SOAK_SECONDS", "40"))


def test_minutes_of_faults_under_writes_stay_exact_with_flat_memory(
    killable_server, spark, tmp_path
):
    report = run_soak(
        spark,
        killable_server,
        tmp_path,
        Path(os.environ["CDC_MYSQL_STATE_DIR"]),
        SOAK_SECONDS,
        fault_every=SOAK_SECONDS / 6,
        rows=20_000,
        writes_per_second=150,
    )
    assert report.still_running
    assert {fault.kind for fault in report.faults} == set(FAULTS)
    assert all(fault.lag is not None for fault in report.faults)
    assert report.writes > 1000
    # Flat: the samples of the second half do not climb past the first half's by more
    # than allocator noise; offsets stay the same size.
    assert report.growth("driver_mib") < 64, report.samples
    assert report.growth("worker_mib") < 128, report.samples
    assert max(s.offset_bytes for s in report.samples) < 1024
