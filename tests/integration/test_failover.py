"""A fail-over to a replica, followed by the running query itself (docs/design.md, 'Epochs
across servers'), on MariaDB and on MySQL.

The source reaches the servers through one address (a proxy on 127.0.0.1). While the
query reads a table in snapshot batches (or streams it) under a concurrent writer, the
primary is killed and the address switched to its replica (GTID replication, its own
binlog file names and offsets), which is promoted and written to. The replica is built
by replication from the primary's first transaction, or from a consistent dump of the
primary (its early GTIDs then only in MySQL's ``gtid_purged`` / MariaDB's
``gtid_slave_pos``, in none of its binlog files), as replicas are usually made. The same
query, never restarted, finds its position in the replica's binlog by its GTID state,
reads the rest of the snapshot and the stream there, and its output replays to
``SELECT *`` of the new primary, with every change read from the replica in a later
``_seq`` epoch. A replica that lacks transactions the query has read (replication
stopped before them) is refused, the refusal naming them.

One binlog task per batch: a batch running with several during the fail-over stops the
query instead (docs/semantics.md, Faults), which a restart resumes; that path is the restart test's.
"""

from __future__ import annotations

import json
import time

import pytest

from cdc_source.gtid import GtidSet
from tests.support.faults import EnduringWriter
from tests.support.replication import ReplicatedPair, SwitchingProxy
from tests.support.streams import (
    StreamRun,
    batches_committed,
    committed_batches,
    handover_batch,
    largest_offset_bytes,
    read_output,
    source_offsets,
    wait_caught_up,
    wait_for,
)
from tests.support.workload import AUTO_INCREMENT, check_exactly_once, load

ONE_DECODER = True
DATABASE = "failover"
ROWS = 20_000
OPTIONS = {
    "scan.incremental.snapshot.chunk.size": "1000",
    "scan.snapshot.chunks-per-batch": "2",
    "scan.snapshot.fetch.size": "500",
    "scan.binlog.parallelism": "1",
}


def _seed(primary) -> None:
    primary.fresh_database(DATABASE)
    load(primary, DATABASE, AUTO_INCREMENT, ROWS)


@pytest.fixture(params=["replication", "dump"])
def pair(request):
    """A pair of its own per test (the test kills the primary and promotes the replica),
    the primary holding the table to capture; the replica built either way."""
    with ReplicatedPair(built=request.param, seed=_seed) as started:
        started.wait_caught_up()
        yield started


def _epoch_offsets(checkpoint) -> dict[int, dict]:
    return {
        n: o for n, o in source_offsets(checkpoint).items() if (o.get("binlog") or {}).get("epoch")
    }


@pytest.mark.parametrize("phase", ["snapshot", "stream"])
def test_a_fail_over_to_a_replica_is_followed_by_gtids_and_stays_exact(
    pair, spark, tmp_path, phase
):
    database = DATABASE
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
            switched = time.monotonic()
            proxy.switch(pair.replica.info.port)
            pair.promote()
            writer = EnduringWriter(pair.replica, database, AUTO_INCREMENT, ROWS, seed=5)
            writer.start()
            wait_for(
                lambda: any(
                    n in committed_batches(run.checkpoint) for n in _epoch_offsets(run.checkpoint)
                ),
                300,
                "a batch committed on the new primary",
                query,
            )
            followed = time.monotonic() - switched
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
    new = _epoch_offsets(run.checkpoint)
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
        f"\nfail-over ({pair.flavour}, replica built by {pair.built}, mid-{phase}): followed "
        f"{followed:.1f} s after the switch; {len(output)} rows, offsets {min(new)}..{max(new)} "
        f"on the replica, largest offset {largest_offset_bytes(run.checkpoint)} bytes: "
        f"{json.dumps(offsets[max(offsets)])}"
    )


def test_a_replica_lacking_transactions_the_query_read_is_refused_naming_them(
    pair, spark, tmp_path
):
    """Replication stops; the primary goes on and the query reads its new transactions;
    then the primary dies and the lagging replica is promoted and written to. The query
    stops, saying which of the transactions it read the new server lacks."""
    database = DATABASE
    with SwitchingProxy(pair.primary.info.port) as proxy:
        options = pair.source_options(database, rf"{database}\.orders", proxy=proxy, **OPTIONS)
        run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
        query = run.start()
        writer = EnduringWriter(pair.primary, database, AUTO_INCREMENT, ROWS, seed=3)
        uuid = pair.primary.query("SELECT @@server_uuid")[0][0] if not pair.mariadb else ""
        try:
            wait_for(
                lambda: handover_batch(run.checkpoint) is not None, 300, "the hand-over", query
            )
            pair.stop_replicating()
            replicated = pair.replica.gtid_state()
            writer.start()
            time.sleep(2)
            writer.stop()
            wait_caught_up(pair.primary, run.checkpoint, query, 180)
            pair.primary.embedded.kill()
            switched = time.monotonic()
            proxy.switch(pair.replica.info.port)
            pair.promote()
            pair.replica.execute(
                "INSERT INTO orders (customer, amount, note, updated) "
                "VALUES ('promoted', 1, 'x', NOW(6))",
                database=database,
            )
            wait_for(lambda: not query.isActive, 180, "the query to stop")
            refused = time.monotonic() - switched
            error = str(query.exception())
        finally:
            writer.stop_event.set()
            query.stop()
    assert "lacks transactions the query has read" in error, error
    assert "Apply them to this server" in error
    lacking = error.split("lacks transactions the query has read: ", 1)[1].split(" (", 1)[0]
    if pair.mariadb:
        assert lacking.startswith("the transactions up to 0-1-")
    else:
        first = GtidSet.parse(replicated).intervals[(uuid, "")][-1][1] + 1
        assert lacking.startswith(f"transactions {uuid}:{first}"), lacking
    print(
        f"\nrefusal ({pair.flavour}, replica built by {pair.built}) {refused:.1f} s after the "
        f"switch; the replica had {replicated}: {lacking}"
    )


# -- a fail-over inside each step of the driver ------------------------------------------

STEPS = ("head", "xa", "gtids", "statements", "batch_ends", "startup")


def _seed_small(primary) -> None:
    primary.fresh_database("midstep")
    primary.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database="midstep")
    primary.execute("INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)", database="midstep")


@pytest.fixture(scope="module", params=["replication", "dump"])
def steady_pair(request):
    """A pair nobody kills: the proxy in front of it is switched from one to the other."""
    with ReplicatedPair(built=request.param, seed=_seed_small) as started:
        yield started


def _armed(monkeypatch, owner, name: str, proxy: SwitchingProxy, port: int) -> list[str]:
    """``owner.name`` switches ``proxy`` to ``port`` when it is first called, before it
    does anything: the step meets the new server at its first round trip."""
    original = getattr(owner, name)
    hits: list[str] = []

    def switching(*args, **kwargs):
        if not hits:
            hits.append(name)
            proxy.switch(port)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, switching)
    return hits


@pytest.mark.parametrize("step", STEPS)
def test_a_fail_over_met_inside_any_step_of_the_driver_is_followed(steady_pair, monkeypatch, step):
    """Each step that reads the binlog (the head, the XA watermark, the GTID tracker, the
    statement scan, the batch ends, the start's resolution) meets the new server at its
    first round trip; the batch is planned on the new server from the offset found there
    by its GTID state, never by asking it for the old server's file names."""
    from cdc_source.gtid import parse_state
    from cdc_source.offsets import SourceOffset
    from cdc_source.options import parse_options
    from cdc_source.spark_readers import discover
    from coordinator import startup
    from coordinator.batch_end import BatchEnds
    from coordinator.ddl_scan import DdlScan
    from coordinator.driver import QueryDriver
    from coordinator.gtid_tracker import GtidListener, GtidTracker
    from coordinator.server_link import ServerLink
    from coordinator.xa_watermark import XaWatermark

    pair = steady_pair
    flavor = "mariadb" if pair.mariadb else "mysql"
    with SwitchingProxy(pair.primary.info.port) as proxy:
        # Each step is one the driver's own pass takes: the follower, which would plan the
        # batch without them, is off.
        extra = {"scan.snapshot.chunks-per-batch": "100", "scan.binlog.follower.enabled": "false"}
        if step == "batch_ends":  # a limit the batch end is counted to, in its own pass
            extra["scan.binlog.max-rows-per-batch"] = "5"
        if step == "startup":
            extra["scan.startup.mode"] = "earliest-offset"
        options = parse_options(pair.source_options("midstep", r"midstep\.t", proxy=proxy, **extra))
        driver = QueryDriver(options, discover(options))
        try:
            identity = driver.server_identity()
            offset = SourceOffset(None, None, driver.fingerprint)
            if step != "startup":
                offset = SourceOffset(None, driver.planner.initial_cursor(), driver.fingerprint)
                while offset.snapshot is not None or offset.binlog is None:
                    offset = driver.latest(offset)
                for i in range(10):
                    pair.primary.execute(
                        f"INSERT INTO t VALUES ({100 + i}, {i}) ON DUPLICATE KEY UPDATE v = v + 1",
                        database="midstep",
                    )
            pair.wait_caught_up()
            port = pair.replica.info.port
            owner, name = {
                "head": (ServerLink, "head"),
                "xa": (XaWatermark, "needed"),
                "gtids": (GtidListener, "__init__"),
                "statements": (DdlScan, "listener"),
                "batch_ends": (BatchEnds, "listener"),
                "startup": (startup, "resolve"),
            }[step]
            hits = _armed(monkeypatch, owner, name, proxy, port)
            end = driver.latest(offset)
            tasks = driver.tasks(offset, end)
        finally:
            driver.close()
    assert hits == [name], f"the step {step} did not run"
    assert end.server != identity and end.server == driver.server_identity()
    assert end.binlog.file.startswith("replica-bin.")
    assert end.binlog.epoch == (0 if step == "startup" else 1)
    assert tasks or step == "startup"
    state = parse_state(end.binlog.gtids, flavor)
    if step != "startup":
        assert state.contains(parse_state(offset.binlog.gtids, flavor))
    # the end's state is the one the replica itself has at that position
    tracker = GtidTracker(lambda: pair.replica.admin(), 4_000_000_003, flavor)
    assert tracker.state_from_file(end.binlog) == end.binlog.gtids
