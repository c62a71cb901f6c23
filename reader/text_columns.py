"""Snapshot values in the server's text form, as a C client returns them unconverted.

With mysqlclient and its converters off, a fetched value is the server's text (``bytes``,
or ``str`` for character columns) and nothing is parsed per value in Python: Arrow casts
whole columns. Values Arrow cannot cast (zero dates, TIME, BIT, MySQL JSON, ...) are
parsed the way PyMySQL parses them and then take the same :func:`canonical_value` as
every other road, so the output does not depend on the client.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pymysql import converters

from cdc_source.catalog import BINARY_TYPES, STRING_TYPES, ColumnSpec
from cdc_source.types import SPARK_MAX_DECIMAL, canonical_value

_INTEGERS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year")
_CASTABLE_TEXT = STRING_TYPES | {"enum", "set"}


def _text(raw: Any) -> str:
    return raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else str(raw)


def text_to_python(column: ColumnSpec, raw: Any) -> Any:
    """The value PyMySQL would have returned for this text (before canonicalization)."""
    if raw is None:
        return None
    t = column.data_type
    if t in _INTEGERS:
        return int(raw)
    if t == "decimal":
        return Decimal(_text(raw))
    if t in ("float", "double", "real"):
        return float(raw)
    if t == "bit" or t in BINARY_TYPES:
        return bytes(raw) if not isinstance(raw, str) else raw.encode("latin-1")
    if t == "date":
        return converters.convert_date(_text(raw))
    if t in ("datetime", "timestamp"):
        return converters.convert_datetime(_text(raw))
    if t == "time":
        return converters.convert_timedelta(_text(raw))
    return _text(raw)


def text_key(columns: tuple[ColumnSpec, ...], record: tuple, positions: list[int]) -> tuple:
    return tuple(text_to_python(c, record[p]) for c, p in zip(columns, positions))


def _as_strings(values: list) -> pa.Array:
    if any(isinstance(v, (bytes, bytearray)) for v in values):
        return pa.array(values, pa.binary()).cast(pa.string())
    return pa.array(values, pa.string())


def _fast_cast(column: ColumnSpec, values: list, arrow_type: pa.DataType) -> pa.Array | None:
    t = column.data_type
    if t in _INTEGERS:
        if column.is_tinyint1:
            return pc.not_equal(_as_strings(values).cast(pa.int16()), 0)
        if t == "bigint" and column.unsigned:
            return _as_strings(values).cast(pa.decimal128(20, 0))
        return _as_strings(values).cast(arrow_type)
    if t == "decimal" and (column.precision or 10) <= SPARK_MAX_DECIMAL:
        return _as_strings(values).cast(arrow_type)
    if t in ("float", "double", "real"):
        return _as_strings(values).cast(pa.float64()).cast(arrow_type)
    if t in _CASTABLE_TEXT:
        return _as_strings(values)
    if t in BINARY_TYPES and t != "binary":
        return pa.array(values, pa.binary())
    if t == "date":
        return _as_strings(values).cast(pa.date32())
    if t in ("datetime", "timestamp"):
        return _as_strings(values).cast(pa.timestamp("us")).cast(arrow_type)
    return None


def text_column_to_arrow(column: ColumnSpec, values: list, arrow_type: pa.DataType) -> pa.Array:
    """One column of fetched text values as an Arrow array of the output type."""
    try:
        array = _fast_cast(column, values, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        array = None  # e.g. a zero date: parse value by value below
    if array is not None and array.type == arrow_type:
        return array
    return pa.array(
        [canonical_value(column, text_to_python(column, v)) for v in values], type=arrow_type
    )
