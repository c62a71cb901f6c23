"""Flink CDC's option forms and metadata columns against the real server and Spark:
``table-name`` as a table regex combined with ``database-name``, a single ``server-id``
for a binlog-only query, ``server-time-zone`` (refused but for UTC, and why), and
``metadata.list`` values checked against the server's own binlog listing."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from cdc_source.options import OptionError, parse_options
from cdc_source.preflight import PreflightError
from cdc_source.spark_readers import discover
from tests.support.streams import (
    StreamRun,
    largest_offset_bytes,
    read_output,
    source_offsets,
)

METADATA = (
    "row_index",
    "binlog_file",
    "op_ts",
    "gtid",
    "database_name",
    "server_id",
    "table_name",
    "binlog_pos",
)


def _load_error(spark, options: dict[str, str]) -> str:
    """The error of ``load()``: first through Spark (the query cannot start), then the
    source's own message in full (Spark shortens the Python traceback it wraps)."""
    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match="PYTHON_DATA_SOURCE_ERROR"):
        reader.load()
    with pytest.raises((OptionError, PreflightError)) as info:
        discover(parse_options(options))
    return str(info.value)


@pytest.mark.one_decoder
def test_flink_table_name_form_is_a_table_regex_combined_with_database_name(
    server, spark, tmp_path
):
    database = server.fresh_database("flink_form_db")
    server.execute(
        "CREATE TABLE orders (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE order_items (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE customers (id INT PRIMARY KEY, v INT)",
        "INSERT INTO orders VALUES (1, 1)",
        "INSERT INTO order_items VALUES (2, 2)",
        "INSERT INTO customers VALUES (3, 3)",
        database=database,
    )
    options = server.source_options(database, "orders|order_items")
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    server.execute("INSERT INTO orders VALUES (4, 4)", database=database)
    run.run_to_end()
    rows = sorted(read_output(spark, run.out), key=lambda r: r["_seq"])
    assert [(r["table"], r["op"]) for r in rows] == [
        ("order_items", "r"),
        ("orders", "r"),
        ("orders", "c"),
    ]
    # Nothing matched: the error names the form used and what the other form matches.
    message = _load_error(spark, server.source_options(database, "flink_form_db"))
    assert "Flink CDC's form" in message and "'db.table'" in message
    message = _load_error(spark, server.source_options(database, "order.*"))
    assert "has a dot" in message
    assert f"{database}.orders" in message and f"{database}.order_items" in message


@pytest.mark.one_decoder
def test_a_single_server_id_runs_a_binlog_only_query(server, spark, tmp_path):
    database = server.fresh_database("single_id_db")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database=database)
    options = server.source_options(
        database,
        "t",
        **{"scan.startup.mode": "latest-offset", "server-id": "6161", "connect.timeout": "20s"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    server.execute("INSERT INTO t VALUES (1, 1), (2, 2)", "DELETE FROM t WHERE id = 1",
                   database=database)  # fmt: skip
    run.run_to_end()
    rows = sorted(read_output(spark, run.out), key=lambda r: r["_seq"])
    assert [(r["_op"], r["id"]) for r in rows] == [("c", 1), ("c", 2), ("d", 1)]
    # A snapshotting query with one id is refused before it starts, saying why.
    message = _load_error(spark, server.source_options(database, "t", **{"server-id": "6161"}))
    assert "snapshots the tables" in message


@pytest.mark.one_decoder
def test_timestamps_are_instants_whatever_the_zone_so_server_time_zone_is_utc_only(
    server, spark, tmp_path
):
    """The evidence for refusing a non-UTC ``server-time-zone``: with the server's global
    time_zone and the writing session's zone both at +05:00, the same instant comes out
    of the snapshot and of the binlog, exactly; no zone option would change it."""
    database = server.fresh_database("zone_db")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP NULL, local_dt DATETIME)",
        database=database,
    )
    (old_zone,) = server.query("SELECT @@GLOBAL.time_zone")[0]
    server.execute("SET GLOBAL time_zone = '+05:00'")
    try:
        with server.admin(database) as conn, conn.cursor() as cur:
            cur.execute("SET time_zone = '+05:00'")
            cur.execute("INSERT INTO t VALUES (1, '2024-01-01 10:00:00', '2024-01-01 10:00:00')")
        run = StreamRun(spark, server.source_options(database, "t"), tmp_path / "ck",
                        tmp_path / "out")  # fmt: skip
        run.run_to_end()
        with server.admin(database) as conn, conn.cursor() as cur:
            cur.execute("SET time_zone = '+05:00'")
            cur.execute("INSERT INTO t VALUES (2, '2024-01-01 10:00:00', '2024-01-01 10:00:00')")
        run.run_to_end()
    finally:
        server.execute(f"SET GLOBAL time_zone = '{old_zone}'")
    rows = sorted(read_output(spark, run.out), key=lambda r: r["id"])
    assert [(r["id"], r["_op"]) for r in rows] == [(1, "r"), (2, "c")]
    instant = dt.datetime(2024, 1, 1, 5, 0, tzinfo=dt.timezone.utc).timestamp()
    # Spark hands a timestamp to Python as local wall-clock time: .timestamp() undoes it.
    assert [r["ts"].timestamp() for r in rows] == [instant, instant]
    assert [r["local_dt"] for r in rows] == [dt.datetime(2024, 1, 1, 10, 0)] * 2
    message = _load_error(
        spark, server.source_options(database, "t", **{"server-time-zone": "Asia/Shanghai"})
    )
    assert "only UTC is accepted" in message and "spark.sql.session.timeZone" in message


def _binlog_events(server, file: str) -> list[tuple]:
    """(pos, type, server id, end pos, info) of every event of ``file``."""
    return [
        (int(r[1]), str(r[2]), int(r[3]), int(r[4]), str(r[5]))
        for r in server.query(f"SHOW BINLOG EVENTS IN '{file}'")
    ]


_GTID_INFO = re.compile(r"GTID\s+(\d+-\d+-\d+)|GTID_NEXT\s*=\s*'([^']+)'", re.I)


def _event_facts(server, file: str) -> dict[int, tuple[str, int, str | None]]:
    """End position of each rows event -> (type, server id, its transaction's GTID)."""
    facts = {}
    gtid = None
    for _, kind, server_id, end_pos, info in _binlog_events(server, file):
        if kind.lower().startswith("gtid") and not kind.lower().startswith("gtid_list"):
            match = _GTID_INFO.search(info)
            gtid = next(g for g in match.groups() if g) if match else None
        elif "rows" in kind.lower() and "annotate" not in kind.lower():
            facts[end_pos] = (kind, server_id, gtid)
    return facts


def _check_metadata(server, checkpoint, rows: list[dict], table_of) -> None:
    """Snapshot rows: the batch's end position and time, null event fields; binlog
    rows: a rows event of the server's listing at that end position, its server id, its
    transaction's GTID, row indexes 0.. within each event."""
    offsets = source_offsets(checkpoint)
    (server_id,) = server.query("SELECT @@server_id")[0]
    per_event: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        database, table = table_of(row)
        assert (row["database_name"], row["table_name"]) == (database, table)
        op = row["_op"] if "_op" in row else row["op"]
        ts_ms = row["_ts_ms"]
        assert round(row["op_ts"].timestamp() * 1000) == ts_ms
        if op == "r":
            binlog = offsets[row["_batch"]]["binlog"]
            assert (row["binlog_file"], row["binlog_pos"]) == (binlog["file"], binlog["pos"])
            assert ts_ms == binlog["ts"]
            assert (row["gtid"], row["server_id"], row["row_index"]) == (None, None, None)
            continue
        facts = _event_facts(server, row["binlog_file"])
        kind, event_server, gtid = facts[row["binlog_pos"]]
        expected_kind = {"c": "write", "u": "update", "d": "delete"}[op]
        assert kind.lower().startswith(expected_kind), (kind, op)
        assert row["server_id"] == event_server == server_id
        assert row["gtid"] == gtid and gtid is not None
        per_event.setdefault((row["binlog_file"], row["binlog_pos"]), []).append(row["row_index"])
    for indexes in per_event.values():
        assert sorted(indexes) == list(range(len(indexes)))


@pytest.mark.one_decoder  # the origins are the range reader's, above the row decoders
def test_metadata_columns_typed_and_envelope_match_the_servers_binlog(server, spark, tmp_path):
    database = server.fresh_database("metadata_db")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE u (id INT PRIMARY KEY, w VARCHAR(10))",
        "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)",
        "INSERT INTO u VALUES (1, 'a')",
        database=database,
    )
    typed = StreamRun(
        spark,
        server.source_options(database, "t", **{"metadata.list": ",".join(METADATA)}),
        tmp_path / "ck_typed",
        tmp_path / "out_typed",
    )
    envelope = StreamRun(
        spark, server.source_options(database, "t|u"), tmp_path / "ck_env", tmp_path / "out_env"
    )
    typed.run_to_end()
    envelope.run_to_end()
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (4, 4), (5, 5), (6, 6)")  # one event, 3 rows
        cur.execute("UPDATE t SET v = v + 10 WHERE id IN (1, 4)")
        cur.execute("UPDATE u SET w = 'b'")
        cur.execute("DELETE FROM t WHERE id = 2")
        conn.commit()
    if server.is_mariadb:  # one GTID per domain, the last one of each
        gtid_pos = server.gtid_state()
    else:  # the server's own untagged GTIDs end with the last one
        gtid_pos = "{}:{}".format(*server.last_own_gtid())
    typed.run_to_end()
    envelope.run_to_end()

    rows = sorted(read_output(spark, typed.out), key=lambda r: r["_seq"])
    names = list(rows[0])
    assert names[names.index("_ts_ms") + 1 : names.index("_ts_ms") + 1 + len(METADATA)] == list(
        METADATA
    )
    assert [(r["_op"], r["id"]) for r in rows] == [
        ("r", 1), ("r", 2), ("r", 3), ("c", 4), ("c", 5), ("c", 6), ("u", 1), ("u", 4), ("d", 2)
    ]  # fmt: skip
    assert [r["row_index"] for r in rows[3:6]] == [0, 1, 2]
    assert len({(r["binlog_file"], r["binlog_pos"]) for r in rows[3:6]}) == 1
    _check_metadata(server, typed.checkpoint, rows, lambda r: (database, "t"))
    assert rows[-1]["gtid"] == gtid_pos  # the last transaction's GTID is the server's

    env_rows = sorted(read_output(spark, envelope.out), key=lambda r: r["_seq"])
    assert [(r["table"], r["op"]) for r in env_rows] == [
        ("t", "r"), ("t", "r"), ("t", "r"), ("u", "r"),
        ("t", "c"), ("t", "c"), ("t", "c"), ("t", "u"), ("t", "u"), ("u", "u"), ("t", "d"),
    ]  # fmt: skip
    _check_metadata(server, envelope.checkpoint, env_rows, lambda r: (r["database"], r["table"]))
    # The same binlog rows carry the same metadata in both outputs.
    fields = ("binlog_file", "binlog_pos", "gtid", "server_id", "row_index", "op_ts")
    stream_typed = {r["_seq"]: tuple(r[f] for f in fields) for r in rows if r["_op"] != "r"}
    stream_env = {r["_seq"]: tuple(r[f] for f in fields) for r in env_rows if r["op"] != "r"}
    assert {s: stream_env[s] for s in stream_typed} == stream_typed
    print(
        "largest offsets:",
        largest_offset_bytes(typed.checkpoint),
        largest_offset_bytes(envelope.checkpoint),
        "bytes",
    )
