"""The pure-Python row decoder: the reference the C extension (``reader._rowdecoder``)
is tested against, and the decoder used where the extension is not built.

Both take the row data of one rows event and append its images to per-column builders;
:meth:`PyRowSink.take` returns them as Arrow arrays. Every read is bounds-checked: bad
bytes raise :class:`RowDecodeError`, never an IndexError or a wrong value.
"""

from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa

from cdc_source.binlog.row_plan import (
    DIG2BYTES,
    K_BIT,
    K_DATE,
    K_DATETIME,
    K_DATETIME2,
    K_DECIMAL,
    K_DOUBLE,
    K_ENUM,
    K_FLOAT,
    K_SET,
    K_SINT,
    K_TIME,
    K_TIME2,
    K_TIMESTAMP,
    K_TIMESTAMP2,
    K_UINT,
    K_VAR,
    K_YEAR,
    MAX_DECIMAL128,
    MAX_DECIMAL_SCALE,
    arrow_type,
    decimal_size,
)
from cdc_source.binlog.wire import Cursor

WRITE, UPDATE, DELETE = 0, 1, 2
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


class RowDecodeError(ValueError):
    """A row image that cannot be decoded exactly (bad bytes, or a partial image)."""


class PartialJsonError(RowDecodeError):
    """A PARTIAL_UPDATE_ROWS after-image holds a JSON diff instead of the whole value."""


class InvalidDateError(RowDecodeError):
    """A date that is neither a real date nor the all-zero one (``2020-02-31`` under
    ALLOW_INVALID_DATES, ``2020-00-15`` without NO_ZERO_IN_DATE): no Spark value holds
    it. Args: the column's index and the value as the server prints it."""


class _InvalidDate(Exception):
    """Raised by :func:`_value` with the spelled value; :class:`PyRowSink` adds the
    column index."""


class _Reader(Cursor):
    """The event layer's bounded cursor, raising :class:`RowDecodeError`."""

    __slots__ = ()
    error = RowDecodeError

    def __init__(self, data: bytes, pos: int, end: int) -> None:
        if not 0 <= pos <= end <= len(data):
            raise RowDecodeError(f"row data bounds {pos}..{end} outside {len(data)} bytes")
        super().__init__(data, pos, end)


def unpack_decimal(raw: bytes, precision: int, scale: int) -> tuple[bool, int, int]:
    """MySQL's binary DECIMAL (``bin2decimal``): big-endian groups of 9 digits in 4 bytes,
    the leading and trailing partial groups in fewer; the first bit is the sign (set for
    positive), negative values are stored inverted. Returns (negative, integer part,
    fraction digits as an integer of ``scale`` digits)."""
    if not 1 <= precision <= 65 or not 0 <= scale <= min(precision, MAX_DECIMAL_SCALE):
        raise RowDecodeError(f"DECIMAL({precision},{scale}) cannot be decoded")
    if len(raw) != decimal_size(precision, scale):
        raise RowDecodeError(
            f"DECIMAL({precision},{scale}) needs {decimal_size(precision, scale)} "
            f"bytes, has {len(raw)}"
        )
    negative = not raw[0] & 0x80
    data = bytearray(raw)
    data[0] ^= 0x80
    if negative:
        data = bytearray(b ^ 0xFF for b in data)
    whole = precision - scale
    pos = 0

    def group(digits: int) -> int:
        nonlocal pos
        size = DIG2BYTES[digits]
        value = int.from_bytes(data[pos : pos + size], "big")
        pos += size
        if value >= 10**digits:
            raise RowDecodeError(f"DECIMAL digit group {value} has more than {digits} digits")
        return value

    integer = group(whole % 9) if whole % 9 else 0
    for _ in range(whole // 9):
        integer = integer * 1_000_000_000 + group(9)
    fraction = 0
    for _ in range(scale // 9):
        fraction = fraction * 1_000_000_000 + group(9)
    if scale % 9:
        fraction = fraction * 10 ** (scale % 9) + group(scale % 9)
    return negative, integer, fraction


def _days(year: int, month: int, day: int) -> int | None:
    """Days since 1970-01-01, or None for a date that is not a real one."""
    if year == 0 or month == 0 or day == 0:
        return None
    try:
        return dt.date(year, month, day).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None


def _date_days(year: int, month: int, day: int) -> int | None:
    """A DATE as days; None for the zero date, which has no Spark value."""
    days = _days(year, month, day)
    if days is None and (year, month, day) != (0, 0, 0):
        raise _InvalidDate(f"{year:04d}-{month:02d}-{day:02d}")
    return days


def _datetime_micros(year, month, day, hour, minute, second, micros) -> int | None:
    """A DATETIME as microseconds; None for the zero datetime."""
    days = _days(year, month, day)
    if days is None:
        if (year, month, day, hour, minute, second, micros) != (0,) * 7:
            raise _InvalidDate(
                f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
                f".{micros:06d}"
            )
        return None
    return ((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + micros


def _fraction(reader: _Reader, fsp: int) -> int:
    if fsp in (1, 2):
        return reader.uint(1) * 10000
    if fsp in (3, 4):
        return int.from_bytes(reader.take(2), "big") * 100
    if fsp in (5, 6):
        return int.from_bytes(reader.take(3), "big")
    return 0


def _time2(reader: _Reader, fsp: int) -> int:
    """TIME(fsp) (``my_time_packed_from_binary``): offset-coded, and a negative value's
    fraction borrows from the integer part."""
    if fsp in (5, 6):
        packed = int.from_bytes(reader.take(6), "big") - 0x800000000000
    else:
        intpart = int.from_bytes(reader.take(3), "big") - 0x800000
        frac = 0
        if fsp in (1, 2):
            frac = reader.uint(1)
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100
            frac *= 10000
        elif fsp in (3, 4):
            frac = int.from_bytes(reader.take(2), "big")
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x10000
            frac *= 100
        packed = (intpart << 24) + frac
    magnitude = -packed if packed < 0 else packed
    hms, micros = magnitude >> 24, magnitude % (1 << 24)
    hours, minutes, seconds = (hms >> 12) % 1024, (hms >> 6) % 64, hms % 64
    total = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros
    return -total if packed < 0 else total


def _value(reader: _Reader, entry: tuple[int, int, int]):
    kind, a, b = entry
    if kind == K_SINT:
        return int.from_bytes(reader.take(a), "little", signed=True)
    if kind == K_UINT or kind == K_ENUM or kind == K_SET:
        return reader.uint(a)
    if kind == K_FLOAT:
        return struct.unpack("<f", reader.take(4))[0]
    if kind == K_DOUBLE:
        return struct.unpack("<d", reader.take(8))[0]
    if kind == K_DECIMAL:
        size = decimal_size(a, b)
        if a < 1 or b > a or size == 0 or size > 40:
            raise RowDecodeError(f"DECIMAL({a},{b}) cannot be decoded")
        negative, integer, fraction = unpack_decimal(reader.take(size), a, b)
        if a <= MAX_DECIMAL128:
            unscaled = integer * 10**b + fraction
            return -unscaled if negative else unscaled
        text = str(integer) + (f".{fraction:0{b}d}" if b else "")
        return ("-" + text if negative else text).encode()
    if kind == K_DATE:
        value = reader.uint(3)
        return _date_days(value >> 9, (value >> 5) & 15, value & 31)
    if kind == K_DATETIME2:
        packed = int.from_bytes(reader.take(5), "big") - 0x8000000000
        micros = _fraction(reader, a)
        if packed < 0:
            raise RowDecodeError("DATETIME2 value below the zero date")
        ymd, hms = packed >> 17, packed % (1 << 17)
        ym = ymd >> 5
        return _datetime_micros(
            ym // 13, ym % 13, ymd % 32, hms >> 12, (hms >> 6) % 64, hms % 64, micros
        )
    if kind == K_TIMESTAMP2:
        seconds = int.from_bytes(reader.take(4), "big")
        micros = _fraction(reader, a)
        return None if seconds == 0 else seconds * 1_000_000 + micros
    if kind == K_TIME2:
        return _time2(reader, a)
    if kind == K_YEAR:
        year = reader.uint(1)
        return 0 if year == 0 else 1900 + year
    if kind == K_VAR:
        data = reader.take(reader.uint(a))
        return data.ljust(b, b"\0") if b else data
    if kind == K_BIT:
        return reader.take(a)
    if kind == K_DATETIME:
        value = reader.uint(8)
        date, time = divmod(value, 1_000_000)
        return _datetime_micros(
            date // 10000,
            date // 100 % 100,
            date % 100,
            time // 10000,
            time // 100 % 100,
            time % 100,
            0,
        )
    if kind == K_TIMESTAMP:
        seconds = reader.uint(4)
        return None if seconds == 0 else seconds * 1_000_000
    if kind == K_TIME:
        value = int.from_bytes(reader.take(3), "little", signed=True)
        magnitude = abs(value)
        total = (
            (magnitude // 10000 * 60 + magnitude // 100 % 100) * 60 + magnitude % 100
        ) * 1_000_000
        return -total if value < 0 else total
    raise RowDecodeError(f"unknown plan kind {kind}")


class PyRowSink:
    """Decoded row images of one table map, column by column."""

    def __init__(self, plan: tuple[tuple[int, int, int], ...], json_count: int = 0) -> None:
        self.plan = tuple(plan)
        if not 1 <= len(self.plan) <= 4096:
            raise ValueError("a row sink needs 1 to 4096 columns")
        for kind, a, b in self.plan:
            if _invalid_entry(kind, a, b):
                raise ValueError(f"invalid plan entry ({kind}, {a}, {b})")
        self.json_count = max(0, json_count)
        self._reset()

    def _reset(self) -> None:
        self.broken = False
        self.rows = 0
        self.nbytes = 0
        self._has_before: list[bool] = []
        self._has_after: list[bool] = []
        self._before: list[list] = [[] for _ in self.plan]
        self._after: list[list] = [[] for _ in self.plan]

    def _image(self, reader: _Reader, columns: list[list]) -> None:
        null_bitmap = reader.take((len(self.plan) + 7) // 8)
        for i, entry in enumerate(self.plan):
            if null_bitmap[i >> 3] & (1 << (i & 7)):
                columns[i].append(None)
                continue
            try:
                columns[i].append(_value(reader, entry))
            except _InvalidDate as err:
                raise InvalidDateError(i, str(err)) from None

    def _absent(self, columns: list[list]) -> None:
        for column in columns:
            column.append(None)

    def _partial_json(self, reader: _Reader) -> None:
        """PARTIAL_UPDATE_ROWS after-images start with ``value_options`` and, when its
        PARTIAL_JSON bit is set, one bit per JSON column of the table (rpl_record.cc)."""
        options = reader.lenenc()
        if options & 1:
            bits = reader.take((self.json_count + 7) // 8)
            if any(bits):
                raise PartialJsonError(
                    "an after-image holds a partial JSON update "
                    "(binlog_row_value_options=PARTIAL_JSON)"
                )
        elif options:
            raise RowDecodeError(f"unknown value_options {options}")

    def decode(self, data: bytes, pos: int, end: int, kind: int, partial: bool = False) -> int:
        """Like the C sink: after an error the sink holds a partial row and refuses more."""
        if self.broken:
            raise RowDecodeError("the sink failed earlier and holds a partial row")
        if kind not in (WRITE, UPDATE, DELETE):
            raise RowDecodeError(f"row data bounds {pos}..{end} outside {len(data)} bytes")
        try:
            return self._decode(data, pos, end, kind, partial)
        except RowDecodeError:
            self.broken = True
            raise

    def _decode(self, data: bytes, pos: int, end: int, kind: int, partial: bool) -> int:
        reader = _Reader(data, pos, end)
        added = 0
        while reader.pos < reader.end:
            start = reader.pos
            if kind == WRITE:
                self._absent(self._before)
                self._image(reader, self._after)
            elif kind == DELETE:
                self._image(reader, self._before)
                self._absent(self._after)
            else:
                self._image(reader, self._before)
                if partial:
                    self._partial_json(reader)
                self._image(reader, self._after)
            self._has_before.append(kind != WRITE)
            self._has_after.append(kind != DELETE)
            self.nbytes += reader.pos - start
            added += 1
        self.rows += added
        return added

    def take(self) -> tuple[int, pa.Array, pa.Array, list[pa.Array], list[pa.Array]]:
        types = [arrow_type(entry) for entry in self.plan]
        result = (
            self.rows,
            pa.array(self._has_before, pa.bool_()),
            pa.array(self._has_after, pa.bool_()),
            [_array(values, t) for values, t in zip(self._before, types)],
            [_array(values, t) for values, t in zip(self._after, types)],
        )
        self._reset()
        return result


def _invalid_entry(kind: int, a: int, b: int) -> bool:
    """The plan entries the C sink refuses too (reader/_rowdecoder.c, RowSink_init)."""
    if not K_SINT <= kind <= K_TIME or not 0 <= a <= 255 or not 0 <= b <= 65535:
        return True
    if kind in (K_SINT, K_UINT, K_ENUM, K_SET, K_BIT):
        return not 1 <= a <= 8
    if kind == K_DECIMAL:
        return not (1 <= a <= 65 and b <= MAX_DECIMAL_SCALE and b <= a)
    if kind in (K_DATETIME2, K_TIMESTAMP2, K_TIME2):
        return a > 6
    if kind == K_VAR:
        return not 1 <= a <= 4
    return False


def _array(values: list, arrow_type: pa.DataType) -> pa.Array:
    if pa.types.is_decimal(arrow_type):
        storage = pa.array(
            [None if v is None else v.to_bytes(16, "little", signed=True) for v in values],
            pa.binary(16),
        )
        return pa.Array.from_buffers(
            arrow_type,
            len(values),
            [storage.buffers()[0], storage.buffers()[1]],
            storage.null_count,
        )
    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
        storage = pa.array(values, pa.int64() if pa.types.is_timestamp(arrow_type) else pa.int32())
        return (
            storage.cast(arrow_type)
            if not pa.types.is_date(arrow_type)
            else storage.view(arrow_type)
        )
    return pa.array(values, arrow_type)
