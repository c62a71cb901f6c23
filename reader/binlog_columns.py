"""Decoded binlog columns -> the canonical Arrow column of the output schema.

The row decoders give each column in its physical form (``cdc_source.binlog.row_plan``); this module
casts it, column at a time, to the Spark type the snapshot produces for the same stored
value (``cdc_source.types``). Only JSON, SET and non-UTF-8 text take a per-value step.
A binlog column whose type does not fit the query's schema (the table was altered) is a
clear error, never a value under the wrong type.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type

from cdc_source.binlog import constants as c
from cdc_source.binlog.table_map import Column
from cdc_source.catalog import BINARY_TYPES, STRING_TYPES, ColumnSpec, TableSchema
from cdc_source.column_policy import ALL_COLUMNS, ColumnPolicy
from cdc_source.refusals import ValueRefusedError
from cdc_source.types import SPARK_MAX_DECIMAL, canonical_json, parse_json, spark_type
from reader import json_binary
from reader.change_blocks import ChangeBlock
from reader.schema_drift import (
    CharsetOf,
    SchemaChangedError,
    binlog_column_spec,
    changes,
    column_change,
    event_schema,
    primary_key_change,
)
from reader.schema_drift import known_at as schema_known_at
from reader.value_checks import boolean_column, decoded_text


def _no_charsets(collation_id: int) -> str:
    raise SchemaChangedError(
        f"a binlog column with collation id {collation_id} is not in the query's schema"
    )


def _written_after(block: ChangeBlock, known_at: tuple[int, int] | None) -> bool:
    """Whether a row of ``block`` was written after ``known_at`` (unknown: assume so)."""
    if known_at is None:
        return True
    last = (int(block.file_number[-1]), int(block.end_pos[-1]))
    return last > known_at


def _changed_error(
    schema: TableSchema,
    block: ChangeBlock,
    differences: list[str],
    known_at: tuple[int, int] | None,
    key_change: str | None,
) -> SchemaChangedError:
    if known_at is None:
        first = 0
    else:
        after = (block.file_number > known_at[0]) | (
            (block.file_number == known_at[0]) & (block.end_pos > known_at[1])
        )
        first = int(after.argmax()) if after.any() else 0
    where = f"binlog file #{int(block.file_number[first])} position {int(block.end_pos[first])}"
    if key_change:
        remedy = (
            "The primary key orders and merges a table's changes, so the capture cannot go on "
            "across this change: start a new query (new checkpoint location) to snapshot the "
            "table again"
        )
    else:
        remedy = (
            "The query's output schema is read when it starts: restart the query (same "
            "checkpoint) and it reads the new schema and continues from its last committed "
            "batch, with the new output schema (a sink such as Delta follows with "
            "mergeSchema); rows written before the change keep their values by column name, "
            "NULL for columns they did not have"
        )
    return SchemaChangedError(
        f"{schema.name} was altered while the query ran, at {where}: "
        f"{'; '.join(differences)}. {remedy}"
    )


class BinlogSchemaMismatchError(RuntimeError):
    """A binlog column's type differs from the column the query's schema expects."""


def canonical_column(
    spec: ColumnSpec, column: Column, values: pa.Array, target: pa.DataType
) -> pa.Array:
    """One decoded column as the output type ``target`` of ``spec``."""
    t = spec.data_type
    if t == "tinyint" and spec.boolean:
        return boolean_column(spec, values)
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
                    None if v is None else canonical_json(json_binary.decode(v))
                    for v in values.to_pylist()
                ],
                pa.string(),
            )
        return pa.array(
            [None if v is None else canonical_json(parse_json(v)) for v in values.to_pylist()],
            pa.string(),
        )
    if t in BINARY_TYPES:
        return values
    if t in STRING_TYPES:
        return decoded_text(spec, values)
    raise BinlogSchemaMismatchError(f"no binlog conversion for {spec.name!r} ({spec.column_type})")


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
    """The canonical output columns of a block's before- and after-images.

    Typed output (``strict``): by the query's schema columns, placed by name. A block in
    another shape than the schema (:mod:`reader.schema_drift`) is accepted only when all
    its rows were written at or before ``known_at``, where the schema was read: then a
    column it lacks is NULL and a retyped column's values are cast to the new type; a
    row after ``known_at`` in another shape raises :class:`SchemaChangedError`.

    Envelope output (not ``strict``): by the block's own columns (``self.schema`` is the
    table as the event writes it), so images carry the columns their rows had.

    A column ``columns`` leaves out is not decoded (NULL here; the writer drops it), and
    neither its addition nor its removal is a change of shape."""

    def __init__(
        self,
        schema: TableSchema,
        block: ChangeBlock,
        types: list[pa.DataType],
        *,
        strict: bool = True,
        known_at: tuple[int, int] | None = None,
        charsets: CharsetOf | None = None,
        columns: ColumnPolicy = ALL_COLUMNS,
    ):
        self.block = block
        table_map = block.table_map
        # Columns the output leaves out are never decoded, and their changes of shape
        # (an ALTER adding one) change nothing the output holds.
        excluded = columns.excluded_names(
            schema, schema.column_names + tuple(column.name for column in table_map.columns)
        )
        differences = changes(schema, table_map, excluded)
        key_change = primary_key_change(schema, table_map)
        if differences and (key_change or (strict and _written_after(block, known_at))):
            raise _changed_error(schema, block, differences, known_at, key_change)
        charsets = charsets or _no_charsets
        if differences and not strict:
            schema = event_schema(schema, table_map, charsets)
            types = [to_arrow_type(spark_type(spec), timezone="UTC") for spec in schema.columns]
        self.schema = schema
        self.types = types
        positions = {column.name: i for i, column in enumerate(table_map.columns)}
        self.positions = [
            None if spec.name in excluded else positions.get(spec.name) for spec in schema.columns
        ]
        self.masked = columns.masked_names(schema, schema.column_names)
        # The spec each present column's values are decoded by: the schema's own, or, for a
        # column retyped since the rows were written, the binlog's (then cast).
        self.sources: list[ColumnSpec | None] = []
        for spec, position in zip(schema.columns, self.positions):
            if position is None:
                self.sources.append(None)
                continue
            column = table_map.columns[position]
            self.sources.append(
                spec if not column_change(spec, column) else binlog_column_spec(column, charsets)
            )
        self._cache: dict[tuple[str, int], pa.Array] = {}

    @classmethod
    def for_output(
        cls,
        schema: TableSchema,
        block: ChangeBlock,
        writer,
        server: str,
        charsets: CharsetOf,
    ) -> ImageColumns:
        """The images as ``writer``'s output holds them: strict (typed) or carrying their
        own columns (envelope), for a task reading the binlog of ``server``."""
        return cls(
            schema,
            block,
            writer.column_types(schema),
            strict=not writer.envelope,
            known_at=schema_known_at(schema, server),
            charsets=charsets,
            columns=writer.columns,
        )

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
                column = self.block.table_map.columns[position]
                spec, source = self.schema.columns[index], self.sources[index]
                try:
                    if source is spec:
                        self._cache[key] = canonical_column(spec, column, raw, self.types[index])
                    else:
                        self._cache[key] = self._retyped(spec, source, column, raw, index)
                except ValueRefusedError as err:
                    if spec.name in self.masked:
                        err = err.hidden()
                    raise err.in_table(self.block.table, self._where()) from None
        return self._cache[key]

    def _where(self) -> str:
        first, last = 0, self.block.num_rows - 1
        return (
            f"in the row events ending at binlog file #{int(self.block.file_number[first])} "
            f"position {int(self.block.end_pos[first])} to file "
            f"#{int(self.block.file_number[last])} position {int(self.block.end_pos[last])}"
        )

    def _retyped(
        self, spec: ColumnSpec, source: ColumnSpec, column: Column, raw: pa.Array, index: int
    ) -> pa.Array:
        """Values written before ``spec``'s column was retyped, in its new type: decoded as
        written, then cast the way Arrow casts (exact, or an error: never a value changed
        silently)."""
        written = canonical_column(
            source, column, raw, to_arrow_type(spark_type(source), timezone="UTC")
        )
        try:
            return pc.cast(written, self.types[index], safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise SchemaChangedError(
                f"{self.block.table}: values of column {spec.name} written as "
                f"{source.column_type} (rows ending at binlog position "
                f"{int(self.block.end_pos[-1])}) cannot be cast to its type now, "
                f"{spec.column_type}: {'(not shown: masked)' if spec.name in self.masked else err}."
                " Start a new query (new checkpoint location) to "
                "snapshot the table again"
            ) from None

    def raw(self, side: str, name: str) -> pa.Array:
        """A column as decoded (physical form), for exact comparisons of key values."""
        position = self.positions[self.schema.column_names.index(name)]
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
