"""Forty seconds of steady writes with a fault every 10 seconds (server restart, every
connection cut, workers killed), the query never restarted: exact at the end, and memory
and offsets do not grow with the run. ``python -m tests.support.soak`` is the
30-minute version (CDC_MYSQL_SOAK_SECONDS lengthens this one); the suite keeps it short to stay
under its time budget."""

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
        fault_every=SOAK_SECONDS / 4,
        rows=20_000,
        writes_per_second=150,
    )
    assert report.still_running
    assert {kind for _, kind in report.faults} == set(FAULTS)
    assert report.writes > 1000
    # Flat: the samples of the second half do not climb past the first half's by more
    # than allocator noise; offsets stay the same size.
    assert report.growth("driver_mib") < 64, report.samples
    assert report.growth("worker_mib") < 128, report.samples
    assert max(s.offset_bytes for s in report.samples) < 1024
