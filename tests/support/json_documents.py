"""JSON documents the unit tests build with :mod:`tests.support.binlog_encoder` and the
corpus recorder has real servers write (:mod:`tests.support.record_binlog_corpus`), so that
the encoder's bytes for each are checked against the servers' bytes."""

from __future__ import annotations

import struct
from decimal import Decimal

from tests.support import binlog_encoder as enc

T_NEWDECIMAL, T_DATE, T_TIME, T_DATETIME, T_BLOB = 246, 10, 11, 12, 252


def packed_datetime(y, mo, d, h, mi, s, us) -> bytes:
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return struct.pack("<q", (((ymd << 17) | hms) << 24) + us)


def packed_time(negative, h, mi, s, us) -> bytes:
    value = (((h << 12) | (mi << 6) | s) << 24) + us
    return struct.pack("<q", -value if negative else value)


SCALARS_AND_CONTAINERS = {
    "int16": -5,
    "uint-ish": 40000,
    "int32": -2_000_000_000,
    "int64": 9_000_000_000_000,
    "uint64": 18_000_000_000_000_000_000,
    "double": 2.5,
    "text": "Grüße 🙂",
    "flags": [True, False, None],
    "nested": {"a": [1, {"b": "c"}], "": []},
}
LARGE_OBJECT = {f"key{i:05d}": [i, -i * 70000, "x" * 50] for i in range(800)}  # > 64 KiB
CANONICAL_DOCUMENT = {"b": [1, 2.5, "x"], "a": None}
LARGE_ARRAY = [-5, 40000, -70000, True, False, None, 1.5, "s", 2**40, -(2**40), LARGE_OBJECT]

OPAQUE_CASES = [
    (
        enc.Opaque(T_NEWDECIMAL, bytes([10, 2]) + enc.decimal_bin(Decimal("-12.50"), 10, 2)),
        -12.5,
    ),
    (
        enc.Opaque(T_DATETIME, packed_datetime(2024, 2, 29, 23, 59, 58, 125000)),
        "2024-02-29 23:59:58.125000",
    ),
    (enc.Opaque(T_DATE, packed_datetime(2001, 12, 31, 0, 0, 0, 0)), "2001-12-31"),
    (enc.Opaque(T_TIME, packed_time(True, 838, 59, 59, 0)), "-838:59:59.000000"),
    (enc.Opaque(T_BLOB, b"\x00\xff"), "base64:type252:AP8="),
]
