"""The snapshot's C readers (reader/_textscan.c: the text protocol's TextScan and the
binary protocol's StatementScan) never crash the worker: misuse is an exception, a
closed or killed connection is a transient server error, and a result stream corrupted
on the wire (bytes flipped or cut by a proxy, seeded) ends in an exception or in rows,
never in a crash. The fuzzing runs in a child process, so a crash would fail the test
instead of ending the test run."""

from __future__ import annotations

import random
import select
import socket
import subprocess
import sys
import textwrap
import threading

import pyarrow as pa
import pytest

from reader import snapshot_connection


@pytest.fixture(autouse=True)
def _native_reader_built():
    """It is built wherever mysqlclient (a dev dependency) builds: its absence is a failure."""
    if snapshot_connection._textscan is None:
        pytest.fail("reader._textscan is not built (pip install -e . with libmariadb-dev)")


ONE_DECODER = True  # no binlog is read here
MARKER = b"/*fuzz*/"
SCANS = ["TextScan", "StatementScan"]


def _scan_type(name: str):
    from reader import _textscan

    if not hasattr(_textscan, name):
        pytest.fail(f"reader._textscan has no {name} (libmariadb older than Connector/C 3.1?)")
    return getattr(_textscan, name)


def _connect(server, port=None, **extra):
    import MySQLdb

    return MySQLdb.connect(
        host=server.info.host,
        port=port or server.info.port,
        user=server.info.admin_user,
        password=server.info.admin_password,
        charset="utf8mb4",
        **extra,
    )


@pytest.fixture
def table(server):
    database = server.fresh_database("textscan")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(200), b BLOB, n INT NULL)",
        database=database,
    )
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s, %s)",
            [
                (i, "x" * (i % 150), bytes([i % 256]) * (i % 40), None if i % 7 else i)
                for i in range(3000)
            ],
        )
    return f"{database}.t"


@pytest.mark.parametrize("scan_name", SCANS)
def test_misuse_and_server_errors_are_exceptions(server, table, scan_name):
    from reader._textscan import ScanError

    scan_type = _scan_type(scan_name)
    conn = _connect(server)
    scan = scan_type(conn)
    with pytest.raises(ValueError):
        scan.fetch(0, 1)
    assert scan.fetch(10, 100) == (0, [])  # nothing open
    with pytest.raises(ScanError) as syntax:
        scan.execute(b"SELEC nothing")
    assert syntax.value.args[0] == 1064
    assert scan.execute(f"SELECT * FROM {table}".encode()) == 4
    rows, columns = scan.fetch(5, 1 << 20)
    assert rows == 5 and len(columns) == 4
    with pytest.raises(ScanError) as busy:
        scan.execute(b"SELECT 1")
    assert busy.value.args[0] == 2014  # commands out of sync
    scan.abandon()
    scan.abandon()
    assert scan.fetch(5, 100) == (0, [])
    with pytest.raises(TypeError):  # its state belongs to the connection it was made with
        scan.__init__(_connect(server))
    conn.close()
    with pytest.raises(ScanError) as closed:
        scan.execute(b"SELECT 1")
    assert closed.value.args[0] == 2006
    with pytest.raises(AttributeError):  # not a MySQLdb connection
        scan_type(object())


@pytest.mark.parametrize("scan_name", SCANS)
def test_fetched_buffers_are_read_only_and_outlive_the_scan_and_its_connection(
    server, table, scan_name
):
    conn = _connect(server)
    scan = _scan_type(scan_name)(conn)
    scan.execute(f"SELECT id, s, n FROM {table} ORDER BY id LIMIT 20".encode())
    asked = b"\x01\x01" if scan_name == "StatementScan" else b"\x00\x01"
    rows, [ids, strings, numbers] = scan.fetch(20, 1 << 20, asked)
    assert scan.fetch(20, 1 << 20)[0] == 0  # the result's end: it is released
    del scan
    conn.close()
    if scan_name == "StatementScan":  # integers as their values, text as TextScan's
        assert [ids[0], strings[0], numbers[0]] == ["int64", "binary", "int64"]
        assert not ids[4]  # asked, but the ASCII check is of text columns only
        assert memoryview(ids[2]).cast("q").tolist() == list(range(20))
        values = memoryview(numbers[2]).cast("q").tolist()
        assert [v for i, v in enumerate(values) if i % 7 == 0] == [0, 7, 14]
        ids, strings, numbers = (None, None, ids[2]), strings[1:], numbers[1:]
    validity, offsets, data, ascii = strings
    assert validity is None  # no NULL among them: no bitmap
    assert ascii
    view = memoryview(data)
    assert view.readonly and len(view) == len(data)
    with pytest.raises(TypeError):
        view[0] = 0
    ends = memoryview(offsets).cast("i")
    assert [bytes(data)[ends[i] : ends[i + 1]] for i in range(rows)] == [
        b"x" * (i % 150) for i in range(20)
    ]
    bits = bytes(numbers[0])  # n is NULL except where i % 7 == 0
    assert [bool(bits[i // 8] >> (i % 8) & 1) for i in range(rows)] == [
        i % 7 == 0 for i in range(20)
    ]
    if scan_name == "TextScan":
        assert bytes(ids[2])[:2] == b"01" and not ids[3]  # only the columns asked


def test_a_text_column_of_ascii_bytes_comes_as_string_and_any_other_as_binary(server, table):
    """Only the columns named text, and only a fetch whose bytes are all ASCII (valid
    UTF-8 as they are): a fetch holding one other byte is binary, for Arrow to check."""
    conn = _connect(server)
    snapshot = snapshot_connection.SnapshotConnection(conn, "native")
    query = f"SELECT s, b, IF(id = 150, 'caf\u00e9', s) FROM {table} WHERE id < 200 ORDER BY id"
    fetches = list(snapshot.fetch_columns(query, [], 100, text_columns=frozenset({0, 2})))
    conn.close()
    assert [[column.type for column in fetch] for fetch in fetches] == [
        [pa.string(), pa.binary(), pa.string()],
        [pa.string(), pa.binary(), pa.binary()],
    ]
    assert fetches[1][2][50].as_py() == "caf\u00e9".encode()


def test_a_connection_killed_mid_result_is_a_transient_error(server, table):
    from cdc_source.retry import is_transient

    conn = _connect(server)
    thread_id = conn.thread_id()
    snapshot = snapshot_connection.SnapshotConnection(conn, "native")
    # Nine million rows: the server is still sending when the connection is killed.
    fetches = snapshot.fetch_columns(f"SELECT * FROM {table} a, {table} b", [], 100, 1 << 20)
    next(fetches)
    server.execute(f"KILL CONNECTION {thread_id}")
    with pytest.raises(Exception) as lost:
        for _ in fetches:
            pass
    assert is_transient(lost.value), lost.value
    snapshot.abort()


def test_byte_budget_ends_a_fetch_and_every_row_arrives_once(server, table):
    conn = _connect(server)
    snapshot = snapshot_connection.SnapshotConnection(conn, "native")
    fetched = list(snapshot.fetch_columns(f"SELECT id, b FROM {table}", [], 10_000, 2_000))
    ids = [i for columns in fetched for i in columns[0].to_pylist()]
    assert sorted(int(i) for i in ids) == list(range(3000))
    # Each fetch stops with the row that crosses 2,000 bytes of values (ids and blobs).
    assert all(sum(c.nbytes for c in columns) < 2_000 + 4 * 500 for columns in fetched)
    conn.close()


class CorruptingProxy:
    """Forwards to the server; once the client sends a query holding MARKER, damages the
    server's answer: one byte flipped every ``every`` bytes on average, or the stream cut
    after ``cut_after`` bytes (seeded)."""

    def __init__(self, target: tuple[str, int], seed: int) -> None:
        self.target = target
        self.random = random.Random(seed)
        self.listener = socket.create_server(("127.0.0.1", 0))  # a port no one else holds
        self.port = self.listener.getsockname()[1]
        self.cut_after = self.random.choice([None, self.random.randrange(1, 200_000)])
        self.every = self.random.choice([500, 5_000, 50_000])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        client, _ = self.listener.accept()
        upstream = socket.create_connection(self.target)
        armed, sent = False, 0
        try:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 5)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    if sock is client:
                        armed = armed or MARKER in data
                        upstream.sendall(data)
                        continue
                    if armed:
                        data = bytearray(data)
                        for _ in range(max(1, len(data) // self.every)):
                            if self.random.random() < 0.7:
                                data[self.random.randrange(len(data))] ^= (
                                    1 << self.random.randrange(8)
                                )
                        if self.cut_after is not None and sent + len(data) > self.cut_after:
                            client.sendall(bytes(data[: self.cut_after - sent]))
                            return
                        sent += len(data)
                    client.sendall(bytes(data))
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                sock.close()
            self.listener.close()


CHILD = textwrap.dedent(
    """
    import sys
    import MySQLdb
    from reader import _textscan
    port, user, password, table, scan_name = sys.argv[1:6]
    conn = MySQLdb.connect(host="127.0.0.1", port=int(port), user=user, password=password,
                           charset="utf8mb4", connect_timeout=5, read_timeout=5)
    scan = getattr(_textscan, scan_name)(conn)
    # Every kind of value the scans take: integers, text, blobs, NULLs, a double and the
    # temporal types.
    query = (
        f"SELECT /*fuzz*/ *, CAST(id AS DOUBLE), DATE('2020-01-01') + INTERVAL id DAY, "
        f"TIMESTAMP('2020-01-01 00:00:00.5') + INTERVAL id SECOND, SEC_TO_TIME(id - 1500) "
        f"FROM {table}"
    )
    try:
        scan.execute(query.encode())
        while scan.fetch(257, 1 << 16)[0]:
            pass
        print("rows")
    except Exception as err:
        print("error", type(err).__name__)
    finally:
        scan.abandon()
    """
)


@pytest.mark.parametrize("scan_name", SCANS)
def test_a_corrupted_result_stream_never_crashes_the_reader(server, table, scan_name):
    _scan_type(scan_name)
    outcomes = []
    for seed in range(24):
        proxy = CorruptingProxy((server.info.host, server.info.port), seed)
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(proxy.port),
                server.info.admin_user,
                server.info.admin_password,
                table,
                scan_name,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"seed {seed}: exit {done.returncode}\n{done.stderr[-2000:]}"
        outcomes.append(done.stdout.split()[0])
    assert "error" in outcomes  # the damage was seen, not only survived


def test_a_server_out_of_prepared_statements_is_read_in_the_text_protocol(server, table):
    """max_prepared_stmt_count reached (or a proxy without COM_STMT_PREPARE): the native
    client reads that connection's chunks as text, with the same columns' values."""
    query = f"SELECT id, s, n FROM {table} WHERE id < 500 ORDER BY id"
    conn = _connect(server)
    expected = list(
        snapshot_connection.SnapshotConnection(conn, "native").fetch_columns(query, [], 100)
    )
    conn.close()
    (limit,) = server.query("SELECT @@GLOBAL.max_prepared_stmt_count")[0]
    server.execute("SET GLOBAL max_prepared_stmt_count = 0")
    try:
        conn = _connect(server)
        snapshot = snapshot_connection.SnapshotConnection(conn, "native")
        fetched = list(snapshot.fetch_columns(query, [], 100))
        again = list(snapshot.fetch_columns(query, [], 100))  # the connection stays on text
    finally:
        server.execute(f"SET GLOBAL max_prepared_stmt_count = {int(limit)}")
    conn.close()
    assert type(snapshot._scan).__name__ == "TextScan"
    assert [c.type for c in expected[0]] == [pa.int64(), pa.binary(), pa.int64()]
    assert [c.type for c in fetched[0]] == [pa.binary(), pa.binary(), pa.binary()]
    for columns in (fetched, again):
        ids = [int(v) for f in columns for v in f[0].to_pylist()]
        assert ids == [v for f in expected for v in f[0].to_pylist()] == list(range(500))
        numbers = [v and int(v) for f in columns for v in f[2].to_pylist()]
        assert numbers == [v for f in expected for v in f[2].to_pylist()]
