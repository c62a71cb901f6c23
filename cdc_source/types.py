"""MySQL -> Spark type mapping, and the canonical Python value of each column.

A value reaches the source by two roads: the text protocol of the snapshot SELECT and
the row events of the binlog. ``canonical_value`` turns either into the one Python value
Spark/Arrow receives, so the same stored value is the same output value on both roads.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from dataclasses import replace
from decimal import Decimal
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from cdc_source.catalog import BINARY_TYPES, STRING_TYPES, ColumnSpec, TableSchema
from cdc_source.refusals import (
    boolean_refusal,
    invalid_date_refusal,
)

SPARK_MAX_DECIMAL = 38


class UnsupportedTypeError(ValueError):
    pass


def with_tinyint1_policy(table: TableSchema, as_boolean: bool) -> TableSchema:
    """``table`` with its TINYINT(1) columns marked as BOOLEAN where ``as_boolean``
    (Flink CDC's default), except key columns: a key mapped to a type of two values would
    merge rows the server keeps apart."""
    key = set(table.primary_key)
    columns = tuple(
        replace(c, boolean=as_boolean and c.is_tinyint1 and c.name not in key)
        for c in table.columns
    )
    return replace(table, columns=columns)


def spark_type(column: ColumnSpec) -> DataType:
    t = column.data_type
    unsigned = column.unsigned
    if t == "tinyint":
        if column.boolean:
            return BooleanType()
        return ShortType() if unsigned else ByteType()
    if t == "smallint":
        return IntegerType() if unsigned else ShortType()
    if t in ("mediumint",):
        return IntegerType()
    if t in ("int", "integer"):
        return LongType() if unsigned else IntegerType()
    if t == "bigint":
        return DecimalType(20, 0) if unsigned else LongType()
    if t == "decimal":
        precision, scale = column.precision or 10, column.scale or 0
        if precision > SPARK_MAX_DECIMAL:
            return StringType()
        return DecimalType(precision, scale)
    if t == "float":
        return FloatType()
    if t in ("double", "real"):
        return DoubleType()
    if t == "bit":
        return BooleanType() if column.bit_width == 1 else BinaryType()
    if t in STRING_TYPES or t in ("enum", "set", "json"):
        return StringType()
    if t in BINARY_TYPES:
        return BinaryType()
    if t == "date":
        return DateType()
    if t == "datetime":
        return TimestampNTZType()
    if t == "timestamp":
        return TimestampType()
    if t == "time":
        return LongType()
    if t == "year":
        return IntegerType()
    raise UnsupportedTypeError(
        f"column {column.name!r} has type {column.column_type!r}, which cdc-mysql does not "
        "support; exclude the table with 'table-name'"
    )


_EPOCH = dt.datetime(1970, 1, 1)


def _to_micros(value: dt.timedelta) -> int:
    return (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds


def canonical_value(column: ColumnSpec, value: Any) -> Any:
    """The value Spark receives for ``column``, from either the snapshot or the binlog."""
    if value is None:
        return None
    t = column.data_type
    if t in ("tinyint", "smallint", "mediumint", "int", "integer"):
        if column.boolean:
            if int(value) not in (0, 1):
                raise boolean_refusal(column.name, value)
            return bool(int(value))
        return int(value)
    if t == "bigint":
        return Decimal(int(value)) if column.unsigned else int(value)
    if t == "decimal":
        value = value if isinstance(value, Decimal) else Decimal(str(value))
        if (column.precision or 10) > SPARK_MAX_DECIMAL:
            return f"{value:.{column.scale or 0}f}"
        return value
    if t in ("float", "double", "real"):
        return float(value)
    if t == "bit":
        if isinstance(value, bool):  # already canonical (BIT(1))
            return value
        number = int(value, 2) if isinstance(value, str) else int.from_bytes(bytes(value), "big")
        if column.bit_width == 1:
            return bool(number)
        return number.to_bytes((column.bit_width + 7) // 8, "big")
    if t in BINARY_TYPES:
        data = value.encode("latin-1") if isinstance(value, str) else bytes(value)
        if t == "binary" and column.octet_length and len(data) < column.octet_length:
            data = data + b"\0" * (column.octet_length - len(data))  # binlog drops trailing zeros
        return data
    if t == "json":
        parsed = parse_json(value) if isinstance(value, (str, bytes)) else _json_decoded(value)
        return canonical_json(parsed)
    if t == "set":
        if isinstance(value, (set, frozenset, list, tuple)):
            return ",".join(m for m in column.set_members if m in value)
        return str(value)
    if t in STRING_TYPES or t == "enum":
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    if t == "date":
        return value if isinstance(value, dt.date) else _zero_date(column, value)
    if t in ("datetime", "timestamp"):
        return value if isinstance(value, dt.datetime) else _zero_date(column, value)
    if t == "time":
        return _to_micros(value) if isinstance(value, dt.timedelta) else int(value)
    if t == "year":
        year = int(value)
        return 0 if year == 1900 else year  # the binlog library maps YEAR 0 to 1900
    raise UnsupportedTypeError(f"no conversion for column {column.name!r} ({column.column_type})")


def _zero_date(column: ColumnSpec, text: Any) -> None:
    """None for the zero date (``0000-00-00``, with a zero time for DATETIME), which has
    no Spark value; any other text a client could not read as a date is refused."""
    spelled = text.decode() if isinstance(text, bytes) else str(text)
    if spelled.strip("0-: .") == "":
        return None
    raise invalid_date_refusal(column.name, spelled)


def parse_json(text: str | bytes) -> Any:
    """A JSON document as the server printed it, its non-integer numbers as Decimal (a
    DECIMAL inside MySQL's JSON keeps all its digits, which a float would not)."""
    return json.loads(text, parse_float=Decimal)


def canonical_json(value: Any) -> str:
    """The one text of a JSON document, from the snapshot's text and the binlog's binary
    document alike: compact, keys sorted, non-ASCII as is; a double as Python's shortest
    repr, a decimal in those digits where they are its exact value, else in its own."""
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{_json_string(k)}:{canonical_json(v)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _json_string(value)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_double(value)
    if isinstance(value, Decimal):
        as_double = float(value)
        if math.isfinite(as_double) and Decimal(repr(as_double)) == value:
            return _json_double(as_double)
        return str(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _json_double(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"a JSON document holds {value}, which JSON has no number for")
    return json.dumps(value)


def _json_decoded(value: Any) -> Any:
    """The binlog library returns MySQL's binary JSON with bytes keys/strings; make it JSON."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, dict):
        return {_json_decoded(k): _json_decoded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_decoded(v) for v in value]
    return value


def json_default(value: Any) -> Any:
    """How a canonical value is written into a JSON row image of the envelope schema."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def row_json(row: dict[str, Any] | None) -> str | None:
    if row is None:
        return None
    return json.dumps(row, default=json_default, separators=(",", ":"), ensure_ascii=False)


_CANONICAL_AS_FETCHED = {
    "smallint",
    "mediumint",
    "int",
    "integer",
    "double",
    "real",
    "float",
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
    "enum",
    "set",
    "varbinary",
    "tinyblob",
    "blob",
    "mediumblob",
    "longblob",
    "year",
}
_TEMPORAL_CLASSES = {"date": dt.date, "datetime": dt.datetime, "timestamp": dt.datetime}
