"""How each column of a TABLE_MAP is laid out in a row image, as a small plan both row
decoders (C and pure Python) follow, and the Arrow type each produces.

A plan entry is ``(kind, a, b)``; the decoders write one Arrow column per entry:

=============  ===================================  ==============================
kind           a, b                                 Arrow column
=============  ===================================  ==============================
K_SINT/K_UINT  byte width, -                        int64 / uint64
K_FLOAT        -                                    float32
K_DOUBLE       -                                    float64
K_DECIMAL      precision, scale                     decimal128 (p <= 38), else text
K_DATE         -                                    date32, NULL for zero/invalid
K_DATETIME2    fsp, -                               timestamp[us], NULL for zero
K_TIMESTAMP2   fsp, -                               timestamp[us, UTC], NULL for 0
K_TIME2        fsp, -                               int64 microseconds
K_YEAR         -                                    int64 (0 stays 0)
K_VAR          length-prefix bytes, pad-to          binary
K_ENUM/K_SET   byte width, -                        int64 / uint64 (index / mask)
K_BIT          byte width, -                        binary (big-endian)
K_DATETIME     -                                    timestamp[us] (pre-5.6 format)
K_TIMESTAMP    -                                    timestamp[us, UTC] (pre-5.6)
K_TIME         -                                    int64 microseconds (pre-5.6)
=============  ===================================  ==============================

``K_VAR`` with ``pad-to`` > 0 is a BINARY(n) column: the server drops its trailing zero
bytes in the row image (``Field_string::pack``), the decoders put them back.
"""

from __future__ import annotations

import pyarrow as pa

from cdc_source.binlog import constants as c
from cdc_source.binlog.table_map import Column, TableMap

K_SINT, K_UINT, K_FLOAT, K_DOUBLE, K_DECIMAL = 1, 2, 3, 4, 5
K_DATE, K_DATETIME2, K_TIMESTAMP2, K_TIME2, K_YEAR = 6, 7, 8, 9, 10
K_VAR, K_ENUM, K_SET, K_BIT = 11, 12, 13, 14
K_DATETIME, K_TIMESTAMP, K_TIME = 15, 16, 17

BINARY_COLLATION = 63
MAX_DECIMAL128 = 38
# The largest DECIMAL scale a server writes: MariaDB's (MySQL's is 30).
MAX_DECIMAL_SCALE = 38

_INT_WIDTH = {c.T_TINY: 1, c.T_SHORT: 2, c.T_INT24: 3, c.T_LONG: 4, c.T_LONGLONG: 8}
_BLOBS = {c.T_BLOB, c.T_TINY_BLOB, c.T_MEDIUM_BLOB, c.T_LONG_BLOB, c.T_GEOMETRY, c.T_JSON}


DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a binary DECIMAL (``decimal_bin_size``): 4 per 9 digits on each side of
    the point, fewer for the rest."""
    whole = precision - scale
    return whole // 9 * 4 + DIG2BYTES[whole % 9] + scale // 9 * 4 + DIG2BYTES[scale % 9]


class UnsupportedColumnError(ValueError):
    pass


def column_plan(column: Column) -> tuple[int, int, int]:
    entry = _column_plan(column)
    kind, a, b = entry
    bad = (
        (kind == K_DECIMAL and not (1 <= a <= 65 and b <= min(a, MAX_DECIMAL_SCALE)))
        or (kind in (K_DATETIME2, K_TIMESTAMP2, K_TIME2) and a > 6)
        or (kind in (K_ENUM, K_SET, K_BIT) and not 1 <= a <= 8)
    )
    if bad:
        raise UnsupportedColumnError(
            f"column {column.name!r} has binlog type {column.type} with metadata "
            f"{column.meta:#x}, which no server writes"
        )
    return entry


def _column_plan(column: Column) -> tuple[int, int, int]:
    t, meta = column.type, column.meta
    if t in _INT_WIDTH:
        return (K_UINT if column.unsigned else K_SINT, _INT_WIDTH[t], 0)
    if t == c.T_FLOAT:
        return (K_FLOAT, 0, 0)
    if t == c.T_DOUBLE:
        return (K_DOUBLE, 0, 0)
    if t == c.T_NEWDECIMAL:
        return (K_DECIMAL, meta & 0xFF, meta >> 8)  # precision, scale
    if t in (c.T_DATE, c.T_NEWDATE):
        return (K_DATE, 0, 0)
    if t == c.T_DATETIME2:
        return (K_DATETIME2, meta, 0)
    if t == c.T_TIMESTAMP2:
        return (K_TIMESTAMP2, meta, 0)
    if t == c.T_TIME2:
        return (K_TIME2, meta, 0)
    if t == c.T_YEAR:
        return (K_YEAR, 0, 0)
    if t in (c.T_VARCHAR, c.T_VAR_STRING):
        return (K_VAR, 1 if meta < 256 else 2, 0)
    if t == c.T_STRING:
        pad = meta if column.collation == BINARY_COLLATION else 0
        return (K_VAR, 1 if meta < 256 else 2, pad)
    if t in _BLOBS:
        if not 1 <= meta <= 4:
            raise UnsupportedColumnError(f"column {column.name}: blob length size {meta}")
        return (K_VAR, meta, 0)
    if t == c.T_ENUM:
        return (K_ENUM, meta, 0)
    if t == c.T_SET:
        return (K_SET, meta, 0)
    if t == c.T_BIT:
        return (K_BIT, (meta >> 8) + (1 if meta & 0xFF else 0), 0)
    if t == c.T_DATETIME:
        return (K_DATETIME, 0, 0)
    if t == c.T_TIMESTAMP:
        return (K_TIMESTAMP, 0, 0)
    if t == c.T_TIME:
        return (K_TIME, 0, 0)
    raise UnsupportedColumnError(
        f"column {column.name!r} has binlog type {t}, which the decoder does not support"
    )


def table_plan(table_map: TableMap) -> tuple[tuple[int, int, int], ...]:
    return tuple(column_plan(column) for column in table_map.columns)


def json_columns(table_map: TableMap) -> int:
    """Columns a PARTIAL_UPDATE_ROWS event's partial-JSON bitmap has a bit for."""
    return sum(1 for column in table_map.columns if column.type == c.T_JSON)


def arrow_type(entry: tuple[int, int, int]) -> pa.DataType:
    kind, a, b = entry
    if kind == K_SINT or kind in (K_TIME2, K_TIME, K_YEAR, K_ENUM):
        return pa.int64()
    if kind in (K_UINT, K_SET):
        return pa.uint64()
    if kind == K_FLOAT:
        return pa.float32()
    if kind == K_DOUBLE:
        return pa.float64()
    if kind == K_DECIMAL:
        return pa.decimal128(a, b) if a <= MAX_DECIMAL128 else pa.binary()
    if kind == K_DATE:
        return pa.date32()
    if kind in (K_DATETIME2, K_DATETIME):
        return pa.timestamp("us")
    if kind in (K_TIMESTAMP2, K_TIMESTAMP):
        return pa.timestamp("us", tz="UTC")
    return pa.binary()  # K_VAR, K_BIT
