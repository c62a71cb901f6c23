"""``cdc-mysql check`` against a throwaway server of its own (its global settings are
changed here): each requirement it can show is seen OK and, with the setting or grant
changed, WARN or FAIL with its fix; the exit status and ``--json`` follow. Requirements
MariaDB cannot produce (an old version, MySQL's GTID mode and PARTIAL_JSON, RDS
retention) are covered by tests/unit/cdc_source/test_requirements.py with recorded outputs."""

from __future__ import annotations

import json
import re

import pytest

from cdc_source.check_command import check, main
from tests.support.server import embedded_server, seq_rows

ONE_DECODER = True  # no binlog rows are decoded here


@pytest.fixture(scope="module")
def own_server():
    server = embedded_server()
    info = server.start()
    try:  # stopped even when the set-up fails (a server left running outlives the tests)
        with info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("USE shop")
            cur.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))")
            rows = seq_rows(1, 5000, mariadb=server.flavour == "mariadb")
            cur.execute(f"INSERT INTO shop.orders SELECT seq, 'n' FROM {rows} ORDER BY seq")
            cur.execute("CREATE TABLE shop.log (line TEXT)")
        yield info
    finally:
        server.stop()


def _options(info, user=None, password=None, **extra) -> dict[str, str]:
    return {
        **info.source_options(),
        **({"username": user, "password": password} if user else {}),
        "database-name": "shop",
        "table-name": r"shop\.orders",
        **extra,
    }


def _by_requirement(options) -> dict[str, object]:
    _, findings = check(options)
    return {f.requirement: f for f in findings}


def _set_global(info, name: str, value) -> object:
    with info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT @@global.{name}")
        (old,) = cur.fetchone()
        cur.execute(f"SET GLOBAL {name} = %s", (value,))
    return old


def test_a_ready_server_passes_every_requirement(own_server):
    found = _by_requirement(_options(own_server))
    statuses = {name: f.status for name, f in found.items()}
    assert statuses.pop("server-id range") in ("OK", "WARN")  # listing replicas needs a grant
    assert set(statuses.values()) == {"OK"}, statuses
    assert re.match(
        r"about [\d,]+ rows, [\d.]+ MiB of data, \d+ chunks", found["snapshot estimate"].detail
    )
    assert found["privilege: binlog dump"].detail == "a binlog dump handshake succeeded"


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("binlog_format", "STATEMENT"),
        ("binlog_row_image", "MINIMAL"),
        ("binlog_row_metadata", "MINIMAL"),
    ],
)
def test_each_binlog_setting_fails_with_its_fix(own_server, name, bad):
    old = _set_global(own_server, name, bad)
    try:
        finding = _by_requirement(_options(own_server))[name]
    finally:
        _set_global(own_server, name, old)
    assert finding.status == "FAIL" and bad in finding.detail
    assert name in finding.fix


def test_compressed_binlog_is_reported_as_decoded(own_server):
    # MariaDB's zlib events, or MySQL's zstd TRANSACTION_PAYLOAD
    name = "log_bin_compress" if _is_mariadb(own_server) else "binlog_transaction_compression"
    old = _set_global(own_server, name, "ON")
    try:
        finding = _by_requirement(_options(own_server))["binlog compression / partial JSON"]
    finally:
        _set_global(own_server, name, old)
    assert finding.status == "OK" and "decoded" in finding.detail


def test_short_retention_warns_and_none_is_fine(own_server):
    old = _set_global(own_server, "binlog_expire_logs_seconds", 3600)
    try:
        short = _by_requirement(_options(own_server))["binlog retention"]
    finally:
        _set_global(own_server, "binlog_expire_logs_seconds", old)
    assert short.status == "WARN" and "3600 s" in short.detail
    assert "binlog_expire_logs_seconds" in short.fix
    assert _by_requirement(_options(own_server))["binlog retention"].status == "OK"


def _is_mariadb(info) -> bool:
    with info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" in cur.fetchone()[0].lower()


def _status_privilege(info) -> str:
    """What lets an account read the binlog head: MariaDB 10.5+ split it out of
    REPLICATION CLIENT as BINLOG MONITOR."""
    return "BINLOG MONITOR" if _is_mariadb(info) else "REPLICATION CLIENT"


def _account(info, name: str, *grants: str) -> None:
    with info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS '{name}'@'%' IDENTIFIED BY 'pw'")
        for grant in grants:
            cur.execute(grant.format(user=f"'{name}'@'%'"))


def test_missing_privileges_are_proven_by_probing_with_the_grant_to_run(own_server):
    _account(
        own_server,
        "nodump",
        "GRANT SELECT ON shop.* TO {user}",
        f"GRANT {_status_privilege(own_server)} ON *.* TO {{user}}",
    )
    found = _by_requirement(_options(own_server, "nodump", "pw"))
    assert found["privilege: binlog status"].status == "OK"
    assert found["privilege: binlog dump"].status == "FAIL"
    assert "GRANT REPLICATION SLAVE" in found["privilege: binlog dump"].fix

    _account(own_server, "nostatus", "GRANT SELECT ON shop.* TO {user}")
    found = _by_requirement(_options(own_server, "nostatus", "pw"))
    assert found["privilege: binlog status"].status == "FAIL"
    assert "REPLICATION CLIENT" in found["privilege: binlog status"].fix


def test_privileges_granted_through_a_role_count(own_server):
    with own_server.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE ROLE IF NOT EXISTS cdc_role")
        cur.execute("GRANT SELECT ON shop.* TO cdc_role")
        cur.execute(f"GRANT REPLICATION SLAVE, {_status_privilege(own_server)} ON *.* TO cdc_role")
    default = "FOR" if _is_mariadb(own_server) else "TO"  # SET DEFAULT ROLE's spelling
    _account(
        own_server,
        "byrole",
        "GRANT cdc_role TO {user}",
        f"SET DEFAULT ROLE cdc_role {default} {{user}}",
    )
    found = _by_requirement(_options(own_server, "byrole", "pw"))
    for requirement in ("privilege: binlog status", "privilege: binlog dump", "privilege: SELECT"):
        assert found[requirement].status == "OK", found[requirement]


def test_tables_without_a_key_or_a_pattern_matching_nothing_fail(own_server):
    no_key = _by_requirement(_options(own_server, **{"table-name": r"shop\..*"}))["tables"]
    assert no_key.status == "FAIL" and "shop.log has no primary key" in no_key.detail
    nothing = _by_requirement(_options(own_server, **{"table-name": r"shop\.nope"}))["tables"]
    assert nothing.status == "FAIL" and "no table matches" in nothing.detail


def test_a_server_id_range_holding_the_servers_own_id_fails(own_server):
    with own_server.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@server_id")
        (own,) = cur.fetchone()
    clash = _by_requirement(_options(own_server, **{"server-id": f"{own}-{own + 3}"}))
    assert clash["server-id range"].status == "FAIL"
    assert f"own is {own}" in clash["server-id range"].detail
    root = _options(own_server, "root", "", **{"server-id": "7000-7003"})
    assert _by_requirement(root)["server-id range"].status == "OK"  # root lists replicas


def test_a_server_without_binlog_fails_log_bin():
    server = embedded_server(binlog=False)
    info = server.start()
    try:
        with info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY)")
        found = _by_requirement(_options(info))
    finally:
        server.stop()
    assert found["log_bin"].status == "FAIL" and "--log-bin" in found["log_bin"].fix


def test_unreachable_server_fails_the_connection(own_server):
    options = _options(own_server, port="1")
    _, findings = check(options)
    assert [f.status for f in findings] == ["FAIL"]
    assert own_server.password not in findings[0].detail


def test_exit_status_json_properties_file_and_password_from_the_environment(
    own_server, tmp_path, monkeypatch, capsys
):
    properties = tmp_path / "cdc.properties"
    lines = [f"{k}={v}" for k, v in _options(own_server).items() if k != "password"]
    properties.write_text("# the source's options\n" + "\n".join(lines) + "\n")
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", own_server.password)
    assert main(["--properties", str(properties), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and len(report["findings"]) >= 12
    assert own_server.password not in json.dumps(report)
    # A flag wins over the file; a FAIL makes the exit status 1.
    assert main(["--properties", str(properties), "--table-name", r"shop\..*"]) == 1
    text = capsys.readouterr().out
    assert "FAIL  tables" in text and "1 FAIL" in text
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", "wrong")
    assert main(["--properties", str(properties)]) == 1
    assert "FAIL  connection" in capsys.readouterr().out
    assert main(["--properties", str(properties), "--port", "x"]) == 2


def test_the_start_position_of_each_mode_is_reported(own_server):
    """``cdc-mysql check`` says where a new query would start, found as its first batch
    finds it, and fails a start the server does not keep; binlog-only modes have no
    snapshot to estimate."""
    found = _by_requirement(_options(own_server))
    assert "initial" in found["start position"].detail and "snapshot estimate" in found
    found = _by_requirement(_options(own_server, **{"scan.startup.mode": "earliest-offset"}))
    assert found["start position"].status == "OK"
    assert re.search(r"the binlog from \S+\.\d+:\d+", found["start position"].detail)
    assert "snapshot estimate" not in found
    future = {
        "scan.startup.mode": "specific-offset",
        "scan.startup.specific-offset.file": "binlog.999999",
        "scan.startup.specific-offset.pos": "4",
    }
    found = _by_requirement(_options(own_server, **future))
    assert found["start position"].status == "FAIL"
    assert "scan.startup.specific-offset.file" in found["start position"].detail
    assert "future" in found["start position"].detail
