"""Schema changes of captured tables while a capture runs.

Typed output: an ALTER TABLE that adds, drops, renames or retypes a column stops the
query with an error naming the table, the change and the remedy; the restarted query
reads the new schema and goes on from its last committed batch with the new output
schema. Rows written before a change keep their values by column name, NULL for columns
they did not have. Envelope output goes on without stopping, each image carrying the
columns its row had. Each test rebuilds the table from the output and compares it with
``SELECT *``, every column.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from pyspark.errors import StreamingQueryException

from tests.support.server import TEST_PASSWORD
from tests.support.streams import (
    StreamRun,
    committed_batches,
    largest_offset_bytes,
    wait_caught_up,
)

ONE_DECODER = True  # what is tested sits above the row decoders


def _output(spark, run: StreamRun) -> list[dict]:
    """Every batch's rows, each batch read with its own schema (a retyped column's batches
    do not merge into one Parquet schema)."""
    rows: list[dict] = []
    for batch in sorted(run.out.iterdir()) if run.out.exists() else ():
        rows.extend(row.asDict() for row in spark.read.parquet(str(batch)).collect())
    return rows


def _stops_with(run: StreamRun, *phrases: str) -> str:
    """Runs ``run`` to its end, which must fail with a message holding ``phrases``."""
    with pytest.raises(StreamingQueryException) as err:
        run.run_to_end()
    message = str(err.value)
    for phrase in phrases:
        assert phrase in message, message[:2000]
    return message


def _altered_while_running(server, run: StreamRun, database: str, *statements: str) -> str:
    """Starts ``run`` (a processing-time trigger), runs ``statements`` once it has caught
    up (so its schema was read before them), and returns the message it stopped with."""
    # A write elsewhere moves the head, so the caught-up query has planned a batch (and
    # read its schema) in this run before the statements.
    server.execute(
        "CREATE TABLE IF NOT EXISTS marker (id INT AUTO_INCREMENT PRIMARY KEY)",
        "INSERT INTO marker VALUES ()",
        database=database,
    )
    query = run.start()
    try:
        wait_caught_up(server, run.checkpoint, query, 120)
        server.execute(*statements, database=database)
        with pytest.raises(StreamingQueryException) as err:
            query.awaitTermination(180)
            raise AssertionError("the query did not stop at the schema change")
        return str(err.value)
    finally:
        query.stop()


def _latest(rows: list[dict], key: str) -> dict:
    """The table rebuilt from typed output: per key, the change with the highest _seq."""
    latest: dict = {}
    for row in sorted(rows, key=lambda r: r["_seq"]):
        if row["_op"] == "d":
            latest.pop(row[key], None)
        else:
            latest[row[key]] = row
    return latest


def _table(server, database: str, table: str) -> tuple[list[str], dict]:
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        return names, {row[0]: dict(zip(names, row)) for row in cur.fetchall()}


def _compare(rebuilt: dict, expected: dict, names: list[str], touched_since: dict) -> None:
    """Every row and column of ``SELECT *``: a column is compared exactly where the row
    was written since the column got its current name and type (``touched_since``:
    column -> keys written since), and must be NULL elsewhere (the row never had it)."""
    assert set(rebuilt) == set(expected)
    for key, row in expected.items():
        for name in names:
            got = rebuilt[key].get(name)
            if name in touched_since and key not in touched_since[name]:
                assert got is None, (key, name, got)
            else:
                assert got == row[name], (key, name, got, row[name])


def test_typed_stream_stops_at_each_change_and_goes_on_with_the_new_schema(server, spark, tmp_path):
    database = server.fresh_database("schema_stream_db")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(20), c INT)",
        *(f"INSERT INTO t VALUES ({i}, {i}, 'b{i}', {i * 10})" for i in range(1, 21)),
        database=database,
    )
    options = server.source_options(database, rf"{database}\.t")
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    touched: dict[str, set] = {}

    # Added column: rows written before it lack it (NULL), rows after carry it.
    message = _altered_while_running(
        server,
        run,
        database,
        "UPDATE t SET a = a + 100 WHERE id <= 3",
        "ALTER TABLE t ADD COLUMN d INT NULL",
        "UPDATE t SET d = id * 1000 WHERE id BETWEEN 2 AND 6",
        "INSERT INTO t VALUES (21, 21, 'b21', 210, 21000)",
    )
    touched["d"] = {2, 3, 4, 5, 6, 21}

    def written(*keys: int) -> None:  # rows written since each column in touched appeared
        for since in touched.values():
            since.update(keys)

    for phrase in (f"{database}.t was altered", "column d (int) was added", "restart the query"):
        assert phrase in message, message[:2000]
    run.run_to_end()

    # Dropped column: gone from the output schema; earlier rows keep the others by name.
    message = _altered_while_running(
        server,
        run,
        database,
        "ALTER TABLE t DROP COLUMN c",
        "UPDATE t SET a = a + 1 WHERE id IN (7, 8)",
    )
    written(7, 8)
    assert f"column c ({_int(server)}) is gone" in message, message[:2000]
    run.run_to_end()

    # Renamed column: the old name's values stay with the old name; the new name is NULL
    # for rows not written since.
    message = _altered_while_running(
        server,
        run,
        database,
        "UPDATE t SET b = 'before-rename' WHERE id = 9",
        "ALTER TABLE t RENAME COLUMN b TO b2",
        "UPDATE t SET b2 = CONCAT(b2, '!') WHERE id IN (10, 11)",
    )
    written(9, 10, 11)
    touched["b2"] = {10, 11}
    for phrase in ("column b (varchar(20)) is gone", "column b2 (varchar) was added"):
        assert phrase in message, message[:2000]
    run.run_to_end()

    # Retyped column: INT -> DECIMAL(12,2); earlier values are cast to the new type.
    message = _altered_while_running(
        server,
        run,
        database,
        "UPDATE t SET a = -5 WHERE id = 12",
        "ALTER TABLE t MODIFY COLUMN a DECIMAL(12,2)",
        "UPDATE t SET a = a + 0.25 WHERE id = 13",
    )
    written(12, 13)
    assert f"column a changed from {_int(server)} to decimal(12,2)" in message, message[:2000]
    assert TEST_PASSWORD not in message
    run.run_to_end()

    rows = _output(spark, run)
    rebuilt = _latest(rows, "id")
    names, expected = _table(server, database, "t")
    assert names == ["id", "a", "b2", "d"]
    _compare(rebuilt, expected, names, touched)
    # Rows before a change keep their values by column name: the update written just
    # before the rename has its value under the old name 'b' if its batch committed before
    # the stop, and nothing under 'b2' either way (a batch re-run after the restart places
    # it in the new schema, which has no 'b'); it never lands under the new name.
    (update,) = [r for r in rows if r["_op"] == "u" and r["id"] == 9]
    assert update.get("b2") is None and update.get("b") in (None, "before-rename")
    assert rebuilt[12]["a"] == Decimal("-5.00") and rebuilt[13]["a"] == Decimal("13.25")
    assert largest_offset_bytes(run.checkpoint) < 1024


# kind -> (the ALTER, what the stop names, the columns after it, the column new rows carry)
def _int(server) -> str:
    """How the server's COLUMN_TYPE spells INT: MySQL 8.0.19+ dropped the display width."""
    return "int(11)" if server.is_mariadb else "int"


SNAPSHOT_CHANGES = {
    "add": ("ADD COLUMN d INT NULL", "column d (int", ["id", "a", "b", "d"], "d"),
    "drop": ("DROP COLUMN b", "column b (varchar(20)) is gone", ["id", "a"], None),
    "rename": ("RENAME COLUMN b TO b2", "column b2 (varchar", ["id", "a", "b2"], "b2"),
    "retype": (
        "MODIFY COLUMN a DECIMAL(12,2)",
        "column a changed from {int} to decimal(12,2)",
        ["id", "a", "b"],
        None,
    ),
}


@pytest.mark.parametrize("kind", sorted(SNAPSHOT_CHANGES))
def test_typed_snapshot_across_a_change_is_exact_after_a_restart(server, spark, tmp_path, kind):
    alter, named, columns, new_column = SNAPSHOT_CHANGES[kind]
    named = named.replace("{int}", _int(server))
    database = server.fresh_database(f"schema_snapshot_{kind}_db")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(20))",
        f"INSERT INTO t SELECT seq, seq, CONCAT('b', seq) FROM {server.seq(1, 3000)} ORDER BY seq",
        database=database,
    )
    altered = []

    def alter_mid_snapshot(batch_id: int) -> bool:
        # Inside batch 2's sink, while the snapshot has chunks left: alter the table, then
        # write rows on both sides of the frontier.
        if batch_id == 2 and not altered:
            server.execute(
                f"ALTER TABLE t {alter}",
                "UPDATE t SET a = a + 1 WHERE id % 97 = 0",
                database=database,
            )
            altered.append(batch_id)
        return False

    options = server.source_options(
        database,
        rf"{database}\.t",
        **{"scan.incremental.snapshot.chunk.size": "200", "scan.snapshot.chunks-per-batch": "1"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out", fail_when=alter_mid_snapshot)
    _stops_with(run, f"{database}.t was altered", named)
    restarted_at = max(committed_batches(run.checkpoint)) + 1
    run.fail_when = lambda batch_id: False
    run.run_to_end()
    names, expected = _table(server, database, "t")
    assert names == columns
    rows = _output(spark, run)
    rebuilt = _latest(rows, "id")
    touched = {}
    if new_column:
        # A row carries the new column if the restarted query wrote it: the snapshot read
        # it with the new schema, or the stream saw it written after the change.
        touched[new_column] = {k for k, r in rebuilt.items() if r["_batch"] >= restarted_at}
        assert len(touched[new_column]) > 1000  # most of the snapshot came after the restart
    _compare(rebuilt, expected, names, touched)
    assert largest_offset_bytes(run.checkpoint) < 1024


def test_envelope_goes_on_with_images_carrying_their_own_columns(server, spark, tmp_path):
    database = server.fresh_database("schema_envelope_db")
    server.execute(
        "CREATE TABLE a (id INT PRIMARY KEY, x INT, y VARCHAR(10))",
        "CREATE TABLE b (id INT PRIMARY KEY, v INT)",
        database=database,
    )
    server.execute(
        f"INSERT INTO a SELECT seq, seq, CONCAT('y', seq) FROM {server.seq(1, 1000)} ORDER BY seq",
        f"INSERT INTO b SELECT seq, seq FROM {server.seq(1, 1000)} ORDER BY seq",
        database=database,
    )
    changed = []

    def alter_mid_snapshot(batch_id: int) -> bool:
        if batch_id == 2 and not changed:
            server.execute(
                "ALTER TABLE a ADD COLUMN z INT NULL",
                "UPDATE a SET z = id WHERE id % 50 = 0",
                "ALTER TABLE b DROP COLUMN v",
                "ALTER TABLE b ADD COLUMN w VARCHAR(5) NULL",
                "UPDATE b SET w = 'w' WHERE id % 70 = 0",
                database=database,
            )
            changed.append(batch_id)
        return False

    options = server.source_options(
        database,
        rf"{database}\.(a|b)",
        **{"scan.incremental.snapshot.chunk.size": "200", "scan.snapshot.chunks-per-batch": "1"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out", fail_when=alter_mid_snapshot)
    run.run_to_end()  # never stops
    assert changed
    server.execute(
        "ALTER TABLE a RENAME COLUMN y TO y2",
        "UPDATE a SET y2 = 'renamed' WHERE id <= 5",
        "ALTER TABLE a MODIFY COLUMN x BIGINT",
        "UPDATE a SET x = 9000000000 WHERE id = 6",
        database=database,
    )
    run.run_to_end()
    rows = _output(spark, run)
    for table in ("a", "b"):
        names, expected = _table(server, database, table)
        images: dict = {}
        for row in sorted((r for r in rows if r["table"] == table), key=lambda r: r["_seq"]):
            key = json.loads(row["key"])["id"]
            if row["op"] == "d":
                images.pop(key, None)
            else:
                images[key] = json.loads(row["after"])
        assert set(images) == set(expected), table
        for key, image in images.items():
            # Every column the image has holds the server's value under its name, except
            # a column renamed or dropped since (the image kept the old name).
            for name, value in image.items():
                if name in expected[key]:
                    assert value == _json_value(expected[key][name]), (table, key, name)
            for name in names:
                assert name in image or name in ("z", "w", "y2"), (table, key, name)
    a_images = [json.loads(r["after"]) for r in rows if r["table"] == "a" and r["after"]]
    assert any("y2" in i and i["y2"] == "renamed" for i in a_images)
    assert any("x" in i and i["x"] == 9000000000 for i in a_images)


def _json_value(value):
    if isinstance(value, Decimal):
        return float(value)
    return value
