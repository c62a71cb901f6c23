"""Arrow output: the columnar snapshot path agrees with the per-value path, batches are
bounded and complete, and the schema is exactly the one Spark expects."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.keys import time_literal
from cdc_source.offsets import BinlogPosition
from cdc_source.output_schema import output_schema
from cdc_source.types import canonical_value
from reader.arrow_output import ArrowWriter, Emitted, _constant
from reader.text_columns import text_column_to_arrow, text_to_python


def _col(name, data_type, column_type, **kw) -> ColumnSpec:
    return ColumnSpec(name, data_type, column_type, True, **kw)


COLUMNS = (
    _col("id", "int", "int(11)"),
    _col("flag", "tinyint", "tinyint(1)", boolean=True),
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


def _text_columns(records: list[tuple]) -> list[pa.Array]:
    """Records as a snapshot client hands them over: one binary column of text each."""
    return [
        pa.array([_text_form(v) for v in values], pa.binary())
        for values in zip(*records, strict=True)
    ]


def test_snapshot_text_batch_has_sparks_schema_and_equals_the_per_value_path():
    """The server's text, cast by Arrow column by column, equals the values parsed one by
    one (PyMySQL's converters) and canonicalized: the path binlog images take."""
    writer = ArrowWriter([TABLE])
    seqs = pa.array(["s1", "s2"])
    (batch,) = writer.snapshot_text_batches(TABLE, _text_columns([RECORD, NULLS]), seqs, 99)
    assert batch.schema == to_arrow_schema(output_schema([TABLE]), timezone="UTC")
    row = batch.to_pylist()[0]
    assert row["flag"] is True and row["big"] == Decimal(18446744073709551615)
    assert row["huge"] == "-1.2345" and row["bn"] == b"ab\0\0" and row["ts"] is None
    assert row["t"] == -3599999995 and row["_op"] == "r" and row["_ts_ms"] == 99
    per_row = next(
        ArrowWriter([TABLE]).batches(
            [
                Emitted(TABLE, "r", None, dict(zip(TABLE.column_names, record)), seq, 99)
                for record, seq in ((RECORD, "s1"), (NULLS, "s2"))
            ]
        )
    )
    assert per_row.to_pylist() == batch.to_pylist()


def test_envelope_snapshot_batches_keep_every_row_and_stay_bounded():
    other = TableSchema("db", "u", (COLUMNS[0],), ("id",))
    writer = ArrowWriter([TABLE, other], rows_per_batch=10)
    records = [(i,) + NULLS[1:] for i in range(25)]
    seqs = pa.array([f"{i:03d}" for i in range(25)])
    target = BinlogPosition("binlog.000002", 4321, "", 1)
    batches = list(
        writer.snapshot_text_batches(
            TABLE, _text_columns(records), seqs, 1, target, pa.nulls(25, pa.binary())
        )
    )
    assert [b.num_rows for b in batches] == [10, 10, 5]
    assert all(
        b.schema == to_arrow_schema(output_schema([TABLE, other]), timezone="UTC") for b in batches
    )
    assert [r["_seq"] for b in batches for r in b.to_pylist()] == seqs.to_pylist()


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


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.none() | st.integers(-(838 * 3600 + 3599) * 10**6 - 999_999, 838 * 3600 * 10**6),
        max_size=20,
    ),
    st.integers(0, 6),
)
def test_time_text_cast_on_columns_equals_the_per_value_parse(micros, fsp):
    """TIME takes a regular-expression cast on columns; the values equal PyMySQL's parse."""
    column = _col("t", "time", f"time({fsp})", fsp=fsp)
    texts = [None if m is None else _time_text(m, fsp) for m in micros]
    array = pa.array(texts, pa.binary())
    expected = [canonical_value(column, text_to_python(column, t)) for t in texts]
    assert text_column_to_arrow(column, array, pa.int64()).to_pylist() == expected


def _time_text(micros: int, fsp: int) -> bytes:
    sign = "-" if micros < 0 else ""
    whole, fraction = divmod(abs(micros), 1_000_000)
    minutes, second = divmod(whole, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{sign}{hour:02d}:{minute:02d}:{second:02d}"
    return (text + (f".{fraction:06d}"[: fsp + 1] if fsp else "")).encode()


@settings(max_examples=100, deadline=None)
@given(st.none() | st.text(max_size=70), st.integers(0, 3000))
def test_a_constant_column_equals_arrows_fill_of_the_value(value, count):
    import pyarrow.compute as pc

    scalar = pa.scalar(value, pa.string())
    built = _constant(scalar, count)
    built.validate(full=True)
    assert built.equals(pc.fill_null(pa.nulls(count, pa.string()), scalar))
    number = pa.scalar(count, pa.int64())
    assert _constant(number, count).to_pylist() == [count] * count
