"""scan.startup.mode: earliest-offset, specific-offset (file + pos, GTID set), timestamp
and snapshot, each in a real query after writes before and after its start point; the
table rebuilt from the output is compared with what it must be, every column. Purged and
future start positions are clear errors."""

from __future__ import annotations

import random
import threading
import time

import pytest

from cdc_source.mysql_client import connect
from cdc_source.offsets import SourceOffset
from cdc_source.options import parse_options
from cdc_source.preflight import run_preflight
from coordinator.driver import QueryDriver
from coordinator.startup import StartupPositionError
from tests.support.streams import (
    StreamRun,
    committed_batches,
    handover_batch,
    largest_offset_bytes,
    read_output,
    source_offsets,
    wait_for,
)

ONE_DECODER = True  # where a stream starts does not depend on the row decoder

COLUMNS = ("id", "v", "n")
BEFORE = (
    "INSERT INTO t VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)",
    "UPDATE t SET n = 10 WHERE id = 1",
)
# After the start point: an insert, an update and a delete of rows written before it, an
# insert updated again in one transaction, and a multi-row transaction.
AFTER = (
    "INSERT INTO t VALUES (4, 'four', 4)",
    "UPDATE t SET v = 'uno', n = 11 WHERE id = 1",
    "DELETE FROM t WHERE id = 2",
    "BEGIN",
    "INSERT INTO t VALUES (5, 'five', 5), (6, 'six', 6)",
    "UPDATE t SET n = 55 WHERE id = 5",
    "COMMIT",
)
AFTER_OPS = [("c", 4), ("u", 1), ("d", 2), ("c", 5), ("c", 6), ("u", 5)]
LARGEST: dict[str, int] = {}


def _table(server, name: str) -> str:
    database = server.fresh_database(name)
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)", database=database)
    return database


def _head(server) -> tuple[str, int]:
    return server.binlog_head()


def _purge_to_head_file(server) -> str:
    """A new binlog file, and every older one purged. MariaDB keeps a file until its
    binlog checkpoint passed it (PURGE skips it with a warning), so purge until it is gone."""
    server.execute("FLUSH BINARY LOGS")
    first, _ = _head(server)

    def purged() -> bool:
        server.execute(f"PURGE BINARY LOGS TO '{first}'")
        return str(server.query("SHOW BINARY LOGS")[0][0]) == first

    wait_for(purged, 60, f"the binlog files before {first} to be purged")
    return first


def _rebuild(rows: list[dict]) -> dict[int, tuple]:
    latest: dict[int, dict] = {}
    for row in sorted(rows, key=lambda r: r["_seq"]):
        latest[row["id"]] = row
    return {k: tuple(r[c] for c in COLUMNS) for k, r in latest.items() if r["_op"] != "d"}


def _select(server, database: str, ids) -> dict[int, tuple]:
    rows = server.query(
        f"SELECT id, v, n FROM t WHERE id IN ({', '.join(map(str, ids))})", database=database
    )
    return {row[0]: tuple(row) for row in rows}


def _run_mode(server, spark, tmp_path, database: str, name: str, **mode: str) -> list[dict]:
    options = server.source_options(database, rf"{database}\.t", **mode)
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    offsets = source_offsets(run.checkpoint)
    # batch 0 ends at the resolved start and reads nothing; batch 1 reads from there
    assert offsets[0]["binlog"] is not None and offsets[0]["snapshot"] is None
    LARGEST[name] = largest_offset_bytes(run.checkpoint)
    print(f"{name}: largest offset {LARGEST[name]} bytes; start {offsets[0]['binlog']}")
    assert LARGEST[name] < 1024
    return read_output(spark, run.out)


def _check_after_only(server, database: str, rows: list[dict]) -> None:
    """Exactly the changes of AFTER, in order; the rebuilt rows equal the table's."""
    ordered = sorted(rows, key=lambda r: r["_seq"])
    assert [(r["_op"], r["id"]) for r in ordered] == AFTER_OPS
    touched = {4, 1, 2, 5, 6}
    assert _rebuild(rows) == _select(server, database, touched)


def test_earliest_offset_starts_at_the_oldest_binlog_kept(server, spark, tmp_path):
    database = _table(server, "start_earliest")
    server.execute(*BEFORE, database=database)
    _purge_to_head_file(server)
    server.execute(*AFTER, database=database)
    rows = _run_mode(
        server, spark, tmp_path, database, "earliest", **{"scan.startup.mode": "earliest-offset"}
    )
    _check_after_only(server, database, rows)


def test_specific_offset_file_and_position(server, spark, tmp_path):
    database = _table(server, "start_filepos")
    server.execute(*BEFORE, database=database)
    file, pos = _head(server)
    server.execute("FLUSH BINARY LOGS")  # the start is in an older file than the head
    server.execute(*AFTER, database=database)
    rows = _run_mode(
        server,
        spark,
        tmp_path,
        database,
        "specific file+pos",
        **{
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": file,
            "scan.startup.specific-offset.pos": str(pos),
        },
    )
    _check_after_only(server, database, rows)


def test_specific_offset_gtid_set(server, spark, tmp_path):
    database = _table(server, "start_gtid")
    server.execute(*BEFORE, database=database)
    gtids = server.gtid_state()
    server.execute(*AFTER, database=database)
    rows = _run_mode(
        server,
        spark,
        tmp_path,
        database,
        "specific gtid-set",
        **{"scan.startup.mode": "specific-offset", "scan.startup.specific-offset.gtid-set": gtids},
    )
    _check_after_only(server, database, rows)
    offsets = source_offsets(tmp_path / "ck")
    assert offsets[0]["binlog"]["gtids"] == gtids  # the start's exact GTID state


def test_timestamp_starts_at_the_first_transaction_at_or_after_it(server, spark, tmp_path):
    database = _table(server, "start_time")
    for statement in BEFORE:  # several files, so the search has files to choose from
        server.execute(statement, database=database)
        server.execute("FLUSH BINARY LOGS")
    ((last_before,),) = server.query("SELECT UNIX_TIMESTAMP()")
    wait_for(
        lambda: server.query("SELECT UNIX_TIMESTAMP()")[0][0] > last_before,
        30,
        "the server's clock to pass the second of the last write before the start",
    )
    start_ms = (int(last_before) + 1) * 1000
    server.execute(*AFTER[:3], database=database)
    server.execute("FLUSH BINARY LOGS")
    server.execute(*AFTER[3:], database=database)
    rows = _run_mode(
        server,
        spark,
        tmp_path,
        database,
        "timestamp",
        **{"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(start_ms)},
    )
    _check_after_only(server, database, rows)


def test_snapshot_mode_ends_at_the_handover(server, spark, tmp_path):
    """availableNow: the snapshot batches, then the query finishes; a later run of the
    same checkpoint plans nothing. A processing-time trigger: no batch after the
    hand-over, however long the query runs and whatever is written meanwhile."""
    database = _table(server, "start_snapshot")
    server.execute(*BEFORE, database=database)
    server.execute(
        f"INSERT INTO t SELECT seq, CONCAT('r', seq), seq FROM {server.seq(10, 40)} ORDER BY seq",
        database=database,
    )
    at_handover = _select(server, database, range(1, 41))
    extra = {
        "scan.startup.mode": "snapshot",
        "scan.incremental.snapshot.chunk.size": "8",
        "scan.snapshot.chunks-per-batch": "1",
    }
    options = server.source_options(database, rf"{database}\.t", **extra)

    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    assert _rebuild(read_output(spark, run.out)) == at_handover
    assert {r["_op"] for r in read_output(spark, run.out)} == {"r"}
    last = handover_batch(run.checkpoint)
    assert last is not None and last == max(source_offsets(run.checkpoint)) and last >= 4
    server.execute(*AFTER, database=database)
    run.run_to_end()  # finishes with no batch: nothing after the hand-over
    assert max(source_offsets(run.checkpoint)) == last
    assert _rebuild(read_output(spark, run.out)) == at_handover

    # processing-time trigger, a new checkpoint
    server.execute("UPDATE t SET n = n + 1000 WHERE id > 30", database=database)
    expected = _select(server, database, range(1, 41))
    timed = StreamRun(spark, options, tmp_path / "ck2", tmp_path / "out2")
    query = timed.start()
    try:
        wait_for(
            lambda: (
                (b := handover_batch(timed.checkpoint)) is not None
                and b in committed_batches(timed.checkpoint)
            ),
            120,
            "the hand-over batch to commit",
            query,
        )
        handover = handover_batch(timed.checkpoint)
        server.execute("INSERT INTO t VALUES (100, 'late', 100)", database=database)
        server.execute("UPDATE t SET v = 'late' WHERE id = 10", database=database)
        query.processAllAvailable()  # returns once a trigger found no new data
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
        assert max(source_offsets(timed.checkpoint)) == handover
        progress = query.lastProgress
        print("snapshot mode, processing-time trigger, last progress:", progress["sources"])
    finally:
        query.stop()
    assert _rebuild(read_output(spark, timed.out)) == expected
    LARGEST["snapshot"] = max(
        largest_offset_bytes(run.checkpoint), largest_offset_bytes(timed.checkpoint)
    )
    print(f"snapshot: largest offset {LARGEST['snapshot']} bytes")
    assert LARGEST["snapshot"] < 1024


class _Writer(threading.Thread):
    """Inserts, updates and deletes rows of ``t`` until stopped (one transaction each)."""

    def __init__(self, server, database: str) -> None:
        super().__init__(daemon=True)
        self.server, self.database = server, database
        self.done = threading.Event()
        self.count = 0

    def run(self) -> None:
        rng = random.Random(7)
        with self.server.admin(self.database) as conn, conn.cursor() as cur:
            conn.autocommit(True)
            while not self.done.is_set():
                key = rng.randint(1, 2500)
                kind = rng.random()
                if kind < 0.5:
                    cur.execute("UPDATE t SET n = n + 1, v = %s WHERE id = %s", (f"w{key}", key))
                elif kind < 0.75:
                    cur.execute("DELETE FROM t WHERE id = %s", (key,))
                else:
                    cur.execute(
                        "INSERT INTO t VALUES (%s, 'ins', 0) ON DUPLICATE KEY UPDATE n = -n",
                        (key,),
                    )
                self.count += 1
                time.sleep(0.002)  # leave the two cores to the query, too


def test_snapshot_mode_under_writes_is_the_table_at_the_handover(server, spark, tmp_path):
    """A snapshot-mode query (processing-time trigger) while a writer commits: its output
    is the table as of the hand-over position P, and no batch follows the hand-over.
    Proven by a specific-offset query from P: the snapshot's rows plus every change
    after P rebuild SELECT * exactly."""
    database = _table(server, "start_snapshot_writes")
    server.execute(
        f"INSERT INTO t SELECT seq, CONCAT('r', seq), seq FROM {server.seq(1, 2000)} ORDER BY seq",
        database=database,
    )
    extra = {
        "scan.startup.mode": "snapshot",
        "scan.incremental.snapshot.chunk.size": "100",
        "scan.snapshot.chunks-per-batch": "2",
    }
    options = server.source_options(database, rf"{database}\.t", **extra)
    writer = _Writer(server, database)
    writer.start()
    try:
        # A processing-time trigger: each batch is planned at the head of its time (under
        # availableNow every batch would be planned at the head frozen at the start).
        run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
        query = run.start()
        try:
            wait_for(
                lambda: (
                    (b := handover_batch(run.checkpoint)) is not None
                    and b in committed_batches(run.checkpoint)
                ),
                300,
                "the hand-over batch to commit",
                query,
            )
            count = writer.count
            wait_for(lambda: writer.count > count + 100, 60, "writes after the hand-over")
            query.processAllAvailable()
            assert query.isActive and query.exception() is None
        finally:
            query.stop()
    finally:
        writer.done.set()
        writer.join()
    handover = handover_batch(run.checkpoint)
    offsets = source_offsets(run.checkpoint)
    assert handover == max(offsets) and handover >= 3  # several batches while it wrote
    at = offsets[handover]["binlog"]
    snapshot_rows = read_output(spark, run.out)
    first = offsets[min(offsets)]["binlog"]

    def where(binlog: dict) -> tuple[int, int]:
        return int(binlog["file"].rsplit(".", 1)[1]), int(binlog["pos"])

    assert where(at) > where(first)  # the writer committed while the snapshot was read

    after = server.source_options(
        database,
        rf"{database}\.t",
        **{
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": at["file"],
            "scan.startup.specific-offset.pos": str(at["pos"]),
        },
    )
    rest = StreamRun(spark, after, tmp_path / "ck2", tmp_path / "out2")
    rest.run_to_end()
    assert source_offsets(rest.checkpoint)[0]["binlog"]["gtids"] == at["gtids"]
    changes = read_output(spark, rest.out)
    assert changes and {r["_op"] for r in changes} <= {"c", "u", "d"}
    state = _rebuild(snapshot_rows)
    for row in sorted(changes, key=lambda r: r["_seq"]):
        if row["_op"] == "d":
            assert state.pop(row["id"], None) is not None, f"delete of a row not there: {row}"
        else:
            state[row["id"]] = tuple(row[c] for c in COLUMNS)
    table = {
        row[0]: tuple(row) for row in server.query("SELECT id, v, n FROM t", database=database)
    }
    assert state == table
    print(
        f"snapshot under writes: {len(snapshot_rows)} rows (ops "
        f"{sorted({r['_op'] for r in snapshot_rows})}) in {handover + 1} batches, "
        f"{len(changes)} changes after the hand-over, {writer.count} writes"
    )


# -- errors -------------------------------------------------------------------------------


def _resolve(server, database: str, **mode: str) -> SourceOffset:
    """Batch 0 of a query in ``mode``, planned by the driver against the real server."""
    options = parse_options(server.source_options(database, rf"{database}\.t", **mode))
    conn = connect(options.connection_kwargs())
    try:
        tables = run_preflight(conn, lambda: connect(options.connection_kwargs()), options)
    finally:
        conn.close()
    driver = QueryDriver(options, tables)
    try:
        return driver.latest(SourceOffset(None, None, driver.fingerprint))
    finally:
        driver.close()


def _error(server, database: str, **mode: str) -> str:
    with pytest.raises(StartupPositionError) as raised:
        _resolve(server, database, **mode)
    message = str(raised.value)
    print(message)
    return message


def _kept(server) -> tuple[str, str]:
    files = [str(row[0]) for row in server.query("SHOW BINARY LOGS")]
    return files[0], files[-1]


def _file(number: int, like: str) -> str:
    return f"{like.rsplit('.', 1)[0]}.{number:06d}"


def test_purged_and_future_file_positions_are_clear_errors(server):
    database = _table(server, "start_errors_file")
    server.execute(*BEFORE, database=database)
    _purge_to_head_file(server)
    first, last = _kept(server)
    number = int(first.rsplit(".", 1)[1])
    option = "scan.startup.specific-offset.file"
    for name, word in ((_file(number - 1, first), "purged"), (_file(number + 50, first), "future")):
        message = _error(
            server,
            database,
            **{
                "scan.startup.mode": "specific-offset",
                option: name,
                "scan.startup.specific-offset.pos": "4",
            },
        )
        assert option in message and name in message and word in message
        assert first in message and last in message
    head_file, head_pos = _head(server)
    message = _error(
        server,
        database,
        **{
            "scan.startup.mode": "specific-offset",
            option: head_file,
            "scan.startup.specific-offset.pos": str(head_pos + 1000),
        },
    )
    assert "future" in message and str(head_pos + 1000) in message and last in message


def test_a_position_inside_a_transaction_is_refused_with_the_reason(server):
    database = _table(server, "start_errors_txn")
    file, before = _head(server)
    server.execute("INSERT INTO t VALUES (1, 'one', 1)", database=database)
    events = server.query(f"SHOW BINLOG EVENTS IN '{file}' FROM {before}")
    # (Log_name, Pos, Event_type, Server_id, End_log_pos, Info): the GTID event's end is
    # inside the transaction; the XID event's end is a boundary.
    gtid_end = next(int(e[4]) for e in events if e[2] == "Gtid")
    xid_end = next(int(e[4]) for e in events if e[2] == "Xid")
    mode = {"scan.startup.mode": "specific-offset", "scan.startup.specific-offset.file": file}
    message = _error(
        server, database, **mode, **{"scan.startup.specific-offset.pos": str(gtid_end)}
    )
    assert "inside a transaction" in message and str(gtid_end) in message
    message = _error(
        server, database, **mode, **{"scan.startup.specific-offset.pos": str(gtid_end + 1)}
    )
    assert "no event" in message
    start = _resolve(server, database, **mode, **{"scan.startup.specific-offset.pos": str(xid_end)})
    assert (start.binlog.file, start.binlog.pos) == (file, xid_end)
    gtids = server.gtid_state()
    assert start.binlog.gtids == gtids  # exact state in the middle of a file
    # 4, the file's start, is the end of its header events: the same changes
    start = _resolve(server, database, **mode, **{"scan.startup.specific-offset.pos": "4"})
    assert start.binlog.file == file and 4 < start.binlog.pos <= before


def test_each_resolution_is_a_function_of_the_binlog_not_of_the_moment(server):
    """Resolved twice with writes in between (a restart before batch 0 was logged), each
    mode gives the same offset, text and all (Spark compares offsets as strings)."""
    database = _table(server, "start_determinism")
    server.execute(*BEFORE, database=database)
    file, pos = _head(server)
    gtids = server.gtid_state()
    # A time after the second of the oldest kept file's first event, which an earlier test's
    # FLUSH may have written in this very second: a time equal to it is rightly refused
    # (binlog times are whole seconds, so the purged file before it may hold that second).
    ((last_before,),) = server.query("SELECT UNIX_TIMESTAMP()")
    wait_for(
        lambda: server.query("SELECT UNIX_TIMESTAMP()")[0][0] > last_before,
        30,
        "the server's clock to pass the second of the last write before the start",
    )
    now = int(last_before) + 1
    modes = [
        {"scan.startup.mode": "earliest-offset"},
        {
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": file,
            "scan.startup.specific-offset.pos": str(pos),
        },
        {"scan.startup.mode": "specific-offset", "scan.startup.specific-offset.gtid-set": gtids},
        {"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(int(now) * 1000)},
    ]
    first = [_resolve(server, database, **mode).to_json() for mode in modes]
    server.execute(*AFTER, database=database)
    server.execute("FLUSH BINARY LOGS")
    server.execute("UPDATE t SET n = n + 1", database=database)
    again = [_resolve(server, database, **mode).to_json() for mode in modes]
    assert again == first
    assert all(len(text) < 1024 for text in first)
    assert '"gtids":"' + gtids + '"' in first[1] and '"gtids":"' + gtids + '"' in first[2]


def test_purged_and_future_gtid_sets_and_times_are_clear_errors(server):
    database = _table(server, "start_errors_gtid")
    server.execute(*BEFORE, database=database)
    _purge_to_head_file(server)
    first, last = _kept(server)
    gtids = server.gtid_state()
    if server.is_mariadb:  # a position: one domain-server-seq per domain
        domain, server_id, seq = gtids.split(",")[0].split("-")
        purged, future = f"{domain}-{server_id}-1", f"{domain}-{server_id}-{int(seq) + 100}"
        other_flavour = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
    else:  # a set, holding the server's own uuid:1-N
        uuid, last_seq = server.last_own_gtid()
        purged, future = f"{uuid}:1", f"{uuid}:1-{last_seq + 100}"
        other_flavour = "0-1-5"
    option = "scan.startup.specific-offset.gtid-set"
    for wanted, word in ((purged, "purged"), (future, "future")):
        message = _error(
            server, database, **{"scan.startup.mode": "specific-offset", option: wanted}
        )
        assert option in message and wanted in message and word in message
        assert first in message and last in message
    message = _error(
        server, database, **{"scan.startup.mode": "specific-offset", option: other_flavour}
    )
    assert "MySQL" in message and "MariaDB" in message

    option = "scan.startup.timestamp-millis"
    future = int(time.time() * 1000) + 3_600_000
    message = _error(server, database, **{"scan.startup.mode": "timestamp", option: str(future)})
    assert option in message and str(future) in message and "future" in message
    message = _error(server, database, **{"scan.startup.mode": "timestamp", option: "1000"})
    assert option in message and "purged" in message and first in message


def test_a_start_error_stops_the_spark_query(server, spark, tmp_path):
    database = _table(server, "start_errors_spark")
    first, last = _kept(server)
    number = int(first.rsplit(".", 1)[1])
    options = server.source_options(
        database,
        rf"{database}\.t",
        **{
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": _file(number + 99, first),
            "scan.startup.specific-offset.pos": "4",
        },
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    query = run.start(available_now=True)
    with pytest.raises(Exception) as raised:
        query.awaitTermination()
    message = str(raised.value)
    assert "scan.startup.specific-offset.file" in message and "future" in message
    assert server.info.password not in message
