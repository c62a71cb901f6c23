"""TABLE_MAP events: the column types, metadata and names of the table a row event
writes, including the optional metadata of ``binlog_row_metadata=FULL``
(MySQL ``Table_map_log_event::Optional_metadata_field_type``; MariaDB 10.5+ writes the
same fields)."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_source.binlog import constants as c
from cdc_source.binlog.wire import Cursor, MalformedEventError

# Optional metadata field types.
SIGNEDNESS = 1
DEFAULT_CHARSET = 2
COLUMN_CHARSET = 3
COLUMN_NAME = 4
SET_STR_VALUE = 5
ENUM_STR_VALUE = 6
GEOMETRY_TYPE = 7
SIMPLE_PRIMARY_KEY = 8
PRIMARY_KEY_WITH_PREFIX = 9
ENUM_AND_SET_DEFAULT_CHARSET = 10
ENUM_AND_SET_COLUMN_CHARSET = 11
COLUMN_VISIBILITY = 12

# Columns with a bit in the SIGNEDNESS field: MySQL's has_signedess_information_type
# includes YEAR, and MariaDB 10.11 writes one for it too (seen: INT, YEAR, INT UNSIGNED
# gives 0b011).
_NUMERIC = {
    c.T_YEAR,
    c.T_DECIMAL,
    c.T_TINY,
    c.T_SHORT,
    c.T_INT24,
    c.T_LONG,
    c.T_LONGLONG,
    c.T_FLOAT,
    c.T_DOUBLE,
    c.T_NEWDECIMAL,
}
_ONE_BYTE_META = {
    c.T_FLOAT,
    c.T_DOUBLE,
    c.T_BLOB,
    c.T_TINY_BLOB,
    c.T_MEDIUM_BLOB,
    c.T_LONG_BLOB,
    c.T_GEOMETRY,
    c.T_JSON,
    c.T_TIMESTAMP2,
    c.T_DATETIME2,
    c.T_TIME2,
}
_TWO_BYTE_META = {
    c.T_VARCHAR,
    c.T_VAR_STRING,
    c.T_BIT,
    c.T_NEWDECIMAL,
    c.T_STRING,
    c.T_ENUM,
    c.T_SET,
}


@dataclass(frozen=True)
class Column:
    """One column as the row event encodes it: ``type`` is the real type (a CHAR/ENUM/SET
    written as STRING is resolved), ``meta`` its type metadata."""

    name: str
    type: int
    meta: int
    unsigned: bool
    nullable: bool
    collation: int | None
    # ENUM/SET member strings (binlog_row_metadata=FULL: ENUM_STR_VALUE, SET_STR_VALUE);
    # None where the event does not carry them. They tell a changed member list, which
    # the stored index alone would not.
    members: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TableMap:
    table_id: int
    database: str
    table: str
    columns: tuple[Column, ...]
    # The primary key's column names (SIMPLE_PRIMARY_KEY / PRIMARY_KEY_WITH_PREFIX), None
    # where the event does not carry it.
    primary_key: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


def table_id_of(body: bytes, post_header_len: int) -> int:
    size = 4 if post_header_len == 6 else 6
    return int.from_bytes(body[:size], "little")


def _resolve_string(meta: int) -> tuple[int, int]:
    """A STRING column's metadata holds the real type (CHAR, ENUM, SET) and the length;
    lengths above 255 borrow two bits of the type byte
    (``Field_string::do_save_field_metadata``)."""
    real_type, length = meta >> 8, meta & 0xFF
    if real_type and (real_type & 0x30) != 0x30:
        length |= ((real_type & 0x30) ^ 0x30) << 4
        real_type |= 0x30
    if real_type in (c.T_ENUM, c.T_SET):
        return real_type, length
    return c.T_STRING, length


def parse_table_map(body: bytes, post_header_len: int, mariadb: bool = False) -> TableMap:
    """``mariadb``: MariaDB counts GEOMETRY among the character columns of the charset
    fields (log_event_client.cc ``is_character_type``); MySQL does not."""
    cur = Cursor(body)
    table_id = cur.uint(4 if post_header_len == 6 else 6)
    cur.skip(post_header_len - (4 if post_header_len == 6 else 6))
    database = cur.take(cur.uint(1)).decode("utf-8", "replace")
    cur.skip(1)
    table = cur.take(cur.uint(1)).decode("utf-8", "replace")
    cur.skip(1)
    count = cur.lenenc()
    types = cur.take(count)
    meta_cur = Cursor(cur.lenenc_bytes())
    metas = []
    for column_type in types:
        if column_type in _ONE_BYTE_META:
            metas.append(meta_cur.uint(1))
        elif column_type in (c.T_STRING, c.T_ENUM, c.T_SET):
            metas.append(meta_cur.uint_be(2))  # real type, then length
        elif column_type in _TWO_BYTE_META:
            metas.append(meta_cur.uint(2))
        else:
            metas.append(0)
    nullable = cur.take((count + 7) // 8)
    fields = _optional_metadata(cur)
    names = fields.get(COLUMN_NAME)
    if names is None or len(names) != count:
        raise MalformedEventError(
            f"the TABLE_MAP of {database}.{table} carries no column names: the server needs "
            "binlog_row_metadata=FULL (MySQL >= 8.0.14, MariaDB >= 10.5)"
        )
    signed_bits = fields.get(SIGNEDNESS, b"")
    collations = _collations(fields, types, metas, mariadb)
    members = _members(fields, types, metas)
    columns = []
    numeric_index = 0
    for i, (column_type, meta) in enumerate(zip(types, metas)):
        unsigned = False
        if column_type in _NUMERIC:
            byte = numeric_index // 8
            unsigned = byte < len(signed_bits) and bool(
                signed_bits[byte] & (0x80 >> (numeric_index % 8))
            )
            numeric_index += 1
        if column_type == c.T_STRING:
            column_type, meta = _resolve_string(meta)
        columns.append(
            Column(
                names[i],
                column_type,
                meta,
                unsigned,
                bool(nullable[i // 8] & (1 << (i % 8))),
                collations.get(i),
                members.get(i),
            )
        )
    key = fields.get(SIMPLE_PRIMARY_KEY)
    if key is not None and any(i >= count for i in key):
        raise MalformedEventError(
            f"the TABLE_MAP of {database}.{table} names primary key column {max(key)} of {count}"
        )
    primary_key = None if key is None else tuple(names[i] for i in key)
    return TableMap(table_id, database, table, tuple(columns), primary_key)


def _members(fields: dict, types: bytes, metas: list[int]) -> dict[int, tuple[str, ...]]:
    """Member strings by column index. The server lists them for its ENUM columns in
    column order (ENUM_STR_VALUE), and likewise for SET (``Table_map_log_event::
    init_set_str_value_field``); a STRING column's real type says which it is."""
    kinds = [_resolve_string(m)[0] if t == c.T_STRING else t for t, m in zip(types, metas)]
    result: dict[int, tuple[str, ...]] = {}
    for kind, field in ((c.T_ENUM, ENUM_STR_VALUE), (c.T_SET, SET_STR_VALUE)):
        lists = fields.get(field)
        if lists is None:
            continue
        indexes = [i for i, k in enumerate(kinds) if k == kind]
        result.update(zip(indexes, lists))
    return result


def _is_character(column_type: int, meta: int, mariadb: bool) -> bool:
    if column_type == c.T_STRING:
        return _resolve_string(meta)[0] == c.T_STRING
    if column_type == c.T_GEOMETRY:
        return mariadb
    return column_type in (
        c.T_VARCHAR,
        c.T_VAR_STRING,
        c.T_BLOB,
        c.T_TINY_BLOB,
        c.T_MEDIUM_BLOB,
        c.T_LONG_BLOB,
    )


def _collations(fields: dict, types: bytes, metas: list[int], mariadb: bool) -> dict[int, int]:
    character = [i for i, (t, m) in enumerate(zip(types, metas)) if _is_character(t, m, mariadb)]
    result: dict[int, int] = {}
    if COLUMN_CHARSET in fields:
        result.update(zip(character, fields[COLUMN_CHARSET]))
    elif DEFAULT_CHARSET in fields:
        default, overrides = fields[DEFAULT_CHARSET]
        result.update({i: default for i in character})
        for nth, collation in overrides:
            if nth < len(character):
                result[character[nth]] = collation
    return result


def _optional_metadata(cur: Cursor) -> dict:
    fields: dict = {}
    while cur.remaining() > 0:
        kind = cur.uint(1)
        value = Cursor(cur.lenenc_bytes())
        if kind == SIGNEDNESS:
            fields[kind] = value.rest()
        elif kind == COLUMN_NAME:
            names = []
            while value.remaining():
                names.append(value.lenenc_bytes().decode("utf-8", "replace"))
            fields[kind] = names
        elif kind == COLUMN_CHARSET:
            collations = []
            while value.remaining():
                collations.append(value.lenenc())
            fields[kind] = collations
        elif kind == DEFAULT_CHARSET:
            default = value.lenenc()
            pairs = []
            while value.remaining():
                pairs.append((value.lenenc(), value.lenenc()))
            fields[kind] = (default, pairs)
        elif kind in (ENUM_STR_VALUE, SET_STR_VALUE):
            lists = []
            while value.remaining():
                count = value.lenenc()
                lists.append(
                    tuple(value.lenenc_bytes().decode("utf-8", "replace") for _ in range(count))
                )
            fields[kind] = lists
        elif kind == SIMPLE_PRIMARY_KEY:
            key = []
            while value.remaining():
                key.append(value.lenenc())
            fields[kind] = key
        elif kind == PRIMARY_KEY_WITH_PREFIX:  # (column, prefix length) pairs
            key = []
            while value.remaining():
                key.append(value.lenenc())
                value.lenenc()
            fields[SIMPLE_PRIMARY_KEY] = key
        # Column visibility and geometry types do not change what a row image holds.
    return fields


class TableMaps:
    """The TABLE_MAP state of a stream: table id -> table map, parsed once per distinct
    event body (a table map repeats before every transaction that writes the table)."""

    def __init__(self) -> None:
        self.by_id: dict[int, TableMap] = {}
        self._parsed: dict[bytes, TableMap] = {}

    def add(self, body: bytes, post_header_len: int, mariadb: bool) -> TableMap:
        table_map = self._parsed.get(body)
        if table_map is None:
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            table_map = self._parsed[body] = parse_table_map(body, post_header_len, mariadb)
        self.by_id[table_map.table_id] = table_map
        return table_map
