"""The connection a snapshot task reads its chunks with.

mysqlclient (a C client) with its converters off hands over the server's text without
parsing values in Python, which Arrow then casts column by column: about 4x the rows/s
of PyMySQL here. It is optional: ``scan.snapshot.client=auto`` uses it where it is
installed and PyMySQL elsewhere; both give the same output.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from cdc_source.mysql_client import SourceConnectionError
from cdc_source.retry import is_transient


class SnapshotClientError(SourceConnectionError):
    """The snapshot's client could not connect, or is not installed."""


@dataclass
class SnapshotConnection:
    conn: object
    text: bool  # records hold the server's unconverted text
    cursor_class: object | None = None

    def cursor(self):
        return self.conn.cursor(self.cursor_class) if self.cursor_class else self.conn.cursor()

    def close(self) -> None:
        with suppress(Exception):  # it may already be gone
            self.conn.close()

    def abort(self) -> None:
        """Drop the connection at once, reading nothing more from it."""
        force = getattr(self.conn, "_force_close", None)  # PyMySQL
        with suppress(Exception):
            force() if force is not None else self.conn.close()


def _mysqlclient(connection_kwargs: dict) -> SnapshotConnection | None:
    try:
        import MySQLdb
        import MySQLdb.converters
        import MySQLdb.cursors
    except ImportError:
        return None
    # Keep the encoders (Python value -> SQL literal), drop every decoder.
    encoders = {k: v for k, v in MySQLdb.converters.conversions.items() if not isinstance(k, int)}
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
    }
    try:
        conn = MySQLdb.connect(**kwargs)
    except MySQLdb.OperationalError as err:
        where = f"{kwargs['user']}@{kwargs['host']}:{kwargs['port']}"
        raise SnapshotClientError(
            f"cannot connect to {where}: {err.args[-1]}", err.args[0], is_transient(err)
        ) from None
    return SnapshotConnection(conn, True, MySQLdb.cursors.SSCursor)


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
    return SnapshotConnection(connect(connection_kwargs, streaming=True), False)
