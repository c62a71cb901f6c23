"""Startup modes, the envelope schema, string keys under a case-insensitive collation,
statements without row events, and snapshot reads racing hard commits."""

from __future__ import annotations

import json
import threading

import pymysql
import pytest

from tests.support.streams import StreamRun, handover_batch, read_output, wait_for
from tests.support.workload import AUTO_INCREMENT, check_exactly_once, load


def test_latest_offset_mode_streams_only_changes_after_the_start(server, spark, tmp_path):
    database = server.fresh_database("latest_db")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t VALUES (1, 1), (2, 2)",
        database=database,
    )
    options = server.source_options(
        database, rf"{database}\.t", **{"scan.startup.mode": "latest-offset"}
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    assert read_output(spark, run.out) == []
    server.execute(
        "INSERT INTO t VALUES (3, 3)", "UPDATE t SET v = 20 WHERE id = 2", database=database
    )
    run.run_to_end()
    rows = sorted(read_output(spark, run.out), key=lambda r: r["_seq"])
    assert [(r["_op"], r["id"], r["v"]) for r in rows] == [("c", 3, 3), ("u", 2, 20)]


def test_several_tables_share_one_envelope_schema(server, spark, tmp_path):
    database = server.fresh_database("envelope_db")
    server.execute(
        "CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(10))",
        "CREATE TABLE b (k1 VARCHAR(5), k2 INT, amount DECIMAL(6,2), PRIMARY KEY (k1, k2))",
        "INSERT INTO a VALUES (1, 'x')",
        "INSERT INTO b VALUES ('p', 1, 2.50)",
        database=database,
    )
    run = StreamRun(
        spark,
        server.source_options(database, rf"{database}\.(a|b)"),
        tmp_path / "ck",
        tmp_path / "out",
    )
    run.run_to_end()
    server.execute(
        "UPDATE b SET amount = 3.75 WHERE k1 = 'p'", "DELETE FROM a WHERE id = 1", database=database
    )
    run.run_to_end()
    rows = sorted(read_output(spark, run.out), key=lambda r: r["_seq"])
    assert [(r["table"], r["op"]) for r in rows] == [("a", "r"), ("b", "r"), ("b", "u"), ("a", "d")]
    update = rows[2]
    assert update["database"] == database
    assert json.loads(update["key"]) == {"k1": "p", "k2": 1}
    assert json.loads(update["before"])["amount"] == "2.50"
    assert json.loads(update["after"])["amount"] == "3.75"
    assert rows[3]["after"] is None and json.loads(rows[3]["before"]) == {"id": 1, "name": "x"}


def test_string_keys_follow_the_servers_collation(server, spark, tmp_path):
    """Chunk boundaries, the frontier and key identity agree with ORDER BY under
    utf8mb4_general_ci: case is ignored and trailing spaces do not count."""
    database = server.fresh_database("collation_db")
    server.execute(
        "CREATE TABLE words (w VARCHAR(20) PRIMARY KEY, n INT) "
        "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
        database=database,
    )
    words = [
        "a",
        "A1",
        "b ",
        "B1",
        "b\t",
        "c",
        "C2 ",
        "d",
        "Dz",
        "e  ",
        "Éa",
        "f",
        "F2",
        "g",
        "G3 ",
        "h",
        "ß",
        "zz",
        "Zz1",
        "ZZ2 ",
    ]
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO words VALUES (%s, %s)", [(w, i) for i, w in enumerate(words)])
    options = server.source_options(
        database,
        rf"{database}\.words",
        **{"scan.incremental.snapshot.chunk.size": "2", "scan.snapshot.chunks-per-batch": "2"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    query = run.start()
    wait_for(lambda: len(run.batches_seen) >= 2, 120, "two snapshot batches", query)
    server.execute(
        "UPDATE words SET w = 'A' WHERE w = 'a'",  # same key, new spelling
        "UPDATE words SET n = n + 100 WHERE w = 'B1'",
        "UPDATE words SET w = 'b' WHERE w = 'b '",  # trailing space: same key
        "DELETE FROM words WHERE w = 'zz'",
        "INSERT INTO words VALUES ('Aa', 99), ('yy ', 98)",
        "UPDATE words SET w = 'c3' WHERE w = 'c'",  # a real key change
        database=database,
    )
    wait_for(lambda: handover_batch(run.checkpoint) is not None, 120, "the hand-over", query)
    query.stop()
    run.run_to_end()
    output = read_output(spark, run.out)
    reads = [r["w"].casefold().rstrip(" ") for r in output if r["_op"] == "r"]
    assert len(reads) == len(set(reads)), "a key was read twice by the snapshot"
    latest: dict[str, dict] = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        latest[row["w"].casefold().rstrip(" ")] = row
    replayed = {(r["w"], r["n"]) for r in latest.values() if r["_op"] != "d"}
    assert replayed == set(server.query("SELECT w, n FROM words", database=database))


@pytest.mark.one_decoder  # the resets are statements, not row images
def test_truncate_and_drop_of_a_typed_table_are_resets(server, spark, tmp_path):
    """TRUNCATE, and DROP then CREATE of the same name, reach the binlog with no row
    events: each is one 't' row at its position (every column NULL), and the rows written
    after it stream on, so a sink that drops the table's rows at 't' holds SELECT *."""
    database = server.fresh_database("truncate_db")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)",
        database=database,
    )
    run = StreamRun(
        spark, server.source_options(database, rf"{database}\.t"), tmp_path / "ck", tmp_path / "out"
    )
    run.run_to_end()
    server.execute(
        "UPDATE t SET v = 10 WHERE id = 1",
        "TRUNCATE TABLE t",
        "INSERT INTO t VALUES (4, 4), (5, 5)",
        database=database,
    )
    run.run_to_end()
    server.execute(
        "DROP TABLE t",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t VALUES (6, 6)",
        "UPDATE t SET v = 7 WHERE id = 6",
        database=database,
    )
    run.run_to_end()
    output = read_output(spark, run.out)
    resets = [r for r in output if r["_op"] == "t"]
    assert len(resets) == 2 and all(r["id"] is None and r["v"] is None for r in resets)
    latest: dict[int, dict] = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        if row["_op"] == "t":
            latest.clear()
        else:
            latest[row["id"]] = row
    rebuilt = {(r["id"], r["v"]) for r in latest.values() if r["_op"] != "d"}
    assert rebuilt == set(server.query("SELECT id, v FROM t", database=database)) == {(6, 7)}


@pytest.mark.one_decoder  # the snapshot's visibility, not the row decoder, is under test
def test_snapshot_is_exact_while_many_sessions_commit_hard(server, spark, tmp_path):
    """The binlog is written before the engine commits; chunks are read inside a consistent
    snapshot whose own binlog position is known, so no commit near a planned position is
    seen twice or missed. Four unthrottled writers commit while every chunk is read."""
    database = server.fresh_database("race_db")
    rows = 20_000
    load(server, database, AUTO_INCREMENT, rows)
    stop = threading.Event()
    counts = [0] * 4

    def hammer(index: int) -> None:
        conn = server.admin(database)
        with conn, conn.cursor() as cur:
            n = 0
            while not stop.wait(0.004):  # each session commits ~200 times a second
                key = (n * 7919 + index * 104729) % rows + 1
                try:
                    cur.execute(
                        "UPDATE orders SET amount = amount + 1, note = %s WHERE id = %s",
                        (f"w{index}-{n}", key),
                    )
                    if n % 5 == 0:
                        cur.execute(
                            "INSERT INTO orders (customer, amount, note, updated) "
                            "VALUES ('race', 1, 'i', NOW(6))"
                        )
                    if n % 7 == 0:
                        cur.execute("DELETE FROM orders WHERE id = %s", (key + 1,))
                except pymysql.err.MySQLError:
                    pass
                n += 1
            counts[index] = n

    threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(4)]
    for thread in threads:
        thread.start()
    options = server.source_options(
        database,
        rf"{database}\.orders",
        **{"scan.incremental.snapshot.chunk.size": "500", "scan.snapshot.chunks-per-batch": "8"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 600, "the hand-over", query)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        query.stop()
    run.run_to_end()
    assert sum(counts) > 1000
    check_exactly_once(server, database, AUTO_INCREMENT, read_output(spark, run.out))
