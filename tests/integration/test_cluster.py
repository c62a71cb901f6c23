"""Exactly once on ``local-cluster[2,1,1024]``: executors in separate JVMs and Python
workers of their own, with Spark's RPC size limit enforced, so nothing driver-side can
reach a task except through its (small) partition. Snapshot, hand-over and stream under a
concurrent writer, checked against SELECT *."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.support.streams import (
    batches_committed,
    handover_batch,
    read_output,
    server_head,
)
from tests.support.workload import COMPOSITE, Writer, check_exactly_once, load

ONE_DECODER = True
ROWS = 30_000
REPO = Path(__file__).resolve().parents[2]


def _wait(condition, timeout: float, what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            raise AssertionError(f"the cluster query exited while waiting for {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_exactly_once_on_a_local_cluster_with_separate_executor_jvms(server, spark, tmp_path):
    database = server.fresh_database("eo_cluster")
    load(server, database, COMPOSITE, ROWS)
    options = server.source_options(
        database,
        rf"{database}\.{COMPOSITE.name}",
        **{
            "scan.incremental.snapshot.chunk.size": "2000",
            "scan.snapshot.chunks-per-batch": "4",
        },
    )
    options_path = tmp_path / "options.json"
    options_path.write_text(json.dumps(options))
    checkpoint, out, control = tmp_path / "checkpoint", tmp_path / "out", tmp_path / "control"
    control.mkdir()
    writer = Writer(server, database, COMPOSITE, ROWS, seed=21)
    writer.start()
    log = open(tmp_path / "cluster.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.cluster_query"]
        + [str(options_path), str(checkpoint), str(out), str(control)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait(lambda: handover_batch(checkpoint) is not None, 400, "the hand-over", process)
        handover = handover_batch(checkpoint)
        _wait(lambda: batches_committed(checkpoint) > handover + 2, 200, "stream", process)
        writer.stop()
        (control / "head.json").write_text(json.dumps(server_head(server)))
        assert process.wait(timeout=300) == 0, (tmp_path / "cluster.log").read_text()[-3000:]
    finally:
        writer.stop()
        if process.poll() is None:
            process.kill()
        log.close()
    output = read_output(spark, out)
    check_exactly_once(server, database, COMPOSITE, output)
    assert handover >= 3, "the snapshot should span several batches"
    assert {row["_op"] for row in output} >= {"r", "c", "u", "d"}
