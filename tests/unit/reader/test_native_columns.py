"""The C builds of snapshot columns (reader/_textvalues.c through
reader/native_columns.py: TIME, DATE, DATETIME, TIMESTAMP, DECIMAL, BIGINT UNSIGNED and
``_seq``) against their pure-Python twins on Arrow's kernels: the same arrays, value for
value, on valid input of every shape the server prints and on text it never does; bad
buffers end in a ValueError."""

from __future__ import annotations

import array
import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.catalog import ColumnSpec
from reader import native_columns
from reader.key_columns import hex_column, snapshot_seq_column
from reader.text_columns import _fast_cast, _time_micros, text_column_to_arrow

pytestmark = pytest.mark.skipif(
    not native_columns.native_available(), reason="reader._textvalues is not built here"
)
SETTINGS = settings(max_examples=300, deadline=None)


def _twin_time(text: pa.Array) -> pa.Array | None:
    try:
        return _time_micros(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _server_time(micros: int, fsp: int) -> bytes:
    """TIME as the server prints it with ``fsp`` fractional digits."""
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{sign}{hour:02d}:{minute:02d}:{second:02d}"
    if fsp:
        text += "." + f"{fraction:06d}"[:fsp]
    return text.encode()


_MAX_TIME = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999
server_times = st.builds(
    _server_time, st.integers(-_MAX_TIME, _MAX_TIME), st.integers(0, 6)
) | st.sampled_from([b"00:00:00", b"-00:00:01", b"838:59:59.000000", b"-838:59:59"])
# Text of TIME's alphabet in any order: shapes the server never prints, which both sides
# must treat alike (the C declines what it does not take, and the twin decides).
time_like = st.text(alphabet="-0123456789:.", max_size=16).map(str.encode) | st.binary(max_size=12)


@SETTINGS
@given(st.lists(st.none() | server_times, max_size=60), st.integers(0, 5))
def test_every_time_the_server_prints_is_taken_by_the_c_and_equals_the_twin(values, skip):
    text = pa.array(values, pa.binary()).slice(min(skip, len(values)))
    built = native_columns.time_micros(text)
    assert built is not None
    assert built.equals(_time_micros(text))
    assert built.null_count == text.null_count


@SETTINGS
@given(st.lists(st.none() | time_like | server_times, max_size=12))
def test_time_text_of_other_shapes_is_left_to_the_twin_or_read_alike(values):
    text = pa.array(values, pa.binary())
    built = native_columns.time_micros(text)
    if built is not None:
        assert built.equals(_twin_time(text))


def test_a_time_the_c_declines_is_typed_by_the_twin_in_the_output():
    column = ColumnSpec("t", "time", "time(6)", True, fsp=6)
    hours = pa.array([b"1234567890:00:00", b"01:00:00"], pa.binary())  # ten digits of hours
    assert native_columns.time_micros(hours) is None
    assert text_column_to_arrow(column, hours, pa.int64(), native=True).equals(
        text_column_to_arrow(column, hours, pa.int64(), native=False)
    )


@SETTINGS
@given(st.lists(st.binary(max_size=40), max_size=50), st.integers(0, 5), st.text(max_size=30))
def test_seq_column_equals_the_twin_even_for_a_sliced_array(keys, skip, prefix):
    array_ = pa.array(keys, pa.binary()).slice(min(skip, len(keys)))
    built = snapshot_seq_column(prefix, array_, native=True)
    assert built.equals(snapshot_seq_column(prefix, array_, native=False))
    assert built.to_pylist() == [prefix + k.hex() for k in keys[skip:]]
    assert hex_column(array_).to_pylist() == [k.hex() for k in keys[skip:]]


def _offsets(*values: int) -> array.array:
    return array.array("i", values)


@pytest.mark.parametrize(
    "offsets, data, offset, length",
    [
        (_offsets(0, 4), b"abc", 0, 1),  # past the data
        (_offsets(0, 3, 2), b"abc", 0, 2),  # out of order
        (_offsets(-1, 2), b"abc", 0, 1),  # negative
        (_offsets(0, 2), b"abc", 0, 2),  # fewer offsets than values
        (_offsets(0, 2), b"abc", 1, 1),  # the slice passes the offsets
        (_offsets(0, 2), b"abc", -1, 1),
        (_offsets(0, 2), b"abc", 0, -1),
        (_offsets(0, 1), None, 0, 1),  # no data buffer, one byte said
    ],
)
def test_bad_buffers_are_a_value_error_on_both_entry_points(offsets, data, offset, length):
    from reader import _textvalues

    with pytest.raises(ValueError):
        _textvalues.time_micros(None, offsets, data, offset, length)
    with pytest.raises(ValueError):
        _textvalues.hex_seq(b"p", offsets, data, offset, length)


def test_a_short_validity_bitmap_and_unaligned_offsets_are_a_value_error():
    from reader import _textvalues

    with pytest.raises(ValueError):
        _textvalues.time_micros(b"", _offsets(*range(10)), b"x" * 9, 0, 9)
    unaligned = memoryview(bytes(12))[1:9]
    with pytest.raises(ValueError):
        _textvalues.hex_seq(b"p", unaligned, b"", 0, 1)


def _column(data_type: str, column_type: str, **kw) -> ColumnSpec:
    return ColumnSpec("c", data_type, column_type, True, **kw)


def _outcome(call) -> tuple:
    try:
        return ("array", call())
    except Exception as err:  # noqa: BLE001 - the two sides must fail alike
        return (type(err).__name__, str(err))


def _typed_alike(column: ColumnSpec, values: list, arrow_type: pa.DataType) -> None:
    """The output column, or the refusal, is the same with and without the C; where
    the C takes the column it equals Arrow's cast."""
    text = pa.array(values, pa.binary())
    native = _outcome(lambda: text_column_to_arrow(column, text, arrow_type, native=True))
    twin = _outcome(lambda: text_column_to_arrow(column, text, arrow_type, native=False))
    if native[0] == "array" and twin[0] == "array":
        assert native[1].equals(twin[1])
    else:
        assert native == twin
    try:
        cast = _fast_cast(column, text, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        cast = None
    if cast is not None and cast.type == arrow_type:
        assert native[1].equals(cast)


def _date_text(day: dt.date) -> bytes:
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}".encode()


def _datetime_text(moment: dt.datetime, fsp: int) -> bytes:
    text = _date_text(moment.date()).decode() + moment.strftime(" %H:%M:%S")
    if fsp:
        text += "." + f"{moment.microsecond:06d}"[:fsp]
    return text.encode()


dates = st.dates().map(_date_text)
datetimes = st.builds(_datetime_text, st.datetimes(), st.integers(0, 6))
odd_temporal = st.text(alphabet="0123456789-: .", max_size=28).map(str.encode) | st.sampled_from(
    [b"0000-00-00", b"0000-00-00 00:00:00", b"2024-02-30", b"2023-02-29 00:00:00", b"2024-1-01"]
)


@SETTINGS
@given(st.lists(st.none() | dates | odd_temporal, max_size=40))
def test_dates_are_typed_alike_by_the_c_and_by_arrow(values):
    _typed_alike(_column("date", "date"), values, pa.date32())


@SETTINGS
@given(st.lists(st.none() | datetimes | odd_temporal, max_size=40), st.booleans())
def test_datetimes_and_timestamps_are_typed_alike_by_the_c_and_by_arrow(values, timestamp):
    if timestamp:
        column, arrow_type = _column("timestamp", "timestamp(6)", fsp=6), pa.timestamp("us", "UTC")
    else:
        column, arrow_type = _column("datetime", "datetime(6)", fsp=6), pa.timestamp("us")
    _typed_alike(column, values, arrow_type)


@SETTINGS
@given(st.lists(st.none() | dates, min_size=1, max_size=40))
def test_every_date_the_server_prints_is_taken_by_the_c(values):
    text = pa.array(values, pa.binary())
    assert native_columns.date_days(text) is not None


@SETTINGS
@given(st.lists(st.none() | datetimes, min_size=1, max_size=40))
def test_every_datetime_the_server_prints_is_taken_by_the_c(values):
    text = pa.array(values, pa.binary())
    assert native_columns.datetime_micros(text, pa.timestamp("us")) is not None


def _decimal_text(units: int, scale: int) -> bytes:
    """DECIMAL as the server prints it: every digit of the scale, a 0 before the point."""
    digits = str(abs(units)).rjust(scale + 1, "0")
    text = digits if not scale else f"{digits[:-scale]}.{digits[-scale:]}"
    return (("-" if units < 0 else "") + text).encode()


@st.composite
def decimal_columns(draw):
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    limit = 10**precision - 1
    printed = st.integers(-limit, limit).map(lambda units: _decimal_text(units, scale))
    odd = st.text(alphabet="-0123456789.", max_size=45).map(str.encode)
    values = draw(st.lists(st.none() | printed | odd, max_size=30))
    return precision, scale, values


@SETTINGS
@given(st.integers(1, 38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p))), st.data())
def test_every_decimal_the_server_prints_is_taken_by_the_c(type_, data):
    precision, scale = type_
    limit = 10**precision - 1
    units = data.draw(st.lists(st.integers(-limit, limit), min_size=1, max_size=20))
    text = pa.array([_decimal_text(u, scale) for u in units], pa.binary())
    built = native_columns.decimals(text, pa.decimal128(precision, scale))
    assert built is not None
    assert built.equals(text.cast(pa.decimal128(precision, scale)))


@SETTINGS
@given(decimal_columns())
def test_decimals_are_typed_alike_by_the_c_and_by_arrow(column_values):
    precision, scale, values = column_values
    column = _column("decimal", f"decimal({precision},{scale})", precision=precision, scale=scale)
    _typed_alike(column, values, pa.decimal128(precision, scale))


@SETTINGS
@given(st.lists(st.none() | st.integers(0, 2**64 - 1).map(lambda v: str(v).encode()), max_size=30))
def test_bigint_unsigned_is_typed_alike_and_taken_by_the_c(values):
    column = _column("bigint", "bigint(20) unsigned")
    _typed_alike(column, values, pa.decimal128(20, 0))
    assert native_columns.decimals(pa.array(values, pa.binary()), pa.decimal128(20, 0)) is not None


@st.composite
def datetimes_of_few_days(draw):
    """DATETIME text of a few days, many values a day (the parser remembers the last
    day): valid times, and times or dates no server prints, in any order."""
    days = draw(st.lists(st.dates().map(_date_text), min_size=1, max_size=3))
    times = st.sampled_from([b" 00:00:00", b" 23:59:59.5", b" 12:30:00", b" 24:00:00", b" 1:2:3"])
    day = st.sampled_from(days + [b"2023-02-29", b"0000-00-00", b"2024-13-01"])
    return draw(st.lists(st.none() | st.builds(bytes.__add__, day, times), max_size=40))


@SETTINGS
@given(datetimes_of_few_days(), st.integers(0, 5))
def test_datetimes_sharing_days_are_typed_alike_by_the_c_and_by_arrow(values, skip):
    _typed_alike(_column("datetime", "datetime"), values[skip:], pa.timestamp("us"))
    dates = [None if v is None else v[:10] for v in values[skip:]]
    _typed_alike(_column("date", "date"), dates, pa.date32())
