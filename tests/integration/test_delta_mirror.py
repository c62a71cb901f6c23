"""``cdc_source.delta`` mirrors tables into Delta exactly: under a concurrent writer, with
a crash between the Delta commit of a batch and Spark's commit of it (the batch runs again
and is recognised as applied) and a crash between two slices of a batch's MERGE (the
re-run skips the slice committed and applies the rest), the Delta table equals ``SELECT
*``; with several tables (one Delta table each, from the envelope), with a crash between
two tables' commits, each Delta table equals ``SELECT *`` of its table on every column. The
VARCHAR key is utf8mb4_general_ci and the writer re-spells keys the collation holds equal
('k1' to 'K1', 'k1 ', and back), during snapshot and stream: each key is still one row,
spelled as the server returns it, and its ``_key`` is the source's key bytes from the
server's ``WEIGHT_STRING``; the single-table road mirrors that table too.
The query runs as a user's does: in a child process (``tests.support.delta_runner``),
the source's options read back from the stream's DataFrame, the password in the
environment."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path

import deltalake  # in the dev extra: a missing package is an error, not a skip
import pymysql
import pytest

from cdc_source.catalog import discover_tables
from cdc_source.delta.transactions import SLICE_LIMIT
from cdc_source.types import canonical_value
from reader.key_weights import WeightResolver
from tests.support.server import suite_flavour

ONE_DECODER = True  # the query runs with the source's default decoder
ROOT = Path(__file__).resolve().parents[2]
ROWS = 3000
# What the writer logs for a slice it applied: merged, or (snapshot reads alone) appended.
APPLIED = r"(\d+ key\(s\) merged|\d+ row\(s\) read by the snapshot appended)"


def _run(server, database, checkpoint, table_path, *extra, env=None, tables=None, mode="mirror"):
    info = server.info
    lakes = table_path if isinstance(table_path, list) else [f"{mode}={table_path}"]
    return subprocess.run(
        [
            sys.executable,
            "-m", "tests.support.delta_runner",
            "--hostname", info.host,
            "--port", str(info.port),
            "--username", info.user,
            "--database-name", database,
            "--table-name", tables or rf"{database}\.t",
            "--checkpoint", str(checkpoint),
            *[arg for lake in lakes for arg in ("--lake", str(lake))],
            "--option", "scan.incremental.snapshot.chunk.size=500",
            "--option", "scan.snapshot.chunks-per-batch=2",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "CDC_MYSQL_PASSWORD": info.password,
            **(env or {}),
        },
    )  # fmt: skip


# How the sink recovers from a crash is the sink's own (application transactions, slices):
# no server takes part in it, so these two run on the MariaDB leg, and the MySQL leg runs
# the modes test, whose keys, collations and changes are the server's.
SINK_ONLY = pytest.mark.skipif(
    suite_flavour() == "mysql", reason="the sink's crash recovery: the MariaDB leg runs it"
)


@SINK_ONLY
def test_the_delta_mirror_is_exact_after_a_crash_between_the_delta_and_spark_commits(
    server, tmp_path
):
    database = server.fresh_database("delta_mirror")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, qty INT NOT NULL, price DECIMAL(10,2), "
        "note VARCHAR(40), at DATETIME(6))",
        database=database,
    )
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s, %s, NOW(6))",
            [(i, i % 7, Decimal(i) / 4, f"row {i}") for i in range(ROWS)],
        )
    stop = threading.Event()

    def write() -> None:
        conn = pymysql.connect(
            host=server.info.host,
            port=server.info.port,
            user=server.info.admin_user,
            password=server.info.admin_password,
            database=database,
            autocommit=True,
        )
        n = 0
        with conn.cursor() as cur:
            while not stop.is_set():
                n += 1
                cur.execute(
                    "UPDATE t SET qty = qty + 1, at = NOW(6) WHERE id = %s", (n * 7 % ROWS,)
                )
                cur.execute("DELETE FROM t WHERE id = %s", (n * 13 % ROWS,))
                cur.execute("INSERT INTO t VALUES (%s, 1, 2.50, 'new', NOW(6))", (ROWS + n,))
                cur.execute("UPDATE t SET id = id + 10000000 WHERE id = %s", (ROWS + n - 1,))
                stop.wait(0.01)
        conn.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    checkpoint, table_path = tmp_path / "checkpoint", tmp_path / "delta"
    name = f"{database}.t"
    slices = ("--slice-rows", "700")  # a snapshot batch (1000 rows) is two slices
    try:
        crashed = _run(
            server, database, checkpoint, table_path, "--available-now", *slices,
            env={"CDC_MYSQL_LAKE_CRASH_AFTER_BATCH": "1"},
        )  # fmt: skip
        assert crashed.returncode == 3, crashed.stdout[-2000:] + crashed.stderr[-3000:]
        assert "batch 1: crashing before Spark commits" in crashed.stdout
        between = _run(
            server, database, checkpoint, table_path, "--available-now", *slices,
            env={"CDC_MYSQL_LAKE_CRASH_BETWEEN_SLICES": "1"},
        )  # fmt: skip
    finally:
        stop.set()
        writer.join()
    assert between.returncode == 3, between.stdout[-2000:] + between.stderr[-3000:]
    assert f"batch 1: {name}: already applied" in between.stdout  # re-run, not re-applied
    crash = re.search(rf"batch (\d+): crashing after slice 0 of {re.escape(name)}", between.stdout)
    assert crash, between.stdout[-2000:]
    batch = int(crash.group(1))

    resumed = _run(server, database, checkpoint, table_path, "--available-now", *slices)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert f"batch {batch}: {name}: already applied (slice 0)" in resumed.stdout
    assert re.search(rf"batch {batch}: {re.escape(name)}: {APPLIED} \(slice 1\)", resumed.stdout)
    applied = _applied_slices(table_path)
    assert applied == sorted(set(applied)), "a slice applied twice"

    mirror = deltalake.DeltaTable(str(table_path)).to_pyarrow_table().to_pylist()
    got = {r["id"]: (r["qty"], r["price"], r["note"], r["at"].replace(tzinfo=None)) for r in mirror}
    rows = server.query("SELECT id, qty, price, note, at FROM t", database=database)
    expected = {r[0]: tuple(r[1:]) for r in rows}
    assert len(mirror) == len(got), "a key appears twice in the Delta table"
    assert got == expected


@SINK_ONLY
def test_a_new_query_at_a_reused_checkpoint_path_skips_no_batch_and_appends_no_duplicate(
    server, tmp_path
):
    """A user who deletes a query's checkpoint and starts again at the same path, into
    the same Delta table, starts a new query (Spark gives it a new id): its batches, from
    0 again, are not taken for the old query's, and its snapshot's reads of keys already
    in the table are merged, not appended beside them."""
    database = server.fresh_database("delta_reuse")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", database=database)
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(ROWS)])
    checkpoint, table_path = tmp_path / "checkpoint", tmp_path / "delta"
    first = _run(server, database, checkpoint, table_path, "--available-now")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute("UPDATE t SET v = v + 1000 WHERE id % 3 = 0")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(ROWS + i, i) for i in range(50)])
    shutil.rmtree(checkpoint)
    again = _run(server, database, checkpoint, table_path, "--available-now")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert "already applied" not in again.stdout
    mirror = deltalake.DeltaTable(str(table_path)).to_pyarrow_table(columns=["id", "v"])
    got = mirror.to_pylist()
    assert len(got) == len({r["id"] for r in got}), "a key appears twice in the Delta table"
    rows = server.query("SELECT id, v FROM t", database=database)
    assert {r["id"]: r["v"] for r in got} == {r[0]: r[1] for r in rows}


# -- several tables --------------------------------------------------------------------

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


def _connect(server, database):
    return pymysql.connect(
        host=server.info.host,
        port=server.info.port,
        user=server.info.admin_user,
        password=server.info.admin_password,
        database=database,
        autocommit=True,
        charset="utf8mb4",
        init_command="SET time_zone = '+00:00'",
    )


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
    with _connect(server, database) as conn, conn.cursor() as cur:
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
    weights = WeightResolver(lambda: _connect(server, database))
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


def _applied_slices(path: Path) -> list[tuple[int, int]]:
    """The (batch id, slice) of the commits in a Delta table's log, in commit order (a
    batch's last slice as ``SLICE_LIMIT - 1``)."""
    applied = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                applied.append(divmod(action["txn"]["version"], SLICE_LIMIT))
    return applied


def _applied_batches(path: Path) -> list[int]:
    """The batch ids of the commits in a Delta table's log, in commit order."""
    return [batch for batch, _ in _applied_slices(path)]


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
    with _connect(server, database) as conn, conn.cursor() as cur:
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
            with _connect(server, database) as conn, conn.cursor() as cur:
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
        crashed = _run(
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
        assert _applied_batches(root / first)[-1] == batch
        assert batch not in _applied_batches(root / second)

        resumed = _run(server, database, checkpoint, root, "--available-now", tables=regex)
        assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
        assert f"batch {batch}: {first}: already applied" in resumed.stdout
        assert re.search(rf"batch {batch}: {re.escape(second)}: {APPLIED}", resumed.stdout)
    finally:
        stop.set()
        writer.join()
    assert not errors and rounds, errors

    with _connect(server, database) as conn, conn.cursor() as cur:
        _write_both(cur, len(rounds) + 1)  # the last changes: after the writer, in one batch
    caught_up = _run(server, database, checkpoint, root, "--available-now", tables=regex)
    assert caught_up.returncode == 0, caught_up.stdout[-2000:] + caught_up.stderr[-3000:]
    _assert_equal(server, database, tables, root)
    single = _run(
        server, database, single_checkpoint, single_path, "--available-now",
        tables=rf"{database}\.t_str",
    )  # fmt: skip
    assert single.returncode == 0, single.stdout[-2000:] + single.stderr[-3000:]
    _assert_equal(server, database, tables[1:], root, {second: single_path})
    keys = [k for (k,) in _expected(server, database, tables[1])]
    assert any(k.startswith("MOVED-N") and k.endswith(" ") for k in keys), keys[-20:]
    assert any(k.startswith("moved-n") for k in keys), keys[-20:]
    for table in tables:
        applied = _applied_slices(root / table.name)
        assert applied == sorted(set(applied)), f"{table.name}: a batch applied twice"

    # Spark runs the last batch again (as after a crash before its commit): no Delta change.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    versions = _versions(root, tables)
    rerun = _run(server, database, checkpoint, root, "--available-now", tables=regex)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-3000:]
    assert f"batch {last}: " in rerun.stdout, rerun.stdout
    assert not re.search(APPLIED, rerun.stdout), rerun.stdout
    assert "already applied" in rerun.stdout
    assert _versions(root, tables) == versions
    _assert_equal(server, database, tables, root)


# -- the three modes in one query --------------------------------------------------------

MODE_ROWS = 2000
MODE_DDL = """CREATE TABLE t (
  k VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY,
  n INT NOT NULL, note VARCHAR(40))"""
MODE_COLUMNS = ("k", "n", "note")


def _write_modes(cur, n: int, truncate: bool = False) -> None:
    """One round on ``t``: an update, re-spellings of keys ('k0007' to 'K0007 ' and back),
    a delete, an insert and a key move; or, with ``truncate``, the table truncated and
    rows inserted anew."""
    if truncate:
        cur.execute("TRUNCATE TABLE t")
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, 'after the truncate')",
            [(f"k{i:04d}", i) for i in range(0, MODE_ROWS, 7)],
        )
        return
    cur.execute(
        "UPDATE t SET n = n + 1, note = %s WHERE k = %s", (f"r{n}", f"k{n * 7 % MODE_ROWS:04d}")
    )
    cur.execute(
        "UPDATE t SET k = CONCAT(UPPER(k), ' ') WHERE k = %s", (f"k{n * 3 % MODE_ROWS:04d}",)
    )
    cur.execute(
        "UPDATE t SET k = LOWER(TRIM(TRAILING ' ' FROM k)), n = n + 2 WHERE k = %s",
        (f"k{(n - 2) * 3 % MODE_ROWS:04d}",),
    )
    cur.execute("DELETE FROM t WHERE k = %s", (f"k{n * 11 % MODE_ROWS:04d}",))
    cur.execute("INSERT INTO t VALUES (%s, %s, 'new')", (f"n{n:05d}", n))
    cur.execute("UPDATE t SET k = CONCAT('m', k) WHERE k = %s", (f"n{n - 1:05d}",))


def _delta_rows(path: Path, version: int | None = None) -> list[dict]:
    table = deltalake.DeltaTable(str(path), version=version).to_pyarrow_table()
    return table.sort_by([("_seq", "ascending")]).to_pylist()


def _batch_versions(path: Path) -> dict[int, int]:
    """The Delta version at which each batch's last slice was committed, by batch id."""
    versions = {}
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                batch, index = divmod(action["txn"]["version"], SLICE_LIMIT)
                if index == SLICE_LIMIT - 1:
                    versions[batch] = int(commit.stem)
    return versions


def _fold(log: list[dict]) -> dict[bytes, tuple]:
    """The table a change log (in ``_seq`` order) leaves: by key bytes, the row's values."""
    state: dict[bytes, tuple] = {}
    for change in log:
        if change["_op"] == "t":
            state.clear()
        elif change["_op"] == "d":
            state.pop(change["_key"], None)
        else:
            state[change["_key"]] = tuple(change[c] for c in MODE_COLUMNS)
    return state


def _history_of(log: list[dict]) -> list[tuple]:
    """The SCD type 2 versions a change log (in ``_seq`` order) makes, in ``_seq`` order:
    (values, _seq, _key, valid_from, valid_to, is_current)."""
    versions: list[list] = []
    open_: dict[bytes, list] = {}
    for change in log:
        at = dt.datetime.fromtimestamp(change["_ts_ms"] / 1000, dt.timezone.utc)
        if change["_op"] == "t":
            for version in open_.values():
                version[4], version[5] = at, False
            open_.clear()
            continue
        previous = open_.pop(change["_key"], None)
        if previous is not None:
            previous[4], previous[5] = at, False
        if change["_op"] != "d":
            values = tuple(change[c] for c in MODE_COLUMNS)
            version = [values, change["_seq"], change["_key"], at, None, True]
            versions.append(version)
            open_[change["_key"]] = version
    return [tuple(v) for v in versions]


def _history_rows(rows: list[dict]) -> list[tuple]:
    return [
        (
            tuple(r[c] for c in MODE_COLUMNS),
            r["_seq"],
            r["_key"],
            r["valid_from"],
            r["valid_to"],
            r["is_current"],
        )
        for r in rows
    ]


def test_mirror_history_and_change_log_are_exact_at_every_committed_batch(server, tmp_path):
    """One query writes each batch into the three modes (``foreachBatch`` composed of three
    writers) under a writer that updates, re-spells (utf8mb4_general_ci), deletes, inserts,
    moves keys and truncates the table (between two runs), through a crash between two
    slices of a batch and a crash before Spark's commit. Then: the change log holds each
    ``_seq`` once and folds to ``SELECT *``; the mirror equals ``SELECT *``; the history is
    exactly the versions the change log makes (``valid_from``/``valid_to`` from each
    change's time, deletes and the truncate closing versions); and at every batch
    committed, the history's current versions and the folded change log as of that batch's
    Delta version equal the mirror as of its own."""
    database = server.fresh_database("delta_modes")
    server.execute(MODE_DDL, database=database)
    with _connect(server, database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s)",
            [(f"k{i:04d}", i, f"row {i}") for i in range(MODE_ROWS)],
        )
    stop, truncate = threading.Event(), threading.Event()
    rounds, errors, truncated = [], [], []

    def write() -> None:
        n = 0
        try:
            with _connect(server, database) as conn, conn.cursor() as cur:
                while not stop.is_set():
                    n += 1
                    if truncate.is_set() and not truncated:
                        _write_modes(cur, n, truncate=True)
                        truncated.append(n)
                    else:
                        _write_modes(cur, n)
                    rounds.append(n)
                    stop.wait(0.02)
        except Exception as error:  # the test fails on it below
            errors.append(error)

    paths = {mode: tmp_path / mode for mode in ("mirror", "history", "append")}
    lakes = [f"{mode}={path}" for mode, path in paths.items()]
    checkpoint = tmp_path / "checkpoint"
    slices = ("--slice-rows", "600", "--trigger-seconds", "0.5")
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        between = _run(
            server, database, checkpoint, lakes, *slices,
            env={"CDC_MYSQL_LAKE_CRASH_BETWEEN_SLICES": "1"},
        )  # fmt: skip
        assert between.returncode == 3, between.stdout[-2000:] + between.stderr[-3000:]
        assert "crashing after slice 0" in between.stdout
        truncate.set()  # in the stream, after the snapshot's start
        while not truncated and not errors:
            stop.wait(0.2)
        after = _run(
            server, database, checkpoint, lakes, *slices,
            env={"CDC_MYSQL_LAKE_CRASH_AFTER_BATCH": "4"},
        )  # fmt: skip
        assert after.returncode == 3, after.stdout[-2000:] + after.stderr[-3000:]
    finally:
        stop.set()
        writer.join()
    assert not errors and truncated, errors
    done = _run(server, database, checkpoint, lakes, "--available-now", *slices)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "batch 4: " in done.stdout and "already applied" in done.stdout

    with _connect(server, database) as conn, conn.cursor() as cur:
        cur.execute("SELECT k, n, note FROM t")
        server_rows = {row[0]: row for row in cur.fetchall()}
    log = _delta_rows(paths["append"])
    assert len({r["_seq"] for r in log}) == len(log), "a change appears twice in the log"
    assert any(r["_op"] == "t" for r in log)
    assert {v[0]: v for v in _fold(log).values()} == server_rows
    mirror = _delta_rows(paths["mirror"])
    assert {r["k"]: tuple(r[c] for c in MODE_COLUMNS) for r in mirror} == server_rows
    assert len(mirror) == len(server_rows)
    history = _delta_rows(paths["history"])
    assert _history_rows(history) == _history_of(log)

    mirror_at, history_at, log_at = (_batch_versions(paths[m]) for m in paths)
    assert mirror_at.keys() == history_at.keys() == log_at.keys() and len(mirror_at) > 3
    for batch, version in mirror_at.items():
        want = {
            r["_key"]: tuple(r[c] for c in MODE_COLUMNS)
            for r in _delta_rows(paths["mirror"], version)
        }
        current = [r for r in _delta_rows(paths["history"], history_at[batch]) if r["is_current"]]
        assert {r["_key"]: tuple(r[c] for c in MODE_COLUMNS) for r in current} == want, batch
        assert _fold(_delta_rows(paths["append"], log_at[batch])) == want, batch
