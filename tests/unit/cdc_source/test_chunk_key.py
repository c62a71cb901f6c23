"""``scan.incremental.snapshot.chunk.key-column`` (cdc_source.chunk_key): both of Flink
CDC's spellings, which column each table gets, the unique-index rule, and that a table
keyed by it is not taken for a changed primary key (reader.schema_drift). The server-side
checks run against a real server in tests/integration/test_no_primary_key.py."""

from __future__ import annotations

import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.chunk_key import (
    ChunkKeyColumns,
    ChunkKeyRule,
    unique_indexes_of,
)
from cdc_source.options import OptionError, parse_chunk_key_columns, parse_options
from reader.schema_drift import changes, shape_changes
from tests.support.orders_events import ENC_ID, ENC_NAME
from tests.support.orders_events import parsed_table_map as _table_map

OPTION = "scan.incremental.snapshot.chunk.key-column"
BASE = {
    "hostname": "db.example.com",
    "username": "cdc",
    "password": "s3cret-Pa55",
    "database-name": "shop",
    "table-name": r"shop\..*",
}


def test_no_option_is_none():
    assert parse_options(BASE).chunk_keys is None
    assert parse_chunk_key_columns("  ") is None


def test_a_column_name_alone_applies_to_every_table():
    parsed = parse_options({**BASE, OPTION: "code"}).chunk_keys
    assert parsed == ChunkKeyColumns((ChunkKeyRule(None, "code"),))
    assert parsed.column_for("shop", "a") == "code"
    assert parsed.column_for("other", "b") == "code"


def test_flink_pipeline_form_per_table_with_trailing_semicolon():
    parsed = parse_chunk_key_columns(r"shop\.log_[0-9]+:seq; shop\.events:event_id;")
    assert parsed.rules == (
        ChunkKeyRule(r"shop\.log_[0-9]+", "seq"),
        ChunkKeyRule(r"shop\.events", "event_id"),
    )
    assert parsed.column_for("shop", "log_7") == "seq"
    assert parsed.column_for("shop", "events") == "event_id"
    assert parsed.column_for("shop", "orders") is None
    assert parsed.column_for("shop", "log_x") is None  # full match, as table-name


def test_two_entries_naming_different_columns_for_one_table_are_refused():
    parsed = parse_chunk_key_columns(r"shop\..*:a;shop\.t:b")
    with pytest.raises(ValueError, match=r"several columns for shop\.t \(a, b\)"):
        parsed.column_for("shop", "t")
    assert parsed.column_for("shop", "u") == "a"
    # the same column twice is no ambiguity
    assert parse_chunk_key_columns(r"shop\..*:a;shop\.t:a").column_for("shop", "t") == "a"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("a,b", "a single column name, or"),
        ("a;b", "a single column name, or"),
        (r"shop\.t:", "is not '<db.table regex>:<column>'"),
        (":col", "is not '<db.table regex>:<column>'"),
        ("shop\\.t:a;b", "entry 'b' is not"),
        ("shop(:a", "is not a valid regular expression"),
        (";;", "a single column name, or"),
        (":;", "is not '<db.table regex>:<column>'"),
    ],
)
def test_malformed_values_are_refused_naming_the_option(value, says):
    with pytest.raises(OptionError) as info:
        parse_options({**BASE, OPTION: value})
    message = str(info.value)
    assert message.startswith(f"option '{OPTION}'")
    assert says in message


def test_the_option_is_picklable_inside_the_options():
    import pickle

    parsed = parse_options({**BASE, OPTION: r"shop\.t:code"})
    assert pickle.loads(pickle.dumps(parsed)).chunk_keys == parsed.chunk_keys


# -- the unique-index rule, over rows of information_schema.STATISTICS -------------------


def test_a_unique_index_of_the_column_alone_qualifies():
    assert unique_indexes_of([("uk", "code", None)], "code") == ("uk",)
    assert unique_indexes_of([(b"uk", b"CODE", None)], "code") == ("uk",)  # any case


@pytest.mark.parametrize(
    "parts",
    [
        [],  # no unique index
        [("uk", "code", None), ("uk", "other", None)],  # composite: code alone may repeat
        [("uk", "code", 10)],  # a prefix index
        [("uk", "other", None)],
        [("fn", None, None)],  # a functional key part (MySQL 8)
    ],
)
def test_other_indexes_do_not(parts):
    assert unique_indexes_of(parts, "code") == ()


def test_one_good_index_among_others_is_enough():
    parts = [("a", "code", None), ("a", "x", None), ("b", "code", None), ("c", "code", None)]
    assert unique_indexes_of(parts, "code") == ("b", "c")


# -- a table keyed by its chunk key column is no schema change ---------------------------


def _keyed(declared: bool) -> TableSchema:
    columns = (
        ColumnSpec("id", "int", "int(11)", False),
        ColumnSpec("name", "varchar", "varchar(10)", True, collation="utf8mb4_general_ci"),
    )
    indexes = ("uk_id",) if declared else ()
    return TableSchema("shop", "orders", columns, ("id",), key_indexes=indexes)


def test_the_event_key_of_a_table_without_primary_key_is_no_change():
    schema = _keyed(declared=True)
    # no key in the event, the same column promoted, another unique column promoted
    assert changes(schema, _table_map([ENC_ID, ENC_NAME])) == []
    assert changes(schema, _table_map([ENC_ID, ENC_NAME], primary_key=[0])) == []
    assert changes(schema, _table_map([ENC_ID, ENC_NAME], primary_key=[1])) == []
    # a real primary key still is one
    found = changes(_keyed(declared=False), _table_map([ENC_ID, ENC_NAME], primary_key=[1]))
    assert found == ["primary key changed from (id) to (name)"]


def test_a_lost_unique_index_is_a_shape_change_that_says_so():
    schema = _keyed(declared=True)
    from dataclasses import replace

    assert shape_changes(schema, schema) == []
    found = shape_changes(schema, replace(schema, primary_key=()))
    assert found == [
        "the chunk key column id that stands in for the missing primary key is no longer "
        "NOT NULL with a UNIQUE index of its own"
    ]


# -- statements in the binlog that may break the key ---------------------------------------

KEYED = {"shop.events": ("code", ("uk_code",)), "other.t": ("c", ("u",))}


@pytest.mark.parametrize(
    "query",
    [
        "ALTER TABLE events DROP INDEX uk_code",
        "/* gh */ alter table `shop`.`events` drop key `UK_CODE`",
        "ALTER TABLE events ADD COLUMN x INT, DROP CONSTRAINT uk_code",
        "ALTER TABLE events RENAME INDEX uk_code TO uk_other",
        "ALTER TABLE events MODIFY code VARCHAR(30) NULL",
        "ALTER TABLE events MODIFY COLUMN `code` VARCHAR(30)",
        "ALTER TABLE events CHANGE code code2 VARCHAR(20) NOT NULL",
        "ALTER TABLE events RENAME COLUMN code TO c2",
        "ALTER TABLE events DROP COLUMN code",
        "ALTER TABLE events DROP code",
        "DROP INDEX uk_code ON events",
        "DROP INDEX u ON other.t",
    ],
)
def test_statements_dropping_the_index_or_changing_the_column_break_the_key(query):
    from cdc_source.chunk_key import key_breaking_target

    assert key_breaking_target(query, "shop", KEYED) in ("shop.events", "other.t")


@pytest.mark.parametrize(
    "query",
    [
        "ALTER TABLE events ADD COLUMN x INT",
        "ALTER TABLE events DROP INDEX uk_serial",
        "ALTER TABLE events DROP COLUMN codex",
        "ALTER TABLE events MODIFY n BIGINT",
        "ALTER TABLE events ADD PRIMARY KEY (serial)",
        "ALTER TABLE orders DROP INDEX uk_code",  # another table
        "DROP INDEX uk_code ON orders",
        "DROP INDEX other ON events",
        "INSERT INTO events VALUES (1)",
    ],
)
def test_other_statements_do_not(query):
    from cdc_source.chunk_key import key_breaking_target

    assert key_breaking_target(query, "shop", KEYED) is None


def test_a_statement_naming_the_table_in_another_case_breaks_the_key_under_lower_case_names():
    from cdc_source.chunk_key import key_breaking_target

    query = "ALTER TABLE Shop.Events DROP INDEX uk_code"
    assert key_breaking_target(query, "shop", KEYED) is None  # lower_case_table_names=0
    assert key_breaking_target(query, "Shop", KEYED, lower_case_names=True) == "shop.events"
