"""Sort keys (cdc_source/keys.py) are order-preserving and prefix-free (docs/design.md,
'Key order').

Comparing two sort keys as bytes must compare the key values the way the server's
``ORDER BY`` on the primary key does; for composite keys, lexicographically by column.
Each component must be prefix-free, or a short first column would compare against the
start of the next one.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.keys import (
    KeyTypeError,
    encode_component,
    key_from_json,
    key_to_json,
    sort_key,
)

SETTINGS = settings(max_examples=200, deadline=None)


def cmp(a, b) -> int:
    return (a > b) - (a < b)


def col(name: str, data_type: str, column_type: str | None = None, **kw) -> ColumnSpec:
    return ColumnSpec(name, data_type, column_type or data_type, False, **kw)


def schema(*columns: ColumnSpec) -> TableSchema:
    return TableSchema("db", "t", tuple(columns), tuple(c.name for c in columns))


BIGINT = col("i", "bigint", "bigint(20)")
UBIGINT = col("u", "bigint", "bigint(20) unsigned")
INT = col("n", "int", "int(11)")
DEC_10_2 = col("d", "decimal", "decimal(10,2)", precision=10, scale=2)
DEC_65_30 = col("d", "decimal", "decimal(65,30)", precision=65, scale=30)
DEC_5_0 = col("d", "decimal", "decimal(5,0)", precision=5, scale=0)
DATE = col("dt", "date")
DATETIME6 = col("ts", "datetime", "datetime(6)", fsp=6)
TIME6 = col("tm", "time", "time(6)", fsp=6)
VARBINARY = col("b", "varbinary", "varbinary(16)", octet_length=16)
BINARY4 = col("b", "binary", "binary(4)", octet_length=4)
VARCHAR_CI = col(
    "s",
    "varchar",
    "varchar(8)",
    char_length=8,
    octet_length=32,
    charset="utf8mb4",
    collation="utf8mb4_general_ci",
)

signed_bigints = st.integers(-(2**63), 2**63 - 1)
unsigned_bigints = st.integers(0, 2**64 - 1)
# Small alphabets make shared prefixes, embedded zero bytes and 0xFF bytes common.
byte_strings = st.one_of(
    st.binary(max_size=6),
    st.lists(st.sampled_from([0x00, 0x01, 0xFF, 0x61]), max_size=5).map(bytes),
)
times = st.timedeltas(
    min_value=-dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999),
    max_value=dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999),
)


def decimals(precision: int, scale: int):
    bound = 10**precision - 1
    return st.integers(-bound, bound).map(lambda units: Decimal(units).scaleb(-scale))


def assert_order_and_prefix_free(column: ColumnSpec, a, b, order=None) -> None:
    ea, eb = encode_component(column, a), encode_component(column, b)
    expected = cmp(a, b) if order is None else cmp(order(a), order(b))
    assert cmp(ea, eb) == expected, (a, b, ea, eb)
    if expected != 0:
        assert not ea.startswith(eb) and not eb.startswith(ea), (a, b, ea, eb)
    else:
        assert ea == eb


# -- single columns ----------------------------------------------------------------------


@SETTINGS
@example(-(2**63), 2**63 - 1)
@example(-1, 0)
@given(signed_bigints, signed_bigints)
def test_signed_bigint(a, b):
    assert_order_and_prefix_free(BIGINT, a, b)


@SETTINGS
@example(0, 2**64 - 1)
@example(2**63 - 1, 2**63)
@given(unsigned_bigints, unsigned_bigints)
def test_unsigned_bigint(a, b):
    assert_order_and_prefix_free(UBIGINT, a, b)


@SETTINGS
@given(st.sampled_from([DEC_10_2, DEC_65_30, DEC_5_0]), st.data())
def test_decimal(column, data):
    values = decimals(column.precision, column.scale)
    assert_order_and_prefix_free(column, data.draw(values), data.draw(values))


def test_decimal_keys_that_differ_past_the_28th_digit_stay_apart_and_in_order():
    """Python's default decimal context keeps 28 digits; DECIMAL keys have up to 65."""
    low = Decimal("12345678901234567890123456789012345.123456789012345678901234567890")
    high = Decimal("12345678901234567890123456789012345.123456789012345678901234567891")
    assert encode_component(DEC_65_30, low) < encode_component(DEC_65_30, high)
    assert encode_component(DEC_65_30, high.copy_negate()) < encode_component(
        DEC_65_30, low.copy_negate()
    )


def test_decimal_equal_values_encode_equal():
    assert encode_component(DEC_10_2, Decimal("1.5")) == encode_component(DEC_10_2, Decimal("1.50"))
    assert encode_component(DEC_10_2, Decimal("-0.00")) == encode_component(DEC_10_2, Decimal(0))
    top = Decimal("9" * 35 + "." + "9" * 30)
    assert encode_component(DEC_65_30, -top) < encode_component(DEC_65_30, top)


@SETTINGS
@given(st.dates(), st.dates())
def test_date(a, b):
    assert_order_and_prefix_free(DATE, a, b)


@SETTINGS
@example(dt.datetime(2024, 1, 1, 0, 0, 0, 1), dt.datetime(2024, 1, 1, 0, 0, 0, 0))
@example(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999))
@given(st.datetimes(), st.datetimes())
def test_datetime_with_microseconds(a, b):
    assert_order_and_prefix_free(DATETIME6, a, b)


@SETTINGS
@example(dt.timedelta(microseconds=-1), dt.timedelta(0))
@example(-dt.timedelta(hours=838, minutes=59, seconds=59), dt.timedelta(hours=838))
@example(-dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=500000), -dt.timedelta(hours=1))
@given(times, times)
def test_time_including_negative(a, b):
    assert_order_and_prefix_free(TIME6, a, b)


@SETTINGS
@example(b"a", b"a\x00")
@example(b"a\x00", b"a\x01")
@example(b"a\x00\x00", b"a\x00")
@example(b"", b"\x00")
@example(b"a\xff", b"a\x00\xff")
@given(byte_strings, byte_strings)
def test_varbinary_with_zero_bytes_and_prefixes(a, b):
    assert_order_and_prefix_free(VARBINARY, a, b)


def pad4(value: bytes) -> bytes:
    return value.ljust(4, b"\x00")


def test_binary_padding_equivalence():
    assert encode_component(BINARY4, b"a") == encode_component(BINARY4, b"a\x00\x00\x00")
    assert encode_component(BINARY4, b"") == encode_component(BINARY4, b"\x00\x00\x00\x00")
    assert encode_component(BINARY4, b"a") < encode_component(BINARY4, b"a\x00\x00\x01")


@SETTINGS
@given(
    st.lists(st.sampled_from([0x00, 0x01, 0x61, 0xFF]), max_size=4).map(bytes),
    st.lists(st.sampled_from([0x00, 0x01, 0x61, 0xFF]), max_size=4).map(bytes),
)
def test_binary_compares_padded_values(a, b):
    assert_order_and_prefix_free(BINARY4, a, b, order=pad4)


# -- composite keys ----------------------------------------------------------------------

INT_BYTES = schema(BIGINT, VARBINARY)
BYTES_INT = schema(VARBINARY, BIGINT)
BYTES_BYTES = schema(VARBINARY, col("b2", "varbinary", "varbinary(16)", octet_length=16))
BINARY_INT = schema(BINARY4, INT)
small_ints = st.integers(-3, 3) | signed_bigints


def assert_tuple_order(table: TableSchema, a: tuple, b: tuple, order=lambda t: t) -> None:
    sa, sb = sort_key(table, a), sort_key(table, b)
    assert cmp(sa, sb) == cmp(order(a), order(b)), (a, b, sa, sb)


@SETTINGS
@given(st.tuples(small_ints, byte_strings), st.tuples(small_ints, byte_strings))
def test_composite_int_bytes(a, b):
    assert_tuple_order(INT_BYTES, a, b)


@SETTINGS
@example((b"a", 2), (b"a\x00", 1))
@example((b"a", 2**63 - 1), (b"a\x00", -(2**63)))
@example((b"", 5), (b"\x00", -5))
@given(st.tuples(byte_strings, small_ints), st.tuples(byte_strings, small_ints))
def test_composite_bytes_int(a, b):
    assert_tuple_order(BYTES_INT, a, b)


@SETTINGS
@example((b"a", b"\xff"), (b"a\x00", b""))
@example((b"a\x00", b"b"), (b"a", b"\x00b"))
@given(st.tuples(byte_strings, byte_strings), st.tuples(byte_strings, byte_strings))
def test_composite_bytes_bytes(a, b):
    assert_tuple_order(BYTES_BYTES, a, b)


@SETTINGS
@given(
    st.tuples(st.lists(st.sampled_from([0, 1, 0x61]), max_size=4).map(bytes), st.integers(-2, 2)),
    st.tuples(st.lists(st.sampled_from([0, 1, 0x61]), max_size=4).map(bytes), st.integers(-2, 2)),
)
def test_composite_binary_padded_then_int(a, b):
    assert_tuple_order(BINARY_INT, a, b, order=lambda t: (pad4(t[0]), t[1]))


# -- collated strings: the order is the server's weight order, injected here -----------


def ci_weight(column: ColumnSpec, value: str) -> bytes:
    """A stand-in for WEIGHT_STRING under a case-insensitive PAD SPACE collation: two
    big-endian bytes per character (so weights are full of 0x00 bytes), trailing spaces
    ignored, case folded."""
    assert column is VARCHAR_CI or column.collation == VARCHAR_CI.collation
    return value.rstrip(" ").upper().encode("utf-16-be")


STR_INT = schema(VARCHAR_CI, INT)
INT_STR = schema(INT, VARCHAR_CI)
STR_STR = schema(
    VARCHAR_CI,
    col(
        "s2",
        "varchar",
        "varchar(8)",
        char_length=8,
        charset="utf8mb4",
        collation="utf8mb4_general_ci",
    ),
)
texts = st.text(alphabet="aAb \x00\x01\u0100\u4100", max_size=4)


def by_weight(t: tuple) -> tuple:
    return tuple(ci_weight(VARCHAR_CI, v) if isinstance(v, str) else v for v in t)


def assert_weighted_order(table: TableSchema, a: tuple, b: tuple) -> None:
    sa, sb = sort_key(table, a, ci_weight), sort_key(table, b, ci_weight)
    assert cmp(sa, sb) == cmp(by_weight(a), by_weight(b)), (a, b, sa, sb)


def test_collated_prefix_cases():
    # The weight of "a" (00 41) is a prefix of the weight of "a\x01" (00 41 00 01).
    assert sort_key(STR_INT, ("a", 2), ci_weight) < sort_key(STR_INT, ("a\x01", 1), ci_weight)
    assert sort_key(STR_INT, ("a\x00", 1), ci_weight) > sort_key(STR_INT, ("a", 9), ci_weight)
    # "\u4100" weighs 41 00: one byte off "a" followed by a zero byte.
    assert sort_key(STR_INT, ("\u4100", 0), ci_weight) > sort_key(STR_INT, ("a", 5), ci_weight)
    # Equal under the collation: same key bytes.
    assert sort_key(STR_INT, ("a ", 1), ci_weight) == sort_key(STR_INT, ("A", 1), ci_weight)
    assert sort_key(STR_STR, ("a", "b"), ci_weight) < sort_key(STR_STR, ("a\x00", ""), ci_weight)


@SETTINGS
@given(st.tuples(texts, st.integers(-2, 2)), st.tuples(texts, st.integers(-2, 2)))
def test_composite_collated_string_int(a, b):
    assert_weighted_order(STR_INT, a, b)


@SETTINGS
@given(st.tuples(st.integers(-2, 2), texts), st.tuples(st.integers(-2, 2), texts))
def test_composite_int_collated_string(a, b):
    assert_weighted_order(INT_STR, a, b)


@SETTINGS
@given(st.tuples(texts, texts), st.tuples(texts, texts))
def test_composite_two_collated_strings(a, b):
    assert_weighted_order(STR_STR, a, b)


def test_collated_string_without_weight_is_an_error():
    with pytest.raises(KeyTypeError, match="collation weight"):
        encode_component(VARCHAR_CI, "a")
    with pytest.raises(KeyTypeError):
        sort_key(STR_INT, ("a", 1))


# -- JSON form of keys in offsets --------------------------------------------------------

ROUND_TRIP_CASES = [
    (BIGINT, signed_bigints),
    (UBIGINT, unsigned_bigints),
    (DEC_10_2, decimals(10, 2)),
    (DEC_65_30, decimals(65, 30)),
    (DATE, st.dates()),
    (DATETIME6, st.datetimes()),
    (TIME6, times),
    (VARBINARY, byte_strings),
    (BINARY4, st.binary(min_size=4, max_size=4)),
    (VARCHAR_CI, st.text(max_size=8)),
]


@SETTINGS
@given(st.data())
def test_key_json_round_trip_each_type(data):
    column, values = data.draw(st.sampled_from(ROUND_TRIP_CASES))
    table = schema(column)
    key = (data.draw(values),)
    encoded = key_to_json(table, key)
    # It survives the offset's JSON text exactly.
    assert json.loads(json.dumps(encoded)) == encoded
    back = key_from_json(table, json.loads(json.dumps(encoded)))
    if column is TIME6:
        # TIME comes back as SQL text (PyMySQL mis-spells negative timedeltas); the same key.
        assert isinstance(back[0], str)
    else:
        assert back == key
        assert type(back[0]) is type(key[0])
    if column is not VARCHAR_CI:
        assert sort_key(table, back) == sort_key(table, key)


@SETTINGS
@given(st.tuples(signed_bigints, byte_strings, decimals(10, 2), times, st.datetimes(), st.text()))
def test_composite_key_json_round_trip(key):
    table = schema(
        BIGINT,
        VARBINARY,
        DEC_10_2,
        TIME6,
        DATETIME6,
        col("s", "varchar", "varchar(8)", charset="utf8mb4", collation="utf8mb4_bin"),
    )
    back = key_from_json(table, json.loads(json.dumps(key_to_json(table, key))))
    assert back[:3] + back[4:] == key[:3] + key[4:]
    weights = lambda column, value: value.encode()  # noqa: E731 - utf8mb4_bin stand-in
    assert sort_key(table, back, weights) == sort_key(table, key, weights)
