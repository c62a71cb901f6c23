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


# -- the snapshot visibility proof ---------------------------------------------------------


def _traits_server(version: str, gtid_mode: str | None, snapshot_status: bool):
    answers = {
        "SELECT VERSION()": [(version,)],
        "SHOW GLOBAL STATUS LIKE 'binlog_snapshot_file'": (
            [("Binlog_snapshot_file", "binlog.000001")] if snapshot_status else []
        ),
    }
    if gtid_mode is not None:
        answers["SELECT @@global.gtid_mode"] = [(gtid_mode,)]
    return RecordedServer(answers)


@pytest.mark.parametrize(
    ("version", "gtid_mode", "snapshot_status", "requested", "status", "says"),
    [
        ("8.4.3", "ON", False, "auto", "OK", "GTID set"),
        ("8.0.36", "OFF", False, "auto", "FAIL", "head-unsafe"),
        ("8.0.36", "OFF", False, "head-unsafe", "WARN", "without proof"),
        ("8.0.36-28", "OFF", True, "auto", "OK", "binlog_snapshot"),  # Percona
        ("10.11.6-MariaDB", None, True, "auto", "OK", "binlog_snapshot"),
        ("10.11.6-MariaDB", None, True, "gtid-wait", "OK", "GTID set"),
        ("8.0.36", "OFF", False, "gtid-wait", "FAIL", "gtid_mode=ON"),
    ],
)
def test_the_check_says_how_snapshots_see_everything_up_to_their_position(
    version, gtid_mode, snapshot_status, requested, status, says
):
    from cdc_source.options import parse_options
    from cdc_source.requirements import check_visibility

    options = parse_options(
        {
            "hostname": "db",
            "username": "cdc",
            "database-name": "shop",
            "table-name": "shop.orders",
            "scan.snapshot.visibility": requested,
        }
    )
    finding = check_visibility(_traits_server(version, gtid_mode, snapshot_status), options)
    assert finding.status == status
    assert says in finding.detail


class _HeadServer(RecordedServer):
    def __init__(self, version: str, refuse: dict[str, int]) -> None:
        row = [("binlog.000007", 1234, "", "", "uuid:1-5")]
        super().__init__({"SHOW BINARY LOG STATUS": row, "SHOW MASTER STATUS": row})
        self.version, self.refuse, self.ran = version, refuse, []

    def get_server_info(self) -> str:
        return self.version

    def execute(self, query: str, params=None) -> None:
        self.ran.append(query)
        if query in self.refuse:
            code = self.refuse[query]
            raise pymysql.err.ProgrammingError(code, f"refused {query}")
        super().execute(query, params)


@pytest.mark.parametrize(
    ("version", "first"),
    [
        ("8.4.3", "SHOW BINARY LOG STATUS"),
        ("8.0.36", "SHOW MASTER STATUS"),
        ("10.11.6-MariaDB", "SHOW MASTER STATUS"),
    ],
)
def test_the_head_statement_is_chosen_once_from_the_version(version, first):
    from cdc_source.mysql_client import read_head

    conn = _HeadServer(version, {})
    assert read_head(conn)[:2] == ("binlog.000007", 1234)
    read_head(conn)
    assert conn.ran == [first, first]


def test_only_a_syntax_error_falls_back_to_the_other_head_statement():
    from cdc_source.mysql_client import read_head

    conn = _HeadServer("8.4.0-misleading", {"SHOW BINARY LOG STATUS": 1064})
    assert read_head(conn)[:2] == ("binlog.000007", 1234)
    assert conn.ran == ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"]


@pytest.mark.parametrize("code", [1227, 1142])
def test_a_refused_head_read_names_the_privilege(code):
    from cdc_source.mysql_client import HeadPrivilegeError, read_head

    conn = _HeadServer("8.4.3", {"SHOW BINARY LOG STATUS": code})
    with pytest.raises(HeadPrivilegeError, match="REPLICATION CLIENT"):
        read_head(conn)
    assert conn.ran == ["SHOW BINARY LOG STATUS"]


def test_a_query_refuses_binlogs_purged_at_once_and_warns_of_short_retention(caplog):
    from cdc_source.preflight import PreflightError, check_retention_at_start

    null = RecordedServer(
        {"CALL mysql.rds_show_configuration": [("binlog retention hours", None, "...")]}
    )
    with pytest.raises(PreflightError, match="rds_set_configuration"):
        check_retention_at_start(null)
    short = RecordedServer(
        {"CALL mysql.rds_show_configuration": [("binlog retention hours", "2", "...")]}
    )
    with caplog.at_level("WARNING", logger="cdc_mysql"):
        check_retention_at_start(short)
    assert "7200 s" in caplog.text and "binlog_expire_logs_seconds" in caplog.text
    check_retention_at_start(RecordedServer(_variables(binlog_expire_logs_seconds=604800)))
