"""A checkpoint's positions belong to one server's binlog: a restart that reaches another
server, or the same server after its binlog was reset, stops with a clear error before
any data moves, instead of reading other events at the same coordinates."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cdc_source.binlog.transport import HEARTBEAT_PERIOD_NS, prepare_dump_session
from cdc_source.mysql_client import ServerChangedError, as_text, connect, server_identity
from cdc_source.offsets import SourceOffset
from cdc_source.options import parse_options
from cdc_source.spark_readers import discover
from coordinator.driver import QueryDriver, SourceStateError

ONE_DECODER = True


def _driver(server, database: str) -> QueryDriver:
    options = parse_options(server.source_options(database, rf"{database}\.t"))
    return QueryDriver(options, discover(options))


def _streamed_offset(server, database: str) -> SourceOffset:
    """The end of a stream-phase batch of a new query (latest-offset mode)."""
    server.fresh_database(database)
    server.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=database)
    driver = _driver(server, database)
    try:
        fingerprint = driver.fingerprint
        end = driver.latest(SourceOffset(None, None, fingerprint))
        server.execute("INSERT INTO t VALUES (1), (2)", database=database)
        return driver.latest(end)
    finally:
        driver.close()


def test_an_offset_names_its_server_and_carries_the_gtid_state(killable_server):
    end = _streamed_offset(killable_server, "ident_a")
    assert end.server.startswith("server_id=")
    assert end.binlog.gtids == killable_server.gtid_state()
    assert SourceOffset.from_json_obj(end.to_json()) == end


def test_a_checkpoint_of_another_server_without_gtids_is_refused(killable_server):
    end = _streamed_offset(killable_server, "ident_b")
    driver = _driver(killable_server, "ident_b")
    try:
        foreign = replace(end, server="server_id=4242", binlog=replace(end.binlog, gtids=""))
        with pytest.raises(ServerChangedError, match="another server"):
            driver.latest(foreign)
    finally:
        driver.close()


def test_a_checkpoint_of_another_server_is_followed_by_its_gtid_state(killable_server):
    """Here the "other" server holds the very same binlog, so the position found by the
    GTID state is the checkpoint's own, one epoch later."""
    end = _streamed_offset(killable_server, "ident_d")
    driver = _driver(killable_server, "ident_d")
    try:
        foreign = replace(end, server="server_id=4242")
        following = driver.latest(foreign)
        tasks = driver.tasks(foreign, following)
    finally:
        driver.close()
    assert following.binlog.epoch == 1 and following.server == end.server
    assert (following.binlog.file, following.binlog.pos) == (end.binlog.file, end.binlog.pos)
    assert tasks == []  # nothing new: the same point of the binlog


def test_a_checkpoint_after_the_binlog_was_reset_is_refused(killable_server):
    """Detected by the GTIDs while the server has written fewer transactions since the
    reset than before it (a reset server that has caught up again, at the same file and
    an event boundary, would pass this check: see docs/semantics.md, Limits)."""
    end = _streamed_offset(killable_server, "ident_c")
    # RESET MASTER is MySQL 8.4+'s RESET BINARY LOGS AND GTIDS
    killable_server.execute(
        "RESET MASTER" if killable_server.is_mariadb else "RESET BINARY LOGS AND GTIDS"
    )
    killable_server.execute("INSERT INTO t VALUES (10)", database="ident_c")
    driver = _driver(killable_server, "ident_c")
    try:
        with pytest.raises(SourceStateError, match="binlog was reset"):
            driver.latest(end)
    finally:
        driver.close()


def _connect(server):
    options = parse_options(server.source_options("mysql", r"mysql\.user"))
    return connect(options.connection_kwargs())


def _identity_by_variables(server) -> str:
    """The identity as the server's variables list it: its server id, and its UUID
    where it has one."""
    rows = server.query("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('server_id', 'server_uuid')")
    found = {as_text(name).lower(): as_text(value) for name, value in rows}
    return " ".join(
        f"{name}={found[name]}" for name in ("server_id", "server_uuid") if name in found
    )


def test_a_servers_identity_is_its_server_id_and_its_uuid_where_it_has_one(server):
    conn = _connect(server)
    try:
        assert server_identity(conn) == _identity_by_variables(server)
    finally:
        conn.close()


def test_a_greeting_that_does_not_name_the_server_gives_the_same_identity(server):
    """A proxy may greet as a MySQL version of its own whatever server is behind it: a
    MariaDB server, asked for a UUID it does not have, is asked again without it."""
    conn = _connect(server)
    try:
        conn.get_server_info = lambda: "8.0.36-proxy"
        assert server_identity(conn) == _identity_by_variables(server)
    finally:
        conn.close()


def test_a_dump_session_knows_its_server_and_announces_what_the_reader_understands(server):
    conn = _connect(server)
    try:
        session = prepare_dump_session(conn, heartbeat=True)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT @@global.binlog_checksum, @master_binlog_checksum, "
                "@source_binlog_checksum, @mariadb_slave_capability, "
                "@master_heartbeat_period, @source_heartbeat_period"
            )
            checksum, *announced = cur.fetchone()
    finally:
        conn.close()
    assert session.identity == _identity_by_variables(server)
    assert session.checksum == (as_text(checksum).upper() == "CRC32")
    assert [as_text(value) for value in announced] == [
        as_text(checksum),
        as_text(checksum),
        "4",
        str(HEARTBEAT_PERIOD_NS),
        str(HEARTBEAT_PERIOD_NS),
    ]
