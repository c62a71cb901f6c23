"""The three snapshot read paths give the same batches, byte for byte.

``native`` (mysqlclient's connection read by the C ``reader._textscan``: the binary
protocol's values where libmariadb has a result callback), mysqlclient's own cursor
(where the extension is missing or linked with another libmariadb) and PyMySQL (pure
Python; both the server's text) all hand their columns to the same columnar
conversion. This reads one chunk task directly (no Spark) with each, over every column
type, over the temporal values' edges (zero dates, every fraction width, negative
times) and over keys of every encodable type, including a collated composite key
(collation weights read with the rows), and a fetch smaller than the table so batches
are cut."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc_source.mysql_client import connect, read_head, server_identity
from cdc_source.offsets import BinlogPosition
from cdc_source.options import parse_options
from cdc_source.partitions import ChunkSpec, ChunkTask
from cdc_source.spark_readers import discover
from reader import snapshot_connection
from reader.task_runner import run_task
from tests.support.typed_rows import COLUMNS, NAMES, ROWS

ONE_DECODER = True  # the binlog is read only to normalize: either decoder does

KEYED_TABLES = {
    "by_name": (
        "name VARCHAR(20) COLLATE utf8mb4_general_ci, at DATETIME(6), n BIGINT UNSIGNED, "
        "v TEXT, PRIMARY KEY (name, at, n)",
        [
            (
                f"{'Ab' if i % 3 else 'aB'}{i % 7} ",
                f"2024-01-0{1 + i % 5} 00:00:0{i % 10}.{i:06d}",
                2**64 - 1 - i,
                "x" * (i % 50),
            )
            for i in range(300)
        ],
    ),
    "by_decimal": (
        "d DECIMAL(20,4) PRIMARY KEY, day DATE, b VARBINARY(8)",
        [
            (f"{(i - 150) * 1.5:.4f}", f"19{10 + i % 80}-02-03", bytes([i % 256, 0]))
            for i in range(300)
        ],
    ),
    "temporal_edges": (
        "y YEAR PRIMARY KEY, d DATE, dt DATETIME, dt1 DATETIME(1), ts3 TIMESTAMP(3) NULL, "
        "dt6 DATETIME(6), t0 TIME, t2 TIME(2), t6 TIME(6), u TINYINT UNSIGNED, f FLOAT",
        [
            (
                1901 + i,
                "0000-00-00" if i % 11 == 0 else f"{1000 + i * 37}-{1 + i % 12:02d}-28",
                "0000-00-00 00:00:00" if i % 13 == 0 else f"2024-02-29 23:59:{i % 60:02d}",
                f"1970-01-01 00:00:00.{i % 10}",
                None if i % 7 == 0 else f"2038-01-19 03:14:0{i % 8}.{i:03d}",
                f"9999-12-31 23:59:59.{999999 - i:06d}",
                f"{'-' if i % 2 else ''}{i * 7 % 839}:{i % 60:02d}:{(i * 3) % 60:02d}",
                f"-00:00:00.{i % 100:02d}",
                f"{i % 24}:00:00.{i:06d}",
                i % 256,
                (i - 100) / 3,
            )
            for i in range(200)
        ],
    ),
}
PERMISSIVE = {"temporal_edges"}  # written in a session that takes zero dates


def _head(options: dict, server) -> tuple[BinlogPosition, str, dict[str, str]]:
    """The position to read at, its server, and how a task proves its snapshot sees it
    (as the driver resolves it: MySQL has no snapshot position, so it waits for GTIDs)."""
    conn = connect(parse_options(options).connection_kwargs())
    try:
        file, pos, gtids, ts = read_head(conn)
        head = BinlogPosition(file, pos, gtids, ts)
        visibility = (
            {} if server.is_mariadb else {"visibility": "gtid-wait", "server_flavor": "mysql"}
        )
        return head, server_identity(conn), visibility
    finally:
        conn.close()


def _read(options: dict, head: tuple, client: str, fetch_size: int) -> list[pa.RecordBatch]:
    parsed = parse_options({**options, "scan.snapshot.client": client})
    tables = tuple(sorted(discover(parsed), key=lambda t: t.name))
    target, server, visibility = head
    task = ChunkTask(
        (ChunkSpec(tables[0], 0, None, None),),
        target,
        parsed.server_ids.first,
        fetch_size,
        client,
        server=server,
        **visibility,
    )
    return list(run_task(task, parsed.connection_kwargs(), tables))


def _sorted(batches: list[pa.RecordBatch]) -> pa.Table:
    table = pa.Table.from_batches(batches)
    return table.sort_by("_seq").combine_chunks()


@pytest.mark.parametrize("table", ["types", *KEYED_TABLES])
def test_every_snapshot_client_reads_the_same_batches(server, monkeypatch, table):
    if snapshot_connection._textscan is None:
        pytest.fail("reader._textscan is not built (pip install -e . with libmariadb-dev)")
    database = server.fresh_database(f"clients_{table}")
    if table == "types":
        ddl, rows = COLUMNS, ROWS
    else:
        ddl, rows = KEYED_TABLES[table]
    server.execute(f"CREATE TABLE t ({ddl})", database=database)
    width = len(rows[0])
    with server.admin(database) as conn, conn.cursor() as cur:
        if table in PERMISSIVE:
            cur.execute("SET SESSION sql_mode = ''")
        cur.executemany(f"INSERT INTO t VALUES ({', '.join(['%s'] * width)})", rows)
    options = server.source_options(database, rf"{database}\.t")

    head = _head(options, server)
    expected = _sorted(_read(options, head, "mysqlclient", 64))
    assert expected.num_rows == len(rows)
    # Changes after P: each read below is normalized back to P (anti-join + restored rows).
    key = server.query(
        "SELECT column_name FROM information_schema.key_column_usage WHERE table_schema = %s "
        "AND constraint_name = 'PRIMARY' ORDER BY ordinal_position LIMIT 1",
        (database,),
    )[0][0]
    nulled = {"types": NAMES[1], "by_decimal": "b", "temporal_edges": "dt6"}.get(table, "v")
    server.execute(
        f"DELETE FROM t ORDER BY {key} LIMIT 5",
        f"UPDATE t SET {nulled} = NULL ORDER BY {key} DESC LIMIT 7",
        database=database,
    )
    native = _read(options, head, "mysqlclient", 64)
    assert max(b.num_rows for b in native) <= 64
    pure = _read(options, head, "pymysql", 64)
    with monkeypatch.context() as patch:
        patch.setattr(snapshot_connection, "_textscan", None)
        cursor = _read(options, head, "mysqlclient", 64)

    for name, batches in (("native", native), ("pymysql", pure), ("mysqlclient cursor", cursor)):
        got = _sorted(batches)
        assert got.schema == expected.schema
        differing = [
            c for c in expected.column_names if not got.column(c).equals(expected.column(c))
        ]
        assert not differing, (
            f"{name}: {[(c, got.column(c), expected.column(c)) for c in differing]}"
        )
    seqs = expected.column("_seq").to_pylist()
    assert len(set(seqs)) == len(seqs)
    if table == "types":
        assert expected.column_names[: len(NAMES)] == NAMES
