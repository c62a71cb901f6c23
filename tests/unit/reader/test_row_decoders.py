"""The two row decoders (C and pure Python) against values encoded by
tests/support/binlog_encoder.py: every kind of column, NULLs, zero dates, edge values.
Both must give exactly the value that was encoded, and the same Arrow arrays."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog import row_plan as rp
from reader.row_decoding import RowSink, native_available
from tests.support import binlog_encoder as enc

pytestmark = pytest.mark.skipif(not native_available(), reason="compares with the C decoder")

UTC = dt.timezone.utc


@st.composite
def int_column(draw):
    width = draw(st.sampled_from([1, 2, 3, 4, 8]))
    unsigned = draw(st.booleans())
    lo, hi = (
        (0, (1 << 8 * width) - 1) if unsigned else (-(1 << 8 * width - 1), (1 << 8 * width - 1) - 1)
    )
    value = draw(st.one_of(st.sampled_from([lo, hi, 0]), st.integers(lo, hi)))
    raw = value.to_bytes(width, "little", signed=not unsigned)
    return (rp.K_UINT if unsigned else rp.K_SINT, width, 0), raw, value


@st.composite
def decimal_column(draw, precision: int | None = None, scale: int | None = None):
    """A DECIMAL value; of the given precision and scale when they are given (later rows
    of a plan must match its first row, and filtering for a match would reject almost all)."""
    if precision is None:
        precision = draw(st.integers(1, 65))
        scale = draw(st.integers(0, min(precision, 30)))
    digits = draw(st.integers(0, 10**precision - 1))
    negative = draw(st.booleans()) and digits != 0
    with localcontext() as ctx:
        ctx.prec = 100
        value = Decimal(-digits if negative else digits).scaleb(-scale)
    raw = enc.decimal_bin(value, precision, scale)
    if precision > rp.MAX_DECIMAL128:
        expected = (f"{value:.{scale}f}").encode()
    else:
        expected = value
    return (rp.K_DECIMAL, precision, scale), raw, expected


@st.composite
def date_column(draw):
    zero = draw(st.booleans())
    if zero:
        return (rp.K_DATE, 0, 0), enc.date3(0, 0, 0), None
    day = draw(st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)))
    return (rp.K_DATE, 0, 0), enc.date3(day.year, day.month, day.day), day


def _truncate(micros: int, fsp: int) -> int:
    unit = 10 ** (6 - fsp)
    return micros // unit * unit


@st.composite
def datetime_column(draw):
    fsp = draw(st.integers(0, 6))
    if draw(st.integers(0, 9)) == 0:
        return (rp.K_DATETIME2, fsp, 0), enc.datetime2((0, 0, 0, 0, 0, 0, 0), fsp), None
    value = draw(st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)))
    value = value.replace(microsecond=_truncate(value.microsecond, fsp))
    return (rp.K_DATETIME2, fsp, 0), enc.datetime2(value, fsp), value


@st.composite
def timestamp_column(draw):
    fsp = draw(st.integers(0, 6))
    seconds = draw(st.one_of(st.just(0), st.integers(1, 2**31 - 1)))
    micros = 0 if seconds == 0 else _truncate(draw(st.integers(0, 999_999)), fsp)
    expected = (
        None
        if seconds == 0
        else (
            dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=seconds, microseconds=micros)
        )
    )
    return (rp.K_TIMESTAMP2, fsp, 0), enc.timestamp2(seconds, micros, fsp), expected


@st.composite
def time_column(draw):
    fsp = draw(st.integers(0, 6))
    limit = (838 * 3600 + 59 * 60 + 59) * 1_000_000
    micros = draw(st.one_of(st.sampled_from([0, -1, 1, -limit, limit]), st.integers(-limit, limit)))
    micros = int(micros / 10 ** (6 - fsp)) * 10 ** (6 - fsp)
    return (rp.K_TIME2, fsp, 0), enc.time2(micros, fsp), micros


@st.composite
def old_datetime_column(draw):
    """A DATETIME of the format before MySQL 5.6.4 (``MYSQL_TYPE_DATETIME``, no fraction):
    the number YYYYMMDDhhmmss in 8 bytes, little-endian; 0 is the zero datetime."""
    if draw(st.integers(0, 9)) == 0:
        return (rp.K_DATETIME, 0, 0), bytes(8), None
    value = draw(st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)))
    value = value.replace(microsecond=0)
    date = (value.year * 100 + value.month) * 100 + value.day
    number = date * 1_000_000 + (value.hour * 100 + value.minute) * 100 + value.second
    return (rp.K_DATETIME, 0, 0), number.to_bytes(8, "little"), value


@st.composite
def old_timestamp_column(draw):
    """An old-format TIMESTAMP: seconds since the epoch in 4 bytes, little-endian (0: the
    zero timestamp)."""
    seconds = draw(
        st.one_of(st.sampled_from([0, 1, 2**31 - 1, 2**32 - 1]), st.integers(0, 2**32 - 1))
    )
    expected = None if seconds == 0 else dt.datetime.fromtimestamp(seconds, UTC)
    return (rp.K_TIMESTAMP, 0, 0), seconds.to_bytes(4, "little"), expected


@st.composite
def old_time_column(draw):
    """An old-format TIME: the signed number [-]HHMMSS in 3 bytes, little-endian, hours
    up to 838."""
    hours = draw(st.one_of(st.sampled_from([0, 838]), st.integers(0, 838)))
    minutes, seconds = draw(st.integers(0, 59)), draw(st.integers(0, 59))
    sign = -1 if draw(st.booleans()) else 1
    number = sign * (hours * 10000 + minutes * 100 + seconds)
    micros = sign * ((hours * 60 + minutes) * 60 + seconds) * 1_000_000
    return (rp.K_TIME, 0, 0), number.to_bytes(3, "little", signed=True), micros


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON_DOCUMENTS = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)


@st.composite
def json_column(draw):
    """A JSON column (MySQL's binary JSON behind a 4-byte length, as a LONGBLOB's): the
    decoders hand its bytes over as they are."""
    document = enc.json_binary(draw(JSON_DOCUMENTS))
    return (rp.K_VAR, 4, 0), len(document).to_bytes(4, "little") + document, document


@st.composite
def var_column(draw):
    prefix = draw(st.sampled_from([1, 2, 3, 4]))
    data = draw(st.binary(max_size=255 if prefix == 1 else 600))
    pad = draw(st.sampled_from([0, 0, len(data) + draw(st.integers(0, 5))]))
    raw = len(data).to_bytes(prefix, "little") + data
    return (rp.K_VAR, prefix, pad), raw, data.ljust(pad, b"\0")


@st.composite
def small_columns(draw):
    kind = draw(st.sampled_from(["float", "double", "year", "enum", "set", "bit"]))
    if kind == "float":
        value = struct.unpack("<f", struct.pack("<f", draw(st.floats(width=32, allow_nan=False))))[
            0
        ]
        return (rp.K_FLOAT, 0, 0), struct.pack("<f", value), value
    if kind == "double":
        value = draw(st.floats(allow_nan=False))
        return (rp.K_DOUBLE, 0, 0), struct.pack("<d", value), value
    if kind == "year":
        year = draw(st.one_of(st.just(0), st.integers(1901, 2155)))
        return (rp.K_YEAR, 0, 0), bytes([0 if year == 0 else year - 1900]), year
    if kind == "enum":
        width = draw(st.sampled_from([1, 2]))
        index = draw(st.integers(0, (1 << 8 * width) - 1))
        return (rp.K_ENUM, width, 0), index.to_bytes(width, "little"), index
    if kind == "set":
        width = draw(st.integers(1, 8))
        mask = draw(st.integers(0, (1 << 8 * width) - 1))
        return (rp.K_SET, width, 0), mask.to_bytes(width, "little"), mask
    width = draw(st.integers(1, 8))
    data = draw(st.binary(min_size=width, max_size=width))
    return (rp.K_BIT, width, 0), data, data


COLUMN = st.one_of(
    int_column(),
    decimal_column(),
    date_column(),
    datetime_column(),
    timestamp_column(),
    time_column(),
    var_column(),
    small_columns(),
    old_datetime_column(),
    old_timestamp_column(),
    old_time_column(),
    json_column(),
)


@st.composite
def rows(draw):
    """A plan and rows of (encoded value | None) with the values expected back."""
    first = draw(st.lists(COLUMN, min_size=1, max_size=12))
    plan = tuple(column[0] for column in first)
    count = draw(st.integers(1, 4))
    images = []
    for _ in range(count):
        encoded, expected = [], []
        for entry in plan:
            if draw(st.integers(0, 5)) == 0:
                encoded.append(None)
                expected.append(None)
                continue
            strategy = {
                rp.K_SINT: int_column(),
                rp.K_UINT: int_column(),
                rp.K_DECIMAL: decimal_column(entry[1], entry[2]),
                rp.K_DATE: date_column(),
                rp.K_DATETIME2: datetime_column(),
                rp.K_TIMESTAMP2: timestamp_column(),
                rp.K_TIME2: time_column(),
                rp.K_VAR: st.one_of(var_column(), json_column()),
                rp.K_DATETIME: old_datetime_column(),
                rp.K_TIMESTAMP: old_timestamp_column(),
                rp.K_TIME: old_time_column(),
            }.get(entry[0], small_columns())
            value = draw(strategy.filter(lambda v, e=entry: v[0] == e))
            encoded.append(value[1])
            expected.append(value[2])
        images.append((encoded, expected))
    return plan, images


def _decode(decoder: str, plan, data: bytes, kind: int):
    sink = RowSink(plan, decoder=decoder)
    assert sink.decode(data, 0, len(data), kind) > 0
    return sink.take()


@settings(max_examples=300, deadline=None)
@given(rows(), st.sampled_from([0, 1, 2]))
def test_both_decoders_return_exactly_the_encoded_values(case, kind):
    plan, images = case
    if kind == 1:  # an update: each row is a before- and an after-image
        data = b"".join(enc.row_image(e) + enc.row_image(e) for e, _ in images)
    else:
        data = b"".join(enc.row_image(e) for e, _ in images)
    native = _decode("native", plan, data, kind)
    python = _decode("python", plan, data, kind)
    assert native.rows == python.rows == len(images)
    assert native.has_before.equals(python.has_before)
    assert native.has_after.equals(python.has_after)
    for a, b in zip(native.before + native.after, python.before + python.after):
        assert a.type == b.type
        assert a.equals(b), (a, b)
    side = python.before if kind == 2 else python.after
    for column, entry in enumerate(plan):
        got = side[column].to_pylist()
        want = [expected[column] for _, expected in images]
        if entry[0] == rp.K_DOUBLE or entry[0] == rp.K_FLOAT:
            assert [struct.pack("<d", g) if g is not None else None for g in got] == [
                struct.pack("<d", w) if w is not None else None for w in want
            ]
        else:
            assert got == want, (entry, got, want)


@settings(max_examples=300, deadline=None)
@given(st.lists(COLUMN, min_size=1, max_size=6), st.binary(max_size=64), st.integers(0, 2))
def test_bad_bytes_raise_the_same_error_kind_and_never_crash(columns, data, kind):
    plan = tuple(column[0] for column in columns)
    outcomes = []
    for decoder in ("native", "python"):
        sink = RowSink(plan, decoder=decoder)
        try:
            count = sink.decode(data, 0, len(data), kind)
            block = sink.take()
            outcomes.append(("ok", count, [a.to_pylist() for a in block.before + block.after]))
        except ValueError as err:
            outcomes.append(("error", type(err).__name__))
    assert outcomes[0] == outcomes[1]


NOT_DATES = [(2020, 0, 0), (2020, 2, 0), (0, 1, 1), (2020, 0, 15), (2020, 2, 31), (2021, 2, 29)]


@pytest.mark.parametrize("decoder", ["native", "python"])
@pytest.mark.parametrize("ymd", NOT_DATES)
def test_a_date_neither_real_nor_zero_is_refused_with_its_column_and_value(decoder, ymd):
    y, m, d = ymd
    plan = ((rp.K_SINT, 4, 0), (rp.K_DATE, 0, 0))
    sink = RowSink(plan, decoder=decoder)
    data = enc.row_image([(7).to_bytes(4, "little"), enc.date3(y, m, d)])
    with pytest.raises(ValueError) as caught:
        sink.decode(data, 0, len(data), 0)
    assert type(caught.value).__name__ == "InvalidDateError"
    assert caught.value.args == (1, f"{y:04d}-{m:02d}-{d:02d}")


@pytest.mark.parametrize("decoder", ["native", "python"])
@pytest.mark.parametrize("fsp", [0, 3, 6])
def test_a_datetime_neither_real_nor_zero_is_refused_with_its_value(decoder, fsp):
    plan = ((rp.K_DATETIME2, fsp, 0),)
    zero_day_at_ten = enc.datetime2((2020, 0, 15, 10, 11, 12, 0), fsp)
    sink = RowSink(plan, decoder=decoder)
    data = enc.row_image([zero_day_at_ten])
    with pytest.raises(ValueError) as caught:
        sink.decode(data, 0, len(data), 0)
    assert caught.value.args == (0, "2020-00-15 10:11:12.000000")


@pytest.mark.parametrize("decoder", ["native", "python"])
def test_the_zero_date_and_datetime_are_null(decoder):
    plan = ((rp.K_DATE, 0, 0), (rp.K_DATETIME2, 0, 0))
    sink = RowSink(plan, decoder=decoder)
    data = enc.row_image([enc.date3(0, 0, 0), enc.datetime2((0, 0, 0, 0, 0, 0, 0), 0)])
    sink.decode(data, 0, len(data), 0)
    block = sink.take()
    assert [c.to_pylist() for c in block.after] == [[None], [None]]


def test_out_of_range_bounds_are_refused():
    for decoder in ("native", "python"):
        sink = RowSink(((rp.K_SINT, 4, 0),), decoder=decoder)
        with pytest.raises(ValueError):
            sink.decode(b"\x00\x01\x02\x03\x04", 2, 10, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(JSON_DOCUMENTS, min_size=1, max_size=5), st.sampled_from([0, 1, 2]))
def test_json_columns_decode_alike_and_back_to_their_documents(documents, kind):
    """Rows of an INT and a JSON column, one row per document (every third NULL): both
    decoders give the same arrays, and the bytes decode to the document written."""
    from reader import json_binary

    plan = ((rp.K_SINT, 4, 0), (rp.K_VAR, 4, 0))
    images = []
    for i, document in enumerate(documents):
        value = None if i % 3 == 2 else enc.json_binary(document)
        raw = None if value is None else len(value).to_bytes(4, "little") + value
        images.append(enc.row_image([i.to_bytes(4, "little"), raw]))
    data = b"".join(image * (2 if kind == 1 else 1) for image in images)
    native, python = _decode("native", plan, data, kind), _decode("python", plan, data, kind)
    for a, b in zip(native.before + native.after, python.before + python.after):
        assert a.equals(b), (a, b)
    side = python.before if kind == 2 else python.after
    for i, value in enumerate(side[1].to_pylist()):
        assert (value is None) == (i % 3 == 2)
        if value is not None:
            assert json_binary.decode(value) == documents[i]


# Old-format values that are no date: month 13, day 32, February 30, hour 24, minute 60.
NOT_OLD_DATETIMES = [20241301000000, 20240132000000, 20240230000000, 20240101240000, 20240101006000]


@pytest.mark.parametrize("number", NOT_OLD_DATETIMES)
def test_an_old_datetime_that_is_no_date_is_refused_alike(number):
    plan = ((rp.K_DATETIME, 0, 0),)
    data = enc.row_image([number.to_bytes(8, "little")])
    outcomes = []
    for decoder in ("native", "python"):
        sink = RowSink(plan, decoder=decoder)
        try:
            sink.decode(data, 0, len(data), 0)
            outcomes.append(("ok", sink.take().after[0].to_pylist()))
        except ValueError as err:
            outcomes.append((type(err).__name__, err.args))
    assert outcomes[0] == outcomes[1]
