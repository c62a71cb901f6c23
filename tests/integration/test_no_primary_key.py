"""Tables without a primary key, keyed by ``scan.incremental.snapshot.chunk.key-column``:
a NOT NULL column with a UNIQUE index of its own plays the primary key's role (chunk
bounds, ownership at the frontier, ``_seq``, normalization), exactly once under a
concurrent writer that also updates the key column; and each way the option can be
wrong is one clear error before any data moves."""

from __future__ import annotations

import json

import pymysql
import pytest

from cdc_source.binlog import constants
from cdc_source.binlog.table_map import parse_table_map
from cdc_source.binlog.transport import DumpSource
from cdc_source.chunk_key import OPTION
from cdc_source.mysql_client import connect, read_head
from cdc_source.offsets import file_number
from cdc_source.options import parse_options
from tests.support.streams import (
    StreamRun,
    committed_batches,
    handover_batch,
    largest_offset_bytes,
    read_output,
    stream_past_handover,
    wait_for,
)
from tests.support.workload import TableKind, Writer, check_exactly_once

ROWS = 20_000
# ``serial`` is unique and NOT NULL too, and declared first: the server reports it as the
# table's primary key where one is asked for (the binlog's TABLE_MAP), while the query is
# keyed by ``code``, a case-insensitive string.
NO_KEY = TableKind(
    "events",
    "CREATE TABLE events (serial INT NOT NULL, code VARCHAR(20) NOT NULL, n INT, "
    "label VARCHAR(30), amount DOUBLE, UNIQUE KEY uk_serial (serial), "
    "UNIQUE KEY uk_code (code)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
    "COLLATE=utf8mb4_general_ci",
    ("code",),
    ("serial", "code", "n", "label", "amount"),
)
STREAM_OPTIONS = {
    "scan.incremental.snapshot.chunk.size": "1000",
    "scan.snapshot.chunks-per-batch": "4",
    "scan.snapshot.fetch.size": "500",
}


def _code(i: int) -> str:
    return f"k{i:06d}" if i % 3 else f"K{i:06d} "  # mixed case, trailing spaces


def _load(server, database: str) -> None:
    server.execute(NO_KEY.ddl, database=database)
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO events (serial, code, n, label, amount) VALUES (%s, %s, %s, %s, %s)",
            [(i, _code(i), i % 97, f"l{i}", i * 0.5) for i in range(ROWS)],
        )


def _event_key(server, database: str, file: str, pos: int) -> tuple[str, ...] | None:
    """The primary key the first TABLE_MAP of ``database.events`` after ``file:pos``
    names (its optional metadata, binlog_row_metadata=FULL)."""
    kwargs = parse_options(server.source_options(database, "events")).connection_kwargs()
    with server.admin() as conn:
        head_file, head_pos, _, _ = read_head(conn)
    until = (file_number(head_file), head_pos)
    _, events, close = DumpSource(lambda: connect(kwargs), 7777).open(file, pos, until)
    try:
        for event in events:
            if event.type == constants.TABLE_MAP:
                table_map = parse_table_map(event.body, 8)
                if (table_map.database, table_map.table) == (database, "events"):
                    return table_map.primary_key
            if (file_number(event.file), event.end_pos) >= until:
                return None
    finally:
        close()
    return None


class NoKeyWriter(Writer):
    """Inserts, updates, deletes, updates of the key column to a new value, and
    re-spellings of it the collation calls equal, at random rows."""

    def _one(self, cur) -> None:
        r = self.random.random()
        code = _code(self.random.randrange(ROWS))
        try:
            if r < 0.25:
                unique = self._unique()
                cur.execute(
                    "INSERT INTO events (serial, code, n, label, amount) "
                    "VALUES (%s, %s, %s, 'ins', %s)",
                    (unique, f"n{unique}", unique % 7, self.random.random()),
                )
            elif r < 0.55:
                cur.execute(
                    "UPDATE events SET n = n + 1, label = %s WHERE code = %s",
                    (f"upd{self.operations}", code),
                )
            elif r < 0.7:
                cur.execute("DELETE FROM events WHERE code = %s", (code,))
            elif r < 0.9:  # the key column changes: a delete of the old, insert of the new
                cur.execute(
                    "UPDATE events SET code = %s WHERE code = %s", (f"m{self._unique()}", code)
                )
            else:  # the same key under the collation, spelled anew
                cur.execute("UPDATE events SET code = UPPER(code) WHERE code = %s", (code,))
        except pymysql.err.IntegrityError:
            pass


@pytest.mark.one_decoder  # the chunk key is read from decoded images by either decoder alike
def test_a_table_keyed_by_a_unique_column_is_exactly_once_under_concurrent_writes(
    server, spark, tmp_path
):
    database = "nopk_events"
    server.fresh_database(database)
    _load(server, database)
    options = server.source_options(database, rf"{database}\.events", **STREAM_OPTIONS)
    options[OPTION] = rf"{database}\.events:code"
    run = StreamRun(spark, options, tmp_path / "checkpoint", tmp_path / "out")
    with server.admin() as conn:
        start_file, start_pos, _, _ = read_head(conn)
    writer = NoKeyWriter(server, database, NO_KEY, ROWS)
    snapshot_batches = stream_past_handover(run, writer)

    assert snapshot_batches >= 4, "the snapshot should span several batches"
    assert writer.operations > 100
    output = read_output(spark, run.out)
    assert {row["_op"] for row in output} >= {"r", "c", "u", "d"}
    moved = [row for row in output if row["_op"] == "c" and row["code"].startswith("m")]
    assert moved, "no update of the key column reached the output"
    check_exactly_once(server, database, NO_KEY, output)
    # The binlog names the first unique NOT NULL index (serial) as the table's primary key
    # while the query is keyed by code: no schema change (reader.schema_drift).
    assert _event_key(server, database, start_file, start_pos) == ("serial",)
    largest = largest_offset_bytes(run.checkpoint)
    assert largest < 1024
    print(
        f"\nno primary key: {len(output)} rows, {writer.operations} writes, "
        f"{snapshot_batches} snapshot batches, largest offset {largest} bytes"
    )


# -- each way the option can be wrong: one error before any data moves -------------------


@pytest.fixture(scope="module")
def shapes(server):
    database = server.fresh_database("nopk_errors")
    server.execute(
        "CREATE TABLE plain (a INT NOT NULL, b INT)",
        "CREATE TABLE indexed (a INT NOT NULL, b INT, KEY ix_a (a))",
        "CREATE TABLE nullable (a INT, b INT, UNIQUE KEY uk_a (a))",
        "CREATE TABLE pair (a INT NOT NULL, b INT NOT NULL, UNIQUE KEY uk_ab (a, b))",
        "CREATE TABLE keyed (id INT NOT NULL PRIMARY KEY, a INT NOT NULL UNIQUE)",
        "CREATE TABLE good (a INT NOT NULL, b INT, UNIQUE KEY uk_a (a))",
        "INSERT INTO plain VALUES (1, 1)",
        database=database,
    )
    return database


def _error_of(spark, options: dict[str, str]) -> str:
    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as caught:
        reader.load()
    return str(caught.value)


def _options(server, database: str, table: str, key: str | None) -> dict[str, str]:
    options = server.source_options(database, rf"{database}\.{table}")
    if key is not None:
        options[OPTION] = key
    return options


@pytest.mark.one_decoder
def test_without_the_option_a_table_without_primary_key_is_refused(server, spark, shapes):
    message = _error_of(spark, _options(server, shapes, "plain", None))
    assert f"{shapes}.plain has no primary key" in message
    assert OPTION in message


@pytest.mark.one_decoder
@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("plain", "no UNIQUE index is made of it alone"),
        ("indexed", "no UNIQUE index is made of it alone"),  # an index, not a unique one
        ("pair", "no UNIQUE index is made of it alone"),  # unique only with b
        ("nullable", "it is nullable"),
    ],
)
def test_a_column_that_cannot_identify_a_row_is_refused(server, spark, shapes, table, says):
    message = _error_of(spark, _options(server, shapes, table, "a"))
    assert f"{shapes}.{table} has no primary key and its chunk key column a" in message
    assert says in message
    if "UNIQUE" in says:
        assert f"ALTER TABLE `{shapes}`.`{table}` ADD UNIQUE (`a`)" in message


@pytest.mark.one_decoder
def test_a_missing_column_is_named(server, spark, shapes):
    message = _error_of(spark, _options(server, shapes, "plain", "nope"))
    assert f"{shapes}.plain has no column 'nope'" in message


@pytest.mark.one_decoder
def test_a_table_with_a_primary_key_accepts_only_its_first_column(server, spark, shapes):
    message = _error_of(spark, _options(server, shapes, "keyed", "a"))
    assert f"{shapes}.keyed has a primary key (id)" in message
    assert "may name only its first column (id), not a" in message
    # its first column is accepted: the table is keyed by its primary key as without it
    options = _options(server, shapes, "keyed", "ID")
    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    assert reader.load().columns[:2] == ["id", "a"]


# -- the unique index dropped while the query runs -----------------------------------------


def _stopped_with(query) -> str:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps the source's error
        query.awaitTermination(300)
    return str(caught.value)


@pytest.mark.one_decoder
@pytest.mark.parametrize("phase", ["snapshot", "stream"])
def test_dropping_the_unique_index_stops_the_query_for_good(server, spark, tmp_path, phase):
    """Dropped during the snapshot (seen by a snapshot task's catalog check or by the
    binlog task reading the ALTER) or during the stream (the ALTER in the binlog): the
    query stops. A restart is refused while the index is missing, and stops again once
    it is back: a duplicate written and deleted meanwhile would take the original row's
    key in the output (without the stop, 'k1' below would be lost). A new query is exact."""
    database = f"nopk_drop_{phase}"
    server.fresh_database(database)
    server.execute(NO_KEY.ddl, database=database)
    server.execute(
        "INSERT INTO events (serial, code, n) SELECT seq, CONCAT('k', seq), seq % 7 "
        f"FROM {server.seq(1, 3000)} ORDER BY seq",
        database=database,
    )
    options = server.source_options(
        database,
        rf"{database}\.events",
        **{"scan.incremental.snapshot.chunk.size": "500", "scan.snapshot.chunks-per-batch": "1"},
    )
    options[OPTION] = "code"
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    drop = (
        "ALTER TABLE events DROP INDEX uk_code",
        "INSERT INTO events (serial, code, n) VALUES (90001, 'k1', 1)",  # a second 'k1'
    )

    def drop_during_snapshot(batch_id: int) -> bool:
        if batch_id == 1:
            server.execute(*drop, database=database)
        return False

    if phase == "snapshot":
        query = StreamRun(spark, options, checkpoint, out, drop_during_snapshot).start()
    else:
        run = StreamRun(spark, options, checkpoint, out)
        query = run.start()
        wait_for(
            lambda: (
                (h := handover_batch(checkpoint)) is not None and h in committed_batches(checkpoint)
            ),
            300,
            "the hand-over commit",
            query,
        )
        server.execute(*drop, database=database)
    message = _stopped_with(query)
    assert "SchemaChangedError" in message and f"{database}.events" in message
    assert "chunk key column" in message and "start a new query" in message
    if phase == "stream":  # read in the binlog, before the duplicate's row
        assert "DROP INDEX uk_code" in message

    refused = _error_of(spark, options)
    assert "no UNIQUE index is made of it alone" in refused

    server.execute(
        "DELETE FROM events WHERE serial = 90001",
        "ALTER TABLE events ADD UNIQUE KEY uk_code (code)",
        "UPDATE events SET n = -1 WHERE code = 'k2'",
        database=database,
    )
    query = StreamRun(spark, options, checkpoint, out).start(available_now=True)
    message = _stopped_with(query)
    assert "DROP INDEX uk_code" in message and "start a new query" in message

    fresh = tmp_path / "fresh"
    StreamRun(spark, options, fresh / "checkpoint", fresh / "out").run_to_end()
    check_exactly_once(server, database, NO_KEY, read_output(spark, fresh / "out"))


@pytest.mark.one_decoder
def test_the_check_command_says_which_tables_a_chunk_key_column_keys(server, shapes):
    from cdc_source.check_command import check

    options = server.source_options(shapes, rf"{shapes}\.(good|plain)")
    options[OPTION] = rf"{shapes}\.good:A"
    tables = {f.requirement: f for f in check(options)[1]}["tables"]
    assert tables.status == "FAIL" and f"{shapes}.plain has no primary key" in tables.detail
    options[OPTION] = rf"{shapes}\.(good|plain):a"
    findings = [f for f in check(options)[1] if f.requirement == "tables"]
    assert [f.status for f in findings] == ["FAIL"]
    assert "no UNIQUE index is made of it alone" in findings[0].detail
    options = server.source_options(shapes, rf"{shapes}\.good")
    options[OPTION] = "a"
    tables = {f.requirement: f for f in check(options)[1]}["tables"]
    assert tables.status == "OK"
    assert f"keyed by their chunk key column: {shapes}.good by a" in tables.detail


@pytest.mark.one_decoder
def test_envelope_key_of_a_table_without_primary_key_is_its_chunk_key_column(
    server, spark, tmp_path
):
    """Several tables (envelope): the per-table form names the column of the keyless one;
    its ``key`` is that column, and an update of it is a delete and an insert."""
    database = server.fresh_database("nopk_envelope")
    server.execute(
        "CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(10))",
        "CREATE TABLE log (seq INT NOT NULL, msg VARCHAR(10), UNIQUE KEY uk_seq (seq))",
        "INSERT INTO a VALUES (1, 'x')",
        "INSERT INTO log VALUES (5, 'm5'), (6, 'm6')",
        database=database,
    )
    options = server.source_options(database, rf"{database}\.(a|log)")
    options[OPTION] = rf"{database}\.log:seq;"
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    server.execute(
        "UPDATE log SET msg = 'x6' WHERE seq = 6",
        "UPDATE log SET seq = 7 WHERE seq = 5",
        database=database,
    )
    run.run_to_end()
    rows = sorted(read_output(spark, run.out), key=lambda r: r["_seq"])
    log = [(r["op"], json.loads(r["key"])) for r in rows if r["table"] == "log"]
    assert log == [
        ("r", {"seq": 5}),
        ("r", {"seq": 6}),
        ("u", {"seq": 6}),
        ("d", {"seq": 5}),
        ("c", {"seq": 7}),
    ]
    assert [json.loads(r["key"]) for r in rows if r["table"] == "a"] == [{"id": 1}]


@pytest.mark.one_decoder
def test_a_batch_read_of_a_table_without_primary_key_equals_select_star(server, spark):
    """``spark.read``: one consistent snapshot, chunked by the chunk key column."""
    database = "nopk_batch"
    server.fresh_database(database)
    _load(server, database)
    options = server.source_options(database, rf"{database}\.events", **STREAM_OPTIONS)
    options[OPTION] = "code"
    reader = spark.read.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = [row.asDict() for row in reader.load().collect()]
    assert len(rows) == ROWS
    check_exactly_once(server, database, NO_KEY, [{**row, "_batch": 0} for row in rows])
