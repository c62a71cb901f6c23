"""Tables joining and leaving a running capture (docs/design.md, 'Tables joining and
leaving'), envelope output.

While a query streams under a writer: a table created that matches is streamed from its
CREATE; a table renamed into the pattern is snapshotted on its own (offset version 3,
``added``) while the others stream; a DROP, a TRUNCATE and a RENAME away are ``t`` rows
at their position. While the query is stopped: a table created, one dropped and the
pattern widened to an existing table; the restart finds which tables its checkpoint
had from the offset's fingerprint, and a table created and dropped in between is
streamed to its reset. Each time the tables rebuilt from the output
(sorted by ``_seq``, ``t`` dropping the table's rows) equal ``SELECT *``; a table renamed
away has no rows after its reset. Offsets stay under 1 KiB."""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest
from pyspark.errors import StreamingQueryException

from tests.support.server import TEST_URL_ENV, TestServer
from tests.support.streams import (
    StreamRun,
    handover_batch,
    largest_offset_bytes,
    read_output,
    source_offsets,
    wait_caught_up,
    wait_for,
)

ONE_DECODER = True  # the table set is the driver's; decoding is tested elsewhere


def _create(server, database: str, table: str, rows: int, first: int = 1) -> None:
    server.execute(
        f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
        database=database,
    )
    if rows:
        server.execute(
            f"INSERT INTO {table} SELECT seq, seq * 3, CONCAT('{table}-', seq) "
            f"FROM {server.seq(first, first + rows - 1)} ORDER BY seq",
            database=database,
        )


class _Writer(threading.Thread):
    """Inserts, updates and deletes on one table until stopped."""

    def __init__(self, server, database: str, table: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.database, self.table = server, database, table
        self.random = random.Random(seed)
        self._stop_event = threading.Event()

    def run(self) -> None:
        with self.server.admin(self.database) as conn, conn.cursor() as cur:
            while not self._stop_event.is_set():
                key = self.random.randint(1, 3000)
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
                time.sleep(0.003)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _rebuilt(rows: list[dict]) -> dict[str, dict[int, dict]]:
    """Each table as a sink rebuilds it: by ``_seq``, the latest image per key; ``t``
    drops every earlier row of its table."""
    tables: dict[str, dict[int, dict]] = {}
    for row in sorted(rows, key=lambda r: r["_seq"]):
        table = tables.setdefault(row["table"], {})
        if row["op"] == "t":
            table.clear()
            continue
        key = json.loads(row["key"])["id"]
        if row["op"] == "d":
            table.pop(key, None)
        else:
            table[key] = json.loads(row["after"])
    return tables


def _server_tables(server, database: str, names: list[str]) -> dict[str, dict[int, dict]]:
    result = {}
    for name in names:
        rows = server.query(f"SELECT id, v, s FROM {name}", database=database)
        result[name] = {r[0]: {"id": r[0], "v": r[1], "s": r[2]} for r in rows}
    return result


def _check(spark, server, run: StreamRun, database: str, present: list[str], gone: list[str]):
    rebuilt = _rebuilt(read_output(spark, run.out))
    expected = _server_tables(server, database, present)
    for name in present:
        assert rebuilt.get(name, {}) == expected[name], name
    for name in gone:
        assert rebuilt.get(name, {}) == {}, name
    assert largest_offset_bytes(run.checkpoint) < 1024


def test_tables_join_and_leave_a_running_capture(server, spark, tmp_path):
    database = server.fresh_database("table_set_db")
    _create(server, database, "t_a", 2000)
    _create(server, database, "t_b", 500)
    _create(server, database, "t_gone", 300)
    _create(server, database, "t_away", 100)  # renamed out of the pattern's reach
    _create(server, database, "other", 1500, first=5)  # renamed into the pattern later
    _create(server, database, "u_wide", 700)  # matched by a widened pattern later
    options = server.source_options(
        database,
        rf"{database}\.t_.*",
        **{
            "scan.incremental.snapshot.chunk.size": "400",
            "scan.snapshot.chunks-per-batch": "2",
            "scan.binlog.max-rows-per-batch": "2000",
        },
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    writer = _Writer(server, database, "t_a", seed=3)
    writer.start()
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 300, "the hand-over", query)
        server.execute(
            "CREATE TABLE t_new (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
            f"INSERT INTO t_new SELECT seq, seq, 'new' FROM {server.seq(1, 200)} ORDER BY seq",
            "UPDATE t_new SET v = -v WHERE id % 10 = 0",
            "DELETE FROM t_new WHERE id % 25 = 0",
            "UPDATE t_b SET v = v + 1 WHERE id <= 50",
            "TRUNCATE TABLE t_b",
            f"INSERT INTO t_b SELECT seq, seq, 'again' FROM {server.seq(1, 30)} ORDER BY seq",
            "UPDATE t_gone SET v = 0 WHERE id <= 10",
            "DROP TABLE t_gone",
            "RENAME TABLE other TO t_other, t_away TO away",
            "UPDATE away SET v = 0",
            "UPDATE t_other SET v = v + 100 WHERE id % 3 = 0",
            database=database,
        )
        time.sleep(3)
        server.execute("DELETE FROM t_other WHERE id % 7 = 0", database=database)
        wait_caught_up(server, run.checkpoint, query, 180)
    finally:
        writer.stop()
        query.stop()
    run.run_to_end()

    offsets = source_offsets(run.checkpoint)
    assert any(o.get("added", {}).get("table") == f"{database}.t_other" for o in offsets.values())
    assert any(o["v"] == 3 for o in offsets.values())
    rows = read_output(spark, run.out)
    resets = sorted(r["table"] for r in rows if r["op"] == "t")
    assert resets == ["t_away", "t_b", "t_gone"]
    # The joining table's snapshot rows are as of one position, after its RENAME.
    assert any(r["table"] == "t_other" and r["op"] == "r" for r in rows)
    assert not any(r["table"] == "t_new" and r["op"] == "r" for r in rows)
    present = ["t_a", "t_b", "t_new", "t_other"]
    _check(spark, server, run, database, present, ["t_gone", "t_away", "other", "away"])

    # While the query is stopped: a table created, one dropped, and the pattern widened
    # to a table that existed all along (snapshotted while the others stream).
    server.execute("UPDATE u_wide SET v = -1 WHERE id <= 5", database=database)
    server.execute(
        "UPDATE t_new SET v = 1 WHERE id = 1",
        "DROP TABLE t_new",
        database=database,
    )
    _create(server, database, "t_later", 50)
    # Created and dropped within the restart's first range: its rows, then its reset.
    _create(server, database, "t_blip", 20)
    server.execute("UPDATE t_blip SET v = 0 WHERE id <= 5", "DROP TABLE t_blip", database=database)
    run.options = {**options, "table-name": rf"{database}\.(t_.*|u_wide)"}
    writer = _Writer(server, database, "t_a", seed=4)
    writer.start()
    try:
        run.run_to_end()
    finally:
        writer.stop()
    run.run_to_end()
    rows = read_output(spark, run.out)
    resets = sorted(r["table"] for r in rows if r["op"] == "t")
    assert resets == ["t_away", "t_b", "t_blip", "t_gone", "t_new"]
    blip = sorted((r for r in rows if r["table"] == "t_blip"), key=lambda r: r["_seq"])
    assert [r["op"] for r in blip] == ["c"] * 20 + ["u"] * 5 + ["t"]
    assert any(r["table"] == "u_wide" and r["op"] == "r" for r in rows)
    present = ["t_a", "t_b", "t_other", "t_later", "u_wide"]
    _check(spark, server, run, database, present, ["t_gone", "t_new"])

    # Narrowed: a table no longer matched stops being captured, the rest goes on.
    run.options = {**options, "table-name": rf"{database}\.(t_a|t_b|t_other|t_later)"}
    server.execute(
        "UPDATE u_wide SET v = 5", "UPDATE t_a SET v = 5 WHERE id < 9", database=database
    )
    run.run_to_end()
    rows = read_output(spark, run.out)
    latest_u = max(r["_seq"] for r in rows if r["table"] == "u_wide")
    assert not any(
        r["table"] == "u_wide" and r["_seq"] == latest_u and json.loads(r["after"])["v"] == 5
        for r in rows
    )
    _check(spark, server, run, database, ["t_a", "t_b", "t_other", "t_later"], [])


def test_a_typed_query_stops_when_a_second_table_matches(server, spark, tmp_path):
    database = server.fresh_database("table_set_typed_db")
    _create(server, database, "t_one", 100)
    options = server.source_options(database, rf"{database}\.t_.*")
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 120, "the hand-over", query)
        _create(server, database, "t_two", 10)
        with pytest.raises(StreamingQueryException) as err:
            query.awaitTermination(120)
    finally:
        query.stop()
    assert "typed output is the columns of" in str(err.value)


def test_statements_naming_tables_in_another_case_under_lower_case_table_names_1(spark, tmp_path):
    """With ``lower_case_table_names=1`` the server stores names in lowercase while the
    binlog keeps each statement as written: a TRUNCATE, CREATE and DROP naming the tables
    in other cases are followed as the tables they are."""
    if os.environ.get(TEST_URL_ENV):
        pytest.skip("needs a server started with lower_case_table_names=1")
    server = TestServer(extra_args=("--lower-case-table-names=1",))
    try:
        database = server.fresh_database("case_db")
        _create(server, database, "t_a", 300)
        _create(server, database, "t_b", 50)  # two tables: the envelope, which tables join
        options = server.source_options(database, rf"{database}\.t_.*")
        options["scan.incremental.snapshot.chunk.size"] = "100"
        run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
        query = run.start()
        try:
            wait_for(lambda: handover_batch(run.checkpoint) is not None, 120, "hand-over", query)
            server.execute(
                "CREATE TABLE Case_DB.T_New (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
                f"INSERT INTO CASE_DB.t_new SELECT seq, seq, 'n' FROM {server.seq(1, 40)}",
                "TRUNCATE TABLE Case_Db.T_A",
                f"INSERT INTO case_db.T_A SELECT seq, seq, 'again' FROM {server.seq(1, 10)}",
                "UPDATE case_db.t_new SET v = 0 WHERE id <= 3",
                "DROP TABLE `CASE_DB`.`T_NEW`",
                database=database,
            )
            wait_caught_up(server, run.checkpoint, query, 120)
        finally:
            query.stop()
        rows = read_output(spark, run.out)
        assert sorted(r["table"] for r in rows if r["op"] == "t") == ["t_a", "t_new"]
        _check(spark, server, run, database, ["t_a", "t_b"], ["t_new"])
    finally:
        server.stop()


def test_the_first_batch_captures_the_tables_created_since_the_query_started(server):
    """The first batch has no range to read statements from: its tables are those matching
    at its position. Initial mode: a table created after the query's tables were read
    whose name sorts after the first table is read by the main snapshot in its turn; one
    sorting before it is snapshotted on its own after the hand-over; one dropped is not
    read. Latest-offset mode: a table created is streamed from the first position."""
    from cdc_source.offsets import SnapshotCursor, SourceOffset, table_fingerprint
    from cdc_source.options import parse_options
    from cdc_source.spark_readers import discover
    from coordinator.driver import QueryDriver

    database = server.fresh_database("first_batch_db")
    _create(server, database, "t_b", 30)
    _create(server, database, "t_d", 30)
    raw = server.source_options(database, rf"{database}\.t_.*")
    options = parse_options(raw)
    tables = discover(options)  # as the query read them when it started
    names = [t.name for t in tables]
    _create(server, database, "t_a", 20)  # sorts before the first table
    _create(server, database, "t_c", 20)
    server.execute("DROP TABLE t_d", database=database)

    driver = QueryDriver(options, tables)
    try:
        start = SourceOffset(None, SnapshotCursor(names[0], None), table_fingerprint(names))
        end = driver.latest(start)
        members = driver.captured.at(end)
        assert members.owned == {f"{database}.t_b", f"{database}.t_c"}
        assert members.pending == (f"{database}.t_a",)
        assert _chunk_tables(driver, start, end) == {f"{database}.t_b", f"{database}.t_c"}
        joined = set()
        while True:  # to the end: the joining table is snapshotted after the hand-over
            start, end = end, driver.latest(end)
            if end == start:
                break
            if start.snapshot is None:
                joined |= _chunk_tables(driver, start, end)
        assert joined == {f"{database}.t_a"}
        assert driver.captured.at(end).owned == {f"{database}.t_{n}" for n in "abc"}
    finally:
        driver.close()

    latest = parse_options({**raw, "scan.startup.mode": "latest-offset"})
    driver = QueryDriver(latest, tables)
    try:
        _create(server, database, "t_e", 0)
        start = SourceOffset(None, None, table_fingerprint(names))
        end = driver.latest(start)
        members = driver.captured.at(end)
        assert f"{database}.t_e" in members.owned and not members.pending
    finally:
        driver.close()


def _chunk_tables(driver, start, end) -> set[str]:
    """The tables whose chunks the batch (start, end] reads."""
    tasks = driver.tasks(start, end)
    return {chunk.table.name for task in tasks for chunk in getattr(task, "chunks", ())}


def test_the_statements_of_a_range_are_read_in_the_pass_that_finds_its_gtids(server):
    """With GTIDs tracked, one pass over a batch range gives its GTID state and its table
    statements: the statement scan reads nothing of its own, and a table created in the
    range still joins."""
    from cdc_source.offsets import SourceOffset, table_fingerprint
    from cdc_source.options import parse_options
    from cdc_source.spark_readers import discover
    from coordinator.driver import QueryDriver

    database = server.fresh_database("one_pass_db")
    _create(server, database, "t_a", 10)
    _create(server, database, "t_z", 1)  # two tables: the envelope, which tables may join
    raw = server.source_options(database, rf"{database}\.t_.*")
    options = parse_options({**raw, "scan.startup.mode": "latest-offset"})
    tables = discover(options)
    driver = QueryDriver(options, tables)
    try:
        first = driver.latest(SourceOffset(None, None, table_fingerprint([t.name for t in tables])))
        _create(server, database, "t_b", 5)
        server.execute("UPDATE t_a SET v = 0 WHERE id < 3", database=database)
        end = driver.latest(first)
        assert end.binlog.gtids and end.binlog.coordinates > first.binlog.coordinates
        assert f"{database}.t_b" in driver.captured.at(end).owned
        tasks = driver.tasks(first, end)
        assert any(s.name == f"{database}.t_b" for t in tasks for s in t.streamed_from_creation)
        assert driver.ddl.scans == 0
    finally:
        driver.close()
