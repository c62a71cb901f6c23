"""What only MySQL writes or does, on a real MySQL server: compressed transaction
payloads, tagged GTIDs, partial JSON row images, and caching_sha2_password's full
authentication without TLS (the RSA key exchange) through both snapshot clients."""

from __future__ import annotations

import pytest

from cdc_source.mysql_client import connect
from cdc_source.options import parse_options
from reader.snapshot_connection import open_snapshot_connection
from tests.support.server import TEST_PASSWORD, TEST_USER, suite_flavour
from tests.support.streams import StreamRun, read_output

pytestmark = pytest.mark.skipif(
    suite_flavour() != "mysql", reason="MySQL's own features: the MySQL leg runs them"
)


def _latest(output: list[dict]) -> dict[int, dict]:
    latest = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        latest[row["id"]] = row
    return {key: row for key, row in latest.items() if row["_op"] != "d"}


def test_a_compressed_transaction_payload_is_streamed_exactly(server, spark, tmp_path):
    """binlog_transaction_compression=ON: a transaction's events arrive inside one zstd
    TRANSACTION_PAYLOAD event."""
    database = server.fresh_database("zstd")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200), n INT)",
        "INSERT INTO t VALUES (1, 'one', 1), (2, 'two', 2)",
        database=database,
    )
    run = StreamRun(
        spark, server.source_options(database, rf"{database}\.t"), tmp_path / "ck", tmp_path / "o"
    )
    run.run_to_end()
    server.execute(
        "SET SESSION binlog_transaction_compression = ON",
        "BEGIN",
        f"INSERT INTO t SELECT seq + 2, REPEAT(CONCAT('row ', seq), 5), seq "
        f"FROM {server.seq(1, 500)} ORDER BY seq",
        "UPDATE t SET n = n + 100 WHERE id % 3 = 0",
        "DELETE FROM t WHERE id % 7 = 0",
        "COMMIT",
        database=database,
    )
    events = {str(row[2]) for row in server.query("SHOW BINLOG EVENTS")}
    assert "Transaction_payload" in events, events
    run.run_to_end()
    expected = {row[0]: (row[1], row[2]) for row in server.query(
        "SELECT id, v, n FROM t", database=database)}  # fmt: skip
    got = {key: (row["v"], row["n"]) for key, row in _latest(read_output(spark, run.out)).items()}
    assert got == expected


def test_tagged_gtids_are_streamed_and_carried_in_the_offset(server, spark, tmp_path):
    """MySQL 8.4+'s tagged GTIDs (``uuid:tag:N``): the rows carry them, and the offset's
    GTID state holds the tag's intervals after the untagged ones."""
    database = server.fresh_database("tagged")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=database)
    options = server.source_options(database, rf"{database}\.t", **{"metadata.list": "gtid"})
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "o")
    run.run_to_end()
    server.execute(
        "SET gtid_next = 'AUTOMATIC:nightly_load'",
        "INSERT INTO t VALUES (1)",
        "INSERT INTO t VALUES (2)",
        "SET gtid_next = 'AUTOMATIC'",
        "INSERT INTO t VALUES (3)",
        database=database,
    )
    run.run_to_end()
    gtids = {row["id"]: row["gtid"] for row in read_output(spark, run.out)}
    assert ":nightly_load:" in gtids[1] and ":nightly_load:" in gtids[2]
    assert gtids[1] != gtids[2] and "nightly_load" not in gtids[3]
    executed = server.gtid_state().replace("\n", "")
    assert "nightly_load" in executed
    offsets = sorted(
        (p for p in (tmp_path / "ck" / "offsets").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    last = offsets[-1].read_text()
    assert ":nightly_load:" in last


def test_partial_json_row_images_stop_the_query_naming_the_setting(server, spark, tmp_path):
    """binlog_row_value_options=PARTIAL_JSON logs a JSON_SET as a diff of the document,
    not the value: the source cannot know the whole document and refuses, naming the
    setting, instead of emitting part of a row."""
    database = server.fresh_database("partial_json")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, doc JSON)",
        """INSERT INTO t VALUES (1, '{"a": 1, "b": "long enough to be worth a diff"}')""",
        database=database,
    )
    run = StreamRun(
        spark, server.source_options(database, rf"{database}\.t"), tmp_path / "ck", tmp_path / "o"
    )
    run.run_to_end()
    server.execute(
        "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
        "UPDATE t SET doc = JSON_SET(doc, '$.a', 2) WHERE id = 1",
        database=database,
    )
    events = {str(row[2]) for row in server.query("SHOW BINLOG EVENTS")}
    assert "Update_rows_partial" in events, events
    with pytest.raises(Exception) as caught:
        run.run_to_end()
    assert "binlog_row_value_options" in str(caught.value)
    assert [r["_op"] for r in read_output(spark, run.out)] == ["r"]


@pytest.mark.parametrize("client", ["pymysql", "mysqlclient"])
def test_caching_sha2_full_authentication_without_tls_through_each_snapshot_client(server, client):
    """An empty authentication cache (FLUSH PRIVILEGES empties it) makes the server ask
    for the password itself: without TLS the client fetches the server's RSA key and
    sends the password encrypted with it."""
    (plugin,) = server.query("SELECT plugin FROM mysql.user WHERE user = %s", (TEST_USER,))[0]
    assert plugin == "caching_sha2_password"
    server.execute("FLUSH PRIVILEGES")
    options = parse_options(
        {
            "hostname": server.info.host,
            "port": str(server.info.port),
            "username": TEST_USER,
            "password": TEST_PASSWORD,
            "database-name": "x",
            "table-name": "x",
            "ssl-mode": "disabled",
        }
    )
    snapshot = open_snapshot_connection(options.connection_kwargs(), client, connect)
    try:
        # mysqlclient's connection is read by the C text scan where it is built ('native')
        assert snapshot.client == client or (client, snapshot.client) == ("mysqlclient", "native")
        with snapshot.conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            (user,) = cur.fetchone()
    finally:
        snapshot.close()
    user = user.decode() if isinstance(user, bytes) else user
    assert user.startswith(f"{TEST_USER}@")
