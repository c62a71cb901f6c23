"""Primary keys: their JSON form in offsets, and an order-preserving byte form.

The byte form ("sort key") is what every Python-side decision about keys uses: "is this
key owned by the stream", "is it inside this chunk", "is it the same key". It must agree
with the server's own ``ORDER BY`` on the primary key, so for collated strings it is
built from the server's ``WEIGHT_STRING`` (padded for PAD SPACE collations) rather than
from Python's string order. For the other key types the value's natural order is the
server's order, encoded big-endian with the sign flipped.

Composite keys concatenate per-column encodings that are prefix-free (fixed width, or
escaped and terminated), so comparing the bytes compares the tuple lexicographically.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Context, Decimal
from typing import Any

from cdc_source.catalog import ColumnSpec, TableSchema

KeyValues = tuple  # one value per primary-key column, in key order

WeightLookup = Callable[[ColumnSpec, str], bytes]


class KeyTypeError(ValueError):
    pass


def to_json_value(column: ColumnSpec, value: Any) -> Any:
    """A key value as it is written into an offset (exact, JSON-safe)."""
    t = column.data_type
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dt.timedelta):
        return (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, str):
        return value
    raise KeyTypeError(f"key column {column.name!r} ({t}) has an unsupported value {value!r}")


def from_json_value(column: ColumnSpec, value: Any) -> Any:
    """The SQL parameter for a key value read back from an offset."""
    t = column.data_type
    if t == "decimal":
        return Decimal(value)
    if t in ("binary", "varbinary"):
        return bytes.fromhex(value)
    if t == "time":
        return time_literal(int(value))
    if t == "date":
        return dt.date.fromisoformat(value)
    if t in ("datetime", "timestamp"):
        return dt.datetime.fromisoformat(value)
    return value


def time_literal(micros: int) -> str:
    """A TIME value as SQL text. (PyMySQL spells a negative ``timedelta`` wrongly:
    -1 s becomes '-1:59:59'.)"""
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return f"{sign}{hours:02d}:{minute:02d}:{second:02d}.{fraction:06d}"


def key_to_json(schema: TableSchema, key: KeyValues) -> list:
    return [to_json_value(c, v) for c, v in zip(schema.key_columns, key)]


def key_from_json(schema: TableSchema, values: list | tuple) -> KeyValues:
    return tuple(from_json_value(c, v) for c, v in zip(schema.key_columns, values))


def _signed(value: int, width: int) -> bytes:
    return (value + (1 << (8 * width - 1))).to_bytes(width, "big")


def _escaped(data: bytes) -> bytes:
    """Prefix-free, order-preserving: 0x00 -> 0x00 0xFF, terminated by 0x00 0x00."""
    return data.replace(b"\x00", b"\x00\xff") + b"\x00\x00"


_EXACT = Context(prec=100)  # DECIMAL has at most 65 digits; the default context keeps 28


def _decimal_units(column: ColumnSpec, value: Decimal) -> int:
    """The value in units of its last decimal place, exactly (a key of more than 28 digits
    would be rounded, and two keys made one, in Python's default decimal context)."""
    scale = column.scale or 0
    return int(Decimal(value).scaleb(scale, _EXACT).to_integral_value(context=_EXACT))


def needs_weight(column: ColumnSpec) -> bool:
    return column.is_collated_string


def encode_component(column: ColumnSpec, value: Any, weight: bytes | None = None) -> bytes:
    """Order-preserving bytes of one key value. ``weight`` is required for collated strings."""
    t = column.data_type
    if needs_weight(column):
        if weight is None:
            raise KeyTypeError(f"key column {column.name!r} needs the server's collation weight")
        return _escaped(weight)
    if t == "year":
        year = int(value)
        return _signed(0 if year == 1900 else year, 9)  # the binlog library reads YEAR 0 as 1900
    if t in ("tinyint", "smallint", "mediumint", "int", "integer", "bigint"):
        return _signed(int(value), 9)
    if t == "decimal":
        return _signed(_decimal_units(column, value), 30)
    if t in ("binary", "varbinary"):
        data = value.encode("latin-1") if isinstance(value, str) else bytes(value)
        if t == "binary" and column.octet_length:
            data = data.ljust(column.octet_length, b"\0")
        return _escaped(data)
    if t == "date":
        return _signed(value.toordinal(), 4)
    if t in ("datetime", "timestamp"):
        delta = value - dt.datetime(1, 1, 1)
        micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return _signed(micros, 9)
    if t == "time":
        if isinstance(value, dt.timedelta):
            value = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
        elif isinstance(value, str):  # a key read back from an offset (time_literal)
            negative = value.startswith("-")
            hours, minutes, seconds = value.lstrip("-").split(":")
            whole, _, fraction = seconds.partition(".")
            value = ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1_000_000 + int(
                (fraction or "0").ljust(6, "0")
            )
            value = -value if negative else value
        return _signed(int(value), 9)
    if t in ("char", "varchar"):  # binary-collated character strings
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return _escaped(data.rstrip(b" ") if column.pad_space else data)
    raise KeyTypeError(
        f"primary key column {column.name!r} has type {column.column_type!r}, which cdc-mysql "
        "cannot chunk; supported key types are integers, DECIMAL, CHAR/VARCHAR, "
        "BINARY/VARBINARY, DATE, DATETIME, TIMESTAMP, TIME and YEAR"
    )


def sort_key(schema: TableSchema, key: KeyValues, weights: WeightLookup | None = None) -> bytes:
    parts = []
    for column, value in zip(schema.key_columns, key):
        weight = weights(column, value) if needs_weight(column) and weights else None
        parts.append(encode_component(column, value, weight))
    return b"".join(parts)


def weight_sql(column: ColumnSpec, expression: str) -> str:
    """SQL giving the collation weight of ``expression`` the way the column compares it."""
    charset = column.charset or "utf8mb4"
    collated = f"CONVERT({expression} USING {charset}) COLLATE {column.collation}"
    if column.pad_space and column.char_length:
        return f"WEIGHT_STRING({collated} AS CHAR({int(column.char_length)}))"
    return f"WEIGHT_STRING({collated})"
