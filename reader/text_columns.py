"""Snapshot values in the server's text form, as a C client returns them unconverted.

Every snapshot client hands over the server's text as Arrow binary columns
(:mod:`reader.snapshot_connection`) and nothing is parsed per value in Python: Arrow
casts whole columns. Values Arrow cannot cast (zero dates, TIME, BIT, MySQL JSON, ...) are
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
from cdc_source.charsets import is_utf8, text_decoder
from cdc_source.types import SPARK_MAX_DECIMAL, canonical_value
from reader import native_columns
from reader.value_checks import boolean_column, decoded_text

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
    if t in STRING_TYPES and not is_utf8(column.charset):
        return text_decoder(column.name, column.charset or "", column.byte_table)(bytes(raw))
    return _text(raw)


def _native_cast(column: ColumnSpec, text: pa.Array, arrow_type: pa.DataType) -> pa.Array | None:
    """The C build of a column of the kinds :mod:`reader.native_columns` types, or None
    (Arrow's cast decides)."""
    t = column.data_type
    if t == "bigint" and column.unsigned:
        return native_columns.decimals(text, pa.decimal128(20, 0))
    if t == "decimal" and pa.types.is_decimal128(arrow_type):
        return native_columns.decimals(text, arrow_type)
    if t == "date" and arrow_type == pa.date32():
        return native_columns.date_days(text)
    if t in ("datetime", "timestamp") and pa.types.is_timestamp(arrow_type):
        if arrow_type.unit != "us":
            return None
        return native_columns.datetime_micros(text, arrow_type)
    if t == "time":
        return native_columns.time_micros(text)
    return None


def _fast_cast(column: ColumnSpec, text: pa.Array, arrow_type: pa.DataType) -> pa.Array | None:
    """Arrow's cast of a binary column of the server's text (or of its stored numbers, the
    same casts), or None (parse per value)."""
    t = column.data_type
    if t in _INTEGERS:
        if column.boolean:
            return boolean_column(column, text.cast(pa.int16()))
        if t == "bigint" and column.unsigned:
            return text.cast(pa.decimal128(20, 0))
        return text.cast(arrow_type)
    if t == "decimal" and (column.precision or 10) <= SPARK_MAX_DECIMAL:
        return text.cast(arrow_type)
    if t in ("float", "double", "real"):
        return text.cast(pa.float64()).cast(arrow_type)
    if t in STRING_TYPES:
        return decoded_text(column, text)
    if t in _CASTABLE_TEXT:
        return text.cast(pa.string())  # checks that it is UTF-8
    if t in BINARY_TYPES and t != "binary":
        return text
    if t == "date":
        return text.cast(pa.string()).cast(pa.date32())
    if t in ("datetime", "timestamp"):
        return text.cast(pa.string()).cast(pa.timestamp("us")).cast(arrow_type)
    if t == "time":
        return _time_micros(text)
    return None


# TIME as the server prints it: [-]H+:MM:SS[.f{1,6}] (hours up to 838).
_TIME_TEXT = r"^(?P<sign>-?)(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d)(?:\.(?P<f>\d{1,6}))?$"


def _time_micros(text: pa.Array) -> pa.Array:
    """TIME text as signed microseconds, on columns (``convert_timedelta`` per value)."""
    parts = pc.extract_regex(text.cast(pa.string()), _TIME_TEXT)
    if parts.null_count != text.null_count:  # a value of another shape: parse per value
        raise pa.ArrowInvalid("TIME text not in [-]H:MM:SS[.ffffff] form")
    hours, minutes, seconds = (pc.struct_field(parts, n).cast(pa.int64()) for n in ("h", "m", "s"))
    fraction = pc.utf8_rpad(pc.struct_field(parts, "f"), width=6, padding="0").cast(pa.int64())
    whole = pc.add(pc.multiply(pc.add(pc.multiply(hours, 60), minutes), 60), seconds)
    micros = pc.add(pc.multiply(whole, 1_000_000), fraction)
    return pc.if_else(pc.equal(pc.struct_field(parts, "sign"), "-"), pc.negate(micros), micros)


def is_stored_number(fetched: pa.Array) -> bool:
    """Whether a fetched column holds the stored numbers (the binary protocol's integers
    and doubles) rather than the server's text."""
    return pa.types.is_integer(fetched.type) or pa.types.is_floating(fetched.type)


def text_column_to_arrow(
    column: ColumnSpec, text: pa.Array, arrow_type: pa.DataType, native: bool = False
) -> pa.Array:
    """One fetched column (the server's text as Arrow binary, or its stored numbers) in
    the output type; ``native``: with :mod:`reader.native_columns` where it has the
    column's kind."""
    try:
        # Stored numbers take Arrow's casts, as their text does; the C parses text only.
        array = (
            _native_cast(column, text, arrow_type)
            if native and not is_stored_number(text)
            else None
        )
        if array is None:
            array = _fast_cast(column, text, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        array = None  # e.g. a zero date: parse value by value below
    if array is not None and array.type == arrow_type:
        return array
    return pa.array(
        [canonical_value(column, text_to_python(column, v)) for v in text.to_pylist()],
        type=arrow_type,
    )
