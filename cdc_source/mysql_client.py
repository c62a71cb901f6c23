"""Small helpers around PyMySQL shared by the driver and the executors."""

from __future__ import annotations

import re
import ssl
import time

import pymysql

from cdc_source import tls
from cdc_source.retry import is_transient


class SourceConnectionError(RuntimeError):
    """The server could not be reached or refused the account. ``transient``: whether a
    later attempt may succeed (:mod:`cdc_source.retry`); ``code``: the MySQL error code."""

    def __init__(self, message: str, code: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.transient = transient


class Connection(pymysql.connections.Connection):
    """PyMySQL's connection, with one TLS context per process where the arguments name no
    TLS setting (``ssl_mode=preferred``: TLS where the server offers it, nothing
    verified). PyMySQL builds that context anew for every connection, loading the
    system's CA certificates that the mode never uses (bench/README.md has its cost), and
    a query's start opens some ten connections, every binlog task at least one. A context
    holds no state of one connection, so one serves them all."""

    _preferred_tls: ssl.SSLContext | None = None  # the process's, built on first use

    def _create_ssl_ctx(self, sslp):
        if sslp:  # TLS settings of the caller's: a context of its own
            return super()._create_ssl_ctx(sslp)
        if Connection._preferred_tls is None:
            Connection._preferred_tls = super()._create_ssl_ctx(sslp)
        return Connection._preferred_tls


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def connect(connection_kwargs: dict, *, streaming: bool = False, **extra) -> Connection:
    """Open a session in UTC with utf8mb4, so TIMESTAMP values arrive as exact UTC instants.

    Errors are re-raised without the password (PyMySQL never puts it in a message, but
    we build ours from host, port and user only). TLS follows the arguments' ``ssl_mode``
    (:mod:`cdc_source.tls`); a mode that requires TLS is checked on the open connection.
    """
    kwargs, tls_settings = tls.split(connection_kwargs)
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
    host, port, user = kwargs.get("host"), kwargs.get("port"), kwargs.get("user")
    try:
        kwargs.update(tls.pymysql_arguments(tls_settings))
        conn = Connection(**kwargs)
    except tls.TlsSetupError as err:
        raise SourceConnectionError(str(err)) from None
    except RuntimeError as err:  # PyMySQL: an auth plugin's missing package
        explained = tls.explain(None, str(err), tls_settings, host, port, user)
        if explained is None:
            raise
        raise SourceConnectionError(explained) from None
    except pymysql.err.OperationalError as err:
        code = err.args[0] if err.args else None
        where = f"{user}@{host}:{port}"
        message = str(err.args[1] if len(err.args) > 1 else err)
        explained = tls.explain(code, message, tls_settings, host, port, user)
        if explained is not None:
            raise SourceConnectionError(
                explained, code if isinstance(code, int) else None
            ) from None
        raise SourceConnectionError(
            f"cannot connect to {where}: {err.args[1] if len(err.args) > 1 else err}; check "
            "'hostname' and 'port', and that the server is running",
            code if isinstance(code, int) else None,
            is_transient(err),
        ) from None
    if tls_settings["ssl_mode"] in tls.REQUIRING and not tls.pymysql_encrypted(conn):
        conn.close()
        raise SourceConnectionError(tls.not_encrypted_message(tls_settings["ssl_mode"], host, port))
    if read_timeout and read_timeout != kwargs.get("read_timeout"):
        conn._read_timeout = read_timeout
        conn._sock.settimeout(read_timeout)
    return conn


def server_flavor(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
    return "mariadb" if names_mariadb(version) else "mysql"


def names_mariadb(version: str) -> bool:
    """Whether a server version (``VERSION()``, or the greeting's) is MariaDB's."""
    return "mariadb" in version.lower()


BINARY_LOG_STATUS, MASTER_STATUS = "SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"
_SYNTAX_ERROR, _ACCESS_ERRORS = 1064, (1227, 1045, 1142, 1044)


def head_statement(version: str) -> str:
    """The statement that reads the binlog head on a server of this ``VERSION()``: MySQL
    8.2 added ``SHOW BINARY LOG STATUS`` and 8.4 removed ``SHOW MASTER STATUS`` (MySQL 8.4
    manual, "Changes in MySQL 8.4"); MariaDB has only the latter (10.5.2 added ``SHOW
    BINLOG STATUS`` as a synonym, not the MySQL name)."""
    if names_mariadb(version):
        return MASTER_STATUS
    numbers = [int(n) for n in re.findall(r"\d+", version.split("-", 1)[0])[:2]]
    major, minor = (numbers + [0, 0])[:2]
    return BINARY_LOG_STATUS if (major, minor) >= (8, 2) else MASTER_STATUS


class HeadPrivilegeError(SourceConnectionError):
    """The account may not read the binlog head."""


def _server_version(conn) -> str:
    info = getattr(conn, "get_server_info", None)  # PyMySQL and mysqlclient connections
    if info is not None:
        return as_text(info())
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return as_text(cur.fetchone()[0])


def read_head(conn) -> tuple[str, int, str, int]:
    """The binlog head: (file, position, executed GTID set or '', wall-clock ms).

    The statement is chosen once per connection from the server version; only a syntax
    error falls back to the other one (a server whose version string misleads), and an
    access error names the privilege to grant. The GTID set is what the server reports
    with the position, which can lag it: exact GTID states come from
    :mod:`coordinator.gtid_tracker`."""
    statement = getattr(conn, "_cdc_head_statement", None)
    if statement is None:
        statement = head_statement(_server_version(conn))
    with conn.cursor() as cur:
        try:
            cur.execute(statement)
        except Exception as err:  # noqa: BLE001 - classified by its code
            code = err.args[0] if err.args else None
            if code in _ACCESS_ERRORS:
                raise HeadPrivilegeError(
                    f"the account may not run {statement}: grant it REPLICATION CLIENT "
                    "(MySQL; BINLOG MONITOR on MariaDB 10.5+)",
                    code,
                ) from None
            if code != _SYNTAX_ERROR:
                raise
            statement = MASTER_STATUS if statement == BINARY_LOG_STATUS else BINARY_LOG_STATUS
            cur.execute(statement)
        row = cur.fetchone()
    conn._cdc_head_statement = statement
    if not row:
        raise SourceConnectionError(
            f"the server has no binlog ({statement} is empty): enable log_bin"
        )
    file, pos = as_text(row[0]), int(row[1])
    gtids = as_text(row[4]).replace("\n", "") if len(row) > 4 and row[4] else ""
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


class ServerChangeFollowed(RuntimeError):
    """Raised by a :class:`SameServer`'s ``on_change`` that follows a server change: the
    step whose connection met the new server used positions of the old one, so it is
    abandoned and done again from its offsets, found on the new server. The new identity
    stays the expected one."""

    transient = False


def server_identity(conn) -> str:
    """Which server this is: ``server_id``, and ``server_uuid`` where the server has one
    (MySQL). Two servers of one replication topology never share a server id (Galera
    nodes may; there the check below cannot tell them apart)."""
    return selected_with_identity(conn, ())[1]


def selected_with_identity(conn, expressions: tuple[str, ...]) -> tuple[tuple, str]:
    """``SELECT expressions`` and the server's identity (:func:`server_identity`) in one
    round trip: the values of ``expressions``, and the identity.

    The greeting's version names a MariaDB server, which has no ``server_uuid``; a
    server that another product's greeting hides (a proxy) and that lacks the variable
    is asked again without it."""
    names = _SERVER_ID if names_mariadb(conn.get_server_info()) else _IDENTITY_NAMES
    while True:
        select = ", ".join((*expressions, *(f"@@global.{name}" for name in names)))
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT {select}")
                row = cur.fetchone()
        except Exception as err:  # PyMySQL's or the C client's error, by its code
            if err.args and err.args[0] == _UNKNOWN_SYSTEM_VARIABLE and len(names) > 1:
                names = _SERVER_ID
                continue
            raise
        values, ids = row[: len(expressions)], row[len(expressions) :]
        identity = " ".join(
            f"{name}={as_text(value)}" for name, value in zip(names, ids) if value is not None
        )
        return tuple(values), identity


_IDENTITY_NAMES = ("server_id", "server_uuid")
_SERVER_ID = ("server_id",)
_UNKNOWN_SYSTEM_VARIABLE = 1193


def as_text(value) -> str:
    """A server value as text (a client may hand over bytes)."""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def binary_logs(conn) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: the server's binlog files, oldest first, with their sizes."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(as_text(row[0]), int(row[1])) for row in cur.fetchall()]


class SameServer:
    """The server a query's positions belong to. The first connection checked (or the
    identity the driver planned a task against) sets it; a later connection that reaches
    another server raises :class:`ServerChangedError` (a fail-over while positions of the
    first server are in use)."""

    def __init__(self, what: str, expected: str | None = None, on_change=None) -> None:
        self.what = what
        self.identity = expected or None
        self.on_change = on_change  # (before, after) -> None: follow the change, or raise

    def check(self, conn) -> None:
        self.check_identity(server_identity(conn))

    def check_identity(self, identity: str) -> None:
        """:meth:`check` of a connection whose identity was already read."""
        if self.identity is None:
            self.identity = identity
        elif identity != self.identity and self.on_change is not None:
            before, self.identity = self.identity, identity
            try:
                self.on_change(before, identity)
            except ServerChangeFollowed:
                raise
            except BaseException:
                self.identity = before
                raise
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
