"""Every server or table problem is one clear error before any data moves, and no error
ever shows the password."""

from __future__ import annotations

import os
import time

import pytest

from tests.support.server import embedded_server
from tests.support.streams import StreamRun, source_offsets

ONE_DECODER = True  # preflight checks run before any row is decoded

SECRET = "pw-Do-Not-Leak-7731"


def _load(spark, options: dict[str, str]):
    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _error_of(spark, options) -> str:
    with pytest.raises(Exception) as caught:
        _load(spark, options)
    return str(caught.value)


def _account_options(server, database: str, user: str, grants: str) -> dict[str, str]:
    """Source options for a new account with exactly ``grants`` and the secret password."""
    server.execute(
        f"DROP USER IF EXISTS '{user}'@'%'",
        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{SECRET}'",
        f"GRANT {grants} ON *.* TO '{user}'@'%'",
    )
    options = server.source_options(database, rf"{database}\.items")
    options.update(username=user, password=SECRET)
    return options


@pytest.fixture(scope="module")
def plain_table(server):
    database = server.fresh_database("preflight_db")
    server.execute(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
        "CREATE TABLE nokey (name VARCHAR(20))",
        "INSERT INTO items VALUES (1, 'a'), (2, 'b')",
        database=database,
    )
    return database


@pytest.fixture
def global_setting(server):
    changed = {}

    def change(name: str, value: str) -> None:
        changed.setdefault(name, server.query(f"SELECT @@global.{name}")[0][0])
        server.execute(f"SET GLOBAL {name} = '{value}'")

    yield change
    for name, value in changed.items():
        server.execute(f"SET GLOBAL {name} = '{value}'")


def test_binlog_off_is_refused_with_how_to_enable_it(spark):
    with embedded_server(binlog=False) as info:
        options = {**info.source_options(), "database-name": "mysql", "table-name": r"mysql\..*"}
        message = _error_of(spark, options)
    assert "log-bin" in message and "binlog is off" in message


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("binlog_format", "STATEMENT", "binlog_format=ROW"),
        ("binlog_row_image", "MINIMAL", "binlog_row_image=FULL"),
        ("binlog_row_metadata", "MINIMAL", "binlog_row_metadata=FULL"),
    ],
)
def test_wrong_binlog_setting_names_the_setting_to_change(
    server, spark, plain_table, global_setting, setting, value, expected
):
    global_setting(setting, value)
    message = _error_of(spark, server.source_options(plain_table, rf"{plain_table}\.items"))
    assert expected in message and value in message


def test_missing_replication_privilege_says_what_to_grant(server, spark, plain_table):
    options = _account_options(server, plain_table, "noslave", "SELECT, REPLICATION CLIENT")
    message = _error_of(spark, options)
    assert "REPLICATION SLAVE" in message and "GRANT" in message
    assert SECRET not in message


def test_missing_select_privilege_is_explained(server, spark, plain_table):
    options = _account_options(
        server, plain_table, "noselect", "REPLICATION SLAVE, REPLICATION CLIENT"
    )
    message = _error_of(spark, options)
    assert "SELECT" in message and SECRET not in message


def test_table_without_primary_key_is_refused(server, spark, plain_table):
    message = _error_of(spark, server.source_options(plain_table, rf"{plain_table}\.nokey"))
    assert f"{plain_table}.nokey has no primary key" in message


def test_pattern_matching_no_table_is_refused(server, spark, plain_table):
    message = _error_of(spark, server.source_options(plain_table, r"nothing\.here"))
    assert "no table matches" in message


def test_wrong_password_is_reported_without_the_password(server, spark, plain_table):
    options = server.source_options(plain_table, rf"{plain_table}\.items")
    options["password"] = SECRET
    message = _error_of(spark, options)
    assert "refused the account" in message and SECRET not in message


def test_unknown_and_bad_options_are_named(server, spark, plain_table):
    options = server.source_options(plain_table, rf"{plain_table}\.items")
    message = _error_of(spark, {**options, "chunk.size": "10"})
    assert "'chunk.size'" in message and "scan.incremental.snapshot.chunk.size" in message
    message = _error_of(spark, {**options, "scan.startup.mode": "earliest"})
    assert "scan.startup.mode" in message and "latest-offset" in message


def _purge_through(server, file: str) -> None:
    """Purge binlogs up to and including ``file``. MariaDB keeps a file until the engine
    has checkpointed its transactions, so flush and retry for a bounded while."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        server.execute("FLUSH BINARY LOGS")
        current = server.binlog_head()[0]
        server.execute(f"PURGE BINARY LOGS TO '{current}'")
        if file not in [row[0] for row in server.query("SHOW BINARY LOGS")]:
            return
        time.sleep(1)
    raise AssertionError(f"the server kept {file} after PURGE BINARY LOGS")


def test_purged_binlog_stops_the_restart_with_a_clear_error(server, spark, plain_table, tmp_path):
    options = server.source_options(plain_table, rf"{plain_table}\.items")
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    server.execute("REPLACE INTO items VALUES (3, 'c')", database=plain_table)
    checkpointed_file = source_offsets(run.checkpoint)[max(source_offsets(run.checkpoint))]
    checkpointed_file = checkpointed_file["binlog"]["file"]
    _purge_through(server, checkpointed_file)
    query = run.start(available_now=True)
    with pytest.raises(Exception) as caught:
        query.awaitTermination(120)
    message = str(caught.value)
    assert "no longer has" in message and "binlog" in message


def test_password_never_appears_in_plans_progress_offsets_or_logs(
    server, spark, plain_table, tmp_path
):
    options = _account_options(
        server, plain_table, "secretive", "SELECT, REPLICATION SLAVE, REPLICATION CLIENT"
    )
    df = _load(spark, options)
    plan = df._jdf.queryExecution().toString()
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    query = run.start(available_now=True)
    query.awaitTermination(120)
    progress = str(query.recentProgress)
    checkpoint_text = "".join(
        p.read_text(errors="replace") for p in (tmp_path / "ck").rglob("*") if p.is_file()
    )
    state_dir = os.environ.get("CDC_MYSQL_STATE_DIR", "")
    log_path = os.path.join(state_dir, "coordinator.log")
    log_text = open(log_path).read() if os.path.exists(log_path) else ""
    assert "items" in plan and progress and checkpoint_text
    for text in (plan, progress, checkpoint_text, log_text):
        assert SECRET not in text
