"""The fail-over harness itself (:mod:`tests.support.replication`): the replica has the
primary's rows and GTIDs in a binlog of its own, the proxy carries connections (a binlog
dump byte for byte, many at once) and resets them all at a switch, and a promoted replica
takes writes under its own server id. The tests run in file order: the last promotes."""

from __future__ import annotations

import socket
import threading
from dataclasses import replace

import pymysql
import pytest

from cdc_source.binlog.framing import take_payload
from cdc_source.binlog.transport import COM_BINLOG_DUMP, prepare_dump_session
from cdc_source.gtid import GtidSet
from tests.support.replication import (
    ReplicatedPair,
    SwitchingProxy,
    binlog_gtids,
    binlog_status,
    proxy_connect,
)
from tests.support.streams import wait_for

ONE_DECODER = True  # no binlog rows are decoded here

LOST = (2006, 2013)  # server gone away, lost connection during query


@pytest.fixture(scope="module")
def pair():
    with ReplicatedPair() as started:
        yield started


@pytest.fixture
def proxy(pair):
    with SwitchingProxy(pair.primary.info.port) as started:
        yield started
    assert started.threads() == []  # stop() ends every thread of the proxy


def _server_id(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT @@server_id")
        return int(cur.fetchone()[0])


def _dump_payloads(conn, file: str, pos: int, server_id: int, blocking: bool = False):
    """The payloads of a ``COM_BINLOG_DUMP`` from ``file:pos``: all of a non-blocking
    dump, or a generator of a blocking one's as they come."""
    prepare_dump_session(conn)
    flags = 0 if blocking else 1
    conn._execute_command(
        COM_BINLOG_DUMP,
        pos.to_bytes(4, "little")
        + flags.to_bytes(2, "little")
        + server_id.to_bytes(4, "little")
        + file.encode(),
    )

    def payloads():
        buffer = bytearray()
        while True:
            payload, used = take_payload(buffer, 0)
            if payload is None:
                chunk = conn._rfile.read1(1 << 16)
                if not chunk:
                    raise ConnectionError("the dump connection closed")
                buffer += chunk
                continue
            del buffer[:used]
            if payload == b"":
                return
            yield payload

    return payloads() if blocking else list(payloads())


def _uuid(server) -> str:
    return server.query("SELECT @@server_uuid")[0][0]


def test_each_server_has_its_id_and_the_replica_logs_what_it_applies(pair):
    assert pair.replicating()
    status = pair.replica_status()
    if pair.mariadb:
        assert pair.primary.query("SELECT @@server_id, @@gtid_strict_mode") == [(1, 1)]
        logs = "SELECT @@server_id, @@log_slave_updates, @@read_only"
        assert status["Using_Gtid"] == "Slave_Pos"
    else:
        assert pair.primary.query("SELECT @@server_id, @@gtid_mode") == [(1, "ON")]
        logs = "SELECT @@server_id, @@log_replica_updates, @@read_only"
        assert status["Auto_Position"] == "1"
    assert pair.replica.query(logs) == [(2, 1, 1)]
    for server in (pair.primary, pair.replica):  # the same account on both
        pymysql.connect(
            host="127.0.0.1",
            port=server.info.port,
            user=server.info.user,
            password=server.info.password,
        ).close()


def test_writes_reach_the_replica_with_the_same_gtids_in_its_own_binlog(pair):
    db = pair.primary.fresh_database("harness")
    pair.primary.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
        "UPDATE t SET v = 'B' WHERE id = 2",
        "INSERT INTO t VALUES (3, 'c')",
        database=db,
    )
    position = pair.wait_caught_up(timeout=30)

    rows = "SELECT id, v FROM t ORDER BY id"
    assert pair.replica.query(rows, database=db) == pair.primary.query(rows, database=db)
    assert pair.replica.query(rows, database=db) == [(1, "a"), (2, "B"), (3, "c")]
    primary, replica = binlog_status(pair.primary), binlog_status(pair.replica)
    assert primary.gtid_pos == replica.gtid_pos == position
    assert position.startswith("0-1-" if pair.mariadb else f"{_uuid(pair.primary)}:1-")
    assert binlog_gtids(pair.replica) == binlog_gtids(pair.primary)
    if pair.mariadb:
        assert pair.replica.query("SELECT @@gtid_binlog_state") == pair.primary.query(
            "SELECT @@gtid_binlog_state"
        )

    # ...at positions of its own: other file names, other offsets
    assert primary.file.startswith("binlog.")
    assert replica.file.startswith("replica-bin.")
    assert (primary.file, primary.pos) != (replica.file, replica.pos)
    files = [row[0] for row in pair.replica.query("SHOW BINARY LOGS")]
    assert files and all(file.startswith("replica-bin.") for file in files)


def test_the_proxy_carries_a_dump_byte_for_byte_and_many_connections(pair, proxy):
    db = pair.primary.fresh_database("harness_bulk")
    pair.primary.execute("CREATE TABLE b (id INT PRIMARY KEY, v LONGBLOB)", database=db)
    for i in range(4):
        pair.primary.execute(f"INSERT INTO b VALUES ({i}, REPEAT('x', 1 << 19))", database=db)
    file = binlog_status(pair.primary).file

    with pair.primary.admin() as direct:
        expected = _dump_payloads(direct, file, 4, server_id=9001)
    with proxy_connect(pair.primary, proxy) as through:
        assert _server_id(through) == 1
        assert _dump_payloads(through, file, 4, server_id=9002) == expected
    assert sum(map(len, expected)) > 2 << 20

    results, errors = [], []

    def one_client():
        try:
            with proxy_connect(pair.primary, proxy) as conn, conn.cursor() as cur:
                cur.execute("SELECT @@server_id, SLEEP(0.2)")
                results.append(cur.fetchone()[0])
        except Exception as err:  # surfaced below
            errors.append(err)

    clients = [threading.Thread(target=one_client) for _ in range(40)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(30)
    assert not errors
    assert results == [1] * 40
    assert proxy.connections == 41
    assert proxy.cuts == 0
    # orderly closes are passed on: the proxy lets every finished connection go
    wait_for(lambda: proxy.open_connections == 0, 10, "the proxy to close its connections")


def test_a_switch_resets_every_connection_and_new_ones_reach_the_replica(pair, proxy):
    old = proxy_connect(pair.primary, proxy, read_timeout=10)
    assert _server_id(old) == 1
    streaming = proxy_connect(pair.primary, proxy, read_timeout=10)
    status = binlog_status(pair.primary)
    dump = _dump_payloads(streaming, status.file, 4, server_id=9003, blocking=True)
    next(dump)  # the stream is open (a blocking dump: the server keeps it open)
    raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    assert raw.recv(1 << 16)  # the server's greeting
    wait_for(lambda: proxy.open_connections == 3, 10, "three connections through the proxy")

    assert proxy.switch(pair.replica.info.port) == 3
    assert proxy.backend_port == pair.replica.info.port

    with pytest.raises(ConnectionResetError):  # an RST, not an orderly end
        raw.recv(1 << 16)
    raw.close()
    with pytest.raises(pymysql.err.OperationalError) as lost:
        _server_id(old)
    assert lost.value.args[0] in LOST
    with pytest.raises((pymysql.err.OperationalError, ConnectionError, OSError)):
        for _ in dump:
            pass
    for conn in (old, streaming):
        conn._force_close()

    with proxy_connect(pair.replica, proxy) as new:
        assert _server_id(new) == 2
    info = replace(pair.replica.info, port=proxy.port)  # the cdc_test account, through it
    with pymysql.connect(
        host=info.host, port=info.port, user=info.user, password=info.password
    ) as cdc:
        assert _server_id(cdc) == 2
    assert proxy.cuts == 3


def test_a_switch_to_a_server_that_is_down_resets_new_connections(pair, proxy):
    from cdc_source.embedded_server import free_port

    proxy.switch(free_port())  # nothing listens there
    with pytest.raises(pymysql.err.OperationalError) as lost:
        proxy_connect(pair.primary, proxy, connect_timeout=5)
    assert lost.value.args[0] in (2003, *LOST)  # reset before or after the connect returned
    assert proxy.refused == 1
    proxy.switch(pair.primary.info.port)
    with proxy_connect(pair.primary, proxy) as conn:
        assert _server_id(conn) == 1


def test_promote_makes_the_replica_take_writes_under_its_own_server_id(pair):
    pair.primary.execute("INSERT INTO t VALUES (4, 'd')", database="harness")
    caught_up = pair.wait_caught_up()
    if pair.mariadb:
        domain, server_id, seq = map(int, caught_up.split("-"))
        assert server_id == 1

    pair.promote()
    assert pair.replica_status() == {}
    assert pair.replica.query("SELECT @@read_only") == [(0,)]
    pair.replica.execute("INSERT INTO t VALUES (5, 'e')", database="harness")

    after = binlog_status(pair.replica)
    if pair.mariadb:
        assert after.gtid_pos == f"{domain}-2-{seq + 1}"
        assert binlog_gtids(pair.replica)[-1] == after.gtid_pos
    else:  # the primary's GTIDs and, now, one of the replica's own
        expected = GtidSet.parse(f"{caught_up},{_uuid(pair.replica)}:1")
        assert GtidSet.parse(after.gtid_pos).text() == expected.text()
        assert binlog_gtids(pair.replica)[-1] == f"{_uuid(pair.replica)}:1"
    assert pair.replica.query("SELECT id FROM t WHERE id = 5", database="harness") == [(5,)]
    assert pair.primary.query("SELECT id FROM t WHERE id = 5", database="harness") == []
    with pytest.raises(RuntimeError):
        pair.wait_caught_up()


def test_a_replica_built_from_a_dump_has_its_early_gtids_only_as_a_setting():
    """``built='dump'``: the dumped rows are on the replica, its GTID state covers the
    dump's transactions, but its binlog holds only what it replicated after the dump."""

    def seed(primary):
        primary.fresh_database("dumped")
        primary.execute(
            "CREATE TABLE d (id INT PRIMARY KEY)",
            "INSERT INTO d VALUES (1), (2)",
            database="dumped",
        )

    with ReplicatedPair(built="dump", seed=seed) as pair:
        assert pair.replicating()
        dumped = pair.dumped_gtids
        assert dumped == binlog_status(pair.primary).gtid_pos
        pair.primary.execute("INSERT INTO d VALUES (3)", database="dumped")
        caught_up = pair.wait_caught_up()
        assert pair.replica.query("SELECT id FROM d ORDER BY id", database="dumped") == [
            (1,),
            (2,),
            (3,),
        ]
        assert binlog_status(pair.replica).gtid_pos == caught_up
        replicated = binlog_gtids(pair.replica)
        assert replicated == binlog_gtids(pair.primary)[-1:]  # only the insert after the dump
        if pair.mariadb:
            assert pair.replica.query("SELECT @@gtid_slave_pos")[0][0] == caught_up
        else:
            assert pair.replica.query("SELECT @@gtid_purged")[0][0] == dumped
