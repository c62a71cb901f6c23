"""Snapshots on demand next to a running stream (docs/usage.md, 'Snapshots on demand'):
under a concurrent writer, a re-read asked for by ``cdc-mysql signal``, by a row of the
signal table, or with a ``WHERE`` condition, is exact: the change log folds to ``SELECT
*``, every key that matched and was left alone during the re-read is restated once, and
no more rows than matched plus the keys written meanwhile; a query stopped in the middle
of a re-read goes on from its cursor."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time

from tests.support.streams import (
    StreamRun,
    committed_batches,
    handover_batch,
    largest_offset_bytes,
    read_output,
    source_offsets,
    wait_for,
)

ONE_DECODER = True  # re-reads are planned by the driver and read by the snapshot's code
ROWS = 3000


def _create(server, database: str, table: str, rows: int = ROWS) -> None:
    server.execute(
        f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
        f"INSERT INTO {table} SELECT seq, seq * 3, CONCAT('{table}-', seq) "
        f"FROM {server.seq(1, rows)} ORDER BY seq",
        database=database,
    )


class _Writer(threading.Thread):
    """Inserts, updates and deletes at random keys of one table until stopped; records
    the keys it writes while ``recording``."""

    def __init__(self, server, database: str, table: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.database, self.table = server, database, table
        self.random = random.Random(seed)
        self._stop_event = threading.Event()
        self.recording = False
        self.touched: set[int] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.server.admin(self.database) as conn, conn.cursor() as cur:
                while not self._stop_event.is_set():
                    key = self.random.randint(1, ROWS + 300)
                    if self.recording:
                        self.touched.add(key)
                    op = self.random.random()
                    if op < 0.4:
                        cur.execute(
                            f"INSERT INTO {self.table} VALUES (%s, %s, 'w') "
                            "ON DUPLICATE KEY UPDATE v = v + 1",
                            (key, key),
                        )
                    elif op < 0.8:
                        cur.execute(f"UPDATE {self.table} SET v = v + 7 WHERE id = %s", (key,))
                    else:
                        cur.execute(f"DELETE FROM {self.table} WHERE id = %s", (key,))
                    conn.commit()
                    time.sleep(0.02)
        except BaseException as err:  # surfaced by stop()
            self.error = err

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        if self.error is not None:
            raise self.error


def _options(server, database: str, checkpoint, **extra) -> dict[str, str]:
    return server.source_options(
        database,
        rf"{database}\.t_a",
        **{
            "scan.incremental.snapshot.chunk.size": "400",
            "scan.snapshot.chunks-per-batch": "2",
            "signal.directory": str(checkpoint),
            **extra,
        },
    )


def _rereads(checkpoint) -> dict[int, list[dict]]:
    """Each logged offset's re-reads (in progress, finished in its batch, queued)."""
    return {
        batch: offset.get("rereads", {}).get("queue", [])
        for batch, offset in source_offsets(checkpoint).items()
    }


def _finished(checkpoint, n: int = 1) -> int | None:
    """The batch that read the last chunk of re-read ``n``."""
    for batch, queue in sorted(_rereads(checkpoint).items()):
        if any(r["n"] == n and r.get("done") for r in queue):
            return batch
    return None


def _first_reread_batch(checkpoint) -> int | None:
    for batch, queue in sorted(_rereads(checkpoint).items()):
        if any(r.get("after") is not None or r.get("done") for r in queue):
            return batch
    return None


def _signal(checkpoint, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cdc_source", "signal", str(checkpoint), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "written" in done.stdout


def _matching(server, database: str, condition: str = "1=1") -> set[int]:
    rows = server.query(f"SELECT id FROM t_a WHERE {condition}", database=database)
    return {r[0] for r in rows}


def _check(spark, server, run: StreamRun, database: str) -> list[dict]:
    """The change log folds to the table (latest ``_seq`` per key, deletes dropped)."""
    rows = read_output(spark, run.out)
    latest: dict[int, dict] = {}
    for row in rows:
        if row["id"] not in latest or row["_seq"] > latest[row["id"]]["_seq"]:
            latest[row["id"]] = row
    rebuilt = {k: (r["v"], r["s"]) for k, r in latest.items() if r["_op"] != "d"}
    table = {
        r[0]: (r[1], r[2]) for r in server.query("SELECT id, v, s FROM t_a", database=database)
    }
    assert rebuilt == table
    seqs = [r["_seq"] for r in rows]
    assert len(seqs) == len(set(seqs)), "a _seq appears twice"
    assert largest_offset_bytes(run.checkpoint) < 1024
    return rows


def _reread_keys(rows: list[dict], after_batch: int) -> list[int]:
    """The keys restated by ``r`` rows after the hand-over's batch."""
    return [r["id"] for r in rows if r["_op"] == "r" and r["_batch"] > after_batch]


def _run_reread(spark, server, tmp_path, database, request, condition="1=1", **extra):
    """Streams t_a under a writer; once past the hand-over, ``request(checkpoint)`` asks
    for a re-read; waits until it is done. Returns the run, the output, the hand-over
    batch, the keys matching when asked, and the keys written meanwhile."""
    _create(server, database, "t_a")
    run = StreamRun(
        spark,
        _options(server, database, tmp_path / "ck", **extra),
        tmp_path / "ck",
        tmp_path / "out",
    )
    writer = _Writer(server, database, "t_a", seed=11)
    writer.start()
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 300, "the hand-over", query)
        handover = handover_batch(run.checkpoint)
        wait_for(lambda: len(run.batches_seen) >= handover + 2, 120, "stream batches", query)
        writer.recording = True
        matching = _matching(server, database, condition)
        request(run.checkpoint)
        wait_for(lambda: _finished(run.checkpoint) is not None, 300, "the re-read", query)
        wait_for(
            lambda: _finished(run.checkpoint) in committed_batches(run.checkpoint),
            120,
            "the re-read's last batch committed",
            query,
        )
        writer.recording = False
    finally:
        writer.stop()
        query.stop()
    run.run_to_end()
    return run, _check(spark, server, run, database), handover, matching, writer.touched


def _assert_restated(keys: list[int], matching: set[int], touched: set[int]) -> None:
    """Each key once; every key that matched and was not written is restated; no more
    keys than matched plus those written meanwhile."""
    assert len(keys) == len(set(keys)), "a key restated twice by one re-read"
    missing = (matching - touched) - set(keys)
    assert not missing, f"keys not restated: {sorted(missing)[:5]}"
    assert len(keys) <= len(matching) + len(touched)


def test_a_reread_asked_by_the_command_line_is_exact(server, spark, tmp_path):
    database = server.fresh_database("reread_cli")
    run, rows, handover, matching, touched = _run_reread(
        spark, server, tmp_path, database, lambda ck: _signal(ck, "snapshot", f"{database}.t_a")
    )
    _assert_restated(_reread_keys(rows, handover), matching, touched)
    assert not list((run.checkpoint / "signals").glob("*.json")), "the request file stays"
    offsets = source_offsets(run.checkpoint)
    assert any(o["v"] == 4 for o in offsets.values())
    assert max(offsets.items())[1].get("rereads", {}).get("queue") is None


def test_a_reread_with_a_condition_restates_the_matching_rows(server, spark, tmp_path):
    database = server.fresh_database("reread_where")
    condition = "v % 2 = 0 AND id > 500"
    run, rows, handover, matching, touched = _run_reread(
        spark,
        server,
        tmp_path,
        database,
        lambda ck: _signal(ck, "snapshot", f"{database}.t_a", "--where", condition),
        condition=condition,
    )
    keys = _reread_keys(rows, handover)
    _assert_restated(keys, matching, touched)
    # Only a key written during the re-read may be restated without matching.
    assert not (set(keys) - matching - touched)
    assert len(keys) < ROWS // 2


def test_a_reread_asked_by_a_signal_row_is_exact(server, spark, tmp_path):
    database = server.fresh_database("reread_signal")
    server.execute(
        "CREATE TABLE cdc_signals (id INT PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT)",
        database=database,
    )
    data = json.dumps({"data-collections": [f"{database}.t_a"]})

    def request(_checkpoint) -> None:
        server.execute(
            f"INSERT INTO cdc_signals VALUES (1, 'execute-snapshot', '{data}')",
            database=database,
        )

    run, rows, handover, matching, touched = _run_reread(
        spark,
        server,
        tmp_path,
        database,
        request,
        **{"signal.data.collection": f"{database}.cdc_signals"},
    )
    _assert_restated(_reread_keys(rows, handover), matching, touched)
    offsets = source_offsets(run.checkpoint)
    assert max(offsets.items())[1]["rereads"]["id"] == 1
    # Taken once: a restart does not run it again.
    restarted = len(rows)
    run.run_to_end()
    assert _finished(run.checkpoint) is not None
    assert not any(q for q in _rereads(run.checkpoint).values() if q and q[0]["n"] > 1)
    assert len(read_output(spark, run.out)) >= restarted


def test_a_query_stopped_during_a_reread_goes_on_from_its_cursor(server, spark, tmp_path):
    database = server.fresh_database("reread_restart")
    _create(server, database, "t_a")
    checkpoint = tmp_path / "ck"
    options = _options(server, database, checkpoint, **{"scan.snapshot.chunks-per-batch": "1"})
    run = StreamRun(spark, options, checkpoint, tmp_path / "out")
    writer = _Writer(server, database, "t_a", seed=5)
    writer.start()
    query = run.start()
    try:
        wait_for(lambda: handover_batch(checkpoint) is not None, 300, "the hand-over", query)
        handover = handover_batch(checkpoint)
        writer.recording = True
        matching = _matching(server, database)
        _signal(checkpoint, "snapshot", f"{database}.t_a")
        wait_for(
            lambda: (_first_reread_batch(checkpoint) or 1 << 30) in committed_batches(checkpoint),
            300,
            "the re-read's first batch",
            query,
        )
    finally:
        query.stop()
    assert _finished(checkpoint) is None, "the re-read ended before the query stopped"
    try:
        query = run.start()
        wait_for(lambda: _finished(checkpoint) is not None, 300, "the re-read", query)
        wait_for(
            lambda: _finished(checkpoint) in committed_batches(checkpoint),
            120,
            "the re-read's last batch committed",
            query,
        )
        writer.recording = False
    finally:
        writer.stop()
        query.stop()
    run.run_to_end()
    rows = _check(spark, server, run, database)
    _assert_restated(_reread_keys(rows, handover), matching, writer.touched)


def test_stop_snapshot_cancels_a_reread(server, spark, tmp_path):
    database = server.fresh_database("reread_stop")
    _create(server, database, "t_a")
    checkpoint = tmp_path / "ck"
    options = _options(server, database, checkpoint, **{"scan.snapshot.chunks-per-batch": "1"})
    run = StreamRun(spark, options, checkpoint, tmp_path / "out")
    run.run_to_end()
    _signal(checkpoint, "snapshot", f"{database}.t_a")
    _signal(checkpoint, "stop-snapshot")
    server.execute("UPDATE t_a SET v = v + 1 WHERE id <= 10", database=database)
    run.run_to_end()
    assert _first_reread_batch(checkpoint) is None
    rows = _check(spark, server, run, database)
    assert not _reread_keys(rows, handover_batch(checkpoint))


def test_a_reread_in_the_envelope_output_is_exact(server, spark, tmp_path):
    database = server.fresh_database("reread_envelope")
    _create(server, database, "t_a", 1200)
    _create(server, database, "t_b", 800)
    checkpoint = tmp_path / "ck"
    options = server.source_options(
        database,
        rf"{database}\.t_.*",
        **{
            "scan.incremental.snapshot.chunk.size": "300",
            "scan.snapshot.chunks-per-batch": "1",
            "signal.directory": str(checkpoint),
        },
    )
    run = StreamRun(spark, options, checkpoint, tmp_path / "out")
    run.run_to_end()
    handover = handover_batch(checkpoint)
    _signal(checkpoint, "snapshot", f"{database}.t_b", "--where", "id <= 500")
    server.execute(
        "UPDATE t_b SET v = -v WHERE id % 10 = 0",
        "DELETE FROM t_b WHERE id % 25 = 0",
        "UPDATE t_a SET v = 0 WHERE id <= 20",
        database=database,
    )
    run.run_to_end()
    assert _finished(checkpoint) is not None
    rows = read_output(spark, run.out)
    rebuilt: dict[str, dict[int, dict]] = {}
    for row in sorted(rows, key=lambda r: r["_seq"]):
        table = rebuilt.setdefault(row["table"], {})
        key = json.loads(row["key"])["id"]
        if row["op"] == "d":
            table.pop(key, None)
        else:
            table[key] = json.loads(row["after"])
    for name in ("t_a", "t_b"):
        expected = {
            r[0]: {"id": r[0], "v": r[1], "s": r[2]}
            for r in server.query(f"SELECT id, v, s FROM {name}", database=database)
        }
        assert rebuilt[name] == expected, name
    again = [json.loads(r["key"])["id"] for r in rows if r["op"] == "r" and r["_batch"] > handover]
    assert sorted(again) == [k for k in range(1, 501) if k % 25], "t_b's rows as of P"
    assert {r["table"] for r in rows if r["op"] == "r" and r["_batch"] > handover} == {"t_b"}


def test_a_delta_mirror_merges_a_reread_and_stays_equal_to_the_table(server, tmp_path):
    import deltalake

    from tests.support.delta_runs import run_delta_query as run_lake

    database = server.fresh_database("reread_delta")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
        f"INSERT INTO t SELECT seq, seq * 3, 'x' FROM {server.seq(1, 1500)} ORDER BY seq",
        database=database,
    )
    checkpoint, lake = tmp_path / "ck", tmp_path / "mirror"
    signals = ("--option", f"signal.directory={checkpoint}")
    first = run_lake(server, database, checkpoint, lake, "--available-now", *signals)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    server.execute("UPDATE t SET v = -v WHERE id <= 40", database=database)
    _signal(checkpoint, "snapshot", f"{database}.t")  # three chunks: two batches
    again = run_lake(server, database, checkpoint, lake, "--available-now", *signals)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert _finished(checkpoint) is not None
    # The re-read's second batch holds its rows alone: merged, not appended.
    assert "merged" in again.stdout and "appended" not in again.stdout
    mirror = deltalake.DeltaTable(str(lake)).to_pyarrow_table().to_pylist()
    got = {r["id"]: (r["v"], r["s"]) for r in mirror}
    assert len(mirror) == len(got), "a key appears twice in the Delta table"
    rows = server.query("SELECT id, v, s FROM t", database=database)
    assert got == {r[0]: (r[1], r[2]) for r in rows}
