"""Riding out transient faults (cdc_source.retry): which errors are retried, how long, what
is logged, and that a binlog dump cut anywhere resumes with exactly the same events."""

from __future__ import annotations

import logging
import socket
import struct

import pymysql
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog.framing import BinlogServerError
from cdc_source.binlog.transport import DumpSource
from cdc_source.mysql_client import SourceConnectionError
from cdc_source.offsets import BinlogPosition
from cdc_source.options import parse_options
from cdc_source.retry import (
    Reconnecting,
    RetriesExhaustedError,
    RetryPolicy,
    describe,
    is_transient,
    resumed,
    retrying,
)
from reader.binlog_range import RangeReader
from reader.row_decoding import native_available
from tests.support import binlog_encoder as enc
from tests.support.server_answers import FLAVOURS, error, exception, load

DECODERS = ["python"] + (["native"] if native_available() else [])
NO_WAIT = RetryPolicy(max_retries=3, first_delay=0.0)


@pytest.mark.parametrize(
    "err",
    [
        *(error(f, "query on a killed connection") for f in FLAVOURS),  # 2013
        *(error(f, "second query on a killed connection") for f in FLAVOURS),  # (0, '')
        *(error(f, "connection refused") for f in FLAVOURS),  # 2003
        *(error(f, "too many connections") for f in FLAVOURS),  # 1040
        # MariaDB's answer to a query running through a shutdown (2013; MySQL's returned)
        exception(load("mariadb-10.11")["errors"]["query during shutdown"]["error"]),
        # Not recorded: PyMySQL's own 2006 when a write to the socket fails (PyMySQL
        # connections.py, _write_bytes: CR_SERVER_GONE_ERROR, "MySQL server has gone away
        # (...)"), and 1053 (ER_SERVER_SHUTDOWN, MySQL server error message reference),
        # which neither server sent to a query running through its shutdown.
        pymysql.err.OperationalError(
            2006, "MySQL server has gone away (BrokenPipeError(32, 'Broken pipe'))"
        ),
        pymysql.err.OperationalError(1053, "Server shutdown in progress"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError("timed out"),
        BinlogServerError(2013, "the server closed the binlog connection"),
        SourceConnectionError("cannot connect", 2003, transient=True),
    ],
)
def test_connection_faults_are_transient(err):
    assert is_transient(err)


@pytest.mark.parametrize(
    "err",
    [
        *(error(f, "access denied") for f in FLAVOURS),  # 1045
        *(error(f, "unknown database") for f in FLAVOURS),  # 1049
        *(error(f, "unknown column") for f in FLAVOURS),  # 1054
        *(error(f, "unknown table") for f in FLAVOURS),  # 1146
        *(
            BinlogServerError(*error(f, "binlog dump of a missing file").args)  # 1236
            for f in FLAVOURS
        ),
        SourceConnectionError("the server refused the account", 1045),
        ValueError("a bug"),
    ],
)
def test_refusals_and_everything_unknown_are_permanent(err):
    assert not is_transient(err)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.floats(0.01, 5), st.floats(0.01, 60))
def test_backoff_doubles_from_the_first_delay_and_never_passes_the_cap(retries, first, cap):
    policy = RetryPolicy(retries, first, cap)
    delays = [policy.delay(a) for a in range(1, retries + 1)]
    assert all(0 < d <= cap for d in delays)
    assert all(b == min(cap, 2 * a) or b == cap for a, b in zip(delays, delays[1:]))
    assert policy.total_wait() == pytest.approx(sum(delays))


def test_the_default_rides_out_a_server_restart_of_a_minute():
    assert RetryPolicy().total_wait() >= 60
    assert parse_options(_options()).retry_policy() == RetryPolicy()
    assert parse_options(_options(**{"connect.max-retries": "0"})).connect_max_retries == 0


def _options(**extra):
    return {
        "hostname": "h",
        "username": "u",
        "password": "pw-never-logged",
        "database-name": "d",
        "table-name": "d.t",
        **extra,
    }


def test_a_transient_fault_is_retried_with_one_warning_per_retry(caplog):
    failures = [pymysql.err.OperationalError(2013, "Lost connection"), ConnectionRefusedError()]

    def action():
        if failures:
            raise failures.pop(0)
        return "ok"

    with caplog.at_level(logging.WARNING, logger="cdc_mysql"):
        assert retrying(NO_WAIT, "reading the binlog head", action) == "ok"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "reading the binlog head failed (OperationalError 2013: Lost connection)" in lines[0]
    assert "retry 1 of 3" in lines[0] and "retry 2 of 3" in lines[1]


def test_a_permanent_error_fails_at_once_with_its_own_message():
    calls = []

    def action():
        calls.append(1)
        raise pymysql.err.OperationalError(1045, "Access denied")

    with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
        retrying(NO_WAIT, "x", action)
    assert len(calls) == 1


def test_retries_end_with_an_error_naming_the_option():
    def action():
        raise pymysql.err.OperationalError(2003, "Connection refused")

    with pytest.raises(RetriesExhaustedError, match="connect.max-retries") as info:
        retrying(NO_WAIT, "reading the binlog head", action)
    assert "OperationalError 2003" in str(info.value)


def test_no_password_in_a_retry_line_or_the_final_error(caplog):
    options = parse_options(_options(**{"connect.max-retries": "2", "port": "1"}))
    policy = RetryPolicy(options.connect_max_retries, first_delay=0.0)
    from cdc_source.mysql_client import connect

    with caplog.at_level(logging.WARNING, logger="cdc_mysql"):
        with pytest.raises(RetriesExhaustedError) as info:
            retrying(policy, "connecting", lambda: connect(options.connection_kwargs()))
    text = " ".join(r.getMessage() for r in caplog.records) + str(info.value) + repr(options)
    assert len(caplog.records) == 2
    assert "pw-never-logged" not in text


def test_describe_uses_code_and_message_only():
    assert describe(pymysql.err.OperationalError(2006, "gone")) == "OperationalError 2006: gone"
    assert (
        describe(BinlogServerError(1236, "purged"))
        == "BinlogServerError: binlog dump failed: (1236) purged"
    )


class _Conn:
    def __init__(self, log, fail_query=False):
        self.open = True
        self.log = log
        self.fail_query = fail_query

    def close(self):
        self.open = False
        self.log.append("closed")


def test_reconnecting_replaces_a_dead_connection_and_repeats_the_query():
    log: list[str] = []
    conns: list[_Conn] = []

    def connect():
        conns.append(_Conn(log, fail_query=not conns))
        return conns[-1]

    def query(conn):
        if conn.fail_query:
            raise pymysql.err.OperationalError(2013, "Lost connection")
        return "row"

    session = Reconnecting(connect, NO_WAIT, "q")
    assert session.run(query) == "row"
    assert len(conns) == 2 and not conns[0].open and conns[1].open
    assert session.run(query) == "row" and len(conns) == 2  # the live one is kept


def test_a_resumed_stream_continues_and_progress_resets_the_count():
    # Five faults in all, but never more than one in a row: a stream that gets work done
    # between faults is never given up on.
    items = list(range(12))
    position = [0]
    opened = []

    def open_stream():
        opened.append(position[0])
        for item in items[position[0] :]:
            if item % 2 == 1 and item not in faulted:
                faulted.add(item)
                raise ConnectionResetError(104, "reset")
            position[0] = item + 1
            yield item

    faulted: set[int] = set()
    assert list(resumed(open_stream, RetryPolicy(1, first_delay=0.0), "s")) == items
    assert opened == [0, 1, 3, 5, 7, 9, 11]


# -- a binlog dump cut at arbitrary bytes ---------------------------------------------


class _DumpServer:
    """Serves COM_BINLOG_DUMP from a :class:`enc.BinlogFile` over fake connections, each
    cut (ConnectionResetError) after the number of bytes the next entry of ``cuts`` says."""

    def __init__(self, binlog: enc.BinlogFile, cuts: list[int], server_ids=()) -> None:
        self.binlog = binlog
        self.cuts = list(cuts)
        self.server_ids = list(server_ids)  # server_id of each connection (default 1)
        self.dumps: list[tuple[str, int]] = []

    def connect(self):
        conn = _DumpConn(self, self.cuts.pop(0) if self.cuts else None)
        conn.server_id = self.server_ids.pop(0) if self.server_ids else 1
        return conn


class _DumpConn:
    def __init__(self, server: _DumpServer, cut: int | None) -> None:
        self.server = server
        self.cut = cut
        self._rfile = self

    def cursor(self):
        return _Cursor(self.server_id)

    def get_server_info(self) -> str:
        return "10.11.0-MariaDB"

    def _execute_command(self, command: int, payload: bytes) -> None:
        pos = struct.unpack_from("<I", payload)[0]
        file = payload[10:].decode()
        self.server.dumps.append((file, pos))
        self._read = enc.packet_stream(self.server.binlog.packets(file, pos), chunk=4096)
        self.sent = 0

    def read1(self, size: int) -> bytes:
        if self.cut is not None and self.sent >= self.cut:
            raise ConnectionResetError(104, "Connection reset by peer")
        if self.cut is not None:
            size = min(size, self.cut - self.sent)
        data = self._read(size)
        self.sent += len(data)
        return data

    def close(self) -> None:
        pass


class _Cursor:
    def __init__(self, server_id: int = 1) -> None:
        self.server_id = server_id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, params=None):
        self.sql = sql

    def fetchone(self):  # a dump session's one SELECT: the checksum and the server id
        return ("CRC32", str(self.server_id))


def _binlog_with_transactions(count: int) -> enc.BinlogFile:
    binlog = enc.BinlogFile()
    columns = [("id", enc.LONG, b"", False, False), ("v", enc.LONG, b"", True, False)]
    for i in range(count):
        binlog.add(2, enc.query_body("shop", "BEGIN"))
        binlog.add(19, enc.table_map_body(77, "shop", "t", columns))
        rows = b"".join(
            enc.row_image([struct.pack("<i", i * 10 + r), struct.pack("<i", r)]) for r in range(3)
        )
        binlog.add(30, enc.rows_body(77, 2, rows, False, True, None))
        binlog.add(16, enc.xid_body(i))
    return binlog


def _rows_read(source, binlog, decoder):
    reader = RangeReader(
        source,
        BinlogPosition(binlog.name, 4),
        BinlogPosition(binlog.name, binlog.pos),
        {"shop.t"},
        decoder=decoder,
    )
    rows = []
    for block in reader.blocks():
        ids = block.rows.after[0].to_pylist()
        rows += list(zip(ids, block.end_pos.tolist(), block.sub.tolist(), block.row_index))
    return rows


@pytest.mark.parametrize("decoder", DECODERS)
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(1, 3000), min_size=1, max_size=8))
def test_a_binlog_dump_cut_anywhere_resumes_with_the_same_rows(decoder, cuts):
    binlog = _binlog_with_transactions(40)
    clean = _rows_read(DumpSource(_DumpServer(binlog, []).connect, 9, decoder), binlog, decoder)
    server = _DumpServer(binlog, cuts)
    policy = RetryPolicy(max_retries=len(cuts), first_delay=0.0)
    cut = _rows_read(DumpSource(server.connect, 9, decoder, policy), binlog, decoder)
    assert [r[:3] for r in cut] == [r[:3] for r in clean]
    assert len(clean) == 120
    starts = {start for start, _ in binlog.events} | {4, binlog.pos}  # pos: the end
    assert all(pos in starts for _, pos in server.dumps), "a dump resumes at an event boundary"


def test_a_dump_refused_by_the_server_is_not_retried():
    class Refusing(_DumpConn):
        def read1(self, size):
            body = b"\xff" + (1236).to_bytes(2, "little") + b"#HY000purged"
            return len(body).to_bytes(3, "little") + b"\x01" + body

    opened = []

    def connect():
        opened.append(1)
        conn = Refusing(_DumpServer(enc.BinlogFile(), []), None)
        conn.server_id = 1
        return conn

    source = DumpSource(connect, 9, "python", RetryPolicy(5, first_delay=0.0))
    _, events, close = source.open("binlog.000001", 4)
    with pytest.raises(BinlogServerError, match="1236"):
        list(events)
    close()
    assert len(opened) == 1


def test_a_server_that_accepts_and_says_nothing_is_a_transient_timeout():
    import threading

    from cdc_source.mysql_client import connect

    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    port = str(listener.getsockname()[1])
    options = parse_options(_options(hostname="127.0.0.1", port=port, **{"connect.timeout": "1"}))
    with pytest.raises(SourceConnectionError, match="timed out") as info:
        connect(options.connection_kwargs())
    assert is_transient(info.value)
    listener.close()


def test_the_handshake_waits_connect_timeout_and_queries_the_longer_read_timeout(monkeypatch):
    """PyMySQL reads the server's greeting under read_timeout: the connection is opened
    with connect.timeout there, and the ten-times-longer read timeout is set after."""
    from cdc_source import mysql_client

    class Opened:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            self._read_timeout = kwargs["read_timeout"]
            self._sock = self
            self.socket_timeout = None

        def settimeout(self, value):
            self.socket_timeout = value

    monkeypatch.setattr(mysql_client, "Connection", lambda **kwargs: Opened(**kwargs))
    options = parse_options(_options(**{"connect.timeout": "3"}))
    conn = mysql_client.connect(options.connection_kwargs())
    assert conn.kwargs["connect_timeout"] == 3 and conn.kwargs["read_timeout"] == 3
    assert conn._read_timeout == 30 and conn.socket_timeout == 30
