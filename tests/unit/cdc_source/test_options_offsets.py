"""Options validation, the offset's JSON form, and recognition of row-destroying DDL."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog.ddl import TableChange, table_changes
from cdc_source.offsets import (
    BinlogPosition,
    SnapshotCursor,
    SourceOffset,
    same_progress,
)
from cdc_source.options import OPTION_DOCS, OptionError, SourceOptions, parse_options
from reader.binlog_range import removed_rows_of

SETTINGS = settings(max_examples=200, deadline=None)

BASE = {
    "hostname": "db.example.com",
    "username": "cdc",
    "password": "s3cret-Pa55",
    "database-name": "shop",
    "table-name": r"shop\.orders",
}


def with_options(**changes) -> dict:
    options = dict(BASE)
    for name, value in changes.items():
        name = name.replace("_", "-").replace("--", ".")
        if value is None:
            options.pop(name, None)
        else:
            options[name] = value
    return options


def option_error(options: dict) -> str:
    with pytest.raises(OptionError) as caught:
        parse_options(options)
    return str(caught.value)


# -- options ----------------------------------------------------------------------------


def test_valid_options_and_defaults():
    parsed = parse_options(BASE)
    assert parsed.hostname == "db.example.com"
    assert parsed.port == 3306
    assert parsed.password == "s3cret-Pa55"
    assert parsed.startup_mode == "initial"
    assert parsed.server_ids.size >= 2
    assert parsed.matches("shop", "orders")
    assert not parsed.matches("shop", "orders_archive")


def test_snapshot_sizing_defaults_follow_the_work_and_the_cores(monkeypatch):
    """No fixed chunk count: batches by rows and bytes; tasks by this machine's cores
    (at least two), and one server id per task even when that needs more than 32."""
    parsed = parse_options(BASE)
    assert parsed.chunks_per_batch is None
    assert parsed.rows_per_batch == 2_000_000 and parsed.bytes_per_batch == 1 << 30
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert parse_options(BASE).snapshot_parallelism == 2
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    many = parse_options(BASE)
    assert many.snapshot_parallelism == 64
    assert many.server_ids.first == 5400 and many.server_ids.size == 64 + 1  # + binlog tasks
    assert parse_options({**BASE, "scan.snapshot.parallelism": "3"}).server_ids.size == 32
    explicit = parse_options({**BASE, "server-id": "10-11", "scan.snapshot.chunks-per-batch": "4"})
    assert (explicit.server_ids.size, explicit.chunks_per_batch) == (2, 4)


@pytest.mark.parametrize("name", ["hostname", "username", "database-name", "table-name"])
@pytest.mark.parametrize("how", ["absent", "empty"])
def test_each_missing_required_option_is_named(name, how):
    options = dict(BASE)
    if how == "absent":
        del options[name]
    else:
        options[name] = ""
    message = option_error(options)
    assert f"'{name}'" in message
    others = {"hostname", "username", "database-name", "table-name"} - {name}
    assert not any(f"'{other}'" in message for other in others)


def test_unknown_option_lists_the_accepted_ones():
    message = option_error({**BASE, "hostnmae": "x"})
    assert "'hostnmae'" in message
    for accepted in OPTION_DOCS:
        assert accepted in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("port", "abc"),
        ("port", "0"),
        ("port", "-1"),
        ("port", "65536"),
        ("port", "33 06"),
        ("port", "3306.0"),
        ("scan.incremental.snapshot.chunk.size", "0"),
        ("scan.incremental.snapshot.chunk.size", "-8096"),
        ("scan.incremental.snapshot.chunk.size", "many"),
        ("scan.incremental.snapshot.chunk.size", "1e3"),
        ("server-id", "0-5"),
        ("server-id", "10-5"),
        ("server-id", "5400"),
        ("server-id", "a-b"),
        ("server-id", "5400-"),
        ("server-id", "1-4294967296"),
        ("server-id", "-5-10"),
        ("scan.startup.mode", "earliest"),
        ("scan.startup.mode", "snapshot-only"),
        ("scan.startup.mode", ""),
        ("database-name", "shop("),
        ("table-name", "[a-"),
        ("table-name", "*orders"),
        ("server-time-zone", "Mars/Olympus"),
        ("server-time-zone", "+25:00"),
        ("server-time-zone", "../etc/passwd"),
        ("server-time-zone", "zone.tab"),
        # Directories of the zone database are not zones either.
        ("server-time-zone", "America"),
        ("server-time-zone", "Etc"),
        # A key too long for a file name.
        pytest.param("server-time-zone", "Europe/" + "x" * 300, id="server-time-zone-too-long"),
    ],
)
def test_bad_values_name_their_option(name, value):
    message = option_error({**BASE, name: value})
    assert f"'{name}'" in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("port", "13306"),
        ("server-id", "5400-5401"),
        ("server-id", " 7 - 9 "),
        ("server-time-zone", "utc"),
        ("server-time-zone", "+00:00"),
        ("server-time-zone", "Etc/UTC"),
        ("scan.startup.mode", "latest-offset"),
        ("scan.incremental.snapshot.chunk.size", "1"),
    ],
)
def test_good_values_are_accepted(name, value):
    parse_options({**BASE, name: value})


weird_passwords = st.text(min_size=0, max_size=20).map(lambda s: "\u2603pw" + s)
bad_settings = st.sampled_from(
    [
        {},
        {"port": "x"},
        {"port": "70000"},
        {"server-id": "3-1"},
        {"server-id": "7"},
        {"scan.startup.mode": "nope"},
        {"database-name": "("},
        {"table-name": ")"},
        {"server-time-zone": "Nowhere/Never"},
        {"scan.snapshot.fetch.size": "-1"},
        {"connect.timeout": "soon"},
        {"passwd": "oops"},
        {"hostname": None},
        {"username": ""},
    ]
)


@SETTINGS
@given(weird_passwords, bad_settings)
def test_password_never_in_repr_or_errors(password, setting):
    options = {**BASE, "password": password}
    for name, value in setting.items():
        if value is None:
            options.pop(name)
        else:
            options[name] = value
    try:
        parsed = parse_options(options)
    except OptionError as err:
        assert password not in str(err)
        assert password not in repr(err)
    else:
        assert parsed.password == password
        assert password not in repr(parsed)
        assert password not in str(parsed)


def test_password_field_is_hidden_from_repr():
    parsed = SourceOptions("h", 1, "u", "hunter2-\u2603")
    assert "hunter2" not in repr(parsed)
    assert parsed.connection_kwargs()["password"] == "hunter2-\u2603"


# -- offsets ----------------------------------------------------------------------------

key_values = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.text(max_size=12),
    st.text(alphabet="0123456789abcdef", max_size=8),
)
positions = st.builds(
    BinlogPosition,
    file=st.from_regex(r"[a-z\-]{1,12}\.[0-9]{6}", fullmatch=True),
    pos=st.integers(4, 2**40),
    gtids=st.sampled_from(["", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77"]),
    ts=st.integers(0, 2**45),
)
cursors = st.builds(
    SnapshotCursor,
    table=st.text(min_size=1, max_size=20),
    after=st.none() | st.lists(key_values, min_size=1, max_size=4).map(tuple),
)
offsets = st.builds(
    SourceOffset,
    binlog=st.none() | positions,
    snapshot=st.none() | cursors,
    tables=st.text(alphabet="0123456789abcdef", min_size=8, max_size=8),
)


@SETTINGS
@given(offsets)
def test_offset_json_round_trip_fixed_order_no_whitespace(offset):
    text = offset.to_json()
    assert SourceOffset.from_json_obj(text) == offset
    assert SourceOffset.from_json_obj(json.loads(text)) == offset
    obj = json.loads(text)
    assert list(obj) == ["v", "tables", "binlog", "snapshot"]
    if obj["binlog"] is not None:
        assert list(obj["binlog"]) == ["file", "pos", "gtids", "ts"]
    if obj["snapshot"] is not None:
        assert list(obj["snapshot"]) == ["table", "after"]
    # Spark compares offsets as strings: the canonical compact form, nothing else.
    assert text == json.dumps(obj, separators=(",", ":"), ensure_ascii=True)
    assert text.isascii()
    # Deterministic: the same offset rebuilt from its JSON serializes identically.
    assert SourceOffset.from_json_obj(text).to_json() == text


def test_offset_json_exact_text():
    offset = SourceOffset(
        BinlogPosition("binlog.000003", 1234, "", 99), SnapshotCursor("db.t", (5, "a b")), "0abc"
    )
    assert offset.to_json() == (
        '{"v":1,"tables":"0abc","binlog":{"file":"binlog.000003","pos":1234,"gtids":"","ts":99},'
        '"snapshot":{"table":"db.t","after":[5,"a b"]}}'
    )


def test_offset_size_is_small_with_a_long_composite_key():
    gtids = (
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-1234567890,"
        "4f22fb58-82db-22f2-af44-d91bb0530673:1-987654321"
    )
    key = (2**64 - 1, "x" * 120, "é" * 40, "2024-01-01T12:34:56.123456", "-12345678.99")
    offset = SourceOffset(
        BinlogPosition("mysql-bin.000123", 2**40, gtids, 1795346227398),
        SnapshotCursor("warehouse_production.customer_order_line_items", key),
        "deadbeef",
    )
    size = len(offset.to_json().encode())
    assert size < 1024, size
    assert SourceOffset.from_json_obj(offset.to_json()) == offset


@SETTINGS
@given(offsets, st.integers(0, 2**45))
def test_same_progress_ignores_ts(offset, ts):
    if offset.binlog is None:
        other = offset
    else:
        b = offset.binlog
        other = SourceOffset(
            BinlogPosition(b.file, b.pos, b.gtids, ts), offset.snapshot, offset.tables
        )
    assert same_progress(offset, other)
    assert same_progress(other, offset)


def test_same_progress_sees_real_differences():
    base = SourceOffset(BinlogPosition("b.000001", 100, "", 1), SnapshotCursor("db.t", (5,)))
    moved = SourceOffset(BinlogPosition("b.000001", 101, "", 1), base.snapshot)
    rotated = SourceOffset(BinlogPosition("b.000002", 100, "", 1), base.snapshot)
    advanced = SourceOffset(base.binlog, SnapshotCursor("db.t", (6,)))
    handed_over = SourceOffset(base.binlog, None)
    for other in (moved, rotated, advanced, handed_over):
        assert not same_progress(base, other)
        assert not same_progress(other, base)


# -- statements that destroy rows without row events ------------------------------------

WATCHED = {"shop.t", "shop.x", "shop.c", "shop.t1", "shop.t2", "a.b", "c.d", "db.t", "db.t1"}
WATCHED |= {"db.t2", "my db.we`ird", "sh`op.k", "shop.t_new"}


def _removed(query: str, lower_case_names: bool = False) -> list[str]:
    changes = table_changes(query, "shop", lower_case_names)
    return [t for change in changes for t in removed_rows_of(change, WATCHED)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("TRUNCATE t", ["shop.t"]),
        ("truncate t;", ["shop.t"]),
        ("TRUNCATE TABLE db.t", ["db.t"]),
        ("TRUNCATE TABLE `my db`.`we``ird`", ["my db.we`ird"]),
        ("  Truncate\n  Table\tx ", ["shop.x"]),
        ("DROP TABLE IF EXISTS `a`.`b`, c", ["a.b", "shop.c"]),
        ("DROP TABLE a.b,c.d", ["a.b", "c.d"]),
        ("drop table t1 /* generated by server */", ["shop.t1"]),
        # The server logs DROP TABLE of several tables with quoted names.
        ("DROP TABLE `t1`,`t2` /* generated by server */", ["shop.t1", "shop.t2"]),
        ("DROP TABLE IF EXISTS `db`.`t1`, `db`.`t2`", ["db.t1", "db.t2"]),
        ("/* app=etl */ TRUNCATE TABLE t", ["shop.t"]),
        ("/* a */ /* b */DROP TABLE t", ["shop.t"]),
        # Line comments before the statement are kept in the binlog text too.
        ("-- cleanup\nTRUNCATE TABLE t", ["shop.t"]),
        ("# cleanup\nTRUNCATE t", ["shop.t"]),
        ("DROP DATABASE shop", ["shop.c", "shop.t", "shop.t1", "shop.t2", "shop.t_new", "shop.x"]),
        ("DROP SCHEMA IF EXISTS `sh``op`", ["sh`op.k"]),
        ("RENAME TABLE t TO t_old", ["shop.t"]),
        ("ALTER TABLE t TRUNCATE PARTITION p0", ["shop.t"]),
        ("ALTER TABLE db.t DROP PARTITION p0", ["db.t"]),
    ],
)
def test_statements_that_remove_rows_without_row_events(query, expected):
    assert _removed(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "BEGIN",
        "COMMIT",
        "INSERT INTO t VALUES (1)",
        "DELETE FROM t WHERE id = 1",
        "CREATE TABLE t (id INT PRIMARY KEY)",
        "ALTER TABLE t ADD COLUMN c INT",
        "DROP INDEX i ON t",
        "DROP VIEW v",
        "DROP TEMPORARY TABLE tmp",
        "DROP TRIGGER truncate_t",
        "CREATE TABLE truncate_log (id INT)",
        "/* TRUNCATE t */ SELECT 1",
        "TRUNCATE TABLE t_other",
        "",
    ],
)
def test_statements_that_remove_no_captured_rows(query):
    assert _removed(query) == []


def test_names_are_read_in_lowercase_under_lower_case_table_names_1():
    """The server stores and compares names in lowercase; the statement keeps them as
    written."""
    assert _removed("TRUNCATE TABLE Shop.T") == []
    assert _removed("TRUNCATE TABLE Shop.T", lower_case_names=True) == ["shop.t"]
    assert _removed("RENAME TABLE `DB`.`T1` TO Shop.T_New", lower_case_names=True) == ["db.t1"]
    (rename,) = table_changes("RENAME TABLE `DB`.`T1` TO Shop.T_New", "Shop", True)
    assert rename == TableChange("rename", "db.t1", "shop.t_new")


def test_seq_orders_binlog_events_before_the_snapshot_rows_at_their_position():
    from cdc_source.sequence import binlog_seq, snapshot_seq

    at_p = snapshot_seq(1, 5000, 0, b"\x00\x01")
    assert binlog_seq(1, 4999, 7) < binlog_seq(1, 5000, 0, 1) < at_p < binlog_seq(1, 5001, 0)
    assert at_p < snapshot_seq(1, 5000, 0, b"\x00\x02") < snapshot_seq(1, 5000, 1, b"\x00")
    assert binlog_seq(1, 5000, 3, 0) < binlog_seq(1, 5000, 3, 1)  # key change: d before c
    assert snapshot_seq(1, 999999, 0, b"\xff") < binlog_seq(2, 4, 0)  # next binlog file


def test_lower_case_table_names_2_is_refused_with_its_reason():
    from cdc_source.preflight import name_case_problem

    # mysql_client.variables reads the integers 0 and 1 as OFF and ON
    assert name_case_problem("OFF") is None and name_case_problem("ON") is None
    assert name_case_problem("missing") is None
    problem = name_case_problem("2")
    assert "lower_case_table_names is 2" in problem and "=0 or 1" in problem
