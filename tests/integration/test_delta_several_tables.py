"""``cdc_source.delta`` mirrors several tables (one Delta table each, from the envelope):
with a crash between two tables' commits, each Delta table equals ``SELECT *`` of its
table on every column. The VARCHAR key is utf8mb4_general_ci and the writer re-spells keys
the collation holds equal ('k1' to 'K1', 'k1 ', and back), during snapshot and stream:
each key is still one row, spelled as the server returns it, and its ``_key`` is the
source's key bytes from the server's ``WEIGHT_STRING``; the single-table road mirrors that
table too. The query runs as a user's does (:mod:`tests.support.delta_runs`)."""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
import threading
from decimal import Decimal
from pathlib import Path

import deltalake  # in the dev extra: a missing package is an error, not a skip

from cdc_source.catalog import discover_tables
from cdc_source.types import canonical_value
from reader.key_weights import WeightResolver
from tests.support.delta_runs import (
    APPLIED,
    SINK_ONLY,
    admin_connection,
    applied_batches,
    applied_slices,
    run_delta_query,
)

ONE_DECODER = True  # the query runs with the source's default decoder


INT_ROWS, STR_ROWS = 1200, 1500
INT_DDL = """CREATE TABLE t_int (
  id INT PRIMARY KEY, ti TINYINT, flag TINYINT(1), biu BIGINT UNSIGNED, d10 DECIMAL(10,2),
  d65 DECIMAL(65,30), f FLOAT, db DOUBLE, b1 BIT(1), b10 BIT(10), bn BINARY(4), bl BLOB,
  dt DATE, dtm6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME(6), yr YEAR, js JSON,
  en ENUM('small','large'), st SET('a','b','c'), vc VARCHAR(40))"""
STR_DDL = """CREATE TABLE t_str (
  k VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY,
  n INT NOT NULL, siu SMALLINT UNSIGNED, miu MEDIUMINT UNSIGNED,
  iu INT UNSIGNED, bi BIGINT, c CHAR(5), tx TEXT, vb VARBINARY(16), dtm DATETIME,
  d38 DECIMAL(38,10), tm TIME)"""


def _int_row(i: int) -> tuple:
    if i % 10 == 5:  # NULL in every column that allows it
        return (i,) + (None,) * 20
    return (
        i, i % 128 - 64, i % 2, 2**64 - 1 - i, Decimal(i) / 4,
        Decimal(f"-{i}12345678901234567890.{i:030d}"), i / 4, i / 8 + 1e10, i % 2, i % 1024,
        bytes([i % 256, 0, 1]), bytes(range(i % 50)), dt.date(2000, 1, 1) + dt.timedelta(days=i),
        dt.datetime(2020, 1, 1, 12, 0, 0, i),
        dt.datetime(2021, 1, 1) + dt.timedelta(seconds=i, milliseconds=i),
        dt.timedelta(seconds=i * 37 - 20000, microseconds=i), 1901 + i % 255,
        json.dumps({"i": i, "s": f"v{i}", "a": [i, None]}), ("small", "large")[i % 2],
        ("", "a", "b,c", "a,b,c")[i % 4], f"Grüße {i} 🙂",
    )  # fmt: skip


def _str_row(key: str, j: int) -> tuple:
    if j % 10 == 5:
        return (key, j) + (None,) * 10
    return (
        key, j, j % 65536, j * 1000 % 16777216, 4294967295 - j, -(2**63) + j, f"c{j % 1000}",
        "text " * (j % 5), bytes([j % 256]) * (j % 16),
        dt.datetime(2001, 1, 1) + dt.timedelta(minutes=j),
        Decimal(f"{j}.{j:010d}"), dt.timedelta(hours=j % 838, seconds=j % 60),
    )  # fmt: skip


def _write_both(cur, n: int) -> None:
    """One round of the writer on both tables: an update of each in one transaction (with
    re-spellings of the string key), deletes, inserts, key moves and more re-spellings
    ('k00007' to 'K00007', to 'K00007 ', and back: each one key for the collation)."""
    cur.execute("BEGIN")
    cur.execute(
        "UPDATE t_int SET ti = MOD(COALESCE(ti, 0) + 1, 100), f = COALESCE(f, 0) + 0.25, "
        "dtm6 = NOW(6), ts = NOW(3), bl = CONCAT(COALESCE(bl, ''), 'x'), "
        "js = JSON_OBJECT('n', %s), st = 'a,c', vc = NULL, b10 = %s WHERE id = %s",
        (n, n % 1024, n * 7 % INT_ROWS),
    )
    key = f"k{n * 7 % STR_ROWS:05d}"
    cur.execute(
        "UPDATE t_str SET n = n + 1, tx = CONCAT(COALESCE(tx, ''), '!'), vb = UNHEX('00ff'), "
        "dtm = NOW(), d38 = -d38 WHERE k = %s",
        (key,),
    )
    cur.execute("UPDATE t_str SET k = UPPER(k) WHERE k = %s", (key,))
    cur.execute("UPDATE t_str SET k = CONCAT(k, ' '), n = n + 1 WHERE k = %s", (key,))
    cur.execute("COMMIT")
    cur.execute(
        "UPDATE t_str SET k = CONCAT(UPPER(k), ' ') WHERE k = %s AND CHAR_LENGTH(k) < 40",
        (f"k{n * 3 % STR_ROWS:05d}",),
    )
    cur.execute(
        "UPDATE t_str SET k = LOWER(TRIM(TRAILING ' ' FROM k)) WHERE k = %s",
        (f"k{n * 17 % STR_ROWS:05d}",),
    )
    # The k keys are all deleted in time: re-spell moved keys too, which stay ('moved-n..'
    # to 'MOVED-N.. ', and every other one back).
    cur.execute("UPDATE t_str SET k = CONCAT(UPPER(k), ' ') WHERE k = %s", (f"moved-n{n - 3:06d}",))
    if n % 2:
        cur.execute(
            "UPDATE t_str SET k = LOWER(TRIM(TRAILING ' ' FROM k)) WHERE k = %s",
            (f"moved-n{n - 5:06d}",),
        )
    cur.execute("DELETE FROM t_int WHERE id = %s", (n * 13 % INT_ROWS,))
    cur.execute("DELETE FROM t_str WHERE k = %s", (f"k{n * 11 % STR_ROWS:05d}",))
    cur.execute(f"INSERT INTO t_int VALUES ({', '.join(['%s'] * 21)})", _int_row(INT_ROWS + n))
    cur.execute(f"INSERT INTO t_str VALUES ({', '.join(['%s'] * 12)})", _str_row(f"n{n:06d}", n))
    cur.execute("UPDATE t_int SET id = id + 10000000 WHERE id = %s", (INT_ROWS + n - 1,))
    cur.execute("UPDATE t_str SET k = CONCAT('moved-', k) WHERE k = %s", (f"n{n - 1:06d}",))


def _expected(server, database: str, table) -> dict:
    """``SELECT *`` of the table as the source's typed columns (the values of the table
    captured alone), by primary key."""
    with admin_connection(server, database) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table.table}")
        rows = cur.fetchall()
    keys = [table.column_names.index(k) for k in table.primary_key]
    result = {}
    for row in rows:
        values = tuple(canonical_value(c, v) for c, v in zip(table.columns, row, strict=True))
        result[tuple(values[i] for i in keys)] = tuple(
            _float32(v) if c.data_type == "float" and v is not None else v
            for c, v in zip(table.columns, values)
        )
    return result


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _mirrored(path: Path, table) -> dict:
    """The Delta table by primary key (as spelled in it)."""
    delta = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    assert delta.column_names == list(table.column_names) + ["_seq", "_key"]
    keys = [table.column_names.index(k) for k in table.primary_key]
    result = {}
    for row in delta.drop_columns(["_seq", "_key"]).to_pylist():
        values = tuple(_naive_utc(row[name]) for name in table.column_names)
        result[tuple(values[i] for i in keys)] = values
    assert len(result) == delta.num_rows, f"a key appears twice in {path.name}"
    return result


def _assert_key_bytes(server, database, path: Path, table) -> None:
    """Each row's ``_key`` is the source's key bytes, from the server's weights."""
    delta = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    weights = WeightResolver(lambda: admin_connection(server, database))
    try:
        key_values = [
            tuple(_server_key(c, row[c.name]) for c in table.key_columns)
            for row in delta.select(list(table.primary_key)).to_pylist()
        ]
        want = weights.sort_keys(table, key_values)
    finally:
        weights.close()
    assert delta.column("_key").to_pylist() == want, f"{path.name}: _key"
    assert len(set(want)) == len(want)


def _server_key(column, value):
    """A key value of the Delta table as the source's readers hand it to ``sort_key``."""
    value = _naive_utc(value)
    if column.data_type == "time":
        return dt.timedelta(microseconds=value)
    return value


def _naive_utc(value):
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _assert_equal(server, database, tables, root: Path, paths=None) -> None:
    for table in tables:
        path = (paths or {}).get(table.name, root / table.name)
        expected, got = _expected(server, database, table), _mirrored(path, table)
        assert got.keys() == expected.keys(), table.name
        for key, row in expected.items():
            for column, want, have in zip(table.columns, row, got[key], strict=True):
                assert have == want, (
                    f"{table.name} {key} column {column.name}: {have!r} != {want!r}"
                )
        _assert_key_bytes(server, database, path, table)


def _versions(root: Path, tables) -> dict:
    return {t.name: deltalake.DeltaTable(str(root / t.name)).version() for t in tables}


@SINK_ONLY
def test_several_tables_mirror_exactly_after_a_crash_between_two_tables_commits(server, tmp_path):
    """Two tables (an INT key and a VARCHAR key, a spread of types) under a writer during
    snapshot and stream; the first run exits between the two tables' Delta commits of a
    batch; the re-run of that batch skips the first table and applies the second; each
    Delta table then equals ``SELECT *``, every batch is in each log at most once, and a
    batch Spark runs again changes no Delta table. The writer re-spells VARCHAR keys
    (utf8mb4_general_ci: case, trailing spaces): one row per key, spelled as the server
    spells it; a query of that table alone (the single-table road) mirrors it as exactly."""
    database = server.fresh_database("delta_tables")
    server.execute(INT_DDL, STR_DDL, database=database)
    with admin_connection(server, database) as conn, conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO t_int VALUES ({', '.join(['%s'] * 21)})",
            [_int_row(i) for i in range(INT_ROWS)],
        )
        cur.executemany(
            f"INSERT INTO t_str VALUES ({', '.join(['%s'] * 12)})",
            [_str_row(f"k{j:05d}", j) for j in range(STR_ROWS)],
        )
    with server.admin() as conn:
        tables = discover_tables(conn, lambda db, t: db == database)
    assert [t.name for t in tables] == [f"{database}.t_int", f"{database}.t_str"]
    first, second = (t.name for t in tables)
    stop = threading.Event()
    rounds, errors = [], []

    def write() -> None:
        n = 0
        try:
            with admin_connection(server, database) as conn, conn.cursor() as cur:
                while not stop.is_set():
                    n += 1
                    _write_both(cur, n)
                    rounds.append(n)
                    stop.wait(0.01)
        except Exception as error:  # the test fails on it below
            errors.append(error)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    checkpoint, root = tmp_path / "checkpoint", tmp_path / "delta"
    single_checkpoint, single_path = tmp_path / "checkpoint_str", tmp_path / "delta_str"
    regex = rf"{database}\.t_(int|str)"
    try:
        # Not availableNow (its batches all end at the head seen at start): each batch reads
        # the binlog to the head of its time, so the snapshot batches of the second table
        # carry the stream's changes of the first, and the run exits at the first of them.
        crashed = run_delta_query(
            server, database, checkpoint, root, "--trigger-seconds", "0.5", tables=regex,
            env={"CDC_MYSQL_LAKE_CRASH_BETWEEN_TABLES": "1"},
        )  # fmt: skip
        assert crashed.returncode == 3, crashed.stdout[-2000:] + crashed.stderr[-3000:]
        crash = re.search(
            rf"batch (\d+): crashing after {re.escape(first)}'s commit, before "
            rf"{re.escape(second)}'s",
            crashed.stdout,
        )
        assert crash, crashed.stdout[-2000:]
        batch = int(crash.group(1))
        assert applied_batches(root / first)[-1] == batch
        assert batch not in applied_batches(root / second)

        resumed = run_delta_query(
            server, database, checkpoint, root, "--available-now", tables=regex
        )
        assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
        assert f"batch {batch}: {first}: already applied" in resumed.stdout
        assert re.search(rf"batch {batch}: {re.escape(second)}: {APPLIED}", resumed.stdout)
    finally:
        stop.set()
        writer.join()
    assert not errors and rounds, errors

    with admin_connection(server, database) as conn, conn.cursor() as cur:
        _write_both(cur, len(rounds) + 1)  # the last changes: after the writer, in one batch
    caught_up = run_delta_query(server, database, checkpoint, root, "--available-now", tables=regex)
    assert caught_up.returncode == 0, caught_up.stdout[-2000:] + caught_up.stderr[-3000:]
    _assert_equal(server, database, tables, root)
    single = run_delta_query(
        server, database, single_checkpoint, single_path, "--available-now",
        tables=rf"{database}\.t_str",
    )  # fmt: skip
    assert single.returncode == 0, single.stdout[-2000:] + single.stderr[-3000:]
    _assert_equal(server, database, tables[1:], root, {second: single_path})
    keys = [k for (k,) in _expected(server, database, tables[1])]
    assert any(k.startswith("MOVED-N") and k.endswith(" ") for k in keys), keys[-20:]
    assert any(k.startswith("moved-n") for k in keys), keys[-20:]
    for table in tables:
        applied = applied_slices(root / table.name)
        assert applied == sorted(set(applied)), f"{table.name}: a batch applied twice"

    # Spark runs the last batch again (as after a crash before its commit): no Delta change.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    versions = _versions(root, tables)
    rerun = run_delta_query(server, database, checkpoint, root, "--available-now", tables=regex)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-3000:]
    assert f"batch {last}: " in rerun.stdout, rerun.stdout
    assert not re.search(APPLIED, rerun.stdout), rerun.stdout
    assert "already applied" in rerun.stdout
    assert _versions(root, tables) == versions
    _assert_equal(server, database, tables, root)
