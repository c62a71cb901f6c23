"""Column control end to end, under concurrent writes during the snapshot and after the
hand-over: the change log rebuilt from the output equals a SELECT of the kept columns with
the masks computed here (hashlib, not the source's code), and no raw value of a masked or
left-out column, nor the salt, reaches the output, the driver's log or the checkpoint."""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
from pathlib import Path

import pytest

from tests.support.streams import StreamRun, read_output, stream_past_handover

ROWS = 3000
SALT_KEY = "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K"
SALT = "czqma0cb5k"  # Spark lower-cases option keys, the salt with them
PEOPLE = (
    "CREATE TABLE people (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
    "secret VARCHAR(60), email VARCHAR(80), phone VARCHAR(20), note VARCHAR(100), age INT) "
    "DEFAULT CHARSET=utf8mb4"
)
OTHER = "CREATE TABLE other (id INT PRIMARY KEY, label VARCHAR(20))"
STREAM_OPTIONS = {
    "scan.incremental.snapshot.chunk.size": "300",
    "scan.snapshot.chunks-per-batch": "2",
    "scan.snapshot.fetch.size": "100",
}


def _values(i: int) -> tuple:
    """A row's stored values; every raw value of a hidden column carries a marker that
    must never reach the output: 'xyzzy' (left out), 'PHN' (masked)."""
    return (
        f"xyzzy-secret-{i}",
        f"person{i}@example.com",
        f"PHN{i:07d}",
        f"Grüße, note number {i}",
        20 + i % 60,
    )


def _column_options(database: str) -> dict[str, str]:
    db = database
    return {
        # secret, and any column named secret* an ALTER adds; no_such_column: logged
        "column.exclude.list": rf"{db}\.people\.secret.*, {db}\.people\.no_such_column",
        SALT_KEY: rf"{db}\.people\.email",
        "column.mask.with.4.chars": rf"{db}\.people\.phone",
        "column.truncate.to.7.chars": rf"{db}\.people\.note",
    }


def _expected(row: tuple) -> dict:
    """A SELECT row (id, email, phone, note, age) as the output must hold it."""
    key, email, phone, note, age = row
    return {
        "id": key,
        "email": None if email is None else hashlib.sha256((SALT + email).encode()).hexdigest(),
        "phone": None if phone is None else "****",
        "note": None if note is None else note[:7],
        "age": age,
    }


def _server_rows(server, database: str) -> dict[int, dict]:
    rows = server.query("SELECT id, email, phone, note, age FROM people", database=database)
    return {row[0]: _expected(row) for row in rows}


class PeopleWriter(threading.Thread):
    """Inserts, updates (of every column, NULLs included) and deletes at random keys."""

    def __init__(self, server, database: str, seed: int = 11) -> None:
        super().__init__(daemon=True)
        self.server, self.database = server, database
        self.random = random.Random(seed)
        self.stop_event = threading.Event()
        self.operations = 0
        self.error: BaseException | None = None

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)
        if self.error:
            raise self.error

    def run(self) -> None:
        try:
            with self.server.admin(self.database) as conn, conn.cursor() as cur:
                while not self.stop_event.wait(0.003):
                    self._one(cur)
                    self.operations += 1
        except BaseException as err:  # surfaced by stop()
            self.error = err

    def _one(self, cur) -> None:
        r, key = self.random.random(), self.random.randint(1, ROWS)
        n = 100_000 + self.operations
        if r < 0.3:
            cur.execute(
                "INSERT INTO people (secret, email, phone, note, age) VALUES (%s,%s,%s,%s,%s)",
                _values(n),
            )
        elif r < 0.8:
            secret, email, phone, note, age = _values(n)
            cur.execute(
                "UPDATE people SET secret=%s, email=%s, phone=%s, note=%s, age=%s WHERE id=%s",
                (secret, email if r < 0.7 else None, phone, note, age, key),
            )
        else:
            cur.execute("DELETE FROM people WHERE id = %s", (key,))


def _setup(server, name: str) -> str:
    database = server.fresh_database(name)
    server.execute(PEOPLE, OTHER, "INSERT INTO other VALUES (1, 'one')", database=database)
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO people (secret, email, phone, note, age) VALUES (%s,%s,%s,%s,%s)",
            [_values(i) for i in range(1, ROWS + 1)],
        )
        cur.execute("UPDATE people SET note = NULL, phone = NULL WHERE id % 97 = 0")
    return database


def _log_text() -> str:
    path = Path(os.environ["CDC_MYSQL_STATE_DIR"]) / "coordinator.log"
    return path.read_text() if path.exists() else ""


def _checkpoint_text(checkpoint: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in checkpoint.rglob("*") if p.is_file())


def _assert_nothing_hidden_leaks(texts: list[str]) -> None:
    for text in texts:
        assert "xyzzy" not in text and "PHN0" not in text and "PHN1" not in text
        assert "example.com" not in text and SALT not in text.lower()


def _run_with_writer(server, spark, tmp_path, database: str, table_regex: str) -> StreamRun:
    options = server.source_options(
        database, table_regex, **STREAM_OPTIONS, **_column_options(database)
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    writer = PeopleWriter(server, database)
    snapshot_batches = stream_past_handover(run, writer, binlog_batches=2)
    assert snapshot_batches >= 3, "the snapshot should span several batches"
    assert writer.operations > 100
    return run


def test_typed_output_keeps_the_key_leaves_out_excluded_columns_and_masks_the_others(
    server, spark, tmp_path
):
    log_before = len(_log_text())
    database = _setup(server, "columns_typed")
    run = _run_with_writer(server, spark, tmp_path, database, rf"{database}\.people")
    # A column the exclude list matches, added while the query runs, stays out and does
    # not stop the typed output.
    server.execute(
        "ALTER TABLE people ADD COLUMN secret_two VARCHAR(40)",
        "UPDATE people SET secret_two = 'xyzzy-two', phone = 'PHN1234567' WHERE id % 5 = 1",
        "INSERT INTO people (secret, email, phone, note, age, secret_two) "
        "VALUES ('xyzzy-late', 'late@example.com', 'PHN7654321', 'late note', 7, 'xyzzy-2')",
        database=database,
    )
    run.run_to_end()

    output = read_output(spark, run.out)
    assert {row["_op"] for row in output} >= {"r", "c", "u", "d"}
    schema = spark.read.parquet(str(run.out)).schema
    assert [f.name for f in schema.fields][:5] == ["id", "email", "phone", "note", "age"]
    assert schema["email"].dataType.typeName() == "string"
    assert "secret" not in schema.fieldNames() and "secret_two" not in schema.fieldNames()
    latest: dict[int, dict] = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        if row["_op"] == "d":
            latest.pop(row["id"], None)
        else:
            latest[row["id"]] = {k: row[k] for k in ("id", "email", "phone", "note", "age")}
    assert latest == _server_rows(server, database)
    log = _log_text()[log_before:]
    assert "no_such_column' of option 'column.exclude.list' matches no column" in log
    _assert_nothing_hidden_leaks(
        [json.dumps(output, default=str), log, _checkpoint_text(run.checkpoint)]
    )


def test_the_envelope_images_hold_only_kept_columns_with_masked_values(server, spark, tmp_path):
    log_before = len(_log_text())
    database = _setup(server, "columns_envelope")
    run = _run_with_writer(server, spark, tmp_path, database, rf"{database}\.(people|other)")
    server.execute(
        "ALTER TABLE people ADD COLUMN secret_two VARCHAR(40)",
        "UPDATE people SET secret_two = 'xyzzy-two' WHERE id % 7 = 1",
        database=database,
    )
    run.run_to_end()

    output = read_output(spark, run.out)
    assert {row["table"] for row in output} == {"people", "other"}
    latest: dict[int, dict] = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        if row["table"] != "people":
            continue
        key = json.loads(row["key"])["id"]
        if row["op"] == "d":
            assert set(json.loads(row["before"])) == {"id", "email", "phone", "note", "age"}
            latest.pop(key, None)
        else:
            after = json.loads(row["after"])
            assert set(after) == {"id", "email", "phone", "note", "age"}
            latest[key] = after
    assert latest == _server_rows(server, database)
    other = [json.loads(r["after"]) for r in output if r["table"] == "other"]
    assert other == [{"id": 1, "label": "one"}]
    _assert_nothing_hidden_leaks(
        [
            json.dumps(output, default=str),
            _log_text()[log_before:],
            _checkpoint_text(run.checkpoint),
        ]
    )


def test_a_salt_given_by_the_secret_option_is_in_no_plan_and_keeps_its_case(
    server, spark, tmp_path
):
    """Spark shows option keys in a query's plan (a salt in Debezium's key form with
    them) and redacts the values of keys that contain 'secret'."""
    database = _setup(server, "columns_plan")
    salt = "PlanSalt-Qx7"
    options = server.source_options(
        database,
        rf"{database}\.people",
        **{
            "column.mask.hash.SHA-256": rf"{database}\.people\.email",
            "column.mask.hash.secret": salt,
            "column.exclude.list": rf"{database}\.people\.secret",
        },
    )
    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    plan = reader.load()._jdf.queryExecution().toString()
    assert "column.mask.hash.secret" in plan and salt.lower() not in plan.lower()
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    output = {row["id"]: row["email"] for row in read_output(spark, run.out)}
    emails = dict(server.query("SELECT id, email FROM people", database=database))
    assert output == {
        key: hashlib.sha256((salt + email).encode()).hexdigest() for key, email in emails.items()
    }
    assert salt.lower() not in _checkpoint_text(run.checkpoint).lower()


def test_a_key_column_left_out_stops_the_query_before_it_reads_naming_it(server, spark):
    database = server.fresh_database("columns_key")
    server.execute(PEOPLE, database=database)
    options = server.source_options(
        database, rf"{database}\.people", **{"column.include.list": rf"{database}\.people\.email"}
    )
    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    try:
        reader.load()
    except Exception as err:  # noqa: BLE001 - Spark wraps the source's OptionError
        message = str(err)
    else:
        raise AssertionError("a key column left out was accepted")
    assert f"{database}.people.id, a key column" in message and "column.include.list" in message


def test_a_refused_value_of_a_hashed_column_is_not_shown_by_either_road(server, spark, tmp_path):
    """A TINYINT(1) read as BOOLEAN refuses a value other than 0 or 1 before it is hashed:
    the refusal names the column, never the value."""
    from pyspark.errors import StreamingQueryException

    database = server.fresh_database("columns_refusal")
    server.execute(
        "CREATE TABLE flags (id INT PRIMARY KEY, f TINYINT(1))",
        "INSERT INTO flags VALUES (1, 0), (2, 77)",
        database=database,
    )
    options = server.source_options(
        database,
        rf"{database}\.flags",
        **{"column.mask.hash.SHA-256": rf"{database}\.flags\.f", "column.mask.hash.secret": "s"},
    )
    snapshot = StreamRun(spark, options, tmp_path / "s-ck", tmp_path / "s-out")
    with pytest.raises(StreamingQueryException) as caught:
        snapshot.run_to_end()
    message = str(caught.value)
    assert f"{database}.flags.f: the value (not shown: the column is masked)" in message
    assert "value 77" not in message
    server.execute("DELETE FROM flags WHERE id = 2", database=database)
    binlog = StreamRun(spark, options, tmp_path / "b-ck", tmp_path / "b-out")
    binlog.run_to_end()
    server.execute("INSERT INTO flags VALUES (3, 77)", database=database)
    with pytest.raises(StreamingQueryException) as caught:
        binlog.run_to_end()
    message = str(caught.value)
    assert f"{database}.flags.f: the value (not shown: the column is masked)" in message
    assert "ending at binlog" in message and "value 77" not in message
