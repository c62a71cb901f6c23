"""The hand-over batch re-run after a crash gives exactly the same rows, and the
coordinator releases its snapshot metadata only at the covering commit (docs/design.md,
'Hand-over and split metadata')."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.streams import (
    StreamRun,
    committed_batches,
    coordinator_states,
    handover_batch,
    read_output,
    source_offsets,
    wait_for,
)
from tests.support.workload import AUTO_INCREMENT, Writer, check_exactly_once, load

ROWS = 20_000
OPTIONS = {"scan.incremental.snapshot.chunk.size": "1000", "scan.snapshot.chunks-per-batch": "6"}


def _rows(spark, path: Path) -> set[tuple]:
    return {
        tuple(sorted((k, v) for k, v in row.items() if k != "_batch"))
        for row in read_output(spark, path)
    }


def _latest_state() -> dict:
    directory = Path(os.environ["CDC_MYSQL_STATE_DIR"])
    files = sorted(directory.glob("coordinator-*.json"), key=lambda p: p.stat().st_mtime)
    assert files, "the coordinator wrote no state file"
    return [s for s in coordinator_states() if f"coordinator-{s['pid']}.json" == files[-1].name][0]


@pytest.mark.one_decoder  # the hand-over's planning and release are the driver's
def test_handover_batch_rerun_is_identical_and_metadata_is_released_at_the_covering_commit(
    server, spark, tmp_path
):
    database = server.fresh_database("handover_db")
    load(server, database, AUTO_INCREMENT, ROWS)
    options = server.source_options(database, rf"{database}\.orders", **OPTIONS)
    checkpoint, out, failed = tmp_path / "ck", tmp_path / "out", tmp_path / "failed"
    writer = Writer(server, database, AUTO_INCREMENT, ROWS, seed=5)
    writer.start()
    try:

        def is_handover(batch_id: int) -> bool:
            offset = source_offsets(checkpoint).get(batch_id)
            return (
                offset is not None
                and offset["snapshot"] is None
                and batch_id > 0
                and (source_offsets(checkpoint)[batch_id - 1]["snapshot"] is not None)
            )

        crashing = StreamRun(
            spark, options, checkpoint, out, fail_when=is_handover, failed_attempts=failed
        )
        query = crashing.start()
        with pytest.raises(Exception, match="injected failure"):
            query.awaitTermination(300)
        handover = handover_batch(checkpoint)
        assert handover is not None and handover not in committed_batches(checkpoint)

        # Restart: Spark re-runs the hand-over batch on a brand-new reader.
        rerun = StreamRun(spark, options, checkpoint, out)
        query = rerun.start()
        wait_for(
            lambda: handover + 2 in committed_batches(checkpoint),
            300,
            "commits past the hand-over",
            query,
        )
        query.stop()
        first_attempt = _rows(spark, failed / f"batch={handover}")
        assert first_attempt, "the hand-over batch should carry rows"
        assert first_attempt == _rows(spark, out / f"batch={handover}")
        state = _latest_state()
        assert state["snapshot_metadata_entries"] == 0 and state["released"] is not None

        # A second restart after the covering commit holds no snapshot metadata at all.
        again = StreamRun(spark, options, checkpoint, out)
        query = again.start()
        wait_for(lambda: len(again.batches_seen) >= 2, 120, "stream batches", query)
        query.stop()
        assert _latest_state()["snapshot_metadata_entries"] == 0
    finally:
        writer.stop()
    StreamRun(spark, options, checkpoint, out).run_to_end()
    check_exactly_once(server, database, AUTO_INCREMENT, read_output(spark, out))
    log_text = (Path(os.environ["CDC_MYSQL_STATE_DIR"]) / "coordinator.log").read_text()
    assert "hand-over committed: released snapshot metadata" in log_text
