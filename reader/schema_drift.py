"""A captured table's shape in a row event, against the query's schema.

With ``binlog_row_metadata=FULL`` every TABLE_MAP names its columns, their types, ENUM and
SET members, character sets and the primary key, so the shape the rows were written in is
known for each event without any schema history. The query's schema was read at a known
binlog position (``TableSchema.read_at``), which decides what a difference means:

- an event *after* that position in another shape is a change the query has not seen:
  the typed output cannot hold it, so the read stops with :class:`SchemaChangedError`
  (restarting the query reads the new schema and continues from the last committed batch);
- an event *at or before* it is of an earlier shape, already superseded by the schema
  read: its values are placed by column name (NULL for columns it did not have), a
  retyped column's values cast to the new type;
- the envelope output (several tables) never stops: each image carries the columns its
  event has.

A changed primary key stops every mode: the key is what orders and merges changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cdc_source.binlog import constants as c
from cdc_source.binlog.table_map import Column, TableMap
from cdc_source.catalog import BINARY_TYPES, STRING_TYPES, ColumnSpec, TableSchema

BINARY_COLLATION = 63
_INTEGER_CODES = {
    "tinyint": c.T_TINY,
    "smallint": c.T_SHORT,
    "mediumint": c.T_INT24,
    "int": c.T_LONG,
    "integer": c.T_LONG,
    "bigint": c.T_LONGLONG,
}
_INTEGER_NAMES = {
    c.T_TINY: "tinyint",
    c.T_SHORT: "smallint",
    c.T_INT24: "mediumint",
    c.T_LONG: "int",
    c.T_LONGLONG: "bigint",
}
_FRACTIONAL = {c.T_DATETIME2: "datetime", c.T_TIMESTAMP2: "timestamp", c.T_TIME2: "time"}
_BLOB_SIZES = {1: "tiny", 2: "", 3: "medium", 4: "long"}
_TEXT_CODES = {
    c.T_VARCHAR,
    c.T_VAR_STRING,
    c.T_STRING,
    c.T_BLOB,
    c.T_TINY_BLOB,
    c.T_MEDIUM_BLOB,
    c.T_LONG_BLOB,
}

CharsetOf = Callable[[int], str]


class SchemaChangedError(RuntimeError):
    """A captured table's columns or key are not the ones the query reads it with."""

    transient = False  # the same bytes give the same answer: no retry helps


def column_change(spec: ColumnSpec, column: Column) -> str | None:
    """How binlog ``column`` differs from ``spec`` in a way that changes its values or
    their type, or None. Display widths, defaults and nullability change neither."""
    was, now = spec.column_type, describe_binlog_column(column)
    t = spec.data_type
    if t in _INTEGER_CODES:
        same = column.type == _INTEGER_CODES[t] and column.unsigned == spec.unsigned
    elif t == "decimal":
        same = column.type == c.T_NEWDECIMAL and (column.meta & 0xFF, column.meta >> 8) == (
            spec.precision,
            spec.scale,
        )
    elif t == "float":
        same = column.type == c.T_FLOAT
    elif t in ("double", "real"):
        same = column.type == c.T_DOUBLE
    elif t == "bit":
        same = column.type == c.T_BIT and _bit_width(column) == spec.bit_width
    elif t == "date":
        same = column.type in (c.T_DATE, c.T_NEWDATE)
    elif t in ("datetime", "timestamp", "time"):
        legacy = {"datetime": c.T_DATETIME, "timestamp": c.T_TIMESTAMP, "time": c.T_TIME}[t]
        modern = {v: k for k, v in _FRACTIONAL.items()}[t]
        same = (column.type == modern and column.meta == spec.fsp) or (
            column.type == legacy and spec.fsp == 0
        )
    elif t == "year":
        same = column.type == c.T_YEAR
    elif t in ("enum", "set"):
        code = c.T_ENUM if t == "enum" else c.T_SET
        same = column.type == code and (
            column.members is None or column.members == spec.set_members
        )
    elif t == "json":
        same = column.type == c.T_JSON or (
            column.type in _TEXT_CODES and column.collation != BINARY_COLLATION
        )
    elif t in STRING_TYPES or t in BINARY_TYPES:
        binary = t in BINARY_TYPES
        same = (
            column.type in _TEXT_CODES
            and (column.collation is None or (column.collation == BINARY_COLLATION) == binary)
            and (
                binary
                or column.collation is None
                or spec.collation_id is None
                or column.collation == spec.collation_id
            )
        )
    else:
        same = False
    if same:
        return None
    return f"column {spec.name} changed from {was} to {now}"


def _bit_width(column: Column) -> int:
    return (column.meta >> 8) * 8 + (column.meta & 0xFF)


def describe_binlog_column(column: Column) -> str:
    """A readable type of a binlog column, e.g. ``int unsigned``, ``decimal(10,2)``."""
    t, meta = column.type, column.meta
    if t in _INTEGER_NAMES:
        return _INTEGER_NAMES[t] + (" unsigned" if column.unsigned else "")
    if t == c.T_NEWDECIMAL:
        return f"decimal({meta & 0xFF},{meta >> 8})"
    if t == c.T_FLOAT:
        return "float"
    if t == c.T_DOUBLE:
        return "double"
    if t == c.T_BIT:
        return f"bit({_bit_width(column)})"
    if t in (c.T_DATE, c.T_NEWDATE):
        return "date"
    if t in _FRACTIONAL:
        return _FRACTIONAL[t] + (f"({meta})" if meta else "")
    if t == c.T_DATETIME:
        return "datetime"
    if t == c.T_TIMESTAMP:
        return "timestamp"
    if t == c.T_TIME:
        return "time"
    if t == c.T_YEAR:
        return "year"
    if t in (c.T_ENUM, c.T_SET):
        name = "enum" if t == c.T_ENUM else "set"
        if column.members is None:
            return name
        return f"{name}({','.join(_quoted(m) for m in column.members)})"
    if t == c.T_JSON:
        return "json"
    binary = column.collation == BINARY_COLLATION
    if t in (c.T_VARCHAR, c.T_VAR_STRING):
        return "varbinary" if binary else "varchar"
    if t == c.T_STRING:
        return "binary" if binary else "char"
    if t in (c.T_BLOB, c.T_TINY_BLOB, c.T_MEDIUM_BLOB, c.T_LONG_BLOB):
        return _BLOB_SIZES.get(meta, "") + ("blob" if binary else "text")
    return f"binlog type {t}"


def _quoted(member: str) -> str:
    return "'" + member.replace("\\", "\\\\").replace("'", "''") + "'"


def changes(
    schema: TableSchema, table_map: TableMap, ignored: frozenset[str] = frozenset()
) -> list[str]:
    """Every difference between the query's ``schema`` and the shape ``table_map``
    writes rows in, readably (empty: the same shape). Columns named in ``ignored`` (left
    out of the output by column.exclude.list or column.include.list) may come, go or
    change type: the output never holds them."""
    found: list[str] = []
    in_event = {column.name: column for column in table_map.columns}
    in_schema = set(schema.column_names)
    for spec in schema.columns:
        if spec.name in ignored:
            continue
        column = in_event.get(spec.name)
        if column is None:
            found.append(f"column {spec.name} ({spec.column_type}) is gone")
            continue
        change = column_change(spec, column)
        if change:
            found.append(change)
    for column in table_map.columns:
        if column.name not in in_schema and column.name not in ignored:
            found.append(f"column {column.name} ({describe_binlog_column(column)}) was added")
    key_change = primary_key_change(schema, table_map)
    if key_change:
        found.append(key_change)
    return found


def primary_key_change(schema: TableSchema, table_map: TableMap) -> str | None:
    key = table_map.primary_key
    if key is None or tuple(key) == tuple(schema.primary_key):
        return None
    if schema.declared_key:
        # A table keyed by its chunk key column has no PRIMARY KEY, and the TABLE_MAP's
        # key metadata may still name one: "If you do not have a PRIMARY KEY and an
        # application asks for the PRIMARY KEY in your tables, MySQL returns the first
        # UNIQUE index that has no NULL columns as the PRIMARY KEY" (refman 8.0,
        # create-table.html; MariaDB 10.11 writes that index as the event's key, seen in
        # tests/integration/test_no_primary_key.py). It may be another unique column than
        # the one chosen, or a primary key added later: neither breaks the chosen
        # column's uniqueness, which is all the key needs; its loss is checked from the
        # catalog (chunk_key.current_shape).
        return None
    return f"primary key changed from ({', '.join(schema.primary_key)}) to ({', '.join(key)})"


def binlog_column_spec(column: Column, charset_of: CharsetOf) -> ColumnSpec:
    """A column as the binlog describes it, for values of a shape the query's schema does
    not have (an added or retyped column): the type, and for text its character set."""
    t, meta = column.type, column.meta
    name = column.name
    if t in _INTEGER_NAMES:
        base = _INTEGER_NAMES[t]
        declared = base + (" unsigned" if column.unsigned else "")
        return ColumnSpec(name, base, declared, column.nullable)
    if t == c.T_NEWDECIMAL:
        precision, scale = meta & 0xFF, meta >> 8
        return ColumnSpec(
            name, "decimal", f"decimal({precision},{scale})", column.nullable, precision, scale
        )
    if t in (c.T_FLOAT, c.T_DOUBLE):
        base = "float" if t == c.T_FLOAT else "double"
        return ColumnSpec(name, base, base, column.nullable)
    if t == c.T_BIT:
        return ColumnSpec(name, "bit", f"bit({_bit_width(column)})", column.nullable)
    if t in (c.T_DATE, c.T_NEWDATE, c.T_YEAR, c.T_DATETIME, c.T_TIMESTAMP, c.T_TIME):
        base = {
            c.T_DATE: "date",
            c.T_NEWDATE: "date",
            c.T_YEAR: "year",
            c.T_DATETIME: "datetime",
            c.T_TIMESTAMP: "timestamp",
            c.T_TIME: "time",
        }[t]
        return ColumnSpec(name, base, base, column.nullable)
    if t in _FRACTIONAL:
        base = _FRACTIONAL[t]
        return ColumnSpec(name, base, describe_binlog_column(column), column.nullable, fsp=meta)
    if t in (c.T_ENUM, c.T_SET):
        if column.members is None:
            raise SchemaChangedError(
                f"column {name} is an ENUM/SET the query's schema does not know, and its "
                "row events carry no member names (binlog_row_metadata=FULL writes them)"
            )
        base = "enum" if t == c.T_ENUM else "set"
        return ColumnSpec(name, base, describe_binlog_column(column), column.nullable)
    if t == c.T_JSON:
        return ColumnSpec(name, "json", "json", column.nullable)
    if t in _TEXT_CODES:
        declared = describe_binlog_column(column)
        if column.collation == BINARY_COLLATION:
            return ColumnSpec(name, declared, declared, column.nullable)
        charset = charset_of(column.collation) if column.collation is not None else "utf8mb4"
        return ColumnSpec(name, declared, declared, column.nullable, charset=charset)
    raise SchemaChangedError(
        f"column {name} has {describe_binlog_column(column)}, which cdc-mysql cannot decode"
    )


def event_schema(schema: TableSchema, table_map: TableMap, charset_of: CharsetOf) -> TableSchema:
    """``schema`` as ``table_map`` writes its rows: the event's columns in its order, each
    the query's own spec where the shape is the same, else the binlog's description."""
    known = {spec.name: spec for spec in schema.columns}
    columns = []
    for column in table_map.columns:
        spec = known.get(column.name)
        if spec is None or column_change(spec, column):
            spec = binlog_column_spec(column, charset_of)
        columns.append(spec)
    return replace(schema, columns=tuple(columns))


class CharsetLookup:
    """Character set names by collation id, asked of the server once per id (only a
    column the query's schema does not have needs it)."""

    def __init__(self, query: Callable[[int], str | None]) -> None:
        self._query = query
        self._known: dict[int, str] = {BINARY_COLLATION: "binary"}

    def __call__(self, collation_id: int) -> str:
        name = self._known.get(collation_id)
        if name is None:
            name = self._query(collation_id)
            if name is None:
                raise SchemaChangedError(
                    f"collation id {collation_id} of a binlog column is unknown to the server"
                )
            self._known[collation_id] = name
        return name


def server_charsets(connect: Callable[[], object]) -> CharsetLookup:
    """A :class:`CharsetLookup` over ``information_schema.COLLATIONS`` of the server."""

    def query(collation_id: int) -> str | None:
        conn = connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID = %s",
                    (collation_id,),
                )
                row = cur.fetchone()
        finally:
            conn.close()
        if row is None:
            return None
        value = row[0]
        return value.decode() if isinstance(value, bytes) else str(value)

    return CharsetLookup(query)


def known_at(schema: TableSchema, server: str) -> tuple[int, int] | None:
    """Where ``schema`` is known to hold in the binlog of ``server`` (the server a task's
    positions belong to): its ``read_at`` when it was read on that server, else None
    (after a fail-over within a run, positions of two servers do not compare)."""
    if schema.read_at is None or (server and schema.read_on and server != schema.read_on):
        return None
    return schema.read_at


def shape_changes(
    schema: TableSchema, now: TableSchema, ignored: frozenset[str] = frozenset()
) -> list[str]:
    """How the table's shape ``now`` (read from the catalog) differs from ``schema``,
    columns named in ``ignored`` (left out of the output) aside."""
    found: list[str] = []
    current = {spec.name: spec for spec in now.columns}
    for spec in schema.columns:
        if spec.name in ignored:
            continue
        other = current.get(spec.name)
        if other is None:
            found.append(f"column {spec.name} ({spec.column_type}) is gone")
        elif (other.column_type, other.collation) != (spec.column_type, spec.collation):
            found.append(
                f"column {spec.name} changed from {spec.column_type} to {other.column_type}"
            )
    known = set(schema.column_names)
    for spec in now.columns:
        if spec.name not in known and spec.name not in ignored:
            found.append(f"column {spec.name} ({spec.column_type}) was added")
    if now.primary_key != schema.primary_key and schema.declared_key:
        found.append(
            f"the chunk key column {schema.primary_key[0]} that stands in for the missing "
            "primary key is no longer NOT NULL with a UNIQUE index of its own"
        )
    elif now.primary_key != schema.primary_key:
        found.append(
            f"primary key changed from ({', '.join(schema.primary_key)}) to "
            f"({', '.join(now.primary_key)})"
        )
    return found
