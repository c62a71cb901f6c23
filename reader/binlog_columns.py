"""Decoded binlog columns -> the canonical Arrow column of the output schema.

The row decoders give each column in its physical form (``reader.row_plan``); this module
casts it, column at a time, to the Spark type the snapshot produces for the same stored
value (``cdc_source.types``). Only JSON, SET and non-UTF-8 text take a per-value step.
A binlog column whose type does not fit the query's schema (the table was altered) is a
clear error, never a value under the wrong type.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.binlog import constants as c
from cdc_source.binlog.table_map import Column
from cdc_source.catalog import BINARY_TYPES, STRING_TYPES, ColumnSpec, TableSchema
from cdc_source.types import SPARK_MAX_DECIMAL
from reader import json_binary
from reader.binlog_range import ChangeBlock


class BinlogSchemaMismatchError(RuntimeError):
    """A binlog column's type differs from the column the query's schema expects."""


_UTF8 = {None, "utf8mb4", "utf8mb3", "utf8", "ascii", "binary"}
_CODECS = {
    "latin1": "cp1252",
    "latin2": "iso8859_2",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "ucs2": "utf_16_be",
    "utf16": "utf_16_be",
    "utf16le": "utf_16_le",
    "utf32": "utf_32_be",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "eucjpms": "euc_jp",
    "euckr": "euc_kr",
    "tis620": "tis_620",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "macroman": "mac_roman",
    "armscii8": "armscii8",
}

_INTEGER_BINLOG = {c.T_TINY, c.T_SHORT, c.T_INT24, c.T_LONG, c.T_LONGLONG}
_TEXT_BINLOG = {
    c.T_VARCHAR,
    c.T_VAR_STRING,
    c.T_STRING,
    c.T_BLOB,
    c.T_TINY_BLOB,
    c.T_MEDIUM_BLOB,
    c.T_LONG_BLOB,
}
_EXPECTED = {
    "tinyint": _INTEGER_BINLOG,
    "smallint": _INTEGER_BINLOG,
    "mediumint": _INTEGER_BINLOG,
    "int": _INTEGER_BINLOG,
    "integer": _INTEGER_BINLOG,
    "bigint": _INTEGER_BINLOG,
    "decimal": {c.T_NEWDECIMAL},
    "float": {c.T_FLOAT},
    "double": {c.T_DOUBLE},
    "real": {c.T_DOUBLE},
    "bit": {c.T_BIT},
    "date": {c.T_DATE, c.T_NEWDATE},
    "datetime": {c.T_DATETIME2, c.T_DATETIME},
    "timestamp": {c.T_TIMESTAMP2, c.T_TIMESTAMP},
    "time": {c.T_TIME2, c.T_TIME},
    "year": {c.T_YEAR},
    "enum": {c.T_ENUM},
    "set": {c.T_SET},
    "json": {c.T_JSON, *_TEXT_BINLOG},
}


def _expected(spec: ColumnSpec) -> set[int]:
    if spec.data_type in STRING_TYPES or spec.data_type in BINARY_TYPES:
        return _TEXT_BINLOG
    return _EXPECTED.get(spec.data_type, set())


def check_column(spec: ColumnSpec, column: Column, table: str, where: str) -> None:
    if column.type not in _expected(spec):
        raise BinlogSchemaMismatchError(
            f"column {spec.name!r} of {table} has binlog type {column.type} at {where}, but "
            f"the query's schema has it as {spec.column_type}: the table was altered while the "
            "query ran. Restart the query to read the new schema"
        )


def canonical_column(
    spec: ColumnSpec, column: Column, values: pa.Array, target: pa.DataType
) -> pa.Array:
    """One decoded column as the output type ``target`` of ``spec``."""
    t = spec.data_type
    if t == "tinyint" and spec.is_tinyint1:
        return pc.not_equal(values, 0)
    if t in ("tinyint", "smallint", "mediumint", "int", "integer", "year"):
        return values.cast(target)
    if t == "bigint":
        return values.cast(target)  # int64, or uint64 -> decimal(20, 0)
    if t == "decimal":
        if (spec.precision or 10) > SPARK_MAX_DECIMAL:
            # The decoders write it as canonical_value does: sign, integer digits without
            # leading zeros ("0" for none), then exactly `scale` fraction digits.
            return values.cast(pa.string())
        return values.cast(target)
    if t in ("float", "double", "real"):
        return values.cast(target)
    if t == "bit":
        if spec.bit_width == 1:
            return pc.not_equal(values, pa.scalar(b"\x00", pa.binary()))
        return values
    if t in ("date", "datetime", "timestamp", "time"):
        return values.cast(target)
    if t == "enum":
        members = pa.array(("",) + spec.set_members, pa.string())
        if (
            len(values)
            and pc.max(values).as_py() is not None
            and pc.max(values).as_py() >= len(members)
        ):
            raise BinlogSchemaMismatchError(f"ENUM {spec.name!r} index out of its members")
        return members.take(values)
    if t == "set":
        return _set_text(values, spec.set_members)
    if t == "json":
        if column.type == c.T_JSON:
            return pa.array(
                [
                    None if v is None else _json_text(json_binary.decode(v))
                    for v in values.to_pylist()
                ],
                pa.string(),
            )
        return pa.array(
            [None if v is None else _json_text(json.loads(v)) for v in values.to_pylist()],
            pa.string(),
        )
    if t in BINARY_TYPES:
        return values
    if t in STRING_TYPES:
        charset = (spec.charset or "").lower()
        if charset in _UTF8:
            return values.cast(pa.string())
        codec = _CODECS.get(charset)
        if codec is None:
            raise BinlogSchemaMismatchError(
                f"column {spec.name!r} uses character set {charset}, which the binlog decoder "
                "cannot convert; exclude the table or convert the column to utf8mb4"
            )
        return pa.array(
            [None if v is None else v.decode(codec) for v in values.to_pylist()], pa.string()
        )
    raise BinlogSchemaMismatchError(f"no binlog conversion for {spec.name!r} ({spec.column_type})")


def _json_text(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _set_text(masks: pa.Array, members: tuple[str, ...]) -> pa.Array:
    """SET bitmasks as the server prints them: members in declaration order, comma-joined;
    each distinct mask is spelled once."""
    unique = pc.unique(masks.drop_null()).to_pylist()
    if any(mask >> len(members) for mask in unique):
        raise BinlogSchemaMismatchError("SET value has bits beyond its members")
    spelled = pa.array(
        [",".join(m for i, m in enumerate(members) if mask >> i & 1) for mask in unique],
        pa.string(),
    )
    return spelled.take(pc.index_in(masks, pa.array(unique, masks.type)))


class ImageColumns:
    """The canonical output columns of a block's before- and after-images, by schema
    column (NULL for a column the binlog rows do not have), built on first use."""

    def __init__(self, schema: TableSchema, block: ChangeBlock, types: list[pa.DataType]):
        self.schema = schema
        self.block = block
        self.types = types
        positions = {column.name: i for i, column in enumerate(block.table_map.columns)}
        self.positions = [positions.get(spec.name) for spec in schema.columns]
        where = f"{block.table} rows ending at position {int(block.end_pos[0])}"
        for spec, position in zip(schema.columns, self.positions):
            if position is not None:
                check_column(spec, block.table_map.columns[position], block.table, where)
        self._cache: dict[tuple[str, int], pa.Array] = {}

    def column(self, side: str, index: int) -> pa.Array:
        key = (side, index)
        if key not in self._cache:
            position = self.positions[index]
            if position is None:
                self._cache[key] = pa.nulls(self.block.num_rows, self.types[index])
            else:
                raw = (self.block.rows.before if side == "before" else self.block.rows.after)[
                    position
                ]
                spec = self.schema.columns[index]
                column = self.block.table_map.columns[position]
                self._cache[key] = canonical_column(spec, column, raw, self.types[index])
        return self._cache[key]

    def raw(self, side: str, index: int) -> pa.Array:
        """A column as decoded (physical form), for exact comparisons of key values."""
        position = self.positions[index]
        if position is None:
            return pa.nulls(self.block.num_rows, pa.int64())
        return (self.block.rows.before if side == "before" else self.block.rows.after)[position]

    def python_images(self, side: str) -> list[dict | None]:
        """Per row, the image as a dict of canonical Python values (None where absent)."""
        present = (
            self.block.rows.has_before if side == "before" else self.block.rows.has_after
        ).to_pylist()
        columns = [_naive(self.column(side, i)).to_pylist() for i in range(len(self.types))]
        names = self.schema.column_names
        return [
            dict(zip(names, values)) if has else None
            for has, values in zip(present, zip(*columns) if columns else [()] * len(present))
        ]

    def key_tuples(self, side: str) -> list[tuple | None]:
        present = (
            self.block.rows.has_before if side == "before" else self.block.rows.has_after
        ).to_pylist()
        indexes = [self.schema.column_names.index(name) for name in self.schema.primary_key]
        columns = [_naive(self.column(side, i)).to_pylist() for i in indexes]
        return [tuple(k) if has else None for has, k in zip(present, zip(*columns))]


def _naive(array: pa.Array) -> pa.Array:
    """UTC timestamps without their zone, as the snapshot's values are."""
    if pa.types.is_timestamp(array.type) and array.type.tz is not None:
        return array.cast(pa.timestamp(array.type.unit))
    return array
