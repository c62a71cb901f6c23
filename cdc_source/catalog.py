"""Table and column descriptions read from ``information_schema``.

These values travel inside partitions to the executors, so they are small frozen
dataclasses with everything a reader needs to type and compare a value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from cdc_source.charsets import read_byte_tables
from cdc_source.mysql_client import quote_ident

STRING_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
TEMPORAL_KEY_TYPES = {"date", "datetime", "timestamp", "time", "year"}
KEY_TYPES = (
    INTEGER_TYPES | {"decimal", "char", "varchar", "binary", "varbinary"} | TEMPORAL_KEY_TYPES
)


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    data_type: str  # lower-case base type, e.g. "int", "varchar", "json"
    column_type: str  # full declaration, e.g. "int(10) unsigned", "enum('a','b')"
    nullable: bool
    precision: int | None = None
    scale: int | None = None
    char_length: int | None = None
    octet_length: int | None = None
    charset: str | None = None
    collation: str | None = None
    fsp: int = 0
    # The server's own pad attribute of ``collation`` (information_schema.COLLATIONS.
    # PAD_ATTRIBUTE): True for NO PAD, False for PAD SPACE, None where the server does not
    # report it (MySQL 5.7, MariaDB before 12.1); ``pad_space`` then reads the name.
    no_pad: bool | None = None
    collation_id: int | None = None  # COLLATIONS.ID: what a binlog TABLE_MAP names it by
    # A TINYINT(1) given to Spark as BOOLEAN (treat-tinyint1-as-boolean.enabled, never a
    # key column: cdc_source.types.with_tinyint1_policy). Its values must be 0 or 1; any
    # other is refused, since a boolean cannot hold it.
    boolean: bool = False
    # For a text column of a single-byte character set: the server's own character for
    # each byte (cdc_source.charsets), read when the query starts.
    byte_table: str | None = field(default=None, repr=False)

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type

    @property
    def is_tinyint1(self) -> bool:
        return self.data_type == "tinyint" and self.column_type.startswith("tinyint(1)")

    @property
    def bit_width(self) -> int:
        match = re.match(r"bit\((\d+)\)", self.column_type)
        return int(match.group(1)) if match else 1

    @property
    def set_members(self) -> tuple[str, ...]:
        return _parse_members(self.column_type)

    @property
    def is_binary_string(self) -> bool:
        return self.data_type in BINARY_TYPES

    @property
    def is_collated_string(self) -> bool:
        return self.data_type in STRING_TYPES and self.collation is not None

    @property
    def pad_space(self) -> bool:
        """PAD SPACE collations ignore trailing spaces when comparing: the attribute the
        server reported at discovery where it did, the collation's name otherwise."""
        if self.no_pad is not None:
            return not self.no_pad
        return pad_space_by_name(self.collation)


def pad_space_by_name(collation: str | None) -> bool:
    """The pad attribute guessed from a collation's name, for servers that do not report
    it. MariaDB before 12.1 has no COLLATIONS.PAD_ATTRIBUTE and names every NO PAD
    collation ``*_nopad_*`` ("NO PAD collations" in mariadb.com/docs, Information Schema
    COLLATIONS Table); in MySQL the NO PAD collations are the UCA 9.0.0 ones, named
    ``*_0900_*`` (refman 8.0 charset-binary-collations.html, "Trailing Space Handling in
    Comparisons"; WL#13054 for utf8mb4_0900_bin), and 5.7 has none. A custom collation
    whose name says neither is taken as PAD SPACE: hence the reported attribute wins."""
    name = (collation or "").lower()
    return "nopad" not in name and "_0900_" not in name and not name.startswith("utf8mb4_0900")


def _parse_members(column_type: str) -> tuple[str, ...]:
    match = re.match(r"(?:enum|set)\((.*)\)$", column_type, re.S)
    if not match:
        return ()
    return tuple(
        m.replace("''", "'").replace("\\\\", "\\")
        for m in re.findall(r"'((?:[^']|'')*)'", match.group(1))
    )


@dataclass(frozen=True)
class TableSchema:
    database: str
    table: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    estimated_rows: int = 0
    avg_row_bytes: int = 0  # information_schema.TABLES.AVG_ROW_LENGTH: sizes batches
    # Where this schema is known to hold: the binlog head (file number, pos) read just
    # before the catalog was, on server ``read_on``. A row event after it whose table
    # differs is a change the query has not seen (reader.schema_drift); before it, rows
    # are of an earlier shape and are placed by column name.
    read_at: tuple[int, int] | None = None
    read_on: str = ""
    # Non-empty when the table has no primary key: ``primary_key`` is then the NOT NULL
    # column named by scan.incremental.snapshot.chunk.key-column (cdc_source.chunk_key),
    # which plays the key's role everywhere, and these are the UNIQUE indexes of that
    # column alone that keep it a key (a statement dropping one stops the stream).
    key_indexes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def quoted(self) -> str:
        return f"{quote_ident(self.database)}.{quote_ident(self.table)}"

    def column(self, name: str) -> ColumnSpec:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"{self.name} has no column {name!r}")

    @property
    def key_columns(self) -> tuple[ColumnSpec, ...]:
        return tuple(self.column(name) for name in self.primary_key)

    @property
    def declared_key(self) -> bool:
        """Keyed by a chunk key column standing in for a missing primary key."""
        return bool(self.key_indexes)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)


_COLUMNS_SQL = """
SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE,
       NUMERIC_PRECISION, NUMERIC_SCALE, CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH,
       CHARACTER_SET_NAME, COLLATION_NAME, DATETIME_PRECISION, COLUMN_KEY
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION
"""

_KEYS_SQL = """
SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME
FROM information_schema.KEY_COLUMN_USAGE
WHERE CONSTRAINT_NAME = 'PRIMARY'
  AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION
"""

_TABLES_SQL = """
SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS, AVG_ROW_LENGTH FROM information_schema.TABLES
WHERE TABLE_TYPE = 'BASE TABLE'
  AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
"""


# MySQL 8.0+ reports each collation's pad attribute in information_schema.COLLATIONS.
# PAD_ATTRIBUTE, 'PAD SPACE' or 'NO PAD' (dev.mysql.com/doc/refman/8.0/en/information-
# schema-collations-table.html, the same in 8.4); MariaDB has the column from 12.1 only
# (mariadb.com/docs, Information Schema COLLATIONS Table) and MySQL 5.7 not at all. So the
# lookup selects * and finds the column by name in the cursor's description: one query
# that works on every server, whether or not the column exists.
_COLLATIONS_SQL = "SELECT * FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN ({})"


def _as_str(value) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def collation_ids(description, rows) -> dict[str, int]:
    """``{collation: id}`` from ``SELECT * FROM information_schema.COLLATIONS``."""
    names = [_as_str(column[0]).upper() for column in description or ()]
    if "ID" not in names or "COLLATION_NAME" not in names:
        return {}
    name_at, id_at = names.index("COLLATION_NAME"), names.index("ID")
    return {_as_str(row[name_at]): int(row[id_at]) for row in rows if row[id_at] is not None}


def pad_attributes(description, rows) -> dict[str, bool]:
    """``{collation: no_pad}`` from ``SELECT * FROM information_schema.COLLATIONS`` (the
    cursor's description and rows); empty where the server has no PAD_ATTRIBUTE column."""
    names = [_as_str(column[0]).upper() for column in description or ()]
    if "PAD_ATTRIBUTE" not in names or "COLLATION_NAME" not in names:
        return {}
    name_at, pad_at = names.index("COLLATION_NAME"), names.index("PAD_ATTRIBUTE")
    result = {}
    for row in rows:
        pad = (_as_str(row[pad_at]) or "").strip().upper()
        if pad in ("NO PAD", "PAD SPACE"):
            result[_as_str(row[name_at])] = pad == "NO PAD"
    return result


def _read_collations(cur, collations: set[str]) -> tuple[dict[str, bool], dict[str, int]]:
    """The pad attribute and the id of each collation in use."""
    if not collations:
        return {}, {}
    names = sorted(collations)
    cur.execute(_COLLATIONS_SQL.format(", ".join(["%s"] * len(names))), names)
    rows = cur.fetchall()
    return pad_attributes(cur.description, rows), collation_ids(cur.description, rows)


def _column_spec(
    row, no_pad: dict[str, bool], ids: dict[str, int], byte_tables: dict[str, str]
) -> ColumnSpec:
    """A row of ``_COLUMNS_SQL`` as a :class:`ColumnSpec`."""
    text = _as_str(row[3]).lower() in STRING_TYPES
    return ColumnSpec(
        name=_as_str(row[2]),
        data_type=_as_str(row[3]).lower(),
        column_type=_as_str(row[4]).lower(),
        nullable=_as_str(row[5]) == "YES",
        precision=None if row[6] is None else int(row[6]),
        scale=None if row[7] is None else int(row[7]),
        char_length=None if row[8] is None else int(row[8]),
        octet_length=None if row[9] is None else int(row[9]),
        charset=_as_str(row[10]),
        collation=_as_str(row[11]),
        fsp=int(row[12] or 0),
        no_pad=no_pad.get(_as_str(row[11])),
        collation_id=ids.get(_as_str(row[11])),
        byte_table=byte_tables.get(_as_str(row[10])) if text else None,
    )


def server_shape(conn, schema: TableSchema) -> TableSchema:
    """``schema`` with the columns and primary key the table has now (one table's rows of
    ``information_schema``, which shows the latest DDL, not a snapshot's). A TINYINT(1)
    column the query gives as BOOLEAN stays one; a column added since is an integer, as
    the binlog describes it. A chunk key column's role is not kept here:
    :func:`cdc_source.chunk_key.current_shape` keeps it."""
    one_table = "\n  AND TABLE_SCHEMA = %s AND TABLE_NAME = %s\nORDER BY"
    names = (schema.database, schema.table)
    with conn.cursor() as cur:
        cur.execute(_COLUMNS_SQL.replace("\nORDER BY", one_table, 1), names)
        rows = cur.fetchall()
        no_pad, ids = _read_collations(cur, {_as_str(row[11]) for row in rows if row[11]})
        tables = read_byte_tables(cur, {_as_str(row[10]) for row in rows if row[10]})
        cur.execute(_KEYS_SQL.replace("\nORDER BY", one_table, 1), names)
        key = tuple(_as_str(row[2]) for row in cur.fetchall())
    booleans = {spec.name for spec in schema.columns if spec.boolean}
    columns = tuple(
        replace(spec, boolean=spec.is_tinyint1 and spec.name in booleans)
        for spec in (_column_spec(row, no_pad, ids, tables) for row in rows)
    )
    return replace(schema, columns=columns, primary_key=key)


def base_tables(conn) -> dict[tuple[str, str], tuple[int, int]]:
    """Every base table on the server outside the system schemas: ``{(db, table):
    (estimated rows, average row length)}``."""
    with conn.cursor() as cur:
        cur.execute(_TABLES_SQL)
        return {
            (_as_str(db), _as_str(t)): (int(rows or 0), int(avg or 0))
            for db, t, rows, avg in cur.fetchall()
        }


def discover_tables(conn, matches) -> list[TableSchema]:
    """All base tables for which ``matches(db, table)`` is true, sorted by ``db.table``."""
    tables = {name: sizes for name, sizes in base_tables(conn).items() if matches(*name)}
    with conn.cursor() as cur:
        if not tables:
            return []
        cur.execute(_COLUMNS_SQL)
        rows = [row for row in cur.fetchall() if (_as_str(row[0]), _as_str(row[1])) in tables]
        no_pad, ids = _read_collations(cur, {_as_str(row[11]) for row in rows if row[11]})
        byte_tables = read_byte_tables(cur, {_as_str(row[10]) for row in rows if row[10]})
        columns: dict[tuple[str, str], list[ColumnSpec]] = {}
        for row in rows:
            key = (_as_str(row[0]), _as_str(row[1]))
            columns.setdefault(key, []).append(_column_spec(row, no_pad, ids, byte_tables))
        cur.execute(_KEYS_SQL)
        keys: dict[tuple[str, str], list[str]] = {}
        for db, t, col in cur.fetchall():
            keys.setdefault((_as_str(db), _as_str(t)), []).append(_as_str(col))
    result = [
        TableSchema(
            database=db,
            table=t,
            columns=tuple(columns.get((db, t), ())),
            primary_key=tuple(keys.get((db, t), ())),
            estimated_rows=tables[(db, t)][0],
            avg_row_bytes=tables[(db, t)][1],
        )
        for db, t in tables
    ]
    return sorted(result, key=lambda schema: schema.name)
