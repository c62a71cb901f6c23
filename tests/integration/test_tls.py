"""TLS against a throwaway MariaDB started with certificates made here (a CA, a server
certificate for 127.0.0.1, a client certificate; tests/support/certs.py), and against the
session's server, which has no TLS: every connection the source opens is encrypted as
``ssl-mode`` asks (the driver's, the binlog dumps, both snapshot clients), a query over
verify-identity is exact, and each way TLS or an account can refuse a connection fails at
once with what to change."""

from __future__ import annotations

import logging
import os

import pytest

from cdc_source.binlog.transport import DumpSource
from cdc_source.check_command import check
from cdc_source.mysql_client import SourceConnectionError, connect, read_head
from cdc_source.options import parse_options
from cdc_source.spark_readers import discover
from cdc_source.tls import pymysql_encrypted, session_cipher
from reader.snapshot_connection import SnapshotClientError, open_snapshot_connection
from tests.support.certs import make_tls_files, server_args
from tests.support.server import TEST_PASSWORD, TEST_URL_ENV, TEST_USER, TestServer
from tests.support.streams import StreamRun, read_output
from tests.support.workload import AUTO_INCREMENT, check_exactly_once, load

ONE_DECODER = True  # what is tested here does not depend on the row decoder

DATABASE = "tls_shop"
SSL_USER, X509_USER, ACCOUNT_PASSWORD = "cdc_ssl", "cdc_x509", "tls-account-pw"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(tls_files):
    if os.environ.get(TEST_URL_ENV):
        pytest.skip("the TLS server is an embedded one started with this module's certificates")
    server = TestServer(extra_args=server_args(tls_files))
    grants = "SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.*"
    try:  # stopped even when the set-up fails (a server left running outlives the tests)
        if server.is_mariadb:  # per account: connections, and how many used TLS
            server.execute("SET GLOBAL userstat = ON")
        server.execute(
            f"CREATE USER '{SSL_USER}'@'%' IDENTIFIED BY '{ACCOUNT_PASSWORD}' REQUIRE SSL",
            f"GRANT {grants} TO '{SSL_USER}'@'%'",
            f"CREATE USER '{X509_USER}'@'%' IDENTIFIED BY '{ACCOUNT_PASSWORD}' REQUIRE X509",
            f"GRANT {grants} TO '{X509_USER}'@'%'",
        )
        server.fresh_database(DATABASE)
        load(server, DATABASE, AUTO_INCREMENT, 300)
        yield server
    finally:
        server.stop()


def _options(server, **extra) -> dict[str, str]:
    return server.source_options(DATABASE, rf"{DATABASE}\.orders", **extra)


def _verified(server, files, **extra) -> dict[str, str]:
    return _options(server, ssl_mode="verify-identity", ssl_ca=str(files.ca), **extra)


def _kwargs(options: dict[str, str]) -> dict:
    return parse_options(options).connection_kwargs()


def _snapshot_ciphers(kwargs: dict) -> dict[str, str]:
    """Client name -> the session's cipher, for both snapshot clients."""
    found = {}
    for client in ("mysqlclient", "pymysql"):
        snapshot = open_snapshot_connection(kwargs, client, connect)
        try:
            found[snapshot.client] = session_cipher(snapshot.conn)
        finally:
            snapshot.close()
    return found


def _connection_counts(server, user: str) -> tuple[int, int]:
    rows = server.query(
        "SELECT TOTAL_CONNECTIONS, TOTAL_SSL_CONNECTIONS FROM information_schema.USER_STATISTICS "
        "WHERE USER = %s",
        (user,),
    )
    return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)


class _Retries(logging.Handler):
    """The retry WARN lines (cdc_source.retry) logged while it is attached."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "; retry " in message:
            self.lines.append(message)


def _fails_at_once(action, error=SourceConnectionError):
    retries = _Retries()
    logger = logging.getLogger("cdc_mysql")
    logger.addHandler(retries)
    try:
        with pytest.raises(error) as caught:
            action()
    finally:
        logger.removeHandler(retries)
    assert retries.lines == [], "a TLS failure must not be retried"
    assert caught.value.transient is False
    return str(caught.value)


@pytest.mark.parametrize("client", ["mysqlclient", "pymysql"])
def test_a_query_over_verify_identity_is_exact_and_every_connection_is_encrypted(
    tls_server, tls_files, spark, tmp_path, client
):
    options = _verified(
        tls_server,
        tls_files,
        **{"scan.snapshot.client": client, "scan.incremental.snapshot.chunk.size": "100"},
    )
    tls_server.fresh_database(DATABASE)
    load(tls_server, DATABASE, AUTO_INCREMENT, 300)
    if tls_server.is_mariadb:
        tls_server.execute("FLUSH USER_STATISTICS")
    else:  # MySQL counts no TLS connections per account: the account refuses any other
        tls_server.execute(f"ALTER USER '{TEST_USER}'@'%' REQUIRE SSL")
    try:
        run = StreamRun(spark, options, tmp_path / "checkpoint", tmp_path / "out")
        run.run_to_end()  # the snapshot
        tls_server.execute(
            "INSERT INTO orders (customer, amount, note, updated) VALUES ('tls', 1.5, 'x', NOW())",
            "UPDATE orders SET note = 'changed' WHERE id % 7 = 0",
            "DELETE FROM orders WHERE id % 11 = 0",
            database=DATABASE,
        )
        run.run_to_end()  # the changes, read from binlog dumps
    finally:
        if not tls_server.is_mariadb:
            tls_server.execute(f"ALTER USER '{TEST_USER}'@'%' REQUIRE NONE")

    output = read_output(spark, run.out)
    assert {row["_op"] for row in output} == {"r", "c", "u", "d"}
    check_exactly_once(tls_server, DATABASE, AUTO_INCREMENT, output)
    if tls_server.is_mariadb:
        connections, encrypted = _connection_counts(tls_server, TEST_USER)
        assert connections > 3 and encrypted == connections, (connections, encrypted)


def test_each_kind_of_connection_is_encrypted_and_preferred_uses_tls_when_offered(
    tls_server, tls_files
):
    for options in (_verified(tls_server, tls_files), _options(tls_server, ssl_mode="preferred")):
        kwargs = _kwargs(options)
        conn = connect(kwargs)
        try:
            assert session_cipher(conn)
            file, pos, _, _ = read_head(conn)
        finally:
            conn.close()
        ciphers = _snapshot_ciphers(kwargs)
        assert set(ciphers) in ({"native", "pymysql"}, {"mysqlclient", "pymysql"})
        assert all(ciphers.values()), ciphers

        tls_server.execute("UPDATE orders SET amount = amount + 1 LIMIT 1", database=DATABASE)
        dumps = []

        def dump_connection(kwargs=kwargs, dumps=dumps):
            conn = connect(kwargs)
            dumps.append(pymysql_encrypted(conn))  # (the dump closes it)
            return conn

        _, events, close = DumpSource(dump_connection, 5399).open(file, pos)
        assert sum(1 for _ in events) > 0
        close()
        assert dumps and all(dumps)
    # without ssl-mode, a loopback host is not encrypted (there TLS protects nothing)
    conn = connect(_kwargs(_options(tls_server)))
    try:
        assert session_cipher(conn) == ""
    finally:
        conn.close()


def test_verify_ca_with_a_wrong_ca_fails_at_once_with_what_to_change(tls_server, tls_files):
    options = _options(tls_server, ssl_mode="verify-ca", ssl_ca=str(tls_files.other_ca))
    message = _fails_at_once(lambda: discover(parse_options(options)))
    assert f"could not be verified against ssl-ca '{tls_files.other_ca}'" in message
    assert "set 'ssl-ca' to the certificate" in message
    kwargs = _kwargs(options)
    message = _fails_at_once(
        lambda: open_snapshot_connection(kwargs, "mysqlclient", connect), SnapshotClientError
    )
    assert "could not be verified against ssl-ca" in message
    assert TEST_PASSWORD not in message


def test_a_host_name_the_certificate_does_not_list_fails_unless_only_the_ca_is_checked(
    tls_server, tls_files
):
    options = {**_verified(tls_server, tls_files), "hostname": "localhost"}
    message = _fails_at_once(lambda: connect(_kwargs(options)))
    assert "is not for the host name 'localhost'" in message
    assert "ssl-mode=verify-ca" in message
    conn = connect(_kwargs({**options, "ssl-mode": "verify-ca"}))
    try:
        assert session_cipher(conn)
    finally:
        conn.close()


def test_tls_required_from_a_server_without_tls_fails_clearly(server):
    options = server.source_options("mysql", r"mysql\.user", **{"ssl-mode": "required"})
    where = f"{server.info.host}:{server.info.port}"
    expected = f"ssl-mode=required needs TLS, but the server at {where} does not offer it"
    assert expected in _fails_at_once(lambda: connect(_kwargs(options)))
    # The C client connects in plain text and only then sees that TLS is missing, so it
    # must get past the account's check: on MySQL, caching_sha2_password's fast path
    # needs the account's first login since the server started, which PyMySQL makes.
    connect(_kwargs({**options, "ssl-mode": "preferred"})).close()
    kwargs = _kwargs(options)
    assert expected in _fails_at_once(
        lambda: open_snapshot_connection(kwargs, "mysqlclient", connect), SnapshotClientError
    )


def test_preferred_connects_unencrypted_to_a_server_without_tls(server):
    kwargs = _kwargs(server.source_options("mysql", r"mysql\.user", **{"ssl-mode": "preferred"}))
    conn = connect(kwargs)
    try:
        assert session_cipher(conn) == ""
    finally:
        conn.close()
    assert set(_snapshot_ciphers(kwargs).values()) == {""}


def test_an_account_requiring_ssl_refuses_ssl_mode_disabled_with_what_to_change(tls_server):
    account = {"username": SSL_USER, "password": ACCOUNT_PASSWORD}
    options = {**_options(tls_server, ssl_mode="disabled"), **account}
    message = _fails_at_once(lambda: connect(_kwargs(options)))
    assert "refused the account" in message and "REQUIRE SSL or X509" in message
    assert "set ssl-mode=required or stronger" in message
    assert ACCOUNT_PASSWORD not in message
    conn = connect(_kwargs({**options, "ssl-mode": "required"}))
    try:
        assert session_cipher(conn)
    finally:
        conn.close()


def test_an_account_requiring_x509_connects_with_a_client_certificate(tls_server, tls_files):
    account = {"username": X509_USER, "password": ACCOUNT_PASSWORD}
    options = {**_verified(tls_server, tls_files), **account}
    message = _fails_at_once(lambda: connect(_kwargs(options)))
    assert "set 'ssl-cert' and 'ssl-key'" in message
    options.update({"ssl-cert": str(tls_files.client_cert), "ssl-key": str(tls_files.client_key)})
    kwargs = _kwargs(options)
    conn = connect(kwargs)
    try:
        assert session_cipher(conn)
    finally:
        conn.close()
    assert all(_snapshot_ciphers(kwargs).values())


def test_check_reports_whether_the_connection_is_encrypted(tls_server, tls_files, server):
    _, findings = check(_verified(tls_server, tls_files))
    (finding,) = [f for f in findings if f.requirement == "TLS"]
    assert finding.status == "OK"
    assert finding.detail.startswith("encrypted (")
    assert "ssl-mode=verify-identity: the certificate and the host name are verified" in (
        finding.detail
    )
    _, findings = check(server.source_options("mysql", r"mysql\.user", **{"ssl-mode": "preferred"}))
    (finding,) = [f for f in findings if f.requirement == "TLS"]
    assert (finding.status, finding.detail) == (
        "OK",
        "not encrypted (ssl-mode=preferred), on a loopback connection",
    )
