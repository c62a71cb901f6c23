"""The connection a snapshot task reads its chunks with, and its fetches as columns.

Every client hands over one Arrow column per selected field: the server's text,
unparsed, as binary, except that the native client's integers and doubles come as the
numbers the server stores; typing is Arrow's (:mod:`reader.text_columns`), so the output
does not depend on the client:

- ``native``: mysqlclient's connection read by ``reader._textscan`` (C over libmariadb,
  straight into Arrow buffers: no Python object per value). About 4x the rows/s of
  mysqlclient's own cursor, which builds a tuple per row that must then be transposed.
  Where libmariadb lets a result be read by a callback (Connector/C 3.1 and later), the
  query is prepared and its rows come in the binary protocol (``StatementScan``):
  integers and doubles as their bytes, which the server does not print (a third less of
  its CPU on a table of typed columns), temporal values as the text the text protocol
  would have carried, everything else as the same bytes; otherwise ``TextScan`` reads the
  text protocol.
- ``mysqlclient``: mysqlclient's streaming cursor with its converters off, where the
  extension is not built.
- ``pymysql``: PyMySQL's streaming cursor with its decoders off (pure Python).

``scan.snapshot.client=auto`` takes the first one available; ``mysqlclient`` insists on
mysqlclient (natively read where it can be).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass

import pyarrow as pa
import pymysql

from cdc_source import tls
from cdc_source.mysql_client import SourceConnectionError
from cdc_source.retry import is_transient

log = logging.getLogger(__name__)

try:
    from reader import _textscan
except ImportError:  # built only where libmariadb's headers were found
    _textscan = None

# A fetch stops at this many bytes of values even before ``fetch_size`` rows, so a task's
# memory is bounded by bytes for wide rows (and by rows for narrow ones).
DEFAULT_FETCH_BYTES = 32 << 20


class SnapshotClientError(SourceConnectionError):
    """The snapshot's client could not connect, or is not installed."""


def _text_column(values: tuple | list) -> pa.Array:
    """A cursor's column of text values (``str``, ``bytes`` or None) as Arrow binary."""
    try:
        return pa.array(values, pa.binary())
    except (pa.ArrowTypeError, pa.ArrowInvalid):  # character columns arrive as str
        return pa.array(values, pa.string()).cast(pa.binary())


@dataclass
class SnapshotConnection:
    conn: object
    client: str  # native, mysqlclient or pymysql
    cursor_class: object | None = None
    _scan: object | None = None

    def cursor(self):
        return self.conn.cursor(self.cursor_class) if self.cursor_class else self.conn.cursor()

    def get_server_info(self) -> str:
        """The version the server's greeting gave."""
        return self.conn.get_server_info()

    def execute(self, statement: str) -> None:
        with self.cursor() as cur:
            cur.execute(statement)

    def fetch_columns(
        self,
        query: str,
        params: list,
        max_rows: int,
        max_bytes: int = DEFAULT_FETCH_BYTES,
        text_columns: frozenset[int] = frozenset(),
    ) -> Iterator[list[pa.Array]]:
        """The query's result as lists of binary columns: at most ``max_rows`` rows each,
        and about ``max_bytes`` of values (a fetch ends with the row that crosses it).
        ``text_columns``: the indexes of columns of UTF-8 text; the native scan hands a
        fetch of one of them whose bytes are all ASCII over as a string column, which is
        then valid UTF-8 without Arrow's check."""
        if self.client == "native":
            yield from self._native_fetches(query, params, max_rows, max_bytes, text_columns)
        else:
            yield from self._cursor_fetches(query, params, max_rows, max_bytes)

    def _native_fetches(
        self,
        query: str,
        params: list,
        max_rows: int,
        max_bytes: int,
        text_columns: frozenset[int],
    ) -> Iterator[list[pa.Array]]:
        import MySQLdb

        literals = tuple(self.conn.literal(p) for p in params)
        statement = query.encode("utf-8") % literals  # '%%' is '%', as PyMySQL has it
        checked = bytes(index in text_columns for index in range(max(text_columns, default=-1) + 1))
        try:
            scan = self._executed(statement)
            columns = _text_columns if isinstance(scan, _textscan.TextScan) else _statement_columns
            while True:
                rows, buffers = scan.fetch(max_rows, max_bytes, checked)
                if not rows:
                    return
                yield columns(rows, buffers)
        except _textscan.ScanError as err:
            # Raised as mysqlclient raises server errors, so callers classify one kind.
            raise MySQLdb.OperationalError(*err.args) from None
        finally:
            if self._scan is not None:  # a no-op after the last row; else the connection must go
                self._scan.abandon()

    def _executed(self, statement: bytes):
        """The connection's scan, ``statement`` started on it. Where the server will not
        prepare it (out of prepared statements, or a proxy without them), the
        connection reads in the text protocol from then on."""
        scan = self._scan = self._scan or _native_scan(self.conn)
        try:
            scan.execute(statement)
        except _textscan.ScanError as err:
            if isinstance(scan, _textscan.TextScan) or err.args[0] not in PREPARE_REFUSED:
                raise
            _warn_text_protocol(err)
            scan = self._scan = _textscan.TextScan(self.conn)
            scan.execute(statement)
        return scan

    def _cursor_fetches(
        self, query: str, params: list, max_rows: int, max_bytes: int
    ) -> Iterator[list[pa.Array]]:
        cur = self.cursor()
        rows = max_rows
        try:
            cur.execute(query, params)
            while True:
                fetched = cur.fetchmany(rows)
                if not fetched:
                    return
                columns = [_text_column(values) for values in zip(*fetched)]
                yield columns
                # Cursors count rows, not bytes: keep the next fetch near the byte budget.
                size = sum(c.nbytes for c in columns)
                rows = max(1, min(max_rows, max_bytes * len(fetched) // max(size, 1)))
        except BaseException:
            # Drop the connection before the cursor: closing a streaming cursor reads its
            # remaining rows, and on a lost connection PyMySQL's then fails with an
            # AttributeError that would hide the (transient) error being raised.
            self.abort()
            raise
        finally:
            with suppress(Exception):
                cur.close()

    def close(self) -> None:
        with suppress(Exception):  # it may already be gone
            self.conn.close()

    def abort(self) -> None:
        """Drop the connection at once, reading nothing more from it."""
        if self._scan is not None:
            self._scan.abandon()
        force = getattr(self.conn, "_force_close", None)  # PyMySQL
        with suppress(Exception):
            force() if force is not None else self.conn.close()


_StatementScan = getattr(_textscan, "StatementScan", None)

# The server's refusals of COM_STMT_PREPARE itself, not of the statement:
# ER_MAX_PREPARED_STMT_COUNT_REACHED, ER_UNSUPPORTED_PS, ER_UNKNOWN_COM_ERROR (a proxy).
PREPARE_REFUSED = frozenset({1461, 1295, 1047})
_text_protocol_warned = False


def _warn_text_protocol(err: Exception) -> None:
    """Once per process: a snapshot task reads in the text protocol instead."""
    global _text_protocol_warned
    if not _text_protocol_warned:
        _text_protocol_warned = True
        log.warning(
            "the server did not prepare a snapshot chunk's SELECT (%s): snapshot tasks read "
            "in the text protocol instead, which costs the server more CPU",
            err.args[-1],
        )


_VALUE_TYPES = {"int64": pa.int64(), "uint64": pa.uint64(), "float64": pa.float64()}


def _native_scan(conn):
    """The binary protocol's scan where the extension has it, else the text scan."""
    return (_StatementScan or _textscan.TextScan)(conn)


def _buffer(buffer) -> pa.Buffer | None:
    return pa.py_buffer(buffer) if buffer is not None else None


def _text_array(rows: int, validity, offsets, data, ascii: bool) -> pa.Array:
    """A fetched column of text: binary, or string where it is all ASCII."""
    return pa.Array.from_buffers(
        pa.string() if ascii else pa.binary(),
        rows,
        [_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)],
    )


def _text_columns(rows: int, buffers: list) -> list[pa.Array]:
    """``TextScan.fetch``'s columns."""
    return [_text_array(rows, *column) for column in buffers]


def _statement_columns(rows: int, buffers: list) -> list[pa.Array]:
    """``StatementScan.fetch``'s columns: int64, uint64 and float64 values as the server
    stores them, the others as :func:`_text_columns`'."""
    return [
        _text_array(rows, validity, first, second, ascii)
        if kind == "binary"
        else pa.Array.from_buffers(
            _VALUE_TYPES[kind], rows, [_buffer(validity), pa.py_buffer(first)]
        )
        for kind, validity, first, second, ascii in buffers
    ]


def _native_matches(MySQLdb) -> bool:
    """The extension and mysqlclient must share one libmariadb (one ``MYSQL`` layout)."""
    if _textscan is None:
        return False
    linked = MySQLdb._mysql.get_client_info()
    ours = _textscan.client_version()
    major, minor, patch = (int(p) for p in linked.split("-")[0].split(".")[:3])
    if major * 10000 + minor * 100 + patch == ours:
        return True
    log.warning(
        "reader._textscan is linked with client library %s but mysqlclient with %s: "
        "snapshots are read with mysqlclient's cursor",
        ours,
        linked,
    )
    return False


def _mysqlclient(connection_kwargs: dict) -> SnapshotConnection | None:
    try:
        import MySQLdb
        import MySQLdb.converters
        import MySQLdb.cursors
    except ImportError:
        return None
    # Keep the encoders (Python value -> SQL literal), drop every decoder.
    encoders = {k: v for k, v in MySQLdb.converters.conversions.items() if not isinstance(k, int)}
    _, tls_settings = tls.split(connection_kwargs)
    kwargs = {
        "host": connection_kwargs["host"],
        "port": connection_kwargs["port"],
        "user": connection_kwargs["user"],
        "password": connection_kwargs.get("password", ""),
        "connect_timeout": connection_kwargs.get("connect_timeout", 30),
        **{
            name: connection_kwargs[name]
            for name in ("read_timeout", "write_timeout")
            if name in connection_kwargs
        },
        "charset": "utf8mb4",
        "conv": encoders,
        "autocommit": True,
        "init_command": "SET time_zone = '+00:00'",
        **tls.mysqlclient_arguments(tls_settings, MySQLdb._mysql.get_client_info()),
    }
    host, port, user = kwargs["host"], kwargs["port"], kwargs["user"]
    try:
        tls.check_files(tls_settings)
        conn = MySQLdb.connect(**kwargs)
    except tls.TlsSetupError as err:
        raise SnapshotClientError(str(err)) from None
    except MySQLdb.OperationalError as err:
        explained = tls.explain(err.args[0], str(err.args[-1]), tls_settings, host, port, user)
        if explained is not None:
            raise SnapshotClientError(explained, err.args[0]) from None
        raise SnapshotClientError(
            f"cannot connect to {user}@{host}:{port}: {err.args[-1]}",
            err.args[0],
            is_transient(err),
        ) from None
    mode = tls_settings["ssl_mode"]
    if mode in tls.REQUIRING:  # the client library may have fallen back to plain text
        try:
            encrypted = bool(tls.session_cipher(conn))
        except BaseException:
            conn.close()
            raise
        if not encrypted:
            conn.close()
            raise SnapshotClientError(tls.not_encrypted_message(mode, host, port))
    client = "native" if _native_matches(MySQLdb) else "mysqlclient"
    return SnapshotConnection(conn, client, MySQLdb.cursors.SSCursor)


_PYMYSQL_ENCODERS = {
    k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)
}


def open_snapshot_connection(
    connection_kwargs: dict, client: str, connect: Callable[..., object]
) -> SnapshotConnection:
    if client in ("auto", "mysqlclient"):
        fast = _mysqlclient(connection_kwargs)
        if fast is not None:
            return fast
        if client == "mysqlclient":
            raise SnapshotClientError(
                "scan.snapshot.client=mysqlclient, but mysqlclient is not installed on the "
                "executors: pip install 'cdc-mysql[fast]' (needs libmariadb-dev and "
                "pkg-config to build), or use scan.snapshot.client=auto"
            )
    # Decoders off: values arrive as the server's text, as from the C clients.
    conn = connect(connection_kwargs, streaming=True, conv=_PYMYSQL_ENCODERS)
    return SnapshotConnection(conn, "pymysql")
