"""Chunk boundaries on real tables (key kinds and distributions), and ``inspect`` on a
checkpoint a real query left behind."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from cdc_source import inspect
from cdc_source.key_sql import key_range
from cdc_source.keys import key_from_json, key_to_json, time_literal
from cdc_source.mysql_client import connect
from cdc_source.options import parse_options
from cdc_source.preflight import check_tables
from coordinator.planner import Planner
from coordinator.splitter import ServerBoundarySource
from tests.support.streams import StreamRun, read_output

CHUNK = 100


def _chunk_sizes(server, options: dict[str, str]) -> list[int]:
    """Plan every chunk of the table as the coordinator does and count its rows."""
    parsed = parse_options(options)
    conn = connect(parsed.connection_kwargs())
    try:
        (table,) = check_tables(conn, parsed)
        planner = Planner(
            [table], ServerBoundarySource(lambda: connect(parsed.connection_kwargs())), CHUNK
        )
        sizes, lo = [], None
        while True:
            hi = planner.boundaries.chunk_end(table, lo, None, CHUNK)
            where, params = key_range(table, lo, hi)
            with conn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM {table.quoted} WHERE {where}", params)
                sizes.append(cur.fetchone()[0])
            if hi is None:
                return sizes
            lo = key_from_json(table, key_to_json(table, hi))  # as the offset carries it
    finally:
        conn.close()


KEY_KINDS = {
    "uneven_integers": (
        "k BIGINT PRIMARY KEY",
        lambda i: (i if i < 500 else 10**15 + i * 7919 if i < 900 else -(10**12) - i,),
    ),
    "decimal": ("k DECIMAL(20,6) PRIMARY KEY", lambda i: (Decimal(i * i) / 1000,)),
    "case_insensitive_strings": (
        "k VARCHAR(30) PRIMARY KEY",
        lambda i: (("A" if i % 3 else "a") + f"{i:05d}" + " " * (i % 4),),
    ),
    "composite_string_int": (
        "region VARCHAR(10), n INT, PRIMARY KEY (region, n)",
        lambda i: (["x", "Y", "z "][i % 3], i // 3 if i < 600 else 10**8 + i),
    ),
    "binary": ("k VARBINARY(16) PRIMARY KEY", lambda i: (i.to_bytes(4, "big") + b"\0" * (i % 3),)),
    "negative_time": ("k TIME(6) PRIMARY KEY", lambda i: (time_literal((i - 500) * 1_000_003),)),
    "datetime": (
        "k DATETIME(6) PRIMARY KEY",
        lambda i: (f"2020-01-01 00:00:{i % 60:02d}.{i:06d}",),
    ),
}


@pytest.mark.one_decoder  # chunk boundaries are the server's and the driver's
@pytest.mark.parametrize("kind", sorted(KEY_KINDS))
def test_chunks_hold_the_chunk_size_whatever_the_key_kind_or_distribution(server, kind):
    database = server.fresh_database(f"chunks_{kind}")
    columns, key = KEY_KINDS[kind]
    server.execute(f"CREATE TABLE t ({columns}, payload VARCHAR(20))", database=database)
    rows = [key(i) + ("p",) for i in range(1000)]
    marks = ", ".join(["%s"] * len(rows[0]))
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO t VALUES ({marks})", rows)
    sizes = _chunk_sizes(server, server.source_options(database, rf"{database}\.t"))
    assert sum(sizes) == 1000
    assert all(size <= 2 * CHUNK for size in sizes), sizes
    assert sizes[:-1] == [CHUNK] * (len(sizes) - 1)


@pytest.mark.one_decoder  # a checkpoint's contents do not depend on the row decoder
def test_inspect_reads_a_checkpoint_left_by_a_real_query(server, spark, tmp_path, capsys):
    database = server.fresh_database("inspect_it")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database=database)
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(1, 501)])
    options = server.source_options(
        database,
        rf"{database}\.t",
        **{"scan.incremental.snapshot.chunk.size": "100", "scan.snapshot.chunks-per-batch": "2"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    server.execute("UPDATE t SET v = 0 WHERE id = 1", database=database)
    run.run_to_end()
    assert len(read_output(spark, run.out)) == 501

    assert inspect.main([str(run.checkpoint)]) == 0
    text = capsys.readouterr().out
    assert "snapshot" in text and "stream" in text and "summary" in text
    assert inspect.main([str(run.checkpoint), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    serialized = json.dumps(report)
    assert "stream" in serialized and f"{database}.t" in serialized
    assert options["password"] not in serialized


def test_a_dense_integer_key_is_cut_by_arithmetic_into_chunks_of_about_the_chunk_size(server):
    """Keys 1..1200 without every sixth: 1.2 key values a row, so 120-value chunks hold
    about 100 rows each, with no counting query walking the table."""
    database = server.fresh_database("chunks_dense")
    server.execute("CREATE TABLE t (k INT PRIMARY KEY, payload VARCHAR(20))", database=database)
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, 'p')", [(k,) for k in range(1, 1201) if k % 6])
        cur.execute(f"ANALYZE TABLE {database}.t")
    options = server.source_options(database, rf"{database}\.t")
    sizes = _chunk_sizes(server, options)
    assert sum(sizes) == 1000
    assert len(sizes) >= 8 and all(60 <= size <= 140 for size in sizes[:-1]), sizes
    parsed = parse_options(options)
    conn = connect(parsed.connection_kwargs())
    try:
        (table,) = check_tables(conn, parsed)
    finally:
        conn.close()
    boundaries = ServerBoundarySource(lambda: connect(parsed.connection_kwargs()))
    boundaries.chunk_end(table, None, None, CHUNK)
    assert boundaries._dense[table.name] is not None, "cut by the counting query"
