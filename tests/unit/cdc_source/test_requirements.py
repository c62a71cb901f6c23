"""The requirements ``cdc-mysql check`` shows, from the answers a real MariaDB 10.11 and
MySQL 9.7 gave (``tests/data/server_answers/``, recorded by ``python -m
tests.support.record_server_answers``): versions, gtid_mode, PARTIAL_JSON with a JSON
column, binlog retention. (The rest run against a real server in
tests/integration/test_check_command.py.)"""

from __future__ import annotations

import pymysql
import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.findings import check_retention
from cdc_source.requirements import check_contents, check_gtids, check_version
from tests.support.server_answers import FLAVOURS, RecordedServer, answer, error, rows

VERSION_QUERY = "SELECT VERSION(), @@version_comment"
RDS_QUERY = "CALL mysql.rds_show_configuration"


class Answers:
    """Answers from a table; anything else is what the recorded server answered to a
    variable it lacks (its ``Unknown system variable`` error, as the client raised it)."""

    def __init__(self, answers: dict[str, list[tuple]], flavour: str = "mysql-9.7") -> None:
        self.answers = answers
        self.unknown = error(flavour, "unknown variable")
        self._rows: list[tuple] = []

    def cursor(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def execute(self, query: str, params=None) -> None:
        if query not in self.answers:
            raise self.unknown
        self._rows = list(self.answers[query])

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def fetchall(self):
        return self._rows


def _variables(**values) -> dict[str, list[tuple]]:
    return {f"SELECT @@global.{name}": [(value,)] for name, value in values.items()}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_recorded_servers_are_new_enough(flavour):
    (finding,) = check_version(RecordedServer(flavour))
    (version, comment) = rows(flavour, VERSION_QUERY)[0]
    assert finding.status == "OK" and f"{version} ({comment})" in finding.detail
    assert finding.detail.startswith("MariaDB" if "mariadb" in flavour else "MySQL")


# Older versions in the recorded servers' own format (the number replaced): the boundary
# is binlog_row_metadata (MySQL 8.0.14 reference manual, binlog_row_metadata; MariaDB
# 10.5 knowledge base, "binlog_row_metadata": added in 10.5.0).
@pytest.mark.parametrize(
    ("flavour", "older", "status"),
    [
        ("mariadb-10.11", "10.4.32", "FAIL"),
        ("mariadb-10.11", "10.5.0", "OK"),
        ("mysql-9.7", "8.0.13", "FAIL"),
        ("mysql-9.7", "8.0.14", "OK"),
        ("mysql-9.7", "8.4.3", "OK"),
    ],
)
def test_server_version_needs_row_metadata_support(flavour, older, status):
    (version, comment) = rows(flavour, VERSION_QUERY)[0]
    real = version.split("-")[0]
    version = version.replace(real, older, 1)
    (finding,) = check_version(Answers({VERSION_QUERY: [(version, comment)]}))
    assert finding.status == status and version in finding.detail
    assert (finding.fix != "") == (status == "FAIL")


def test_mysql_without_gtids_warns_and_with_them_is_ok():
    (off,) = check_gtids(RecordedServer("mysql-9.7", "gtid_mode=OFF"))
    assert off.status == "WARN" and "gtid_mode=ON" in off.fix
    (on,) = check_gtids(RecordedServer("mysql-9.7"))
    assert on.status == "OK" and on.detail == "gtid_mode=ON"


def test_mariadb_always_has_gtids():
    (finding,) = check_gtids(RecordedServer("mariadb-10.11"))
    gtid_pos = rows("mariadb-10.11", "SELECT @@global.gtid_binlog_pos")[0][0]
    assert finding.status == "OK" and f"gtid_binlog_pos={gtid_pos}" in finding.detail


def test_partial_json_fails_only_when_a_captured_table_has_json():
    conn = RecordedServer("mysql-9.7", "binlog_row_value_options=PARTIAL_JSON")
    doc = ColumnSpec("doc", "json", "json", True)
    key = ColumnSpec("id", "int", "int", False)
    with_json = TableSchema("shop", "docs", (key, doc), ("id",))
    without = TableSchema("shop", "plain", (key,), ("id",))
    (fail,) = check_contents(conn, [with_json])
    assert fail.status == "FAIL" and "shop.docs" in fail.fix
    (fine,) = check_contents(conn, [without])
    assert fine.status == "OK" and "PARTIAL_JSON" in fine.detail


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_server_without_the_rds_procedure_is_read_from_its_variables(flavour):
    assert answer(flavour, RDS_QUERY)["error"]["code"] == 1305  # no such procedure
    for setting, status, says in (
        ("binlog_expire_logs_seconds=7200", "WARN", "7200 s"),
        ("binlog_expire_logs_seconds=604800", "OK", "7 days"),
        ("binlog_expire_logs_seconds=0", "OK", "never purged"),
    ):
        (finding,) = check_retention(RecordedServer(flavour, setting))
        assert finding.status == status and says in finding.detail, (setting, finding)


def test_mariadb_keeps_expire_logs_days_and_the_seconds_as_one_setting():
    """MariaDB 10.6+ makes the two one setting: expire_logs_days=7 after
    binlog_expire_logs_seconds=0 reads back as 604800 seconds (recorded)."""
    setting = "binlog_expire_logs_seconds=0, expire_logs_days=7"
    assert rows("mariadb-10.11", "SELECT @@global.binlog_expire_logs_seconds", setting) == [
        (604800,)
    ]
    (finding,) = check_retention(RecordedServer("mariadb-10.11", setting))
    assert finding.status == "OK" and "7 days" in finding.detail


# RDS for MySQL's procedure (AWS RDS user guide, "mysql.rds_show_configuration": rows of
# name, value, description; the value NULL until set). No server of ours has it: each
# recorded server refuses the call (1305), which is the answer mixed in here.
RDS_NULL = [
    (
        "binlog retention hours",
        None,
        "binlog retention hours specifies the duration in hours before binary logs are "
        "automatically deleted.",
    )
]
RDS_TWO = [(RDS_NULL[0][0], "2", RDS_NULL[0][2])]
RDS_WEEK = [(RDS_NULL[0][0], "168", RDS_NULL[0][2])]


def test_rds_retention_null_fails_and_hours_count():
    (finding,) = check_retention(Answers({RDS_QUERY: RDS_NULL}))
    assert finding.status == "FAIL" and "rds_set_configuration" in finding.fix
    (finding,) = check_retention(Answers({RDS_QUERY: RDS_TWO}))
    assert finding.status == "WARN" and "7200 s" in finding.detail
    assert next(check_retention(Answers({RDS_QUERY: RDS_WEEK}))).status == "OK"


# MySQL 8.0 with binlog_expire_logs_seconds=0 and expire_logs_days set uses the days (MySQL
# 8.0 reference manual, "Binary Logging Options and Variables", binlog_expire_logs_seconds);
# MySQL 8.4 removed expire_logs_days and MariaDB keeps the two as one (recorded above).
def test_mysql_expire_days_count_when_seconds_are_unset():
    conn = Answers(_variables(binlog_expire_logs_seconds=0, expire_logs_days=7))
    (finding,) = check_retention(conn)
    assert finding.status == "OK" and "7 days" in finding.detail


# -- the snapshot visibility proof ---------------------------------------------------------


@pytest.mark.parametrize(
    ("flavour", "setting", "requested", "status", "says"),
    [
        ("mysql-9.7", "default", "auto", "OK", "GTID set"),
        ("mysql-9.7", "gtid_mode=OFF", "auto", "FAIL", "head-unsafe"),
        ("mysql-9.7", "gtid_mode=OFF", "head-unsafe", "WARN", "without proof"),
        ("mysql-9.7", "gtid_mode=OFF", "gtid-wait", "FAIL", "gtid_mode=ON"),
        ("mariadb-10.11", "default", "auto", "OK", "binlog_snapshot"),
        ("mariadb-10.11", "default", "gtid-wait", "OK", "GTID set"),
    ],
)
def test_the_check_says_how_snapshots_see_everything_up_to_their_position(
    flavour, setting, requested, status, says
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
    finding = check_visibility(RecordedServer(flavour, setting), options)
    assert finding.status == status
    assert says in finding.detail


# Percona Server 8.0 reports a MySQL version with gtid_mode=OFF and also has
# binlog_snapshot_file (Percona Server 8.0 documentation, "Binary logs and consistent
# snapshots" / "Start transaction with consistent snapshot": the Binlog_snapshot_file and
# Binlog_snapshot_position status variables). No server of ours is Percona: MySQL 9.7's
# answers with gtid_mode=OFF, plus that status row.
def test_percona_snapshot_status_is_the_proof_without_gtids():
    from cdc_source.options import parse_options
    from cdc_source.requirements import check_visibility

    snapshot = "SHOW GLOBAL STATUS LIKE 'binlog_snapshot_file'"
    answers = {
        q: rows("mysql-9.7", q, "gtid_mode=OFF")
        for q in ("SELECT VERSION()", "SELECT @@global.gtid_mode")
    }
    answers[snapshot] = rows("mariadb-10.11", snapshot)  # the row's shape, as MariaDB has it
    options = parse_options(
        {"hostname": "db", "username": "cdc", "database-name": "shop", "table-name": "shop.t"}
    )
    finding = check_visibility(Answers(answers), options)
    assert finding.status == "OK" and "binlog_snapshot" in finding.detail


# -- the binlog head -----------------------------------------------------------------------


class _HeadServer(RecordedServer):
    """A recorded server whose VERSION() is replaced (a misleading version string)."""

    def __init__(self, flavour: str, version: str | None = None) -> None:
        super().__init__(flavour)
        self.version = version

    def get_server_info(self) -> str:
        return self.version or super().get_server_info()

    def execute(self, query: str, params=None) -> None:
        if query.startswith("SELECT VERSION()") and self.version:
            self.ran.append(query)
            self._rows = [(self.version, "")]
            return
        super().execute(query, params)


def _heads(conn) -> list[str]:
    return [q for q in conn.ran if q.startswith("SHOW")]


@pytest.mark.parametrize(
    ("flavour", "first"),
    [("mysql-9.7", "SHOW BINARY LOG STATUS"), ("mariadb-10.11", "SHOW MASTER STATUS")],
)
def test_the_head_statement_is_chosen_once_from_the_version(flavour, first):
    from cdc_source.mysql_client import read_head

    conn = _HeadServer(flavour)
    file, pos = rows(flavour, first)[0][:2]
    assert read_head(conn)[:2] == (file, pos)
    read_head(conn)
    assert _heads(conn) == [first, first]


def test_mysql_8_0_reads_show_master_status():
    """MySQL 8.2 added SHOW BINARY LOG STATUS and 8.4 removed SHOW MASTER STATUS (MySQL 8.4
    reference manual, "What Is New in MySQL 8.4 since MySQL 8.0")."""
    from cdc_source.mysql_client import head_statement

    assert head_statement("8.0.36") == "SHOW MASTER STATUS"
    assert head_statement("8.4.3") == "SHOW BINARY LOG STATUS"


def test_only_a_syntax_error_falls_back_to_the_other_head_statement():
    """MariaDB's real answers (a syntax error for SHOW BINARY LOG STATUS) behind a
    version string that says MySQL 8.4."""
    from cdc_source.mysql_client import read_head

    conn = _HeadServer("mariadb-10.11", "8.4.0-misleading")
    file, pos = rows("mariadb-10.11", "SHOW MASTER STATUS")[0][:2]
    assert read_head(conn)[:2] == (file, pos)
    assert _heads(conn) == ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"]


class _Refusing(_HeadServer):
    def __init__(self, flavour: str, refusal: Exception) -> None:
        super().__init__(flavour)
        self.refusal = refusal

    def execute(self, query: str, params=None) -> None:
        if query.startswith("SHOW"):
            self.ran.append(query)
            raise self.refusal
        super().execute(query, params)


@pytest.mark.parametrize(
    ("flavour", "statement"),
    [("mysql-9.7", "SHOW BINARY LOG STATUS"), ("mariadb-10.11", "SHOW MASTER STATUS")],
)
def test_a_refused_head_read_names_the_privilege(flavour, statement):
    from cdc_source.mysql_client import HeadPrivilegeError, read_head

    refusal = error(flavour, f"{statement} without privilege")  # 1227, recorded
    conn = _Refusing(flavour, refusal)
    with pytest.raises(HeadPrivilegeError, match="REPLICATION CLIENT"):
        read_head(conn)
    assert _heads(conn) == [statement]


def test_a_table_access_refusal_names_the_privilege_too():
    """1142 (ER_TABLEACCESS_DENIED_ERROR, MySQL server error message reference: "%s
    command denied to user '%s'@'%s' for table '%s'"), which no server of ours gave for a
    head read; the code treats it as the other access errors."""
    from cdc_source.mysql_client import HeadPrivilegeError, read_head

    refusal = pymysql.err.OperationalError(
        1142, "SELECT command denied to user 'cdc'@'10.0.0.1' for table 'x'"
    )
    conn = _Refusing("mysql-9.7", refusal)
    with pytest.raises(HeadPrivilegeError, match="REPLICATION CLIENT"):
        read_head(conn)


def test_a_query_refuses_binlogs_purged_at_once_and_warns_of_short_retention(caplog):
    from cdc_source.preflight import PreflightError, check_retention_at_start

    with pytest.raises(PreflightError, match="rds_set_configuration"):
        check_retention_at_start(Answers({RDS_QUERY: RDS_NULL}))
    for flavour in FLAVOURS:
        caplog.clear()
        with caplog.at_level("WARNING", logger="cdc_mysql"):
            check_retention_at_start(RecordedServer(flavour, "binlog_expire_logs_seconds=7200"))
        assert "7200 s" in caplog.text and "binlog_expire_logs_seconds" in caplog.text
        check_retention_at_start(RecordedServer(flavour, "binlog_expire_logs_seconds=604800"))
