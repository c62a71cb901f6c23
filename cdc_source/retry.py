"""Riding out server restarts, fail-overs and dropped connections (``connect.max-retries``).

Every connection the source makes, on the driver and on the executors, goes through
:func:`retrying` or :class:`Reconnecting`: a *transient* error (the server went away, the
connection was lost or refused while the server restarts, a read timed out, too many
connections) closes the connection and tries again after a capped exponential backoff; a
*permanent* one (access denied, unknown database, a purged binlog, a schema change, any
error this module does not know) is raised at once with its own message. Retrying is
safe because everything the source asks of the server is a read whose answer depends only
on its arguments (docs/design.md, 'Micro-batches'): a re-run query, chunk or binlog range
gives the same rows.

Each retry is one WARN line naming what was being done, the cause and the attempt; it is
built from the error's code and message only, never from connection arguments, so a
password cannot reach it.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from cdc_source.tls import failure_kind

log = logging.getLogger("cdc_mysql")

T = TypeVar("T")

# Client and server error codes after which a new connection can succeed.
# Client (CR_*, libmysql/errmsg and PyMySQL): 2002 no local socket, 2003 cannot connect
# (refused while the server restarts), 2006 server gone away, 2013 lost connection during a
# query, 2055 lost connection at a handshake step. Server (ER_*, mysqld_error.h):
# 1040 too many connections, 1053 server shutdown in progress, 1077 normal shutdown,
# 1079 shutdown complete, 1152/1158-1161 aborted connection / network read-write errors,
# 1317 query interrupted (a shutdown interrupts running statements), 1927 connection
# killed (MariaDB ER_CONNECTION_KILLED), 3032 server in offline mode (ER_SERVER_OFFLINE_MODE:
# maintenance, a group-replication member leaving, a cloud instance low on disk; MySQL
# manual "offline_mode", MariaDB KB e3032), 4031 client disconnected by the server for
# inactivity (MySQL 8.0.24+ ER_CLIENT_INTERACTION_TIMEOUT).
TRANSIENT_CODES = frozenset(
    {2002, 2003, 2006, 2013, 2055, 1040, 1053, 1077, 1079, 1152, 1158, 1159, 1160, 1161}
    | {1317, 1927, 3032, 4031}
)
_TRANSIENT_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
    }
)

DEFAULT_MAX_RETRIES = 10
FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 15.0


@dataclass(frozen=True)
class RetryPolicy:
    """How long a transient fault is ridden out: ``max_retries`` attempts after the first,
    waiting 0.5 s, 1 s, 2 s, ... capped at 15 s. The default of 10 retries waits
    0.5+1+2+4+8+15x5 = 90.5 s in all, plus the time of the failed attempts themselves:
    enough for a server restart or a fail-over of about a minute."""

    max_retries: int = DEFAULT_MAX_RETRIES
    first_delay: float = FIRST_DELAY_SECONDS
    max_delay: float = MAX_DELAY_SECONDS

    def delay(self, attempt: int) -> float:
        """The wait before retry ``attempt`` (1-based)."""
        return min(self.max_delay, self.first_delay * 2 ** (attempt - 1))

    def total_wait(self) -> float:
        return sum(self.delay(a) for a in range(1, self.max_retries + 1))


class RetriesExhaustedError(RuntimeError):
    """A transient fault lasted longer than ``connect.max-retries`` allows."""


def error_code(err: BaseException) -> int | None:
    """The MySQL error code of a PyMySQL, mysqlclient or binlog-dump error, if it has one."""
    code = getattr(err, "code", None)
    if isinstance(code, int):
        return code
    args = getattr(err, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    return None


def is_transient(err: BaseException) -> bool:
    """Whether a new connection may succeed where this error happened."""
    transient = getattr(err, "transient", None)
    if isinstance(transient, bool):  # our own errors say so themselves
        return transient
    if isinstance(err, (TimeoutError, ConnectionError)):
        return True
    if isinstance(err, OSError) and err.errno in _TRANSIENT_ERRNOS:
        return True
    module = type(err).__module__ or ""
    if module.startswith(("pymysql", "MySQLdb")):
        if type(err).__name__ == "InterfaceError":
            return True  # PyMySQL: "(0, '')", a use of a connection already closed
        # A certificate that fails verification, or a server without the TLS a mode
        # requires, arrives as 2003 (PyMySQL) or 2026: no retry can mend it.
        if failure_kind(" ".join(str(a) for a in getattr(err, "args", ()))):
            return False
        return error_code(err) in TRANSIENT_CODES
    return False


def describe(err: BaseException) -> str:
    """``Type code: message`` from the error's own arguments (never connection arguments)."""
    code = error_code(err)
    args = getattr(err, "args", ())
    message = args[1] if code is not None and len(args) > 1 else (args[0] if args else "")
    if not isinstance(message, str):
        message = str(message)
    if code is not None and f"({code})" in message:
        code = None
    prefix = f"{type(err).__name__} {code}" if code is not None else type(err).__name__
    return f"{prefix}: {message}" if message else prefix


class Attempts:
    """Counts the transient faults of one operation and waits between them. A caller that
    makes progress between faults (a resumed stream) calls :meth:`progressed`, so a long
    read survives a fault every few seconds as long as each connection gets work done."""

    def __init__(self, policy: RetryPolicy, what: str, sleep: Callable[[float], None] = time.sleep):
        self.policy = policy
        self.what = what
        self.sleep = sleep
        self.count = 0
        self.waited = 0.0

    def progressed(self) -> None:
        self.count = 0
        self.waited = 0.0

    def failed(self, err: BaseException) -> None:
        """Wait before the next attempt after ``err``, or raise: ``err`` itself when it is
        permanent, :class:`RetriesExhaustedError` when the retries are used up."""
        if not is_transient(err):
            raise err
        self.count += 1
        if self.count > self.policy.max_retries:
            raise RetriesExhaustedError(
                f"{self.what}: the server could not be reached for {self.waited:.0f} s "
                f"({self.policy.max_retries} retries; last error {describe(err)}); raise "
                "'connect.max-retries' to wait longer through a restart or fail-over"
            ) from None
        delay = self.policy.delay(self.count)
        log.warning(
            "%s failed (%s); retry %d of %d in %.1f s",
            self.what,
            describe(err),
            self.count,
            self.policy.max_retries,
            delay,
        )
        self.sleep(delay)
        self.waited += delay


def retrying(policy: RetryPolicy, what: str, action: Callable[[], T]) -> T:
    """``action()``, run again after each transient fault (it must be safe to repeat)."""
    attempts = Attempts(policy, what)
    while True:
        try:
            return action()
        except Exception as err:  # noqa: BLE001 - classified by Attempts.failed
            attempts.failed(err)


class Reconnecting:
    """A lazily opened connection whose queries are retried on a fresh connection after
    a transient fault: ``run(lambda conn: ...)``. For reads only (each is repeated whole)."""

    def __init__(
        self,
        connect: Callable[[], object],
        policy: RetryPolicy,
        what: str,
        on_connect: Callable[[object], None] | None = None,
    ) -> None:
        self._connect = connect
        self.policy = policy
        self.what = what
        self.on_connect = on_connect  # checks a new connection (e.g. that it is the same server)
        self._conn = None

    def run(self, query: Callable[[object], T]) -> T:
        def attempt() -> T:
            try:
                if self._conn is None or not getattr(self._conn, "open", True):
                    self._conn = self._connect()
                    if self.on_connect is not None:
                        self.on_connect(self._conn)
                return query(self._conn)
            except Exception:
                self.close()
                raise

        return retrying(self.policy, self.what, attempt)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - it may already be gone
                pass


def resumed(open_stream: Callable[[], Iterator[T]], policy: RetryPolicy, what: str) -> Iterator[T]:
    """The items of a stream that is opened again after a transient fault. ``open_stream``
    must continue where the items already yielded end (it is called once per attempt)."""
    attempts = Attempts(policy, what)
    while True:
        stream = open_stream()
        try:
            for item in stream:
                if attempts.count:  # (a check per item: this loop carries every binlog event)
                    attempts.progressed()
                yield item
            return
        except Exception as err:  # noqa: BLE001 - classified by Attempts.failed
            attempts.failed(err)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
