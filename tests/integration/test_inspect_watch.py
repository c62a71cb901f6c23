"""``cdc-mysql inspect CHECKPOINT --watch`` against the checkpoint of a running query: the
query is held inside its third batch (planned and logged, not committed) while the
command refreshes, so what the frames must show is known exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from cdc_source.inspect.watch import FRAME_SEPARATOR
from tests.support.streams import StreamRun, committed_batches, source_offsets, wait_for

ONE_DECODER = True  # the view reads the checkpoint and the server, not decoded rows
HELD_BATCH = 2


def _watch(options: dict[str, str], checkpoint: Path, *extra: str) -> str:
    """``cdc-mysql inspect --watch`` as a user runs it, piped, with the password only in
    the environment."""
    argv = [
        sys.executable,
        "-m",
        "cdc_source",
        "inspect",
        str(checkpoint),
        "--watch",
        "--interval",
        "0.2",
        "--count",
        "2",
        *("--hostname", options["hostname"], "--port", options["port"]),
        *("--username", options["username"], "--database-name", options["database-name"]),
        *("--table-name", options["table-name"]),
        *extra,
    ]
    env = {**os.environ, "CDC_MYSQL_PASSWORD": options["password"]}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert options["password"] not in done.stdout + done.stderr
    return done.stdout


def test_watch_shows_phase_frontier_lag_and_offset_sizes_of_a_running_query(
    server, spark, tmp_path
):
    database = server.fresh_database("watch_it")
    for table in ("a", "b"):
        server.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)", database=database)
        with server.admin(database) as conn, conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {table} VALUES (%s, %s)", [(i, i) for i in range(1, 1001)]
            )
    options = server.source_options(
        database,
        rf"{database}\.(a|b)",
        **{"scan.incremental.snapshot.chunk.size": "100", "scan.snapshot.chunks-per-batch": "1"},
    )
    held, release = threading.Event(), threading.Event()

    def hold(batch_id: int) -> bool:  # called in foreachBatch: the batch is in flight
        if batch_id == HELD_BATCH:
            held.set()
            release.wait(300)
        return False

    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out", fail_when=hold)
    query = run.start()
    try:
        wait_for(held.is_set, 300, f"batch {HELD_BATCH} to start", query)
        # the binlog grows past the held batch's end position: a lag in bytes
        server.execute("UPDATE b SET v = 0 WHERE id = 1", database=database)
        text = _watch(options, run.checkpoint)
        lines = _watch(options, run.checkpoint, "--json").splitlines()
        release.set()
        wait_for(
            lambda: HELD_BATCH in committed_batches(run.checkpoint),
            300,
            f"batch {HELD_BATCH} to commit",
            query,
        )
    finally:
        release.set()
        query.stop()

    offset = source_offsets(run.checkpoint)[HELD_BATCH]
    frontier = offset["snapshot"]
    assert frontier["table"] == f"{database}.a"  # 1000 rows, 100-row chunks, one a batch
    (row,) = server.query(f"SELECT COUNT(*) FROM {database}.a WHERE id <= %s", frontier["after"])
    offset_line = (run.checkpoint / "offsets" / str(HELD_BATCH)).read_text().splitlines()[2]

    frames = text.split(FRAME_SEPARATOR + "\n")
    assert len(frames) == 2
    for frame in frames:
        assert "  phase           snapshot\n" in frame
        assert f"  frontier        {database}.a after [{frontier['after'][0]}], " in frame
        assert f"in flight {HELD_BATCH} (in offsets/" in frame
        assert "bytes behind the head binlog." in frame
        assert f"s since the driver read the head that batch {HELD_BATCH} ends at" in frame
        assert f"  offset bytes    latest {len(offset_line.encode())}, largest " in frame

    objects = [json.loads(line) for line in lines]
    assert [o["refresh"] for o in objects] == [1, 2]
    for obj in objects:
        assert obj["phase"] == "snapshot"
        assert obj["frontier"] == frontier
        assert obj["frontier_rows"] == row[0]
        assert obj["in_flight"] == [HELD_BATCH] and obj["last_committed"] == HELD_BATCH - 1
        assert obj["lag"]["bytes"] > 0 and obj["lag"]["seconds"] is not None
        assert obj["lag"]["seconds_batch"] == HELD_BATCH
        assert obj["offset_bytes"]["latest"] == len(offset_line.encode())
        assert obj["offset_bytes"]["largest"] < obj["offset_bytes"]["target"] == 1024
    # the batch is held: between the two refreshes nothing was committed, no row moved
    assert objects[1]["rates"]["batches_committed_per_s"] == 0.0
    assert objects[1]["rates"]["snapshot_rows_per_s"] == 0.0
    assert objects[1]["rates"]["snapshot_rows_of"] == f"{database}.a"
