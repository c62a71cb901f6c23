"""A fail-over to a replica, followed by the running query itself (docs/design.md, 'Epochs
across servers').

The source reaches the servers through one address (a proxy on 127.0.0.1). While the
query reads a table in snapshot batches (or, in the second case, streams it) under a
concurrent writer, the primary is killed
and the address switched to its replica (GTID replication, its own binlog file names and
offsets), which is promoted and written to. The same query, never restarted, finds its
position in the replica's binlog by its GTID state, reads the rest of the snapshot and
the stream there, and its output replays to ``SELECT *`` of the new primary, with every
change read from the replica in a later ``_seq`` epoch.

One binlog task per batch: a batch running with several during the fail-over stops the
query instead (README, Faults), which a restart resumes; that path is the restart test's.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.faults import EnduringWriter
from tests.integration.replication import ReplicatedPair, SwitchingProxy
from tests.integration.server import suite_flavour
from tests.integration.streams import (
    StreamRun,
    batches_committed,
    handover_batch,
    largest_offset_bytes,
    read_output,
    source_offsets,
    wait_caught_up,
    wait_for,
)
from tests.integration.workload import AUTO_INCREMENT, check_exactly_once, load

ONE_DECODER = True
# The harness (tests/integration/replication.py) replicates MariaDB only: CHANGE MASTER
# with MASTER_USE_GTID=slave_pos, gtid_slave_pos, gtid_strict_mode, gtid_binlog_state.
pytestmark = pytest.mark.skipif(
    suite_flavour() == "mysql", reason="MariaDB replication harness; no MySQL replicas yet"
)
ROWS = 20_000
OPTIONS = {
    "scan.incremental.snapshot.chunk.size": "1000",
    "scan.snapshot.chunks-per-batch": "2",
    "scan.snapshot.fetch.size": "500",
    "scan.binlog.parallelism": "1",
}


@pytest.fixture
def pair():
    """A pair of its own per test: the test kills the primary and promotes the replica."""
    with ReplicatedPair() as started:
        yield started


@pytest.mark.parametrize("phase", ["snapshot", "stream"])
def test_a_fail_over_to_a_replica_is_followed_by_gtids_and_stays_exact(
    pair, spark, tmp_path, phase
):
    database = "failover"
    pair.primary.fresh_database(database)
    load(pair.primary, database, AUTO_INCREMENT, ROWS)
    pair.wait_caught_up()
    with SwitchingProxy(pair.primary.info.port) as proxy:
        options = pair.source_options(database, rf"{database}\.orders", proxy=proxy, **OPTIONS)
        run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
        writer = EnduringWriter(pair.primary, database, AUTO_INCREMENT, ROWS, seed=3)
        writer.start()
        query = run.start()
        try:
            if phase == "snapshot":
                wait_for(lambda: batches_committed(run.checkpoint) >= 3, 240, "batches", query)
                assert handover_batch(run.checkpoint) is None, "the fail-over is mid-snapshot"
            else:
                wait_for(
                    lambda: (
                        (h := handover_batch(run.checkpoint)) is not None
                        and batches_committed(run.checkpoint) >= h + 3
                    ),
                    300,
                    "stream batches on the old primary",
                    query,
                )
            writer.stop()
            pair.wait_caught_up()
            before = max(source_offsets(run.checkpoint))
            pair.primary.embedded.kill()
            proxy.switch(pair.replica.info.port)
            pair.promote()
            writer = EnduringWriter(pair.replica, database, AUTO_INCREMENT, ROWS, seed=5)
            writer.start()
            wait_for(
                lambda: handover_batch(run.checkpoint) is not None,
                300,
                "the hand-over on the new primary",
                query,
            )
            wait_for(
                lambda: batches_committed(run.checkpoint) >= handover_batch(run.checkpoint) + 3,
                240,
                "stream batches on the new primary",
                query,
            )
            writer.stop()
            wait_caught_up(pair.replica, run.checkpoint, query, 180)
            assert query.isActive, "the query must still be running, never restarted"
        finally:
            writer.stop_event.set()
            query.stop()

    offsets = source_offsets(run.checkpoint)
    old = {n: o for n, o in offsets.items() if n <= before}
    new = {n: o for n, o in offsets.items() if (o.get("binlog") or {}).get("epoch")}
    assert all("epoch" not in (o.get("binlog") or {}) for o in old.values())
    assert new and all(o["v"] == 2 and o["binlog"]["epoch"] == 1 for o in new.values())
    assert all(o["binlog"]["file"].startswith("replica-bin.") for o in new.values())
    assert {o["server"] for o in new.values()} != {o.get("server") for o in old.values()}
    output = read_output(spark, run.out)
    seqs = [row["_seq"] for row in output]
    assert any(s.startswith("E0001.") for s in seqs) and any(s[0].isdigit() for s in seqs)
    check_exactly_once(pair.replica, database, AUTO_INCREMENT, output)
    assert largest_offset_bytes(run.checkpoint) < 1024
    print(
        f"\nfail-over: {len(output)} rows, offsets {min(new)}..{max(new)} on the replica, "
        f"largest offset {largest_offset_bytes(run.checkpoint)} bytes: "
        f"{json.dumps(offsets[max(offsets)])}"
    )
