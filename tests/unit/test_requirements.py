"""The requirements ``cdc-mysql check`` shows that MariaDB cannot produce, from recorded
server outputs: an old server version, MySQL's gtid_mode, PARTIAL_JSON with a JSON column,
RDS's binlog retention setting. (The rest run against a real server in
tests/integration/test_check_command.py.)"""

from __future__ import annotations

import pymysql
import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.requirements import check_contents, check_gtids, check_retention, check_version


class RecordedServer:
    """Answers queries from a table of recorded results; anything else is the error a
    server gives for an unknown variable or procedure."""

    def __init__(self, answers: dict[str, list[tuple]]) -> None:
        self.answers = answers
        self._rows: list[tuple] = []

    def cursor(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def execute(self, query: str, params=None) -> None:
        if query not in self.answers:
            raise pymysql.err.OperationalError(1193, f"Unknown system variable in {query!r}")
        self._rows = list(self.answers[query])

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def fetchall(self):
        return self._rows


def _variables(**values) -> dict[str, list[tuple]]:
    return {f"SELECT @@global.{name}": [(value,)] for name, value in values.items()}


@pytest.mark.parametrize(
    ("version", "comment", "status"),
    [
        ("10.4.32-MariaDB", "MariaDB Server", "FAIL"),
        ("10.5.0-MariaDB", "MariaDB Server", "OK"),
        ("8.0.13", "MySQL Community Server - GPL", "FAIL"),
        ("8.0.14", "MySQL Community Server - GPL", "OK"),
        ("8.4.3", "MySQL Community Server - GPL", "OK"),
        ("8.0.36-28", "Percona Server (GPL), Release 28", "OK"),
    ],
)
def test_server_version_needs_row_metadata_support(version, comment, status):
    conn = RecordedServer({"SELECT VERSION(), @@version_comment": [(version, comment)]})
    (finding,) = check_version(conn)
    assert finding.status == status and version in finding.detail
    assert (finding.fix != "") == (status == "FAIL")


def test_mysql_without_gtids_warns_and_with_them_is_ok():
    (off,) = check_gtids(RecordedServer(_variables(gtid_mode="OFF")))
    assert off.status == "WARN" and "gtid_mode=ON" in off.fix
    (on,) = check_gtids(RecordedServer(_variables(gtid_mode="ON")))
    assert on.status == "OK"


def test_partial_json_fails_only_when_a_captured_table_has_json():
    conn = RecordedServer(_variables(binlog_row_value_options="PARTIAL_JSON"))
    doc = ColumnSpec("doc", "json", "json", True)
    key = ColumnSpec("id", "int", "int", False)
    with_json = TableSchema("shop", "docs", (key, doc), ("id",))
    without = TableSchema("shop", "plain", (key,), ("id",))
    (fail,) = check_contents(conn, [with_json])
    assert fail.status == "FAIL" and "shop.docs" in fail.fix
    (fine,) = check_contents(conn, [without])
    assert fine.status == "OK" and "PARTIAL_JSON" in fine.detail


def test_rds_retention_null_fails_and_hours_count():
    null = RecordedServer(
        {"CALL mysql.rds_show_configuration": [("binlog retention hours", None, "...")]}
    )
    (finding,) = check_retention(null)
    assert finding.status == "FAIL" and "rds_set_configuration" in finding.fix
    short = RecordedServer(
        {"CALL mysql.rds_show_configuration": [("binlog retention hours", "2", "...")]}
    )
    (finding,) = check_retention(short)
    assert finding.status == "WARN" and "7200 s" in finding.detail
    week = RecordedServer(
        {"CALL mysql.rds_show_configuration": [("binlog retention hours", "168", "...")]}
    )
    assert next(check_retention(week)).status == "OK"


def test_mysql_expire_days_count_when_seconds_are_unset():
    conn = RecordedServer(_variables(binlog_expire_logs_seconds=0, expire_logs_days=7))
    (finding,) = check_retention(conn)
    assert finding.status == "OK" and "7 days" in finding.detail
