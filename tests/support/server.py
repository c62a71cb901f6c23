"""The MySQL-compatible server the integration tests talk to.

By default a throwaway MariaDB started by the tests themselves;
``CDC_MYSQL_TEST_FLAVOUR=mysql`` makes it a throwaway MySQL 9.7 instead (fetched into a
cache by ``tests/support/mysql_dist.py`` when missing). Set
``CDC_MYSQL_TEST_URL=mysql://root:PASSWORD@HOST:PORT`` to use an external server instead
(for instance the docker-compose MySQL 8); the tests then create their own databases and
a ``cdc_test`` account there.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

import pymysql

from cdc_source.embedded_server import ConnectionInfo, EmbeddedServer
from cdc_source.gtid import GtidSet
from cdc_source.mysql_client import read_head

TEST_URL_ENV = "CDC_MYSQL_TEST_URL"
FLAVOUR_ENV = "CDC_MYSQL_TEST_FLAVOUR"
FLAVOURS = ("mariadb", "mysql")
TEST_USER = "cdc_test"
TEST_PASSWORD = "cdc-test-secret"


def suite_flavour() -> str:
    """The throwaway server's flavour the suite runs on: ``mariadb`` (default) or ``mysql``."""
    flavour = os.environ.get(FLAVOUR_ENV, "").strip().lower() or "mariadb"
    if flavour not in FLAVOURS:
        raise ValueError(f"{FLAVOUR_ENV}={flavour!r}: expected one of {', '.join(FLAVOURS)}")
    return flavour


def seq_rows(first: int, last: int, mariadb: bool) -> str:
    """A table of one column ``seq``, the integers ``first``..``last``: MariaDB's sequence
    table ``seq_<first>_to_<last>`` there, elsewhere a derived table of the same rows (a
    cross join of digits: a recursive CTE stops at MySQL's cte_max_recursion_depth, 1000).
    Order by ``seq`` where the order matters: the derived table's is not defined."""
    if mariadb:
        return f"seq_{first}_to_{last}"
    count = last - first + 1
    places = len(str(max(count - 1, 1)))
    digits = " UNION ALL ".join(f"SELECT {d} AS d" for d in range(10))
    value = " + ".join(f"d{i}.d * {10**i}" for i in range(places))
    joined = " CROSS JOIN ".join(f"({digits}) AS d{i}" for i in range(places))
    return f"(SELECT {first} + {value} AS seq FROM {joined} WHERE {value} < {count}) AS seq_rows"


def embedded_server(**kwargs) -> EmbeddedServer:
    """A throwaway server (not started) of the suite's flavour; ``kwargs`` as
    :class:`EmbeddedServer`'s."""
    if suite_flavour() == "mysql":
        from tests.support.mysql_dist import ensure

        kwargs.setdefault("mysql", ensure())
    return EmbeddedServer(**kwargs)


class TestServer:
    """Admin access plus a CDC account, on an embedded or an external server."""

    __test__ = False  # a helper, not a test class, whatever its name

    def __init__(self, extra_args: tuple[str, ...] = ()) -> None:
        """``extra_args``: more server options for the embedded server (TLS files...)."""
        self.embedded: EmbeddedServer | None = None
        self.decoder: str | None = None  # scan.binlog.decoder of the queries, when set
        url = os.environ.get(TEST_URL_ENV)
        if url:
            parsed = urlparse(url)
            self.info = ConnectionInfo(
                parsed.hostname or "127.0.0.1",
                parsed.port or 3306,
                TEST_USER,
                TEST_PASSWORD,
                admin_user=unquote(parsed.username or "root"),
                admin_password=unquote(parsed.password or ""),
            )
            self.flavour = "mariadb" if "mariadb" in self._version().lower() else "mysql"
        else:
            self.embedded = embedded_server(extra_args=extra_args)
            base = self.embedded.start()
            self.info = ConnectionInfo(base.host, base.port, TEST_USER, TEST_PASSWORD)
            self.flavour = self.embedded.flavour
        self._create_account()

    def _create_account(self) -> None:
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{TEST_USER}'@'%'")
            cur.execute(f"CREATE USER '{TEST_USER}'@'%%' IDENTIFIED BY %s", (TEST_PASSWORD,))
            cur.execute(
                f"GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* "
                f"TO '{TEST_USER}'@'%'"
            )

    def _version(self) -> str:
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            return cur.fetchone()[0]

    @property
    def is_mariadb(self) -> bool:
        return self.flavour == "mariadb"

    def seq(self, first: int, last: int) -> str:
        """:func:`seq_rows` for this server: ``FROM {server.seq(1, 100)}``."""
        return seq_rows(first, last, self.is_mariadb)

    def binlog_head(self) -> tuple[str, int]:
        """The binlog's current file and end: ``SHOW MASTER STATUS``, or ``SHOW BINARY LOG
        STATUS`` where MySQL (8.2+) took it (chosen as the source itself chooses)."""
        with self.admin() as conn:
            file, pos, _, _ = read_head(conn)
        return file, pos

    def gtid_state(self) -> str:
        """The GTIDs the binlog holds: ``gtid_binlog_pos`` on MariaDB (one GTID per domain),
        ``gtid_executed`` on MySQL (a GTID set)."""
        variable = "gtid_binlog_pos" if self.is_mariadb else "gtid_executed"
        return self.query(f"SELECT @@global.{variable}")[0][0]

    def last_own_gtid(self) -> tuple[str, int]:
        """MySQL: the server's UUID and the number of its last untagged GTID. Other UUIDs'
        sets may stand beside it in ``gtid_executed`` (tests share a server)."""
        uuid = self.query("SELECT @@global.server_uuid")[0][0]
        own = GtidSet.parse(self.gtid_state()).intervals[(uuid, "")]
        return uuid, own[-1][1]

    def admin(self, database: str | None = None) -> pymysql.Connection:
        return self.info.admin_connect(database, charset="utf8mb4")

    def execute(self, *statements: str, database: str | None = None) -> None:
        with self.admin(database) as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def query(self, sql: str, params=None, database: str | None = None) -> list[tuple]:
        with self.admin(database) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def fresh_database(self, name: str) -> str:
        self.execute(
            f"DROP DATABASE IF EXISTS `{name}`",
            f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        )
        return name

    def source_options(self, database: str, table_regex: str, **extra: str) -> dict[str, str]:
        options = {
            **self.info.source_options(),
            "database-name": database,
            "table-name": table_regex,
        }
        if self.decoder:
            options["scan.binlog.decoder"] = self.decoder
        options.update({k.replace("_", "-") if "." not in k else k: v for k, v in extra.items()})
        return options

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
