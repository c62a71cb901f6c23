"""A primary, its replica and a proxy in front of them: the pieces of a fail-over test.

:class:`ReplicatedPair` starts two throwaway servers of the suite's flavour, the replica
following the primary by GTID and logging what it applies (``log_slave_updates``, on
MySQL ``log_replica_updates``): its own binlog holds the primary's transactions under the
same GTIDs, in files of its own name and at its own offsets. MariaDB replicates with
``MASTER_USE_GTID=slave_pos``, MySQL with ``SOURCE_AUTO_POSITION=1``.

The replica is built one of two ways (``built``):

- ``replication``: both servers start empty and the replica replays every transaction
  of the primary, from the first;
- ``dump``: the primary's data (written by ``seed`` first) is copied by a consistent
  dump (``mysqldump --single-transaction --set-gtid-purged=ON``, ``mariadb-dump
  --single-transaction --gtid``) and loaded without binlogging; the replica's early GTIDs
  are then only a setting (MySQL ``gtid_purged``, MariaDB ``gtid_slave_pos``), in none of
  its binlog files, and it replicates from there, as replicas are usually made.

:class:`SwitchingProxy` is the one address the source connects to; :meth:`SwitchingProxy.
switch` resets every connection through it and sends new ones to another server, as a
DNS name or a virtual IP moved to a promoted replica looks to a client.

A fail-over::

    with ReplicatedPair() as pair, SwitchingProxy(pair.primary.info.port) as proxy:
        options = pair.source_options("db", r"db\\.t", proxy=proxy)
        ...                                    # the query reads the primary
        pair.wait_caught_up()
        proxy.switch(pair.replica.info.port)   # the query's connections are reset
        pair.promote()                         # writes now go to pair.replica
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import pymysql
import pytest

from tests.support.server import TEST_URL_ENV, TestServer, suite_flavour

REPL_USER = "cdc_repl"
REPL_PASSWORD = "cdc-repl-secret"
PRIMARY_SERVER_ID = 1
REPLICA_SERVER_ID = 2
REPLICA_BINLOG = "replica-bin"  # other file names than the primary's ``binlog.NNNNNN``
BUILT = ("replication", "dump")
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

# Both servers can be a primary or a replica: the same options but the server id.
_COMMON_ARGS = {
    "mariadb": ("--log-slave-updates=ON", "--gtid-strict-mode=ON", "--slave-net-timeout=10"),
    "mysql": ("--log-replica-updates=ON", "--replica-net-timeout=10", "--skip-replica-start"),
}


class BinlogStatus(NamedTuple):
    """Where a server's binlog ends and its GTIDs (MariaDB ``gtid_binlog_pos``, MySQL
    ``gtid_executed``)."""

    file: str
    pos: int
    gtid_pos: str


def binlog_status(server: TestServer) -> BinlogStatus:
    file, pos = server.binlog_head()
    return BinlogStatus(file, pos, gtid_text(server.gtid_state()))


def gtid_text(value) -> str:
    """A GTID state as one line (MySQL breaks a long ``gtid_executed`` after commas)."""
    return re.sub(r"\s+", "", _text(value))


def binlog_gtids(server: TestServer) -> list[str]:
    """The GTIDs of every transaction in the server's binlog files, in binlog order."""
    gtids = []
    pattern = r"GTID (\d+-\d+-\d+)" if server.is_mariadb else r"GTID_NEXT\s*=\s*'([^']+)'"
    with server.admin() as conn, conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        files = [_text(row[0]) for row in cur.fetchall()]
        for file in files:
            cur.execute(f"SHOW BINLOG EVENTS IN '{file}'")
            for row in cur.fetchall():
                if _text(row[2]) == "Gtid":
                    match = re.search(pattern, _text(row[5]))
                    if match:
                        gtids.append(match.group(1))
    return gtids


class ReplicatedPair:
    """A primary (server id 1) and its GTID replica (server id 2), both fresh.

    Both have the ``cdc_test`` account of :class:`TestServer` with the same password (each
    created it itself; the binlogs are reset before replication starts, so the replica
    never replays it) and a replication account ``cdc_repl``. ``seed(primary)``, if given,
    writes the primary's first data: before the replica is built from its dump
    (``built='dump'``), or once the replica replicates (``built='replication'``). The
    replica is ``read_only`` until :meth:`promote` (``root``, the tests' admin, writes
    anyway). Use as a context manager, or :meth:`start` / :meth:`stop` around a module
    fixture. Needs the embedded servers: skips the test under ``CDC_MYSQL_TEST_URL``."""

    def __init__(
        self,
        primary_args: tuple[str, ...] = (),
        replica_args: tuple[str, ...] = (),
        read_only_replica: bool = True,
        built: str = "replication",
        seed: Callable[[TestServer], None] | None = None,
    ) -> None:
        if built not in BUILT:
            raise ValueError(f"built={built!r}: expected one of {', '.join(BUILT)}")
        self.flavour = suite_flavour()
        common = _COMMON_ARGS[self.flavour]
        self.primary_args = (f"--server-id={PRIMARY_SERVER_ID}", *common, *primary_args)
        self.replica_args = (
            f"--server-id={REPLICA_SERVER_ID}",  # after EmbeddedServer's --server-id=1: wins
            *common,
            f"--log-bin={REPLICA_BINLOG}",  # a relative name: in the data directory
            "--relay-log=replica-relay-bin",
            *replica_args,
        )
        self.read_only_replica = read_only_replica
        self.built = built
        self.seed = seed
        self.dumped_gtids = ""  # built from a dump: the GTID state the dump was taken at
        self._primary: TestServer | None = None
        self._replica: TestServer | None = None
        self.promoted = False

    @property
    def mariadb(self) -> bool:
        return self.flavour == "mariadb"

    @property
    def primary(self) -> TestServer:
        if self._primary is None:
            raise RuntimeError("the pair is not started")
        return self._primary

    @property
    def replica(self) -> TestServer:
        if self._replica is None:
            raise RuntimeError("the pair is not started")
        return self._replica

    def start(self, timeout: float = 60.0) -> ReplicatedPair:
        if os.environ.get(TEST_URL_ENV):
            pytest.skip("a replicated pair needs the embedded servers, not CDC_MYSQL_TEST_URL")
        self._primary, self._replica = _start_servers(self.primary_args, self.replica_args)
        try:
            reset = "RESET MASTER" if self.mariadb else "RESET BINARY LOGS AND GTIDS"
            for server in (self.primary, self.replica):
                server.execute(
                    "SET SESSION sql_log_bin = 0",
                    f"DROP USER IF EXISTS '{REPL_USER}'@'%'",
                    f"CREATE USER '{REPL_USER}'@'%' IDENTIFIED BY '{REPL_PASSWORD}'",
                    f"GRANT REPLICATION SLAVE ON *.* TO '{REPL_USER}'@'%'",
                    # Each server's own account set-up leaves its binlog: both start empty,
                    # and every GTID from now on is the primary's, in both binlogs.
                    reset,
                )
            if self.built == "dump":
                if self.seed is not None:
                    self.seed(self.primary)
                self._load_dump()
            self._replicate()
            self._wait_replicating(timeout)
            if self.built == "replication" and self.seed is not None:
                self.seed(self.primary)
        except BaseException:
            self.stop()
            raise
        return self

    def _replicate(self) -> None:
        port = self.primary.info.port
        if self.mariadb:
            statements = [
                *([] if self.built == "dump" else ["SET GLOBAL gtid_slave_pos = ''"]),
                f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, "
                f"MASTER_USER='{REPL_USER}', MASTER_PASSWORD='{REPL_PASSWORD}', "
                "MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos",
                "START SLAVE",
            ]
        else:
            statements = [
                f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={port}, "
                f"SOURCE_USER='{REPL_USER}', SOURCE_PASSWORD='{REPL_PASSWORD}', "
                "SOURCE_CONNECT_RETRY=1, SOURCE_AUTO_POSITION=1, SOURCE_SSL=0, "
                "GET_SOURCE_PUBLIC_KEY=1",
                "START REPLICA",
            ]
        if self.read_only_replica:
            statements.append("SET GLOBAL read_only = ON")
        self.replica.execute(*statements)

    def _load_dump(self) -> None:
        """The replica gets the primary's data from a consistent dump, loaded without
        binlogging, and the dump's GTID state as a setting: MySQL ``gtid_purged`` (the
        dump's own ``SET @@GLOBAL.GTID_PURGED``), MariaDB ``gtid_slave_pos``."""
        databases = [
            _text(name)
            for (name,) in self.primary.query("SHOW DATABASES")
            if _text(name).lower() not in SYSTEM_SCHEMAS
        ]
        if self.mariadb:
            dump = ["mariadb-dump", "--single-transaction", "--gtid", "--master-data=2"]
            load = ["mariadb", "--init-command=SET SESSION sql_log_bin = 0"]
        else:
            mysql = self.primary.embedded.mysql
            dump = [*mysql.command("usr/bin/mysqldump"), "--single-transaction"]
            dump.append("--set-gtid-purged=ON")
            load = mysql.command("usr/bin/mysql")
        if databases:
            script = _run([*dump, *_client_args(self.primary), "--databases", *databases])
        else:  # nothing to copy: the state alone
            state = gtid_text(self.primary.gtid_state())
            script = "" if self.mariadb else f"SET @@GLOBAL.GTID_PURGED='{state}';\n"
            if self.mariadb:
                script = f"-- SET GLOBAL gtid_slave_pos='{state}';\n"
        if self.mariadb:
            match = re.search(r"SET GLOBAL gtid_slave_pos\s*=\s*'([^']*)'", script)
            if match is None:
                raise AssertionError("mariadb-dump wrote no gtid_slave_pos")
            self.dumped_gtids = match.group(1)
        else:
            match = re.search(r"GTID_PURGED\s*=\s*(?:/\*.*?\*/)?\s*'([^']*)'", script, re.S)
            if match is None:
                raise AssertionError("mysqldump wrote no GTID_PURGED")
            self.dumped_gtids = gtid_text(match.group(1))
        _run([*load, *_client_args(self.replica)], stdin=script)
        if self.mariadb:
            self.replica.execute(f"SET GLOBAL gtid_slave_pos = '{self.dumped_gtids}'")

    def _wait_replicating(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.replicating():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"replication did not start: {_brief(self.replica_status())}")
            time.sleep(0.05)

    def replicating(self) -> bool:
        """Whether both replication threads of the replica run."""
        status = self.replica_status()
        names = ("Slave_IO_Running", "Slave_SQL_Running")
        if not self.mariadb:
            names = ("Replica_IO_Running", "Replica_SQL_Running")
        return all(status.get(name) == "Yes" for name in names)

    def replica_status(self) -> dict[str, str]:
        """``SHOW SLAVE STATUS`` (MySQL: ``SHOW REPLICA STATUS``) of the replica, column
        name to text ({} once promoted)."""
        with self.replica.admin() as conn, conn.cursor() as cur:
            cur.execute("SHOW SLAVE STATUS" if self.mariadb else "SHOW REPLICA STATUS")
            row = cur.fetchone()
            if row is None:
                return {}
            return {col[0]: _text(value) for col, value in zip(cur.description, row)}

    def wait_caught_up(self, timeout: float = 30.0) -> str:
        """Waits until the replica has executed every transaction the primary has written
        (its ``gtid_binlog_pos``, MySQL ``gtid_executed``, now); returns that state."""
        if self.promoted:
            raise RuntimeError("the replica was promoted: it no longer follows the primary")
        position = gtid_text(self.primary.gtid_state())
        if self.mariadb:
            wait = "SELECT MASTER_GTID_WAIT(%s, %s)"
        else:
            wait = "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)"
        (waited,) = self.replica.query(wait, (position, timeout))[0]
        if waited != 0:
            raise AssertionError(
                f"the replica did not reach the primary's {position!r} in {timeout}s: "
                f"{_brief(self.replica_status())}"
            )
        return position

    def stop_replicating(self) -> None:
        """The replica stops following the primary (``STOP SLAVE``, MySQL ``STOP
        REPLICA``): what the primary writes from now on, it lacks."""
        self.replica.execute("STOP SLAVE" if self.mariadb else "STOP REPLICA")

    def promote(self) -> None:
        """The replica stops following the primary and takes writes: ``STOP SLAVE``,
        ``RESET SLAVE ALL`` (MySQL ``STOP REPLICA``, ``RESET REPLICA ALL``), ``read_only``
        off. Its new transactions carry server id 2 (MySQL: its own server_uuid).
        (The primary is left as it is: stop or kill it to make the fail-over complete.)"""
        if self.mariadb:
            self.replica.execute("STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")
        else:
            self.replica.execute("STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL read_only = OFF")
        self.promoted = True

    def source_options(
        self,
        database: str,
        table_regex: str,
        proxy: SwitchingProxy | None = None,
        **extra: str,
    ) -> dict[str, str]:
        """The source's options for the primary, or for whatever ``proxy`` leads to (the
        ``cdc_test`` account is the same on both servers)."""
        options = self.primary.source_options(database, table_regex, **extra)
        if proxy is not None:
            options.update(proxy.address_options())
        return options

    def stop(self) -> None:
        for server in (self._replica, self._primary):
            if server is not None:
                server.stop()
        self._primary = self._replica = None

    def __enter__(self) -> ReplicatedPair:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _client_args(server: TestServer) -> list[str]:
    info = server.info
    password = [f"--password={info.admin_password}"] if info.admin_password else []
    return ["--host=127.0.0.1", f"--port={info.port}", f"--user={info.admin_user}", *password]


def _run(argv: list[str], stdin: str | None = None) -> str:
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise AssertionError(f"{argv[0]} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def _start_servers(*args: tuple[str, ...]) -> list[TestServer]:
    """The servers started side by side (each spends most of its start-up initializing
    its data directory); when one fails, the others are stopped."""
    with ThreadPoolExecutor(len(args)) as pool:
        futures = [pool.submit(TestServer, extra_args=extra) for extra in args]
    started, errors = [], []
    for future in futures:
        try:
            started.append(future.result())
        except BaseException as err:
            errors.append(err)
    if errors:
        for server in started:
            server.stop()
        raise errors[0]
    return started


def _brief(status: dict[str, str]) -> str:
    keys = [
        f"{who}_{what}" for who in ("Slave", "Replica") for what in ("IO_Running", "SQL_Running")
    ]
    keys += ["Last_IO_Errno", "Last_IO_Error", "Last_SQL_Errno", "Last_SQL_Error", "Gtid_IO_Pos"]
    keys += ["Retrieved_Gtid_Set", "Executed_Gtid_Set"]
    shown = [f"{key}={status[key]!r}" for key in keys if key in status]
    return ", ".join(shown) if status else "no replication"


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


# -- the proxy ---------------------------------------------------------------------------

_POLL_S = 0.2  # how often a blocked thread looks whether it was stopped
_CHUNK = 1 << 16
_JOIN_S = 5.0


class SwitchingProxy:
    """A TCP proxy on a free 127.0.0.1 port (:attr:`port`) to a loopback backend port.

    :meth:`switch` resets (RST) every connection through it and sends the new ones to
    another backend; :meth:`cut` resets them all without switching. Two threads per
    connection, one per direction, so a binlog dump streaming to a slow reader holds up
    nothing else; an orderly close of one side is passed on as a half-close. A failed
    connect to the backend resets the client's connection (a lost connection, as a
    server that is down looks through a load balancer). :meth:`stop` resets everything
    and ends every thread of the proxy."""

    def __init__(self, backend_port: int, backend_host: str = "127.0.0.1") -> None:
        self._backend = (_loopback(backend_host), backend_port)
        self._generation = 0  # +1 at every switch or cut: a connect in flight is dropped
        self._links: set[_Link] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.connections = 0  # connections forwarded
        self.refused = 0  # clients reset because the backend refused
        self.cuts = 0  # connections reset by switch / cut / stop
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.settimeout(_POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(
            target=self._accept, name=f"switching-proxy-{self.port}", daemon=True
        )
        self._started = False

    def start(self) -> SwitchingProxy:
        if not self._started:
            self._started = True
            self._acceptor.start()
        return self

    @property
    def backend_port(self) -> int:
        with self._lock:
            return self._backend[1]

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._links)

    def threads(self) -> list[threading.Thread]:
        """The proxy's threads still alive (none once :meth:`stop` returned)."""
        return [t for t in threading.enumerate() if t.name.startswith(self._acceptor.name)]

    def address_options(self) -> dict[str, str]:
        """The source options ``hostname`` and ``port`` that connect through the proxy."""
        return {"hostname": "127.0.0.1", "port": str(self.port)}

    def switch(self, backend_port: int, backend_host: str = "127.0.0.1") -> int:
        """New connections go to ``backend_port``; every open one is reset (whichever
        server it reached). Returns how many were reset. When it returns, the clients'
        sockets have been reset and the proxy's threads for them have ended."""
        backend = (_loopback(backend_host), backend_port)
        with self._lock:
            self._backend = backend
        return self.cut()

    def cut(self) -> int:
        """Resets every open connection; returns how many."""
        with self._lock:
            self._generation += 1
            links, self._links = list(self._links), set()
        for link in links:
            link.begin_cut()
        for link in links:
            link.wait(_JOIN_S)
        with self._lock:
            self.cuts += len(links)
        return len(links)

    def stop(self) -> None:
        self._stopping.set()
        if self._started and self._acceptor.is_alive():
            self._acceptor.join(_JOIN_S)
        self._listener.close()
        self.cut()

    def __enter__(self) -> SwitchingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopping.is_set():
                    return
                time.sleep(_POLL_S)
                continue
            with self._lock:
                backend, generation = self._backend, self._generation
            try:
                upstream = socket.create_connection(backend, timeout=_JOIN_S)
            except OSError:
                with self._lock:
                    self.refused += 1
                _reset(client)
                continue
            link = _Link(client, upstream, self._forget, name=self._acceptor.name)
            with self._lock:
                current = generation == self._generation and not self._stopping.is_set()
                if current:
                    self._links.add(link)
                    self.connections += 1
                    link.start()
            if not current:  # a switch while it connected: it would reach the old backend
                _reset(client)
                _reset(upstream)

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)


class _Link:
    """One client connection and its upstream connection, pumped by two threads; the
    last of them to end closes both sockets, with RST when the link was cut."""

    def __init__(
        self, client: socket.socket, upstream: socket.socket, on_closed, name: str
    ) -> None:
        self._sockets = (client, upstream)
        for sock in self._sockets:
            sock.settimeout(_POLL_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._on_closed = on_closed
        self._cut = threading.Event()
        self._lock = threading.Lock()
        self._running = 2
        self._closed = False
        self._threads = [
            threading.Thread(
                target=self._pump, args=(client, upstream), name=f"{name}-up", daemon=True
            ),
            threading.Thread(
                target=self._pump, args=(upstream, client), name=f"{name}-down", daemon=True
            ),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def begin_cut(self) -> None:
        """Marks the link cut and wakes its threads blocked in ``recv`` at once (a
        read-side shutdown sends nothing to either peer); a thread blocked sending sees
        the mark within ``_POLL_S``."""
        self._cut.set()
        with self._lock:  # not once closed: the descriptor may be another socket's by then
            if self._closed:
                return
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RD)
                except OSError:
                    pass

    def wait(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while not self._cut.is_set():
                try:
                    data = source.recv(_CHUNK)
                except TimeoutError:
                    continue
                if not data:  # an orderly close (or the wake-up of a cut)
                    if not self._cut.is_set():
                        target.shutdown(socket.SHUT_WR)
                    return
                if not self._send(target, data):
                    return
        except OSError:  # one side reset: so is the other
            self._cut.set()
        finally:
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                self._close()

    def _send(self, target: socket.socket, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            if self._cut.is_set():
                return False
            try:
                view = view[target.send(view) :]
            except TimeoutError:
                continue
        return True

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            for sock in self._sockets:
                if self._cut.is_set():
                    _reset(sock)
                else:
                    sock.close()
        self._on_closed(self)


def _reset(sock: socket.socket) -> None:
    """Closes with RST (SO_LINGER on, 0 s): the peer sees a lost connection."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _loopback(host: str) -> str:
    if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the proxy forwards to loopback addresses only, not {host!r}")
    return host


def proxy_connect(server: TestServer, proxy: SwitchingProxy, **kwargs) -> pymysql.Connection:
    """An admin connection to whatever server ``proxy`` leads to (``root`` on both)."""
    return pymysql.connect(
        host="127.0.0.1",
        port=proxy.port,
        user=server.info.admin_user,
        password=server.info.admin_password,
        autocommit=True,
        **kwargs,
    )
