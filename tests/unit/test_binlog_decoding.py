"""TIME2 decoding (reader/binlog_decoding.py) against an independent encoder.

The encoder follows the server's ``TIME_to_longlong_time_packed`` and
``my_time_packed_to_binary`` (mysys/my_time.cc, identical in MariaDB):

    packed = sign * (((hh << 12) | (mm << 6) | ss) << 24 | micros)

    fsp 0:    3 bytes  big-endian  0x800000 + (packed >> 24)
    fsp 1-2:  the same 3 bytes, then 1 byte   (char)(frac / 10000)
    fsp 3-4:  the same 3 bytes, then 2 bytes  frac / 100
    fsp 5-6:  6 bytes  big-endian  0x800000000000 + packed

where ``packed >> 24`` is C's arithmetic (flooring) shift and ``frac = packed % (1 << 24)``
is C's truncating remainder, negative for negative values: a negative value with a fraction
thus borrows one from the integer part and stores the fraction's two's complement, which
keeps the bytes memcmp-sortable.
"""

from __future__ import annotations

import datetime as dt
import io

from hypothesis import example, given, settings
from hypothesis import strategies as st

from reader.binlog_decoding import _read_time2, unpack_time2

SETTINGS = settings(max_examples=200, deadline=None)
MAX_TIME = dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999)
FRAC_BYTES = {0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3}


def total_micros(value: dt.timedelta) -> int:
    return (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds


def truncate(value: dt.timedelta, fsp: int) -> dt.timedelta:
    """The value as TIME(fsp) stores it (truncated toward zero to fsp digits)."""
    micros = total_micros(value)
    unit = 10 ** (6 - fsp)
    magnitude = abs(micros) - abs(micros) % unit
    return dt.timedelta(microseconds=-magnitude if micros < 0 else magnitude)


def packed_time(value: dt.timedelta) -> int:
    """TIME_to_longlong_time_packed."""
    micros = total_micros(value)
    magnitude = abs(micros)
    seconds, fraction = divmod(magnitude, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    packed = (((hours << 12) | (minutes << 6) | secs) << 24) | fraction
    return -packed if micros < 0 else packed


def c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def c_mod(a: int, b: int) -> int:
    """C remainder (sign of the dividend)."""
    return a - c_div(a, b) * b


def encode_time2(value: dt.timedelta, fsp: int) -> bytes:
    """my_time_packed_to_binary of a value already truncated to fsp."""
    nr = packed_time(value)
    int_part = nr >> 24  # arithmetic shift, like C on a signed longlong
    frac_part = c_mod(nr, 1 << 24)
    if fsp in (5, 6):
        return (nr + 0x800000000000).to_bytes(6, "big")
    head = (0x800000 + int_part).to_bytes(3, "big")
    if fsp in (1, 2):
        return head + (c_div(frac_part, 10000) & 0xFF).to_bytes(1, "big")
    if fsp in (3, 4):
        return head + (c_div(frac_part, 100) & 0xFFFF).to_bytes(2, "big")
    return head


def decode_with_unpack(data: bytes, fsp: int) -> dt.timedelta:
    if fsp in (5, 6):
        return unpack_time2(int.from_bytes(data, "big"), None, fsp)
    raw_int = int.from_bytes(data[:3], "big")
    raw_frac = int.from_bytes(data[3:], "big") if len(data) > 3 else 0
    return unpack_time2(raw_int, raw_frac, fsp)


times = st.timedeltas(min_value=-MAX_TIME, max_value=MAX_TIME)
fsps = st.integers(0, 6)


# -- the encoder itself agrees with the server's documented bytes ------------------------


def test_encoder_matches_the_servers_table():
    # From the comment in my_time_packed_from_binary (fsp 2).
    cases = {
        "00:00:00.00": "80000000",
        "-00:00:00.01": "7fffffff",
        "-00:00:00.99": "7fffff9d",
        "-00:00:01.00": "7fffff00",
        "-00:00:01.01": "7ffffeff",
        "-00:00:01.10": "7ffffef6",
    }
    for text, hex_bytes in cases.items():
        negative = text.startswith("-")
        h, m, s = text.lstrip("-").split(":")
        value = dt.timedelta(hours=int(h), minutes=int(m), seconds=float(s))
        assert encode_time2(-value if negative else value, 2).hex() == hex_bytes, text
    assert encode_time2(dt.timedelta(0), 6).hex() == "800000000000"
    assert encode_time2(dt.timedelta(hours=838, minutes=59, seconds=59), 0).hex() == "b46efb"


@SETTINGS
@given(fsps, times, times)
def test_encoder_is_memcmp_sortable(fsp, a, b):
    """The server's format sorts as bytes; a sanity check of the encoder used below."""
    a, b = truncate(a, fsp), truncate(b, fsp)
    ea, eb = encode_time2(a, fsp), encode_time2(b, fsp)
    assert len(ea) == 3 + FRAC_BYTES[fsp]
    assert (ea < eb) == (a < b) and (ea == eb) == (a == b)


# -- the decoder ------------------------------------------------------------------------


@SETTINGS
@example(fsp=6, value=-dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=500000))
@example(fsp=2, value=-dt.timedelta(microseconds=10000))
@example(fsp=2, value=-dt.timedelta(seconds=1, microseconds=100000))
@example(fsp=4, value=-dt.timedelta(seconds=1, microseconds=500))
@example(fsp=1, value=-dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=900000))
@example(fsp=3, value=dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999000))
@example(fsp=0, value=-MAX_TIME)
@example(fsp=5, value=-dt.timedelta(microseconds=10))
@given(fsp=fsps, value=times)
def test_unpack_time2_inverts_the_servers_packing(fsp, value):
    value = truncate(value, fsp)
    assert decode_with_unpack(encode_time2(value, fsp), fsp) == value


@SETTINGS
@given(fsp=fsps, value=times)
def test_read_time2_reads_exactly_its_bytes(fsp, value):
    value = truncate(value, fsp)
    packet = io.BytesIO(encode_time2(value, fsp) + b"\xaa\xbb")
    assert _read_time2(packet, fsp) == value
    assert packet.read() == b"\xaa\xbb"


def test_known_bad_library_case_negative_half_second_fsp6():
    value = -dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=500000)
    data = encode_time2(value, 6)
    assert decode_with_unpack(data, 6) == value
    assert _read_time2(io.BytesIO(data), 6) == value


def test_negative_fractions_for_each_fsp():
    """Negative values with a fraction are the borrowing case of every short format."""
    for fsp in range(1, 7):
        unit = 10 ** (6 - fsp)
        for micros in (unit, 5 * unit, 1_000_000 - unit, 3_723_000_000 + unit):
            value = -dt.timedelta(microseconds=micros)
            assert decode_with_unpack(encode_time2(value, fsp), fsp) == value, (fsp, value)
