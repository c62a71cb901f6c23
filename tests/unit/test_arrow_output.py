"""Arrow output: the columnar snapshot path agrees with the per-value path, batches are
bounded and complete, and the schema is exactly the one Spark expects."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pyspark.sql.pandas.types import to_arrow_schema

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.keys import time_literal
from cdc_source.output_schema import output_schema
from cdc_source.types import canonical_value, snapshot_converter
from reader.arrow_output import ArrowWriter, Emitted


def _col(name, data_type, column_type, **kw) -> ColumnSpec:
    return ColumnSpec(name, data_type, column_type, True, **kw)


COLUMNS = (
    _col("id", "int", "int(11)"),
    _col("flag", "tinyint", "tinyint(1)"),
    _col("small", "tinyint", "tinyint(4)"),
    _col("big", "bigint", "bigint(20) unsigned"),
    _col("amount", "decimal", "decimal(10,2)", precision=10, scale=2),
    _col("huge", "decimal", "decimal(65,4)", precision=65, scale=4),
    _col("f", "float", "float"),
    _col(
        "name",
        "varchar",
        "varchar(10)",
        char_length=10,
        charset="utf8mb4",
        collation="utf8mb4_general_ci",
    ),
    _col("bn", "binary", "binary(4)", octet_length=4),
    _col("bits", "bit", "bit(10)"),
    _col("day", "date", "date"),
    _col("at", "datetime", "datetime(6)", fsp=6),
    _col("ts", "timestamp", "timestamp", fsp=0),
    _col("t", "time", "time(6)", fsp=6),
    _col("yr", "year", "year(4)"),
    _col("st", "set", "set('a','b')"),
)
TABLE = TableSchema("db", "t", COLUMNS, ("id",))

RECORD = (
    7,
    1,
    -3,
    18446744073709551615,
    Decimal("12.50"),
    Decimal("-1.2345"),
    0.10000000149011612,
    "Grüße",
    b"ab\0\0",
    b"\x02\xaa",
    dt.date(2024, 2, 29),
    dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    "0000-00-00 00:00:00",
    dt.timedelta(hours=-1, microseconds=5),
    0,
    "a,b",
)
NULLS = (8,) + (None,) * (len(COLUMNS) - 1)


def test_columnar_snapshot_conversion_equals_the_per_value_conversion():
    for position, column in enumerate(COLUMNS):
        values = [RECORD[position], NULLS[position]]
        converter = snapshot_converter(column)
        columnar = list(values) if converter is None else converter(values)
        assert columnar == [canonical_value(column, v) for v in values], column.name


def test_snapshot_batch_schema_is_exactly_sparks_and_values_round_trip():
    writer = ArrowWriter([TABLE])
    (batch,) = writer.snapshot_batches(TABLE, [RECORD, NULLS], ["s1", "s2"], 99)
    assert batch.schema == to_arrow_schema(output_schema([TABLE]), timezone="UTC")
    row = batch.to_pylist()[0]
    assert row["flag"] is True and row["big"] == Decimal(18446744073709551615)
    assert row["huge"] == "-1.2345" and row["bn"] == b"ab\0\0" and row["ts"] is None
    assert row["t"] == -3599999995 and row["_op"] == "r" and row["_ts_ms"] == 99
    per_row = next(
        ArrowWriter([TABLE]).batches(
            [Emitted(TABLE, "r", None, dict(zip(TABLE.column_names, RECORD)), "s1", 99)]
        )
    )
    assert per_row.to_pylist()[0] == row


def test_envelope_snapshot_batches_keep_every_row_and_stay_bounded():
    other = TableSchema("db", "u", (COLUMNS[0],), ("id",))
    writer = ArrowWriter([TABLE, other], rows_per_batch=10)
    records = [(i,) + NULLS[1:] for i in range(25)]
    batches = list(writer.snapshot_batches(TABLE, records, [f"{i:03d}" for i in range(25)], 1))
    assert [b.num_rows for b in batches] == [10, 10, 5]
    assert all(
        b.schema == to_arrow_schema(output_schema([TABLE, other]), timezone="UTC") for b in batches
    )


def test_typed_delete_carries_the_before_image():
    writer = ArrowWriter([TABLE])
    before = dict(zip(TABLE.column_names, RECORD))
    (batch,) = writer.batches([Emitted(TABLE, "d", before, None, "s", 1)])
    row = batch.to_pylist()[0]
    assert row["_op"] == "d" and row["id"] == 7 and row["name"] == "Grüße"


def _text_form(value):
    """How the server prints a value in the text protocol (what mysqlclient hands over)."""
    if value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dt.timedelta):
        return time_literal(value // dt.timedelta(microseconds=1)).encode()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ").encode()
    return str(value).encode()


def test_text_records_give_the_same_batch_as_parsed_records():
    """mysqlclient's unconverted text, cast by Arrow, equals PyMySQL's parsed values."""
    text_record = tuple(_text_form(v) for v in RECORD)
    text_nulls = tuple(_text_form(v) for v in NULLS)
    parsed = next(ArrowWriter([TABLE]).snapshot_batches(TABLE, [RECORD, NULLS], ["a", "b"], 5))
    text = next(
        ArrowWriter([TABLE]).snapshot_batches(
            TABLE, [text_record, text_nulls], ["a", "b"], 5, text=True
        )
    )
    assert text.to_pylist() == parsed.to_pylist()
    assert text.schema == parsed.schema
