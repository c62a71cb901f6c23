"""Small helpers around PyMySQL shared by the driver and the executors."""

from __future__ import annotations

import time

import pymysql

from cdc_source.retry import is_transient


class SourceConnectionError(RuntimeError):
    """The server could not be reached or refused the account. ``transient``: whether a
    later attempt may succeed (:mod:`cdc_source.retry`); ``code``: the MySQL error code."""

    def __init__(self, message: str, code: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.transient = transient


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def connect(connection_kwargs: dict, *, streaming: bool = False, **extra) -> pymysql.Connection:
    """Open a session in UTC with utf8mb4, so TIMESTAMP values arrive as exact UTC instants.

    Errors are re-raised without the password (PyMySQL never puts it in a message, but
    we build ours from host, port and user only).
    """
    kwargs = dict(connection_kwargs)
    kwargs.setdefault("charset", "utf8mb4")
    kwargs.setdefault("autocommit", True)
    kwargs.setdefault("init_command", "SET time_zone = '+00:00'")
    if streaming:
        kwargs["cursorclass"] = pymysql.cursors.SSCursor
    kwargs.update(extra)
    # PyMySQL reads the server's greeting under read_timeout: bound the whole handshake by
    # connect_timeout (a server or proxy that accepts and then says nothing), then give
    # queries their own, longer read timeout.
    read_timeout = kwargs.get("read_timeout")
    if kwargs.get("connect_timeout") and read_timeout:
        kwargs["read_timeout"] = min(read_timeout, kwargs["connect_timeout"])
    try:
        conn = pymysql.connect(**kwargs)
    except pymysql.err.OperationalError as err:
        code = err.args[0] if err.args else None
        where = f"{kwargs.get('user')}@{kwargs.get('host')}:{kwargs.get('port')}"
        if code == 1045:
            raise SourceConnectionError(
                f"the server refused the account {where}: check 'username' and 'password'",
                code,
            ) from None
        raise SourceConnectionError(
            f"cannot connect to {where}: {err.args[1] if len(err.args) > 1 else err}; check "
            "'hostname' and 'port', and that the server is running",
            code if isinstance(code, int) else None,
            is_transient(err),
        ) from None
    if read_timeout and read_timeout != kwargs.get("read_timeout"):
        conn._read_timeout = read_timeout
        conn._sock.settimeout(read_timeout)
    return conn


def server_flavor(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
    return "mariadb" if "mariadb" in version.lower() else "mysql"


def read_head(conn) -> tuple[str, int, str, int]:
    """The binlog head: (file, position, executed GTID set or '', wall-clock ms)."""
    with conn.cursor() as cur:
        try:
            cur.execute("SHOW BINARY LOG STATUS")  # MySQL >= 8.2
        except Exception:  # older servers: a syntax error, from whichever client
            cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    if not row:
        raise SourceConnectionError(
            "the server has no binlog (SHOW MASTER STATUS is empty): enable log_bin"
        )
    file, pos = str(row[0]), int(row[1])
    gtids = str(row[4]).replace("\n", "") if len(row) > 4 and row[4] else ""
    return file, pos, gtids, int(time.time() * 1000)


def variables(conn, names: list[str]) -> dict[str, str]:
    """Global server variables by name (lower-cased); a variable the server lacks is absent.

    ``@@global.x`` works on MariaDB and every MySQL version, unlike
    ``information_schema.GLOBAL_VARIABLES`` (gone in MySQL 8)."""
    found: dict[str, str] = {}
    with conn.cursor() as cur:
        for name in names:
            try:
                cur.execute(f"SELECT @@global.{name}")
            except pymysql.err.MySQLError:
                continue
            value = cur.fetchone()[0]
            value = value.decode() if isinstance(value, bytes) else value
            found[name.lower()] = (
                {1: "ON", 0: "OFF"}.get(value, str(value)) if isinstance(value, int) else str(value)
            )
    return found


class ServerChangedError(RuntimeError):
    """A connection re-opened after a fault reached another server than before."""

    transient = False


def server_identity(conn) -> str:
    """Which server this is: ``server_id``, and ``server_uuid`` where the server has one
    (MySQL). Two servers of one replication topology never share a server id (Galera
    nodes may; there the check below cannot tell them apart)."""
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('server_id', 'server_uuid')")
        found = {_text(name).lower(): _text(value) for name, value in cur.fetchall()}
    return " ".join(
        f"{name}={found[name]}" for name in ("server_id", "server_uuid") if name in found
    )


def _text(value) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


class SameServer:
    """The server a query's positions belong to. The first connection checked (or the
    identity the driver planned a task against) sets it; a later connection that reaches
    another server raises :class:`ServerChangedError` (a fail-over while positions of the
    first server are in use)."""

    def __init__(self, what: str, expected: str | None = None) -> None:
        self.what = what
        self.identity = expected or None

    def check(self, conn) -> None:
        identity = server_identity(conn)
        if self.identity is None:
            self.identity = identity
        elif identity != self.identity:
            raise ServerChangedError(
                f"{self.what}: the connection reached another server ({identity}; the "
                f"query's binlog positions are those of {self.identity}), after a fail-over. "
                "Binlog positions of one server do not hold on another; start a new query "
                "with a new checkpoint location"
            )

    def checked(self, conn):
        """``conn`` after :meth:`check` (closed if it fails)."""
        try:
            self.check(conn)
        except BaseException:
            conn.close()
            raise
        return conn
