"""A throwaway MariaDB/MySQL server for the quickstart and the integration tests.

It lives in a temporary data directory, listens on a free loopback port, and has the
binlog configured the way CDC needs it (ROW format, FULL row image, FULL row metadata).
It never reads the machine's option files (``--no-defaults``), so a system server on
3306 with other settings cannot leak in.

Two flavours: the machine's MariaDB (``mariadbd``, the default), or a MySQL unpacked into
a directory of its own (``mysql=UnpackedMySQL(root)``, see :mod:`cdc_source.embedded_mysql`),
which also runs with GTIDs on, as MySQL captures are advised to.

Given ``keep_dir``, the server lives in that directory instead and ``stop()`` leaves it:
a later server on the same ``keep_dir`` starts on the data the earlier one left (the
benchmark generates its large tables once this way).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from cdc_source.embedded_mysql import UnpackedMySQL
from cdc_source.mysql_client import Connection

SERVER_CANDIDATES = ("/usr/sbin/mariadbd", "/usr/sbin/mysqld", "mariadbd", "mysqld")
INSTALL_CANDIDATES = ("mariadb-install-db", "/usr/bin/mariadb-install-db", "mysql_install_db")

CDC_USER = "cdc"
CDC_PASSWORD = "cdc-secret"
BIND_ATTEMPTS = 5  # launches on fresh ports when another process took the chosen one


class EmbeddedServerError(RuntimeError):
    """The throwaway server could not be set up."""


def _find_executable(candidates: tuple[str, ...]) -> str | None:
    for candidate in candidates:
        path = shutil.which(candidate) if "/" not in candidate else candidate
        if path and os.access(path, os.X_OK):
            return path
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ConnectionInfo:
    """Where a server listens and which account the CDC source should use."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    admin_user: str = "root"
    admin_password: str = field(default="", repr=False)

    def admin_connect(self, database: str | None = None, **kwargs) -> Connection:
        return Connection(
            host=self.host,
            port=self.port,
            user=self.admin_user,
            password=self.admin_password,
            database=database,
            autocommit=True,
            **kwargs,
        )

    def source_options(self) -> dict[str, str]:
        return {
            "hostname": self.host,
            "port": str(self.port),
            "username": self.user,
            "password": self.password,
        }


class EmbeddedServer:
    """Starts ``mariadbd`` (or, given ``mysql``, that tree's ``mysqld``) on a fresh data
    directory; ``stop()`` removes everything.

    With ``keep_dir`` (a path, created if absent) the server's directory is that path: its
    data directory is initialized only when it does not exist yet, and ``stop()`` leaves
    it, so the next server on the same path finds the data again."""

    def __init__(
        self,
        base_dir: str | None = None,
        buffer_pool: str = "256M",
        binlog: bool = True,
        extra_args: tuple[str, ...] = (),
        mysql: UnpackedMySQL | None = None,
        keep_dir: str | os.PathLike | None = None,
    ) -> None:
        if keep_dir is not None and base_dir is not None:
            raise ValueError("base_dir and keep_dir exclude each other: keep_dir is the directory")
        self.mysql = mysql
        if mysql is not None:
            self.server_bin = self.install_bin = None
        else:
            self.server_bin = _find_executable(SERVER_CANDIDATES)
            self.install_bin = _find_executable(INSTALL_CANDIDATES)
        if mysql is None and (not self.server_bin or not self.install_bin):
            raise EmbeddedServerError(
                "no MariaDB server found (looked for mariadbd and mariadb-install-db); "
                "install it with 'apt-get install -y mariadb-server', or point the tests at a "
                "server with CDC_MYSQL_TEST_URL=mysql://root:pw@host:port"
            )
        self.kept = keep_dir is not None
        if self.kept:
            self.base_dir = Path(keep_dir).expanduser().resolve()
            self.base_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.base_dir = Path(tempfile.mkdtemp(prefix="cdc-mysql-server-", dir=base_dir))
        self.datadir = self.base_dir / "data"
        self.socket = self.base_dir / "mysqld.sock"
        self.error_log = self.base_dir / "error.log"
        self.buffer_pool = buffer_pool
        self.binlog = binlog
        self.extra_args = extra_args
        self.process: subprocess.Popen | None = None
        self.info = ConnectionInfo("127.0.0.1", free_port(), CDC_USER, CDC_PASSWORD)

    @property
    def port(self) -> int:
        """The port the server listens on (its connection info's)."""
        return self.info.port

    @property
    def flavour(self) -> str:
        return "mariadb" if self.mysql is None else "mysql"

    @property
    def _server_name(self) -> str:
        return "mariadbd" if self.mysql is None else "mysqld"

    def _run_as_root_args(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    def _tmpdir(self) -> Path:
        path = self.base_dir / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def start(self, timeout: float = 60.0) -> ConnectionInfo:
        if not self.datadir.exists():
            self._initialize()
        try:
            self._launch_on_a_free_port(timeout)
            self._create_cdc_user()
        except BaseException:
            self.stop()  # never leave a half-started server and its data directory behind
            raise
        return self.info

    def _launch_on_a_free_port(self, timeout: float) -> None:
        """Launch the server and wait until it accepts connections. A port from
        :func:`free_port` is free only when it is chosen: another process can bind it
        before the server does, and the server then exits at once. It is launched again
        on a fresh port, up to ``BIND_ATTEMPTS`` times."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            log_offset = self._error_log_size()
            self._args = (
                self._mysql_args(self.mysql) if self.mysql is not None else self._mariadb_args()
            )
            self._launch()
            try:
                self._wait_ready(timeout)
                return
            except EmbeddedServerError:
                if attempt == BIND_ATTEMPTS or not self._port_was_taken(since=log_offset):
                    raise
            self.info.port = free_port()

    def _error_log_size(self) -> int:
        return self.error_log.stat().st_size if self.error_log.exists() else 0

    def _port_was_taken(self, *, since: int) -> bool:
        """Whether the server's error log, after byte ``since``, says its port was taken."""
        if not self.error_log.exists():
            return False
        with self.error_log.open("rb") as f:
            f.seek(since)
            return b"Address already in use" in f.read()

    def _common_args(self, *, binlog_extra: list[str], no_binlog: list[str]) -> list[str]:
        """The options both flavours run with: the throwaway paths and port, server id 1,
        the binlog as CDC needs it (``binlog_extra`` added, ``no_binlog`` instead of it
        where ``binlog`` is off), and small, fast durability settings."""
        binlog = [
            f"--log-bin={self.datadir / 'binlog'}",
            "--binlog-format=ROW",  # the default on MySQL, deprecated there: said for MariaDB
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            *binlog_extra,
        ]
        return [
            f"--datadir={self.datadir}",
            f"--socket={self.socket}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={self.base_dir / 'mysqld.pid'}",
            f"--log-error={self.error_log}",
            f"--tmpdir={self._tmpdir()}",
            "--server-id=1",
            *(binlog if self.binlog else no_binlog),
            f"--innodb-buffer-pool-size={self.buffer_pool}",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--skip-name-resolve",
            "--max-connections=500",
        ]

    def _initialize(self) -> None:
        """Create the data directory. In a kept directory, one that initialization left
        half made is removed, so that the next start initializes it again instead of
        starting on it."""
        try:
            if self.mysql is not None:
                self._mysql_initialize(self.mysql)
            else:
                self._mariadb_install()
        except BaseException:
            if self.kept:
                shutil.rmtree(self.datadir, ignore_errors=True)
            raise

    def _mariadb_install(self) -> None:
        install = [
            self.install_bin,
            "--no-defaults",
            f"--datadir={self.datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            f"--tmpdir={self._tmpdir()}",  # not the shared /tmp: parallel installs collide there
            *self._run_as_root_args(),
        ]
        result = subprocess.run(install, capture_output=True, text=True)
        if result.returncode != 0:
            raise EmbeddedServerError(f"mariadb-install-db failed: {result.stderr[-2000:]}")

    def _mariadb_args(self) -> list[str]:
        return [
            self.server_bin,
            "--no-defaults",
            *self._common_args(binlog_extra=[], no_binlog=[]),
            *self.extra_args,
            *self._run_as_root_args(),
        ]

    def _mysql_initialize(self, mysql: UnpackedMySQL) -> None:
        # --initialize-insecure makes root@localhost only, which --skip-name-resolve does
        # not match for TCP from 127.0.0.1 (MariaDB's install makes root@127.0.0.1 too).
        init_file = self.base_dir / "init.sql"
        init_file.write_text(
            "CREATE USER 'root'@'127.0.0.1' IDENTIFIED BY '';\n"
            "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n"
        )
        initialize = [
            *mysql.mysqld(),
            "--no-defaults",  # must come first
            *mysql.server_paths_args(),
            f"--datadir={self.datadir}",
            f"--tmpdir={self._tmpdir()}",
            "--initialize-insecure",
            f"--init-file={init_file}",
            *self.extra_args,  # some (lower_case_table_names) are fixed at initialization
            *self._run_as_root_args(),
        ]
        result = subprocess.run(initialize, capture_output=True, text=True)
        if result.returncode != 0:
            raise EmbeddedServerError(
                f"mysqld --initialize-insecure failed: {(result.stdout + result.stderr)[-2000:]}"
            )

    def _mysql_args(self, mysql: UnpackedMySQL) -> list[str]:
        return [
            *mysql.mysqld(),
            "--no-defaults",
            *mysql.server_paths_args(),
            *self._common_args(
                binlog_extra=["--gtid-mode=ON", "--enforce-gtid-consistency=ON"],
                no_binlog=["--skip-log-bin"],  # on by default in MySQL
            ),
            "--mysqlx=OFF",
            "--secure-file-priv=",  # unset, mysqld aborts: its compiled-in directory is absent
            # As MariaDB here, TLS only with certificates given (--ssl-cert...): MySQL would
            # otherwise offer it with certificates it made at initialization.
            *([] if any(a.startswith("--ssl-") for a in self.extra_args) else ["--tls-version="]),
            *self.extra_args,
            *self._run_as_root_args(),
        ]

    def _launch(self) -> None:
        self.process = subprocess.Popen(
            self._args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

    def kill(self) -> None:
        """SIGKILL, as a crash: no shutdown, the data directory stays as it was (fault tests)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self, timeout: float = 60.0) -> None:
        """Start again on the same data directory and port (after :meth:`kill`): crash
        recovery runs, and the server opens a new binlog file."""
        self.kill()
        self._launch()
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process and self.process.poll() is not None:
                raise EmbeddedServerError(f"{self._server_name} exited: {self.error_log_tail()}")
            if self._answers_on_its_port():
                return
            time.sleep(0.2)
        raise EmbeddedServerError(
            f"{self._server_name} did not accept connections: {self.error_log_tail()}"
        )

    def _answers_on_its_port(self) -> bool:
        """Whether this server, and not whatever else may hold the port, accepts an admin
        connection there: the one answering must name this server's socket file. A
        listener that never greets is given up on after a short read timeout."""
        try:
            with self.info.admin_connect(connect_timeout=2, read_timeout=2) as conn:
                with conn.cursor() as cur:
                    cur.execute("SELECT @@socket")
                    return cur.fetchone()[0] == str(self.socket)
        except pymysql.err.MySQLError:
            return False

    def error_log_tail(self) -> str:
        if not self.error_log.exists():
            return ""
        return self.error_log.read_text(errors="replace")[-2000:]

    def _create_cdc_user(self) -> None:
        """The CDC account; a kept data directory already has it from an earlier start."""
        with self.info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"CREATE USER IF NOT EXISTS '{CDC_USER}'@'%%' IDENTIFIED BY %s", (CDC_PASSWORD,)
            )
            cur.execute(
                f"GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* "
                f"TO '{CDC_USER}'@'%'"
            )

    def stop(self) -> None:
        """Shut the server down; remove its directory unless it is kept (``keep_dir``)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not self.kept:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> ConnectionInfo:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
