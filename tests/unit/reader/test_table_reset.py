"""Table resets (``t`` rows, scan.on-binlog-purged=resnapshot): their output in typed
and envelope form, the ``_seq`` order around them, and the option."""

from __future__ import annotations

import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.offsets import BinlogPosition
from cdc_source.options import OptionError, parse_options
from cdc_source.partitions import TableResetTask
from cdc_source.sequence import binlog_seq, snapshot_seq
from reader.arrow_output import ArrowWriter
from reader.task_runner import table_resets

ORDERS = TableSchema(
    "shop",
    "orders",
    (ColumnSpec("id", "int", "int(11)", False), ColumnSpec("v", "int", "int", True)),
    ("id",),
)
ITEMS = TableSchema("shop", "items", (ColumnSpec("k", "int", "int(11)", False),), ("k",))
RESET_AT = BinlogPosition("binlog.000003", 1234, ts=1_700_000_000_000, epoch=1)


def test_a_typed_reset_row_has_every_column_null_and_op_t():
    (batch,) = table_resets(TableResetTask((ORDERS,), (0,), RESET_AT), ArrowWriter([ORDERS]))
    (row,) = batch.to_pylist()
    assert row["id"] is None and row["v"] is None
    assert row["_op"] == "t" and row["_ts_ms"] == RESET_AT.ts


def test_envelope_resets_name_each_table_with_an_empty_key():
    writer = ArrowWriter([ITEMS, ORDERS])
    (batch,) = table_resets(TableResetTask((ITEMS, ORDERS), (0, 1), RESET_AT), writer)
    rows = batch.to_pylist()
    assert [(r["table"], r["op"], r["key"], r["before"], r["after"]) for r in rows] == [
        ("items", "t", "{}", None, None),
        ("orders", "t", "{}", None, None),
    ]


def test_a_reset_sorts_after_every_earlier_row_and_before_the_new_snapshot_and_stream():
    (batch,) = table_resets(TableResetTask((ORDERS,), (0,), RESET_AT), ArrowWriter([ORDERS]))
    (seq,) = batch.column("_seq").to_pylist()
    # An earlier epoch's rows, whatever their file numbers (a reset server restarts them).
    earlier = [binlog_seq(999999, 10**11, 5), snapshot_seq(999999, 10**11, 0, b"\xff")]
    later = [
        snapshot_seq(3, 1234, 0, b"\x00", epoch=1),
        snapshot_seq(3, 1234, 1, b"", epoch=1),
        binlog_seq(3, 1235, 0, epoch=1),
    ]
    assert all(e < seq for e in earlier) and all(seq < x for x in later)


def _options(**extra):
    return {
        "hostname": "db",
        "username": "u",
        "database-name": "shop",
        "table-name": r"shop\.orders",
        **extra,
    }


def test_the_option_accepts_fail_and_resnapshot_only():
    assert parse_options(_options()).on_binlog_purged == "fail"
    assert parse_options(_options(**{"scan.on-binlog-purged": "resnapshot"})).on_binlog_purged == (
        "resnapshot"
    )
    with pytest.raises(OptionError, match="fail, resnapshot"):
        parse_options(_options(**{"scan.on-binlog-purged": "snapshot"}))
