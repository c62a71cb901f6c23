"""Exactly once under concurrent writes, for an auto-increment key and a composite key
with a case-insensitive string column, with and without restarts from the checkpoint."""

from __future__ import annotations

import pytest

from tests.support.streams import (
    InjectedFailure,
    StreamRun,
    committed_batches,
    handover_batch,
    largest_offset_bytes,
    read_output,
    source_offsets,
    stream_past_handover,
    wait_for,
)
from tests.support.workload import (
    AUTO_INCREMENT,
    COMPOSITE,
    Writer,
    check_exactly_once,
    load,
)

ROWS = 50_000
STREAM_OPTIONS = {
    "scan.incremental.snapshot.chunk.size": "1000",
    "scan.snapshot.chunks-per-batch": "4",
    "scan.snapshot.fetch.size": "500",
}


def _setup(server, kind, database):
    server.fresh_database(database)
    load(server, database, kind, ROWS)
    return server.source_options(database, rf"{database}\.{kind.name}", **STREAM_OPTIONS)


@pytest.mark.parametrize(
    "kind, visibility",
    [
        (AUTO_INCREMENT, "auto"),
        (COMPOSITE, "auto"),
        pytest.param(AUTO_INCREMENT, "gtid-wait", marks=pytest.mark.one_decoder),
    ],
    ids=["auto_increment", "composite", "auto_increment-mysql_gtid_wait"],
)
def test_snapshot_then_binlog_is_exactly_once_under_concurrent_writes(
    server, spark, tmp_path, kind, visibility
):
    """``gtid-wait`` runs MySQL's snapshot path (no binlog_snapshot_* position: wait for the
    exact GTID set of P, then the head as Q) on MariaDB."""
    database = f"eo_{kind.name}_{visibility.replace('-', '_')}"
    options = _setup(server, kind, database)
    options["scan.snapshot.visibility"] = visibility
    run = StreamRun(spark, options, tmp_path / "checkpoint", tmp_path / "out")
    writer = Writer(server, database, kind, ROWS)
    snapshot_batches = stream_past_handover(run, writer)

    assert snapshot_batches >= 5, "the snapshot should span several batches"
    assert writer.operations > 100
    output = read_output(spark, run.out)
    assert {row["_op"] for row in output} >= {"r", "c", "u", "d"}
    check_exactly_once(server, database, kind, output)
    assert largest_offset_bytes(run.checkpoint) < 1024
    print(
        f"\n{kind.name}: {len(output)} rows, {writer.operations} writes, "
        f"largest offset {largest_offset_bytes(run.checkpoint)} bytes"
    )


@pytest.mark.parametrize(
    "kind",
    # The composite key's restarts once: both decoders restart with the integer key.
    [AUTO_INCREMENT, pytest.param(COMPOSITE, marks=pytest.mark.one_decoder)],
    ids=["auto_increment", "composite"],
)
def test_exactly_once_across_restarts_during_snapshot_and_after_handover(
    server, spark, tmp_path, kind
):
    database = f"eor_{kind.name}"
    options = _setup(server, kind, database)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    writer = Writer(server, database, kind, ROWS, seed=11)
    writer.start()
    try:
        # Two crashes in the middle of the snapshot: the batch's offset is logged, its
        # commit never happens, and the restarted query re-plans it from the offsets alone.
        for crash_at in (2, 5):
            run = StreamRun(
                spark,
                options,
                checkpoint,
                out,
                fail_when=lambda batch_id, at=crash_at: batch_id == at,
            )
            query = run.start()
            with pytest.raises(Exception, match="injected failure"):
                query.awaitTermination(300)
            assert crash_at in source_offsets(checkpoint)
            assert crash_at not in committed_batches(checkpoint)

        # A clean stop right after the hand-over batch committed.
        run = StreamRun(spark, options, checkpoint, out)
        query = run.start()
        wait_for(
            lambda: (
                (h := handover_batch(checkpoint)) is not None and h in committed_batches(checkpoint)
            ),
            300,
            "the hand-over commit",
            query,
        )
        query.stop()
        run = StreamRun(spark, options, checkpoint, out)
        query = run.start()
        wait_for(lambda: len(run.batches_seen) >= 3, 120, "binlog batches after restart", query)
        query.stop()
    finally:
        writer.stop()
    StreamRun(spark, options, checkpoint, out).run_to_end()

    output = read_output(spark, out)
    check_exactly_once(server, database, kind, output)
    assert largest_offset_bytes(checkpoint) < 1024


def test_injected_failure_is_the_exception_the_restart_test_relies_on():
    assert issubclass(InjectedFailure, RuntimeError)
