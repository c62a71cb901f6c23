"""``row_key``: each row's primary-key bytes as the server compares keys, carried from the
source to any sink. Checked against the server itself, for every kind of key: a snapshot
row and every later change of the same key carry the same bytes (a key re-spelled under
its collation included), a key moved carries new ones, and the bytes sort as the server's
``ORDER BY`` sorts the keys."""

from __future__ import annotations

import json

from tests.support.streams import StreamRun, read_output

# name: (key columns DDL, primary key, key literals in insertion order). Each row also has
# a ``tag`` (which row it is, never updated) and a ``v`` the updates change.
KEYS = {
    "k_int": ("k INT", "k", ["-5", "0", "7", "2147483647"]),
    "k_ubig": ("k BIGINT UNSIGNED", "k", ["0", "1", "18446744073709551615"]),
    "k_ci": (
        "k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        "k",
        ["'a'", "'b'", "'é'", "'zz'"],
    ),
    "k_bin": ("k VARBINARY(16)", "k", ["x'00'", "x'0001'", "x'ff'", "x''"]),
    "k_dec": ("k DECIMAL(12,3)", "k", ["-1.5", "0", "123456789.125"]),
    "k_dt": ("k DATETIME(6)", "k", ["'2020-01-01 00:00:00'", "'1999-12-31 23:59:59.999999'"]),
    "k_ts": ("k TIMESTAMP(3)", "k", ["'2020-01-01 00:00:00.123'", "'1971-01-02 00:00:00'"]),
    "k_date": ("k DATE", "k", ["'2020-02-29'", "'1000-01-01'", "'9999-12-31'"]),
    "k_time": ("k TIME(6)", "k", ["'-838:59:59'", "'00:00:00.5'", "'12:00:00'", "'-00:00:01'"]),
    "k_comp": (
        "a INT, b VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        "a, b",
        ["1, 'x'", "1, 'Y'", "-2, 'x'"],
    ),
}
# Updates after the snapshot that keep the key as the server compares it, re-spelled.
RESPELL = {
    "k_ci": "UPDATE k_ci SET k = 'A  ', v = v + 1 WHERE k = 'a'",
    "k_comp": "UPDATE k_comp SET b = 'y ', v = v + 1 WHERE a = 1 AND b = 'Y'",
}


def _create(server, database: str) -> None:
    statements = []
    for table, (columns, key, literals) in KEYS.items():
        statements.append(
            f"CREATE TABLE {table} ({columns}, tag INT NOT NULL, v INT, PRIMARY KEY ({key}))"
        )
        values = ", ".join(f"({lit}, {i}, 0)" for i, lit in enumerate(literals))
        statements.append(f"INSERT INTO {table} VALUES {values}")
    server.execute("SET SESSION time_zone = '+00:00'", *statements, database=database)


def _change(server, database: str) -> None:
    """Every row updated; keys re-spelled; the first row of each table deleted; one key of
    ``k_int`` moved (a ``d`` of the old key and a ``c`` of the new)."""
    statements = [f"UPDATE {table} SET v = v + 10" for table in KEYS]
    statements += list(RESPELL.values())
    statements += [f"DELETE FROM {table} WHERE tag = 0" for table in KEYS]
    statements.append("UPDATE k_int SET k = 100 WHERE tag = 2")
    server.execute(*statements, database=database)


def _server_order(server, database: str, table: str) -> list[int]:
    key = KEYS[table][1]
    return [
        tag for (tag,) in server.query(f"SELECT tag FROM {table} ORDER BY {key}", None, database)
    ]


def _envelope_rows(spark, out) -> list[dict]:
    rows = []
    for row in read_output(spark, out):
        image = json.loads(row["after"] or row["before"])
        rows.append({**row, "tag": image["tag"], "image": image})
    return sorted(rows, key=lambda r: r["_seq"])


def test_row_key_is_one_per_key_from_the_snapshot_on_and_sorts_as_the_server(
    server, spark, tmp_path
):
    database = server.fresh_database("row_key_kinds")
    _create(server, database)
    orders = {table: _server_order(server, database, table) for table in KEYS}
    run = StreamRun(
        spark,
        server.source_options(database, rf"{database}\.k_.*"),
        tmp_path / "ck",
        tmp_path / "out",
    )
    run.run_to_end()
    _change(server, database)
    run.run_to_end()
    rows = _envelope_rows(spark, run.out)
    for table, (_, _, literals) in KEYS.items():
        mine = [r for r in rows if r["table"] == table]
        snapshot = {r["tag"]: r["row_key"] for r in mine if r["op"] == "r"}
        assert sorted(snapshot) == list(range(len(literals))), table
        assert all(isinstance(key, bytes | bytearray) and key for key in snapshot.values())
        # The bytes sort as the server sorts the keys.
        by_bytes = [tag for tag, _ in sorted(snapshot.items(), key=lambda item: item[1])]
        assert by_bytes == orders[table], f"{table}: row_key order"
        changes = [r for r in mine if r["op"] != "r"]
        assert {r["op"] for r in changes} >= {"u", "d"}, table
        for change in changes:
            moved = table == "k_int" and change["tag"] == 2 and change["op"] == "c"
            if moved:
                assert change["row_key"] not in snapshot.values()
                continue
            assert change["row_key"] == snapshot[change["tag"]], (table, change["op"])
    respelled = [r for r in rows if r["table"] == "k_ci" and r["image"]["k"] == "A  "]
    assert [r["op"] for r in respelled] == ["u", "d"]  # re-spelled in place, then deleted
    moved = [r["op"] for r in rows if r["table"] == "k_int" and r["tag"] == 2]
    assert moved == ["r", "u", "d", "c"]


def test_a_single_tables_row_key_equals_the_envelopes(server, spark, tmp_path):
    """The typed output's ``row_key`` (asked for in ``metadata.list``) is the envelope's,
    row for row, for a collated string key and a composite one."""
    database = server.fresh_database("row_key_typed")
    _create(server, database)
    tables = ("k_ci", "k_comp", "k_time")

    def stream(regex: str, name: str) -> StreamRun:
        options = server.source_options(database, regex, **{"metadata.list": "row_key"})
        return StreamRun(spark, options, tmp_path / f"{name}-ck", tmp_path / f"{name}-out")

    typed = {table: stream(rf"{database}\.{table}", table) for table in tables}
    envelope = stream(rf"{database}\.({'|'.join(tables)})", "envelope")
    for run in (*typed.values(), envelope):
        run.run_to_end()
    _change(server, database)
    for run in (*typed.values(), envelope):
        run.run_to_end()
    seen: dict[tuple, set] = {}
    for row in _envelope_rows(spark, envelope.out):
        seen.setdefault((row["table"], row["op"], row["tag"]), set()).add(row["row_key"])
    for table, run in typed.items():
        rows = read_output(spark, run.out)
        assert len(rows) >= len(KEYS[table][2]) + 2
        for row in rows:
            assert {row["row_key"]} == seen[(table, row["_op"], row["tag"])], (table, row)
