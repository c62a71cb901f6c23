"""Flink CDC's forms of options: ``table-name`` without a dot, durations, a single
``server-id``, ``server-time-zone``, and ``metadata.list``."""

from __future__ import annotations

import logging

import pytest

from cdc_source.options import (
    METADATA_NAMES,
    OptionError,
    mode_snapshots,
    parse_duration_seconds,
    parse_options,
)

BASE = {
    "hostname": "db.example.com",
    "username": "cdc",
    "password": "s3cret-Pa55",
    "database-name": "shop|shop_eu",
    "table-name": r"shop\.orders",
}


def options(**changes: str):
    return parse_options({**BASE, **changes})


def refused(**changes: str) -> str:
    with pytest.raises(OptionError) as info:
        options(**changes)
    return str(info.value)


# -- table-name -------------------------------------------------------------------------


def test_table_name_with_a_dot_matches_db_dot_table():
    parsed = options(**{"table-name": r"shop\.orders"})
    assert not parsed.flink_table_form
    assert parsed.matches("shop", "orders")
    assert not parsed.matches("shop_eu", "orders")
    assert not parsed.matches("shop", "orders_old")


def test_table_name_without_a_dot_is_flinks_table_regex_combined_with_database_name():
    parsed = options(**{"table-name": "orders|order_[0-9]+"})
    assert parsed.flink_table_form
    assert parsed.matches("shop", "orders")
    assert parsed.matches("shop_eu", "order_7")
    assert not parsed.matches("other", "orders")  # database-name still applies
    assert not parsed.matches("shop", "orders_old")  # full match, as Flink's
    # The table regex sees the table name only: 'shop.orders' is no table name.
    assert not options(**{"table-name": "shop_orders"}).matches("shop", "orders")


def test_no_match_hint_names_the_form_used_and_the_other_forms_matches():
    flink = options(**{"table-name": "shop"})
    hint = flink.no_table_hint(["shop.orders"])
    assert "Flink CDC's form" in hint and "shop.orders" in hint and "'db.table'" in hint
    qualified = options(**{"table-name": "orders.*"})
    assert not qualified.flink_table_form
    hint = qualified.no_table_hint([])
    assert "has a dot" in hint and "without a dot" in hint
    # The other form of 'orders.*' matches the table 'orders_old' of database 'shop'.
    assert qualified.matches_other_form("shop", "orders_old")
    assert not qualified.matches("shop", "orders_old")


# -- durations --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("30", 30),
        ("30s", 30),
        ("30 s", 30),
        ("1min", 60),
        ("2 h", 7200),
        ("1d", 86400),
        ("500ms", 0.5),
        ("1500 millis", 1.5),
        ("2 minutes", 120),
        ("3 SECONDS", 3),
    ],
)
def test_flink_durations(raw, seconds):
    assert parse_duration_seconds("connect.timeout", raw) == pytest.approx(seconds)


@pytest.mark.parametrize("raw", ["soon", "30 fortnights", "", "s", "-5s", "1h30m", "30s5"])
def test_bad_durations_name_the_option_and_the_syntax(raw):
    message = refused(**{"connect.timeout": raw})
    assert "'connect.timeout'" in message and "'30s'" in message


def test_duration_options_take_whole_seconds_rounded_up_and_say_so(caplog):
    assert options(**{"connect.timeout": "45s"}).connect_timeout == 45
    assert options(**{"connect.timeout": "2min"}).connect_timeout == 120
    assert options(**{"connect.timeout": "12"}).connect_timeout == 12
    assert options(**{"scan.snapshot.gtid-wait.timeout": "1 h"}).gtid_wait_timeout == 3600
    with caplog.at_level(logging.WARNING, logger="cdc_mysql"):
        assert options(**{"connect.timeout": "500ms"}).connect_timeout == 1
        assert options(**{"scan.snapshot.gtid-wait.timeout": "2.5s"}).gtid_wait_timeout == 3
    assert "rounded up to 1 s" in caplog.text and "rounded up to 3 s" in caplog.text
    assert "must be a duration above zero" in refused(**{"connect.timeout": "0s"})


# -- server-id --------------------------------------------------------------------------


def test_mode_snapshots_keys_the_single_id_rule():
    assert mode_snapshots("initial") and mode_snapshots("snapshot")
    for mode in ("latest-offset", "earliest-offset", "specific-offset", "timestamp"):
        assert not mode_snapshots(mode)


def test_single_server_id_is_accepted_for_one_binlog_task_without_snapshot():
    parsed = options(**{"server-id": "5400", "scan.startup.mode": "latest-offset"})
    assert (parsed.server_ids.first, parsed.server_ids.size) == (5400, 1)


def test_single_server_id_is_refused_with_the_reason():
    message = refused(**{"server-id": "5400"})  # initial: snapshots
    assert "'initial' snapshots the tables" in message and "'5400-5408'" in message
    message = refused(
        **{
            "server-id": "5400",
            "scan.startup.mode": "latest-offset",
            "scan.binlog.parallelism": "2",
        }
    )
    assert "scan.binlog.parallelism is 2" in message


# -- server-time-zone -------------------------------------------------------------------


@pytest.mark.parametrize("zone", ["UTC", "utc", "Etc/UTC", "+00:00", "Z", "GMT"])
def test_utc_time_zones_are_accepted(zone):
    options(**{"server-time-zone": zone})


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "Europe/Berlin", "+08:00"])
def test_other_time_zones_are_refused_with_the_reason(zone):
    message = refused(**{"server-time-zone": zone})
    assert "only UTC is accepted" in message
    assert "exact instant" in message and "spark.sql.session.timeZone" in message


# -- metadata.list ----------------------------------------------------------------------


def test_metadata_list_keeps_the_order_given():
    parsed = options(**{"metadata.list": " op_ts, table_name ,GTID"})
    assert parsed.metadata == ("op_ts", "table_name", "gtid")
    assert options().metadata == ()
    assert options(**{"metadata.list": ",".join(METADATA_NAMES)}).metadata == METADATA_NAMES


def test_unknown_metadata_names_list_the_valid_ones():
    message = refused(**{"metadata.list": "op_ts,binlog_offset"})
    assert "'binlog_offset'" in message
    for name in METADATA_NAMES:
        assert name in message
    assert "more than once" in refused(**{"metadata.list": "gtid,op_ts,gtid"})
