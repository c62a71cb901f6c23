"""Key bytes and ``_seq`` computed on columns (reader/key_columns.py) equal the per-row
encoding (cdc_source/keys.py) byte for byte: a differential test over every key type,
from the text the server sends for it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.keys import sort_key
from cdc_source.sequence import snapshot_seq
from reader import native_columns
from reader.key_columns import hex_column, snapshot_seq_column, sort_key_reader
from reader.text_columns import text_to_python

SETTINGS = settings(max_examples=150, deadline=None)


def col(name: str, data_type: str, column_type: str | None = None, **kw) -> ColumnSpec:
    return ColumnSpec(name, data_type, column_type or data_type, False, **kw)


def _datetime_text(value: dt.datetime, fsp: int) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{value.microsecond:06d}"[: fsp + 1] if fsp else "")


def _time_text(micros: int) -> str:
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{sign}{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}"


# (column, strategy of the server's text for a value of it)
KEY_KINDS = {
    "int": (col("k", "int"), st.integers(-(2**31), 2**31 - 1).map(str)),
    "tinyint": (col("k", "tinyint"), st.integers(-128, 127).map(str)),
    "bigint": (col("k", "bigint"), st.integers(-(2**63), 2**63 - 1).map(str)),
    "bigint unsigned": (
        col("k", "bigint", "bigint(20) unsigned"),
        st.integers(0, 2**64 - 1).map(str),
    ),
    "year": (col("k", "year"), st.sampled_from(["0000", "1901", "1999", "2155"])),
    "decimal(12,2)": (
        col("k", "decimal", "decimal(12,2)", precision=12, scale=2),
        st.decimals(min_value=-(10**10) + 1, max_value=10**10 - 1, places=2).map(
            lambda d: f"{d:.2f}"
        ),
    ),
    "decimal(38,10)": (
        col("k", "decimal", "decimal(38,10)", precision=38, scale=10),
        st.integers(-(10**38) + 1, 10**38 - 1).map(lambda u: f"{Decimal(u).scaleb(-10):.10f}"),
    ),
    "decimal(50,5)": (  # beyond decimal128: row by row
        col("k", "decimal", "decimal(50,5)", precision=50, scale=5),
        st.integers(-(10**50) + 1, 10**50 - 1).map(lambda u: f"{Decimal(u).scaleb(-5):.5f}"),
    ),
    "date": (
        col("k", "date"),
        st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)).map(lambda d: d.isoformat()),
    ),
    "datetime(6)": (
        col("k", "datetime", "datetime(6)", fsp=6),
        st.datetimes(dt.datetime(1000, 1, 1)).map(lambda d: _datetime_text(d, 6)),
    ),
    "timestamp": (
        col("k", "timestamp"),
        st.datetimes(dt.datetime(1970, 1, 2), dt.datetime(2038, 1, 1)).map(
            lambda d: _datetime_text(d.replace(microsecond=0), 0)
        ),
    ),
    "time": (
        col("k", "time", "time(6)", fsp=6),
        st.integers(-838 * 3600 * 10**6, 838 * 3600 * 10**6).map(_time_text),
    ),
    "varbinary": (col("k", "varbinary", "varbinary(20)"), st.binary(max_size=20)),
    "binary(4)": (col("k", "binary", "binary(4)", octet_length=4), st.binary(max_size=4)),
    "varchar bin": (
        col("k", "varchar", "varchar(20)", collation=None),
        st.text(max_size=10).map(lambda s: s.replace("\x00", "")),
    ),
}


def _text_array(values: list) -> pa.Array:
    return pa.array([v.encode() if isinstance(v, str) else v for v in values], pa.binary())


@SETTINGS
@given(st.data())
def test_columnar_keys_equal_per_row_keys_for_every_key_type(data):
    kind = data.draw(st.sampled_from(sorted(KEY_KINDS)))
    column, texts = KEY_KINDS[kind]
    values = data.draw(st.lists(texts, min_size=1, max_size=30))
    native = data.draw(st.booleans()) and native_columns.native_available()
    schema = TableSchema("db", "t", (column,), (column.name,))
    keys = sort_key_reader(schema, native=native)([_text_array(values)])
    expected = [sort_key(schema, (text_to_python(column, v),)) for v in values]
    assert keys.to_pylist() == expected


def _outcome(call) -> tuple:
    try:
        return ("keys", call().to_pylist())
    except Exception as err:  # noqa: BLE001 - the two sides must fail alike
        return (type(err).__name__, str(err))


@SETTINGS
@given(
    st.sampled_from(["int", "bigint", "bigint unsigned", "tinyint"]),
    st.lists(
        st.none()
        | st.integers(-(2**65), 2**65).map(str)
        | st.text(alphabet="+-0123456789 ", max_size=22),
        min_size=1,
        max_size=20,
    ),
)
def test_integer_keys_the_c_declines_are_encoded_as_without_it(kind, values):
    """A NULL, text of another shape or a value past 64 bits: the C declines the fetch,
    and the keys (or the error) are those of the path without it."""
    column, _ = KEY_KINDS[kind]
    schema = TableSchema("db", "t", (column,), (column.name,))
    text = [_text_array(values)]
    native = _outcome(lambda: sort_key_reader(schema, native=True)(text))
    assert native == _outcome(lambda: sort_key_reader(schema, native=False)(text))


@SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=12), st.binary(max_size=8)),
        min_size=1,
        max_size=30,
    )
)
def test_composite_keys_with_collation_weights_join_their_components(rows):
    """A composite key (int, collated varchar, varbinary): the weight column follows the
    table's columns, as the SELECT lists it."""
    columns = (
        col("a", "int"),
        col("b", "varchar", "varchar(10)", collation="utf8mb4_general_ci", char_length=10),
        col("c", "varbinary", "varbinary(8)"),
        col("payload", "json"),
    )
    schema = TableSchema("db", "t", columns, ("a", "b", "c"))
    weights = {f"w{i}": weight for i, (_, weight, _) in enumerate(rows)}
    fetched = [
        _text_array([str(a) for a, _, _ in rows]),
        _text_array([f"w{i}" for i in range(len(rows))]),
        _text_array([c for _, _, c in rows]),
        _text_array(["{}"] * len(rows)),
        _text_array([weight for _, weight, _ in rows]),  # WEIGHT_STRING(b)
    ]
    keys = sort_key_reader(schema)(fetched)
    expected = [
        sort_key(schema, (a, f"w{i}", c), lambda column, value: weights[value])
        for i, (a, _, c) in enumerate(rows)
    ]
    assert keys.to_pylist() == expected


@given(st.lists(st.binary(max_size=40), max_size=50), st.integers(0, 5))
def test_hex_column_is_bytes_hex_even_for_a_sliced_array(values, skip):
    array = pa.array(values, pa.binary()).slice(min(skip, len(values)))
    assert hex_column(array).to_pylist() == [v.hex() for v in values[skip:]]


@given(st.lists(st.binary(min_size=1, max_size=20), min_size=1, max_size=20))
def test_snapshot_seq_column_is_snapshot_seq_per_row(keys):
    prefix_parts = (7, 123456, 3)
    from cdc_source.sequence import snapshot_seq_prefix

    column = snapshot_seq_column(snapshot_seq_prefix(*prefix_parts), pa.array(keys, pa.binary()))
    assert column.to_pylist() == [snapshot_seq(*prefix_parts, k) for k in keys]
