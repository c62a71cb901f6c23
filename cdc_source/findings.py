"""The requirements that both the query's preflight (:mod:`cdc_source.preflight`, which
refuses to start on a FAIL) and ``cdc-mysql check`` (:mod:`cdc_source.requirements`,
which lists every one) judge, each as a :class:`Finding`: what the account may read,
proven by doing it (a head read, a binlog dump handshake, a SELECT per table, so that grants
through roles count), and how long the server keeps its binlogs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import pymysql

from cdc_source.binlog.framing import BinlogServerError
from cdc_source.binlog.transport import probe_dump
from cdc_source.catalog import TableSchema
from cdc_source.mysql_client import (
    HeadPrivilegeError,
    SourceConnectionError,
    read_head,
    variables,
)
from cdc_source.options import SourceOptions

OK, WARN, FAIL = "OK", "WARN", "FAIL"
DAY_SECONDS = 86_400


@dataclass(frozen=True)
class Finding:
    requirement: str
    status: str  # OK, WARN or FAIL
    detail: str
    fix: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def as_number(value: str | None) -> float:
    """A numeric variable as :func:`variables` reports it (it shows 0 and 1 as OFF/ON)."""
    text = (value or "0").upper()
    if text in ("OFF", "ON"):
        return float(text == "ON")
    return float(text)


def _rds_retention_hours(conn) -> str | None:
    """``binlog retention hours`` on RDS/Aurora; None where the procedure is missing."""
    try:
        with conn.cursor() as cur:
            cur.execute("CALL mysql.rds_show_configuration")
            for row in cur.fetchall():
                if str(row[0]).lower() == "binlog retention hours":
                    return "NULL" if row[1] is None else str(row[1])
    except pymysql.err.MySQLError:
        return None
    return None


def check_retention(conn) -> Iterator[Finding]:
    found = variables(conn, ["binlog_expire_logs_seconds", "expire_logs_days"])
    hours = _rds_retention_hours(conn)
    if hours is not None:
        if hours == "NULL":
            yield Finding(
                "binlog retention",
                FAIL,
                "RDS binlog retention hours is NULL: binlogs are purged almost at once",
                "CALL mysql.rds_set_configuration('binlog retention hours', 168)",
            )
            return
        seconds = int(hours) * 3600
    else:
        seconds = int(as_number(found.get("binlog_expire_logs_seconds")))
        if not seconds:
            seconds = int(as_number(found.get("expire_logs_days")) * DAY_SECONDS)
    if not seconds:
        yield Finding("binlog retention", OK, "binlogs are never purged automatically")
    elif seconds < DAY_SECONDS:
        yield Finding(
            "binlog retention",
            WARN,
            f"binlogs are kept {seconds} s: a query stopped longer than that cannot resume",
            "SET GLOBAL binlog_expire_logs_seconds = 604800 (and in the server configuration)",
        )
    else:
        yield Finding("binlog retention", OK, f"binlogs are kept {seconds / DAY_SECONDS:g} days")


def unreadable_tables(conn, tables: list[TableSchema]) -> list[tuple[TableSchema, str]]:
    """The tables the account cannot SELECT from, each with the server's refusal."""
    refused = []
    with conn.cursor() as cur:
        for table in tables:
            try:
                cur.execute(f"SELECT 1 FROM {table.quoted} LIMIT 0")
                cur.fetchall()
            except pymysql.err.MySQLError as err:
                refused.append((table, str(err.args[-1])))
    return refused


def _dump_probe(connect: Callable[[], object], server_id: int, file: str, pos: int) -> None:
    conn = connect()
    try:
        probe_dump(conn, server_id, file, pos)
    finally:
        conn.close()


def check_privileges(
    conn, connect: Callable[[], object], options: SourceOptions, tables: list[TableSchema]
) -> Iterator[Finding]:
    user = options.username
    try:
        file, pos, _, _ = read_head(conn)
    except HeadPrivilegeError as err:
        yield Finding(
            "privilege: binlog status",
            FAIL,
            str(err),
            f"GRANT REPLICATION CLIENT ON *.* TO '{user}'@'%' (BINLOG MONITOR on MariaDB)",
        )
        return
    except SourceConnectionError as err:  # no binlog at all: nothing to probe
        yield Finding("privilege: binlog status", FAIL, str(err), "turn the binlog on (log_bin)")
        return
    except pymysql.err.MySQLError as err:
        yield Finding(
            "privilege: binlog status",
            FAIL,
            f"SHOW MASTER STATUS refused: {err.args[-1]}",
            f"GRANT REPLICATION CLIENT ON *.* TO '{user}'@'%' (BINLOG MONITOR on MariaDB)",
        )
        return
    yield Finding("privilege: binlog status", OK, f"the head is {file}:{pos}")
    try:
        _dump_probe(connect, options.server_ids.last, file, pos)
    except (BinlogServerError, pymysql.err.MySQLError) as err:
        yield Finding(
            "privilege: binlog dump",
            FAIL,
            f"the binlog dump was refused: {err}",
            f"GRANT REPLICATION SLAVE ON *.* TO '{user}'@'%'",
        )
    else:
        yield Finding("privilege: binlog dump", OK, "a binlog dump handshake succeeded")
    refused = [f"{table.name} ({reason})" for table, reason in unreadable_tables(conn, tables)]
    if refused:
        yield Finding(
            "privilege: SELECT",
            FAIL,
            f"cannot read {', '.join(refused)}",
            f"GRANT SELECT ON <db>.<table> TO '{user}'@'%' for each",
        )
    elif tables:
        yield Finding("privilege: SELECT", OK, f"can read all {len(tables)} table(s)")
