"""MySQL's snapshot path, on MySQL and run on MariaDB, and the visibility race it exists for.

A commit held between its binlog write and its engine commit (semi-sync AFTER_SYNC with
no replica: the server waits ``rpl_semi_sync_master_timeout``, MySQL's
``rpl_semi_sync_source_timeout``, there) is at or before the planned position P and
invisible to a snapshot opened at once. Without a proof of visibility the snapshot misses
it; ``gtid-wait`` (MySQL's path; on MariaDB its wait is made by snapshot probes) and
``snapshot-status`` (MariaDB's own position) do not.

Each test plans a batch read on the driver and runs its chunk tasks in this process, so
the held commit is certainly still held when the snapshot opens.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from cdc_source.mysql_client import read_head
from cdc_source.offsets import BinlogPosition
from cdc_source.options import parse_options
from cdc_source.partitions import ChunkTask
from cdc_source.spark_readers import discover
from coordinator.driver import QueryDriver
from coordinator.gtid_tracker import GtidTracker, GtidTrackingError
from reader.task_runner import run_task

ONE_DECODER = True
HOLD_SECONDS = 6  # how long the server holds the commit before giving up on a replica


@pytest.fixture(scope="module")
def private(killable_server):
    """A server of this module's own: the tests change its semi-sync settings."""
    return killable_server


def _admin(server):
    return server.admin()


def _setup(server, database: str) -> dict[str, str]:
    server.fresh_database(database)
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)",
        "INSERT INTO t VALUES " + ",".join(f"({i}, 0)" for i in range(1, 201)),
        database=database,
    )
    return server.source_options(database, rf"{database}\.t")


class HeldCommit:
    """An UPDATE whose commit the server holds after writing it to the binlog."""

    def __init__(self, server, database: str) -> None:
        self.server, self.database = server, database
        self.thread = threading.Thread(target=self._run)
        self.error: BaseException | None = None
        # MariaDB's semi-sync is built in; MySQL's is a plugin, with "source" for "master".
        self.prefix = "rpl_semi_sync_master" if server.is_mariadb else "rpl_semi_sync_source"

    def _install_mysql_plugin(self, cur) -> None:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.plugins "
            "WHERE plugin_name = 'rpl_semi_sync_source'"
        )
        if not cur.fetchone()[0]:
            cur.execute("INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so'")

    def __enter__(self) -> HeldCommit:
        with _admin(self.server) as conn, conn.cursor() as cur:
            if not self.server.is_mariadb:
                self._install_mysql_plugin(cur)
            cur.execute(f"SET GLOBAL {self.prefix}_wait_point = 'AFTER_SYNC'")
            cur.execute(f"SET GLOBAL {self.prefix}_timeout = {HOLD_SECONDS * 1000}")
            cur.execute(f"SET GLOBAL {self.prefix}_enabled = ON")
        before = self.server.binlog_head()[1]
        self.thread.start()
        deadline = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < deadline:  # until the commit's events are in the binlog
            if self.server.binlog_head()[1] > before:
                return self
            time.sleep(0.02)
        raise AssertionError("the held commit never reached the binlog")

    def _run(self) -> None:
        try:
            with _admin(self.server) as conn, conn.cursor() as cur:
                cur.execute(f"UPDATE `{self.database}`.t SET v = 1 WHERE id = 100")
        except BaseException as err:  # noqa: BLE001 - reported by __exit__
            self.error = err

    def still_held(self) -> bool:
        return self.thread.is_alive()

    def __exit__(self, *exc) -> None:
        self.thread.join(HOLD_SECONDS * 3)
        with _admin(self.server) as conn, conn.cursor() as cur:
            cur.execute(f"SET GLOBAL {self.prefix}_enabled = OFF")
        if self.error is not None:
            raise self.error


def _snapshot_rows(options: dict[str, str]) -> tuple[dict[int, int], list[ChunkTask]]:
    """The batch read's rows (id -> v), its tasks run here, planned while the commit is held."""
    parsed = parse_options(options)
    tables = discover(parsed)
    driver = QueryDriver(parsed, tables)
    try:
        tasks = driver.snapshot_tasks()
    finally:
        driver.close()
    rows: dict[int, int] = {}
    for task in tasks:
        for batch in run_task(task, parsed.connection_kwargs(), tuple(tables)):
            table = pa.Table.from_batches([batch])
            for row in table.select(["id", "v"]).to_pylist():
                assert row["id"] not in rows
                rows[row["id"]] = row["v"]
    return rows, [t for t in tasks if isinstance(t, ChunkTask)]


def test_a_commit_held_after_its_binlog_write_is_missed_without_a_proof(private):
    """The race is real here: what the other two tests pass is not vacuous."""
    options = _setup(private, "vis_unsafe")
    options["scan.snapshot.visibility"] = "head-unsafe"
    with HeldCommit(private, "vis_unsafe") as held:
        rows, tasks = _snapshot_rows(options)
        assert held.still_held(), "the snapshot must open while the commit is held"
    assert tasks and all(t.visibility == "head-unsafe" for t in tasks)
    assert rows[100] == 0  # the update is at or before P, and lost: the race


@pytest.mark.parametrize("visibility", ["gtid-wait", "snapshot-status"])
def test_a_commit_held_after_its_binlog_write_is_in_the_snapshot(private, visibility):
    if visibility == "snapshot-status" and not private.is_mariadb:
        pytest.skip("MySQL reports no snapshot position (binlog_snapshot_*: MariaDB, Percona)")
    database = f"vis_{visibility.replace('-', '_')}"
    options = _setup(private, database)
    options["scan.snapshot.visibility"] = visibility
    with HeldCommit(private, database):
        rows, tasks = _snapshot_rows(options)
    assert tasks and all(t.visibility == visibility for t in tasks)
    assert all(t.target.gtids for t in tasks), "the planned position carries its GTID state"
    assert len(rows) == 200
    assert rows[100] == 1
    assert all(v == 0 for k, v in rows.items() if k != 100)


def _server_gtid_pos(server) -> str:
    with server.admin() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@global.gtid_binlog_pos")
        return cur.fetchone()[0]


def _head(server) -> BinlogPosition:
    with server.admin() as conn:
        file, pos, _, _ = read_head(conn)
    return BinlogPosition(file, pos)


def test_the_tracked_gtid_state_is_the_servers_own_across_files(private):
    """The driver's exact GTID state at a position equals MariaDB's gtid_binlog_pos there,
    built from the file's GTID_LIST alone and incrementally across rotations."""
    if not private.is_mariadb:
        pytest.skip("MariaDB's GTID positions (GTID_LIST events, domains, BINLOG_GTID_POS)")
    private.fresh_database("vis_gtids")
    tracker = GtidTracker(private.admin, 4_000_000_001, "mariadb")
    private.execute("CREATE TABLE g (id INT PRIMARY KEY)", database="vis_gtids")
    first = _head(private)
    first = BinlogPosition(first.file, first.pos, tracker.at(None, first))
    assert first.gtids == _server_gtid_pos(private)
    for round_ in range(3):
        private.execute(
            *(f"INSERT INTO g VALUES ({round_ * 10 + i})" for i in range(5)),
            "FLUSH BINARY LOGS",
            f"INSERT INTO g VALUES ({round_ * 10 + 9})",
            database="vis_gtids",
        )
    second = _head(private)
    expected = _server_gtid_pos(private)
    assert second.file != first.file
    assert tracker.at(first, second) == expected  # from the last state
    assert tracker.at(None, second) == expected  # BINLOG_GTID_POS, asked of the server
    assert tracker.state_from_file(second) == expected  # read from the file's start
    assert tracker.at(first, first) == first.gtids
    # A domain of its own: MariaDB positions keep one GTID per domain.
    with private.admin() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION gtid_domain_id = 7")
        cur.execute("INSERT INTO vis_gtids.g VALUES (1000)")
    third = _head(private)
    assert tracker.at(BinlogPosition(second.file, second.pos, expected), third) == (
        _server_gtid_pos(private)
    )
    assert tracker.at(None, third) == tracker.state_from_file(third) == _server_gtid_pos(private)
    inside = BinlogPosition(third.file, third.pos - 1)  # not where an event ends
    with pytest.raises(GtidTrackingError):
        tracker.at(None, inside)
    assert "7-" in _server_gtid_pos(private)


def test_a_gtid_wait_that_times_out_fails_the_task_with_the_reason(private):
    """A commit held longer than scan.snapshot.gtid-wait.timeout fails the task, naming
    the option, instead of reading a snapshot that may miss it."""
    options = _setup(private, "vis_timeout")
    options["scan.snapshot.visibility"] = "gtid-wait"
    options["scan.snapshot.gtid-wait.timeout"] = "1"
    with HeldCommit(private, "vis_timeout"):
        with pytest.raises(Exception, match="scan.snapshot.gtid-wait.timeout"):
            _snapshot_rows(options)
