"""A fake MySQL server on a Unix socket, in a thread of the fuzzing process, for the
``textscan`` and ``statement`` targets: it greets with a protocol-10 handshake, accepts
any account, answers every query with OK except ``SELECT fuzz``, whose answer is the
fuzzer's packet payloads (framed with sequence numbers), after which it closes the
connection. Prepared, ``SELECT fuzz`` is a statement of no parameters and of the columns
the payloads define (as a server sends them with the statement), and its execution's
answer is the fuzzer's payloads.

:func:`scan` connects with mysqlclient, reads that answer with ``reader._textscan``'s
``TextScan`` (libmariadb parses the packets, the C copies each value into Arrow buffers)
and returns when the result ends or fails; :func:`statement_scan` reads it with
``StatementScan`` (libmariadb frames the rows, the C parses each value). A new
connection per input: a damaged answer leaves the connection unusable anyway.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import struct
import tempfile
import threading

QUERY = b"SELECT fuzz"
# CLIENT_LONG_PASSWORD | FOUND_ROWS | LONG_FLAG | CONNECT_WITH_DB | PROTOCOL_41 |
# TRANSACTIONS | SECURE_CONNECTION | MULTI_RESULTS | PLUGIN_AUTH: no TLS, no compression,
# EOF packets after the column definitions and rows.
CAPABILITIES = 0x1 | 0x2 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x20000 | 0x80000
OK = b"\x00\x00\x00\x02\x00\x00\x00"
STATEMENT_ID = (1).to_bytes(4, "little")
EOF = b"\xfe\x00\x00\x02\x00"

_server: _FakeServer | None = None


def _packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 0xFF]) + payload


def _greeting() -> bytes:
    scramble = b"abcdefghijklmnopqrst"
    return (
        b"\x0a"
        + b"5.5.5-10.11.19-MariaDB-fuzz\x00"
        + struct.pack("<I", 7)
        + scramble[:8]
        + b"\x00"
        + struct.pack("<H", CAPABILITIES & 0xFFFF)
        + b"\x21"  # utf8mb3_general_ci
        + struct.pack("<H", 2)  # SERVER_STATUS_AUTOCOMMIT
        + struct.pack("<H", CAPABILITIES >> 16)
        + bytes([21])
        + bytes(10)
        + scramble[8:]
        + b"\x00"
        + b"mysql_native_password\x00"
    )


class _FakeServer:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="cdc-fuzz-server-")
        atexit.register(shutil.rmtree, self.dir, ignore_errors=True)
        self.path = os.path.join(self.dir, "mysqld.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(4)
        self.answer: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.listener.accept()
            try:
                self._session(conn)
            except OSError:
                pass
            finally:
                conn.close()

    def _read(self, conn: socket.socket) -> bytes | None:
        head = _recv(conn, 4)
        if head is None:
            return None
        return _recv(conn, int.from_bytes(head[:3], "little"))

    def _session(self, conn: socket.socket) -> None:
        conn.sendall(_packet(0, _greeting()))
        if self._read(conn) is None:
            return
        conn.sendall(_packet(2, OK))
        while True:
            command = self._read(conn)
            if not command or command[0] == 0x01:  # COM_QUIT
                return
            if command == b"\x03" + QUERY or command[:5] == b"\x17" + STATEMENT_ID:
                conn.sendall(b"".join(_packet(i + 1, p) for i, p in enumerate(self.answer)))
                return
            if command == b"\x16" + QUERY:
                conn.sendall(self._prepared())
                continue
            conn.sendall(_packet(1, OK))

    def _prepared(self) -> bytes:
        """COM_STMT_PREPARE's answer: the statement, no parameters, and the columns the
        answer's first payloads define (its column count and definitions), then EOF."""
        count = self.answer[0][0] if self.answer and self.answer[0] else 0
        columns = self.answer[1 : 1 + count]
        ok = b"\x00" + STATEMENT_ID + len(columns).to_bytes(2, "little") + bytes(5)
        packets = [ok, *columns, EOF] if columns else [ok]
        return b"".join(_packet(i + 1, p) for i, p in enumerate(packets))


def _recv(conn: socket.socket, size: int) -> bytes | None:
    parts, missing = [], size
    while missing:
        part = conn.recv(missing)
        if not part:
            return None
        parts.append(part)
        missing -= len(part)
    return b"".join(parts)


def _connect(payloads: list[bytes]):
    import MySQLdb

    global _server
    if _server is None:
        _server = _FakeServer()
    _server.answer = payloads
    return MySQLdb.connect(unix_socket=_server.path, user="fuzz", connect_timeout=5, read_timeout=5)


def _read_through(payloads: list[bytes], scan_type: str, read) -> None:
    """``read(scanner)`` on a new connection's ``reader._textscan.<scan_type>`` scanner,
    the answer being ``payloads``; a ScanError or ValueError (bad bytes) ends it."""
    from reader import _textscan

    conn = _connect(payloads)
    try:
        scanner = getattr(_textscan, scan_type)(conn)
        try:
            read(scanner)
        except (_textscan.ScanError, ValueError):
            pass
        finally:
            scanner.abandon()
    finally:
        conn.close()


def statement_scan(payloads: list[bytes]) -> None:
    """Reads ``payloads`` as the answer to a prepared statement's execution through
    ``reader._textscan.StatementScan``."""

    def read(scanner) -> None:
        if not scanner.execute(QUERY):
            return
        while True:
            rows, columns = scanner.fetch(7, 1 << 16, b"\x01\x00\x01")
            if not rows:
                return
            for kind, _, first, second, ascii in columns:
                if kind == "binary":
                    assert ascii in (True, False) and len(first) == 4 * (rows + 1)
                else:
                    assert second is None and len(first) == 8 * rows and not ascii

    _read_through(payloads, "StatementScan", read)


def scan(payloads: list[bytes]) -> None:
    """Reads ``payloads`` as the answer to a query through ``reader._textscan``."""

    def read(scanner) -> None:
        if not scanner.execute(QUERY):
            return
        scanner.field_names()
        while True:
            rows, columns = scanner.fetch(7, 1 << 16, b"\x01\x00\x01")
            if not rows:
                return
            for index, (_, _, data, ascii) in enumerate(columns):
                asked = index in (0, 2)
                assert ascii == (asked and max(bytes(data), default=0) < 0x80)

    _read_through(payloads, "TextScan", read)
