"""``scan.incremental.snapshot.chunk.key-column``: a column that stands in for the missing
primary key of a table.

Flink CDC's MySQL connector spells the option two ways, and both are accepted here:

- a column name alone (the ``mysql-cdc`` SQL connector, Flink CDC 2.4 to 3.x:
  ``MySqlSourceOptions.SCAN_INCREMENTAL_SNAPSHOT_CHUNK_KEY_COLUMN``), for every captured
  table;
- ``<table-pattern>:<column>[;<table-pattern>:<column>...]`` with an optional trailing
  ``;`` (the MySQL pipeline connector since Flink CDC 3.2, FLINK-35884:
  ``MySqlDataSourceOptions``, e.g. ``db1.user_table_[0-9]+:col1;db2.orders:col2;``). The
  pattern is a regular expression matched against ``db.table`` in full, as
  ``table-name`` is here.

Flink CDC chunks a table without a primary key by any column it is told to, and reads
the binlog without a key: its own documentation warns that this may produce
inconsistent data. Here the column takes the primary key's whole role (chunk bounds,
ownership at the frontier, ``_seq``, the envelope ``key``, normalization), which is exact
only if the column identifies a row: so it must be NOT NULL and carry a UNIQUE index of
its own, which the server enforces (and under the column's collation, the comparison
the source uses for keys). A column merely declared unique by the user is not accepted:
two rows with one value would be merged into one by every consumer that keeps the
latest row per key, silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from cdc_source.catalog import TableSchema, server_shape
from cdc_source.mysql_client import quote_ident

OPTION = "scan.incremental.snapshot.chunk.key-column"


@dataclass(frozen=True)
class ChunkKeyRule:
    """One entry of the option: ``pattern`` (matched against ``db.table``; None: every
    table) and the column it names."""

    pattern: str | None
    column: str


@dataclass(frozen=True)
class ChunkKeyColumns:
    """The parsed option. Travels inside ``SourceOptions`` (picklable, small)."""

    rules: tuple[ChunkKeyRule, ...]

    def column_for(self, database: str, table: str) -> str | None:
        """The column named for ``database.table``, or None. Two entries naming different
        columns for one table are ambiguous: ``ValueError``."""
        name = f"{database}.{table}"
        found = {
            rule.column
            for rule in self.rules
            if rule.pattern is None or re.fullmatch(rule.pattern, name)
        }
        if len(found) > 1:
            raise ValueError(
                f"'{OPTION}' names several columns for {name} ({', '.join(sorted(found))}): "
                "make the table patterns match each table once"
            )
        return next(iter(found), None)


# The unique indexes of one table, a row per index part. NON_UNIQUE is 0 for UNIQUE and
# PRIMARY indexes; SUB_PART is the prefix length of a part indexed by prefix, else NULL;
# COLUMN_NAME is NULL for a MySQL 8 functional key part (refman 8.0,
# information-schema-statistics-table.html; the same columns on MariaDB).
_UNIQUE_PARTS_SQL = """
SELECT INDEX_NAME, COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0
ORDER BY INDEX_NAME, SEQ_IN_INDEX
"""


def unique_indexes_of(parts, column: str) -> tuple[str, ...]:
    """The unique indexes in ``parts`` (rows of ``_UNIQUE_PARTS_SQL``: index name, column
    name, prefix length) made of ``column`` alone, whole (a prefix index would do too,
    but is refused to keep the rule simple to state)."""
    indexes: dict[str, list[tuple]] = {}
    for index, name, sub_part in parts:
        indexes.setdefault(_text(index), []).append((_text(name), sub_part))
    return tuple(
        index
        for index, columns in indexes.items()
        if len(columns) == 1
        and columns[0][0] is not None
        and columns[0][0].lower() == column.lower()
        and columns[0][1] is None
    )


def _text(value) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def key_column_problem(conn, table: TableSchema, column: str) -> tuple[str | None, tuple[str, ...]]:
    """Why ``column`` cannot stand in for the primary key of ``table`` (which has none),
    or None; and the unique indexes of the column alone. It must exist, be NOT NULL and
    have a unique index of its own."""
    spec = next((c for c in table.columns if c.name.lower() == column.lower()), None)
    if spec is None:
        return (
            f"{table.name} has no column '{column}' (named by '{OPTION}'); its columns: "
            f"{', '.join(table.column_names)}"
        ), ()
    with conn.cursor() as cur:
        cur.execute(_UNIQUE_PARTS_SQL, (table.database, table.table))
        indexes = unique_indexes_of(cur.fetchall(), spec.name)
    unique = bool(indexes)
    wrong, fixes = [], []
    if spec.nullable:
        wrong.append("it is nullable (NULL is no key, and a unique index allows many NULLs)")
        fixes.append("declare it NOT NULL (ALTER TABLE ... MODIFY with its type and collation)")
    if not unique:
        wrong.append(
            "no UNIQUE index is made of it alone (without one, two rows may share a value "
            "and a consumer keeping the latest row per key would merge them)"
        )
        fixes.append(f"ALTER TABLE {table.quoted} ADD UNIQUE ({quote_ident(spec.name)})")
    if not wrong:
        return None, indexes
    return (
        f"{table.name} has no primary key and its chunk key column {spec.name} (named by "
        f"'{OPTION}') cannot stand in for one: {'; and '.join(wrong)}. The column must be "
        f"NOT NULL with a UNIQUE index of its own: {'; '.join(fixes)}; or add a primary key"
    ), indexes


def with_chunk_keys(
    conn, tables: list[TableSchema], chunk_keys: ChunkKeyColumns | None
) -> tuple[list[TableSchema], dict[str, str]]:
    """``tables`` with the option applied, and what is wrong with it, by table name.

    A table without a primary key whose named column qualifies gets
    ``primary_key=(column,)`` and ``key_indexes`` (the column's unique indexes); one
    without a column stays keyless (preflight's error names the option). A table with a
    primary key is keyed by it: the option may name its first column (Flink CDC's
    default chunk key, so nothing changes), not another one: the key must identify rows
    for ownership and normalization anyway, and a second order of the table would buy
    nothing but a way to get it wrong."""
    result, problems = [], {}
    for table in tables:
        try:
            column = (
                None if chunk_keys is None else chunk_keys.column_for(table.database, table.table)
            )
        except ValueError as err:
            problems[table.name] = str(err)
            result.append(table)
            continue
        if column is None:
            result.append(table)
        elif table.primary_key:
            if column.lower() != table.primary_key[0].lower():
                problems[table.name] = (
                    f"{table.name} has a primary key ({', '.join(table.primary_key)}), which "
                    f"chunks and keys it; '{OPTION}' may name only its first column "
                    f"({table.primary_key[0]}), not {column}: name the column for the tables "
                    "without a primary key only ('<db.table regex>:<column>;...')"
                )
            result.append(table)
        else:
            problem, indexes = key_column_problem(conn, table, column)
            if problem:
                problems[table.name] = problem
                result.append(table)
            else:
                key = (column_name(table, column),)
                result.append(replace(table, primary_key=key, key_indexes=indexes))
    return result, problems


def current_shape(conn, schema: TableSchema) -> TableSchema:
    """``schema`` with the columns and primary key the table has now
    (:func:`cdc_source.catalog.server_shape`). A chunk key column keeps its role while it
    is still NOT NULL and uniquely indexed (a primary key added since changes nothing: the
    column still identifies a row); otherwise the key is gone, which
    ``reader.schema_drift.shape_changes`` reports."""
    now = server_shape(conn, schema)
    if not schema.declared_key:
        return now
    keyless = replace(now, primary_key=())
    holds = key_column_problem(conn, keyless, schema.primary_key[0])[0] is None
    return replace(now, primary_key=schema.primary_key if holds else ())


def column_name(table: TableSchema, column: str) -> str:
    """``column`` as the table spells it (MySQL column names are case-insensitive)."""
    return next((c.name for c in table.columns if c.name.lower() == column.lower()), column)


# Statements that may take a chunk key column's uniqueness or NOT NULL away while the
# stream runs (refman 8.0 alter-table.html, drop-index.html; the same syntax on MariaDB):
# DROP INDEX of one of its unique indexes (also ALTER TABLE ... DROP INDEX/KEY/CONSTRAINT,
# or RENAME INDEX/KEY, after which the index goes by a name the query does not know), and
# an ALTER TABLE that modifies, changes, renames or drops the column.
_NAME = r"(`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = _NAME + r"(?:\s*\.\s*" + _NAME + r")?"
_ALTER = re.compile(
    r"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?" + _QUALIFIED + r"\s+(.*)$",
    re.I | re.S,
)
_DROP_INDEX = re.compile(
    r"^DROP\s+(?:ONLINE\s+)?INDEX\s+(?:IF\s+EXISTS\s+)?" + _NAME + r"\s+ON\s+" + _QUALIFIED,
    re.I | re.S,
)
_INDEX_CLAUSE = re.compile(
    r"\b(?:DROP\s+(?:INDEX|KEY|CONSTRAINT)|RENAME\s+(?:INDEX|KEY))\s+(?:IF\s+EXISTS\s+)?" + _NAME,
    re.I,
)
_COMMENTS = re.compile(r"^(?:\s+|/\*.*?\*/|(?:--\s|#)[^\n]*(?:\n|$))*", re.S)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _qualified(first: str, second: str | None, default_schema: str) -> str:
    if second:
        return f"{_unquote(first)}.{_unquote(second)}"
    return f"{default_schema}.{_unquote(first)}"


def _column_clause(column: str) -> re.Pattern:
    quoted = "`" + re.escape(column.replace("`", "``")) + "`"
    name = f"(?:{quoted}|{re.escape(column)}(?![\\w$]))"
    return re.compile(
        r"\b(?:(?:MODIFY|CHANGE)(?:\s+COLUMN)?(?:\s+IF\s+EXISTS)?|RENAME\s+COLUMN|"
        r"DROP(?:\s+COLUMN)?(?:\s+IF\s+EXISTS)?)\s+" + name,
        re.I,
    )


def key_breaking_target(
    query: str,
    default_schema: str,
    keyed: dict[str, tuple[str, tuple[str, ...]]],
    lower_case_names: bool = False,
) -> str | None:
    """The table of ``keyed`` (``{db.table: (key column, its unique indexes)}``) whose key
    column, or one of whose unique indexes, ``query`` drops or changes; or None.
    ``lower_case_names``: lower_case_table_names=1, names read in lowercase
    (:func:`cdc_source.binlog.ddl.table_changes`)."""
    query = query[_COMMENTS.match(query).end() :]
    fold = str.lower if lower_case_names else str
    match = _DROP_INDEX.match(query)
    if match:
        table = fold(_qualified(match.group(2), match.group(3), default_schema))
        if table in keyed and _unquote(match.group(1)).lower() in _lower(keyed[table][1]):
            return table
        return None
    match = _ALTER.match(query)
    if not match:
        return None
    table = fold(_qualified(match.group(1), match.group(2), default_schema))
    if table not in keyed:
        return None
    column, indexes = keyed[table]
    body = match.group(3)
    if any(_unquote(m.group(1)).lower() in _lower(indexes) for m in _INDEX_CLAUSE.finditer(body)):
        return table
    return table if _column_clause(column).search(body) else None


def _lower(names: tuple[str, ...]) -> set[str]:
    return {name.lower() for name in names}
