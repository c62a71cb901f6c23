"""MySQL's binary JSON (``sql-common/json_binary.h``) to the Python value the server's
JSON text parses to, so a JSON column has one canonical form on both roads.

Layout: a type byte, then the value. Objects and arrays hold an element count and a
byte size (2 bytes each in the small form, 4 in the large), key entries (offset and a
2-byte length) and value entries (a type byte and an offset, or the value itself for
literals, 16-bit integers and, in the large form, 32-bit integers); offsets count from
the first byte after the type byte. Strings and opaque values carry a variable-length
size (7 bits per byte, low group first). Opaque values hold a MySQL field type and its
binary form; the server prints them as ``Json_wrapper::to_string`` does (json_dom.cc).

Offsets are not trusted to be distinct: containers pointing into each other could make
one element be decoded again and again, each level doubling the work (a few hundred
bytes that never finish), and many entries pointing at one long string would copy it
again for each (a 200 KB document taking 1.9 GB). In a document the server wrote, every
element has an entry of at least three bytes of its own and every string, key and opaque
value bytes of its own, so the elements met plus the bytes decoded never exceed the
document's size; decoding stops with an error once they would.
"""

from __future__ import annotations

import base64
import struct
from decimal import Decimal
from typing import Any

from reader.row_decoder_py import unpack_decimal

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY = 0x00, 0x01, 0x02, 0x03
LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING = range(0x04, 0x0D)
OPAQUE = 0x0F

_T_DECIMAL, _T_NEWDECIMAL = 0, 246
_T_TIMESTAMP, _T_DATE, _T_TIME, _T_DATETIME, _T_VAR_STRING = 7, 10, 11, 12, 253
_MAX_DEPTH = 150


class JsonBinaryError(ValueError):
    pass


class _Budget:
    """What a document may still hold: its size, less the elements met and the bytes of
    strings, keys and opaque values decoded."""

    __slots__ = ("left",)

    def __init__(self, size: int) -> None:
        self.left = size

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise JsonBinaryError(
                "binary JSON decodes to more than its bytes hold: its values overlap"
            )


def decode(data: bytes) -> Any:
    """The value of a whole binary JSON document (an empty document is JSON null)."""
    if not data:
        return None
    return _value(data[0], memoryview(data), 1, len(data), 0, _Budget(len(data)))


def _need(data: memoryview, pos: int, size: int, end: int) -> None:
    if pos < 0 or size < 0 or pos + size > end:
        raise JsonBinaryError(f"binary JSON needs {size} bytes at {pos}, past {end}")


def _uint(data: memoryview, pos: int, size: int, end: int) -> int:
    _need(data, pos, size, end)
    return int.from_bytes(data[pos : pos + size], "little")


def _varlen(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = 0
    for i in range(5):
        _need(data, pos + i, 1, end)
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise JsonBinaryError("binary JSON length longer than 5 bytes")


def _value(kind: int, data: memoryview, pos: int, end: int, depth: int, budget: _Budget) -> Any:
    if depth > _MAX_DEPTH:
        raise JsonBinaryError("binary JSON nested too deeply")
    if kind in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
        return _container(kind, data, pos, end, depth, budget)
    if kind == LITERAL:
        literal = _uint(data, pos, 1, end)
        if literal > 2:
            raise JsonBinaryError(f"binary JSON literal {literal}")
        return (None, True, False)[literal]
    if kind in (INT16, UINT16, INT32, UINT32, INT64, UINT64):
        size = {INT16: 2, UINT16: 2, INT32: 4, UINT32: 4, INT64: 8, UINT64: 8}[kind]
        _need(data, pos, size, end)
        signed = kind in (INT16, INT32, INT64)
        return int.from_bytes(data[pos : pos + size], "little", signed=signed)
    if kind == DOUBLE:
        _need(data, pos, 8, end)
        return struct.unpack("<d", data[pos : pos + 8])[0]
    if kind == STRING:
        size, pos = _varlen(data, pos, end)
        _need(data, pos, size, end)
        budget.spend(size)
        return bytes(data[pos : pos + size]).decode("utf-8")
    if kind == OPAQUE:
        field_type = _uint(data, pos, 1, end)
        size, pos = _varlen(data, pos + 1, end)
        _need(data, pos, size, end)
        budget.spend(size)
        return _opaque(field_type, bytes(data[pos : pos + size]))
    raise JsonBinaryError(f"binary JSON value type {kind:#x}")


def _container(kind: int, data: memoryview, pos: int, end: int, depth: int, budget: _Budget) -> Any:
    large = kind in (LARGE_OBJECT, LARGE_ARRAY)
    is_object = kind in (SMALL_OBJECT, LARGE_OBJECT)
    width = 4 if large else 2
    count = _uint(data, pos, width, end)
    budget.spend(count)
    size = _uint(data, pos + width, width, end)
    _need(data, pos, size, end)
    limit = pos + size
    entries = pos + 2 * width
    keys = []
    if is_object:
        for i in range(count):
            entry = entries + i * (width + 2)
            key_offset = _uint(data, entry, width, limit)
            key_len = _uint(data, entry + width, 2, limit)
            _need(data, pos + key_offset, key_len, limit)
            budget.spend(key_len)
            keys.append(bytes(data[pos + key_offset : pos + key_offset + key_len]).decode())
        entries += count * (width + 2)
    values = []
    for i in range(count):
        entry = entries + i * (1 + width)
        value_kind = _uint(data, entry, 1, limit)
        inline = value_kind in (LITERAL, INT16, UINT16) or (large and value_kind in (INT32, UINT32))
        if inline:
            values.append(_value(value_kind, data, entry + 1, limit, depth + 1, budget))
        else:
            offset = _uint(data, entry + 1, width, limit)
            values.append(_value(value_kind, data, pos + offset, limit, depth + 1, budget))
    return dict(zip(keys, values)) if is_object else values


def _opaque(field_type: int, data: bytes) -> Any:
    if field_type in (_T_NEWDECIMAL, _T_DECIMAL):
        if len(data) < 2:
            raise JsonBinaryError("opaque DECIMAL without precision and scale")
        precision, scale = data[0], data[1]
        negative, integer, fraction = unpack_decimal(data[2:], precision, scale)
        text = f"{'-' if negative else ''}{integer}" + (f".{fraction:0{scale}d}" if scale else "")
        return Decimal(text)  # all its digits: cdc_source.types.canonical_json
    if field_type in (_T_DATE, _T_DATETIME, _T_TIMESTAMP, _T_TIME):
        if len(data) < 8:
            raise JsonBinaryError("opaque temporal value shorter than 8 bytes")
        packed = int.from_bytes(data[:8], "little", signed=True)
        return _temporal(field_type, packed)
    if field_type == _T_VAR_STRING:
        return data.decode("utf-8", "replace")
    return f"base64:type{field_type}:{base64.b64encode(data).decode('ascii')}"


def _temporal(field_type: int, packed: int) -> str:
    """``TIME_from_longlong_*_packed`` (my_time.cc), printed with 6 fraction digits."""
    negative = packed < 0
    magnitude = -packed if negative else packed
    micros, whole = magnitude % (1 << 24), magnitude >> 24
    if field_type == _T_TIME:
        hours, minutes, seconds = (whole >> 12) % 1024, (whole >> 6) % 64, whole % 64
        sign = "-" if negative else ""
        return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}.{micros:06d}"
    ymd, hms = whole >> 17, whole % (1 << 17)
    ym = ymd >> 5
    year, month, day = ym // 13, ym % 13, ymd % 32
    if field_type == _T_DATE:
        return f"{year:04d}-{month:02d}-{day:02d}"
    hour, minute, second = hms >> 12, (hms >> 6) % 64, hms % 64
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micros:06d}"
