"""The binlog encoder of the unit tests (``tests/support/binlog_encoder.py``) writes the
bytes real servers write: every TABLE_MAP and rows event of the binlog corpus
(``tests/data/binlog/``, MySQL 9.7 and MariaDB 10.11, recorded by
``tests/support/record_binlog_corpus.py``) is decoded by the project's decoders and
re-encoded by the encoder from what they give, and the two must be equal byte for byte,
the whole event: header (type code, size, flags), body and CRC32.

* TABLE_MAP: :func:`cdc_source.binlog.table_map.parse_table_map` gives the table id,
  names, columns (real type, metadata, nullability, signedness, collation, ENUM/SET
  members) and primary key; :func:`binlog_encoder.column_meta` turns each column back into
  its type byte and metadata bytes, :func:`binlog_encoder.table_map_body` writes the rest
  (the optional metadata fields, the DEFAULT_CHARSET/COLUMN_CHARSET choice included).
* Rows events (v1 and v2 WRITE/UPDATE/DELETE, MariaDB's zlib-compressed ones, the events
  of MySQL's zstd TRANSACTION_PAYLOAD): :func:`cdc_source.binlog.rows_event.
  parse_rows_event` and the Python row decoder (``RowSink(decoder="python")``) give each
  image's values; :func:`binlog_encoder.pack_value` packs each, JSON documents are built
  again by :func:`binlog_encoder.json_binary` from :func:`reader.json_binary.decode`'s
  value (opaque values kept typed, below), :func:`binlog_encoder.row_image` adds the NULL
  bitmap, :func:`binlog_encoder.rows_body` and :func:`binlog_encoder.event` the rest.

What the encoder is given that is not a decoded value, by name:

* the event header's timestamp, server id and end position (``log_pos``): the recording's
  clock, identity and file offset;
* the table id: the server numbers its tables;
* the flavour: MySQL 9.7 sets the spare bits of the columns-present bitmaps and clears
  those of the NULL bitmaps, MariaDB 10.11 the other way round, and MariaDB counts
  GEOMETRY among the character columns; only MySQL writes COLUMN_VISIBILITY;
* the rows event flags, per flavour: STMT_END_F, and on MySQL 9.7 also 0x10, which its
  ``mysqlbinlog`` prints as USE_SQL_FOREIGN_KEY_F (foreign keys checked by the SQL layer);
* the collation of ENUM and SET columns (``ENUM_SET_COLLATION``): the server writes it
  (ENUM_AND_SET_DEFAULT_CHARSET), the project's TABLE_MAP parser does not keep it; the
  recorder's tables leave it to the server's default;
* zero DATE/DATETIME/TIMESTAMP values: the decoders give NULL for them (no Spark value
  holds them), so where a decoded NULL's bit is clear in the recorded NULL bitmap the
  value is the zero one, and the encoder writes its zero form;
* the precision byte of an opaque DECIMAL in JSON: the server writes its ``my_decimal``'s
  integer digits + scale, which depends on how the value was made (a DECIMAL(10,2)
  column's value has 10, ``CAST(12.340 AS DECIMAL(10,3))`` 12), not on the value; it is
  taken from the recorded document (the digits are encoded from the decoded Decimal).

MySQL's TRANSACTION_PAYLOAD events are compared whole too, from their inner events
(:func:`test_transaction_payloads_are_what_the_server_wrote`): the encoder's zstd frame
(python-zstandard at level 3, the server's default) is the server's byte for byte.

JSON values are typed as the server's parser types JSON text (an integer above 2^32 - 1
is UINT64, the rest INT16/INT32/INT64); the corpus's documents come from JSON text, SQL
integer literals and DECIMAL, temporal and BLOB columns, never from unsigned integer
columns (which make UINT16/UINT32 values a decoded Python int cannot tell apart).

Rows events with partial images (binlog_row_image=MINIMAL/NOBLOB, PARTIAL_UPDATE_ROWS)
are not in the corpus: the recorder's server writes FULL images and the project refuses
partial ones (``PartialRowImageError``).

``test_json_binary.py``'s documents (its scalars-and-containers object, the large object,
each opaque value, the canonical-text document) are found in the corpus and the
encoder's bytes for them checked equal to the server's.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
import zstandard

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import (
    CHECKSUM_CRC32,
    CHECKSUM_NONE,
    Event,
    Format,
    parse_format_description,
    split_header,
)
from cdc_source.binlog.row_plan import (
    K_DATE,
    K_DATETIME2,
    K_DECIMAL,
    K_TIMESTAMP2,
    json_columns,
    table_plan,
)
from cdc_source.binlog.rows_event import parse_rows_event
from cdc_source.binlog.table_map import Column, TableMap, parse_table_map, table_id_of
from reader import json_binary
from reader.row_decoding import RowSink
from tests.support import binlog_encoder as enc
from tests.support import json_documents
from tests.support.binlog_corpus import CORPUS, FLAVOURS

EPOCH = dt.datetime(1970, 1, 1)

# The collation the recorder's ENUM and SET columns get from the server's defaults.
ENUM_SET_COLLATION = {"mysql-9.7": 255, "mariadb-10.11": 8}  # utf8mb4_0900_ai_ci, latin1
STMT_END_F, USE_SQL_FOREIGN_KEY_F = 0x0001, 0x0010
ROWS_FLAGS = {"mysql-9.7": STMT_END_F | USE_SQL_FOREIGN_KEY_F, "mariadb-10.11": STMT_END_F}

_TYPE_NAMES = {
    c.T_TINY: "TINYINT",
    c.T_SHORT: "SMALLINT",
    c.T_INT24: "MEDIUMINT",
    c.T_LONG: "INT",
    c.T_LONGLONG: "BIGINT",
    c.T_FLOAT: "FLOAT",
    c.T_DOUBLE: "DOUBLE",
    c.T_NEWDECIMAL: "DECIMAL",
    c.T_DATE: "DATE",
    c.T_DATETIME2: "DATETIME(fsp)",
    c.T_TIMESTAMP2: "TIMESTAMP(fsp)",
    c.T_TIME2: "TIME(fsp)",
    c.T_YEAR: "YEAR",
    c.T_VARCHAR: "VARCHAR/VARBINARY",
    c.T_BIT: "BIT",
    c.T_ENUM: "ENUM",
    c.T_SET: "SET",
    c.T_BLOB: "BLOB/TEXT",
    c.T_JSON: "JSON",
}


def _kind_name(column: Column) -> str:
    if column.type == c.T_STRING:
        return "BINARY" if column.collation == enc.BINARY_COLLATION else "CHAR"
    name = _TYPE_NAMES[column.type]
    if column.type in (c.T_TINY, c.T_SHORT, c.T_INT24, c.T_LONG, c.T_LONGLONG):
        name += " UNSIGNED" if column.unsigned else " SIGNED"
    return name


# -- the corpus's events, as recorded -----------------------------------------------------


@dataclass
class Recorded:
    raw: bytes  # header to checksum, as in the file (inside a payload: no checksum)
    event: Event
    fmt: Format
    where: str


def _split(data: bytes, start: int = 0) -> list[bytes]:
    events, pos = [], start
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        assert size >= 19 and pos + size <= len(data), f"event at {pos} of {size} bytes"
        events.append(data[pos : pos + size])
        pos += size
    return events


def payload_parts(body: bytes) -> tuple[dict[int, int], bytes]:
    """A TRANSACTION_PAYLOAD body: its (type, length, value) header fields, then the
    payload."""
    fields, pos = {}, 0

    def lenenc() -> int:
        nonlocal pos
        first = body[pos]
        size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first, 0)
        value = int.from_bytes(body[pos + 1 : pos + 1 + size], "little") if size else first
        pos += 1 + size
        return value

    while (kind := lenenc()) != 0:
        length = lenenc()
        end = pos + length
        fields[kind] = lenenc()
        assert pos == end
    return fields, body[pos:]


def recorded_events(path: Path) -> list[Recorded]:
    """The file's events and, in place of each TRANSACTION_PAYLOAD, its inner events."""
    fmt = Format()
    out = []
    data = path.read_bytes()
    assert data[:4] == b"\xfebin"
    for raw in _split(data, 4):
        event = split_header(raw, fmt, path.name)
        if event.type == c.FORMAT_DESCRIPTION:
            fmt = parse_format_description(event.body)
        where = f"{path.relative_to(CORPUS)} {c.event_name(event.type)} ending at {event.end_pos}"
        if event.type == c.TRANSACTION_PAYLOAD:
            _, payload = payload_parts(event.body)
            inner_data = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
            inner_fmt = Format(checksum=CHECKSUM_NONE, post_header=fmt.post_header)
            for inner_raw in _split(inner_data):
                inner = split_header(inner_raw, inner_fmt, path.name)
                name = c.event_name(inner.type)
                out.append(Recorded(inner_raw, inner, inner_fmt, f"{where}, inner {name}"))
            continue
        out.append(Recorded(raw, event, fmt, where))
    return out


def corpus_files(flavour: str) -> list[Path]:
    directory = CORPUS / flavour
    return sorted(p for p in directory.rglob("*") if re.fullmatch(r".*\.\d{6}", p.name))


def reencoded_event(recorded: Recorded, body: bytes) -> bytes:
    """The encoder's event of ``body`` with the recorded header's clock, server id and
    position; type code, size, header flags (0) and checksum are the encoder's."""
    event = recorded.event
    return enc.event(
        event.type,
        body,
        event.end_pos,
        timestamp=event.timestamp,
        checksum=recorded.fmt.checksum == CHECKSUM_CRC32,
        server_id=event.server_id,
    )


def first_difference(ours: bytes, theirs: bytes) -> str:
    at = next((i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y), None)
    if at is None:
        return f"lengths {len(ours)} (encoder) and {len(theirs)} (server)"
    return (
        f"first difference at byte {at}: encoder {ours[at : at + 16].hex()}, "
        f"server {theirs[at : at + 16].hex()}"
    )


# -- TABLE_MAP ------------------------------------------------------------------------


def encoder_columns(table_map: TableMap, flavour: str) -> list[tuple]:
    columns = []
    for column in table_map.columns:
        type_byte, meta = enc.column_meta(column.type, column.meta)
        collation = column.collation
        if column.type in (c.T_ENUM, c.T_SET):
            collation = ENUM_SET_COLLATION[flavour]
        columns.append((column.name, type_byte, meta, column.nullable, column.unsigned, collation))
    return columns


def reencoded_table_map(table_map: TableMap, flavour: str) -> bytes:
    members = {
        kind: [list(col.members) for col in table_map.columns if col.type == kind]
        for kind in (c.T_ENUM, c.T_SET)
    }
    names = [col.name for col in table_map.columns]
    return enc.table_map_body(
        table_map.table_id,
        table_map.database,
        table_map.table,
        encoder_columns(table_map, flavour),
        enum_values=members[c.T_ENUM] or None,
        set_values=members[c.T_SET] or None,
        primary_key=None
        if table_map.primary_key is None
        else [names.index(n) for n in table_map.primary_key],
        mariadb=flavour.startswith("mariadb"),
        visibility=flavour.startswith("mysql"),
    )


# -- JSON: the project's decoding, opaque values kept typed ----------------------------------

_DATETIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?: (\d\d):(\d\d):(\d\d)\.(\d{6}))?$")
_TIME = re.compile(r"(-?)(\d+):(\d\d):(\d\d)\.(\d{6})$")
_BASE64 = re.compile(r"base64:type(\d+):(.*)$")
_TEMPORALS = {c.T_DATE, c.T_DATETIME, c.T_TIMESTAMP}


def _typed_opaque(field_type: int, raw: bytes, value) -> enc.Opaque:
    """The encoder's opaque value for what :mod:`reader.json_binary` made of one."""
    if field_type == c.T_NEWDECIMAL:
        scale = -value.as_tuple().exponent
        return enc.opaque_decimal(value, raw[0], scale)  # the precision: see the docstring
    if field_type in _TEMPORALS:
        parts = [int(p) for p in _DATETIME.fullmatch(value).groups() if p is not None]
        return enc.opaque_datetime(field_type, *parts)
    if field_type == c.T_TIME:
        sign, h, mi, s, us = _TIME.fullmatch(value).groups()
        micros = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + int(us)
        return enc.opaque_time(-micros if sign else micros)
    match = _BASE64.fullmatch(value)
    assert match and int(match.group(1)) == field_type, value
    return enc.Opaque(field_type, base64.b64decode(match.group(2)))


def decoded_json(data: bytes):
    """:func:`reader.json_binary.decode` of ``data``, with each opaque value as the
    encoder's :class:`~binlog_encoder.Opaque` built from the value the decoder read."""
    read_opaque = json_binary._opaque

    def typed(field_type: int, raw: bytes):
        return _typed_opaque(field_type, raw, read_opaque(field_type, raw))

    with mock.patch.object(json_binary, "_opaque", typed):
        return json_binary.decode(data)


def json_shapes(data: bytes, tally: Counter) -> None:
    """Counts the value types of a binary JSON document (containers by form, opaque
    values by field type, inlined values apart)."""
    names = {
        0x00: "small object",
        0x01: "large object",
        0x02: "small array",
        0x03: "large array",
        0x04: "literal",
        0x05: "int16",
        0x06: "uint16",
        0x07: "int32",
        0x08: "uint32",
        0x09: "int64",
        0x0A: "uint64",
        0x0B: "double",
        0x0C: "string",
    }

    def walk(kind: int, pos: int, inline: bool = False) -> None:
        if kind == 0x0F:
            tally[f"opaque type {data[pos]}"] += 1
            return
        tally[names[kind] + (" (inlined)" if inline else "")] += 1
        if kind > 0x03:
            return
        large = kind in (0x01, 0x03)
        width = 4 if large else 2
        count = int.from_bytes(data[pos : pos + width], "little")
        entries = pos + 2 * width + (count * (width + 2) if kind in (0x00, 0x01) else 0)
        for i in range(count):
            entry = entries + i * (1 + width)
            child = data[entry]
            if child in (0x04, 0x05, 0x06) or (large and child in (0x07, 0x08)):
                walk(child, entry + 1, inline=True)
            else:
                offset = int.from_bytes(data[entry + 1 : entry + 1 + width], "little")
                walk(child, pos + offset)

    if data:
        walk(data[0], 1)


# -- rows events ----------------------------------------------------------------------------

_ZERO = {K_DATE: (0, 0, 0), K_DATETIME2: (0,) * 7, K_TIMESTAMP2: 0}


@dataclass
class Tally:
    table_maps: int = 0
    rows_events: Counter = field(default_factory=Counter)
    rows: int = 0
    values: Counter = field(default_factory=Counter)
    json: Counter = field(default_factory=Counter)
    json_documents: list[bytes] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)


def encoder_value(column: Column, entry: tuple, value):
    """A decoded value (the Python value of the decoder's Arrow column) as
    :func:`binlog_encoder.pack_value` takes it."""
    kind = entry[0]
    if kind == K_DECIMAL and isinstance(value, bytes):  # precision > 38: the text
        return Decimal(value.decode())
    if kind == K_DATETIME2:
        return EPOCH + dt.timedelta(microseconds=value)
    if column.type == c.T_JSON:
        return enc.json_binary(decoded_json(value))
    return value


def python_values(array) -> list:
    if pa.types.is_timestamp(array.type):
        return array.cast(pa.int64()).to_pylist()
    return array.to_pylist()


def reencoded_rows(
    table_map: TableMap, rows, kind: int, recorded: bytes, mariadb: bool, tally: Tally, where: str
) -> bytes:
    """The row images of ``rows`` (DecodedRows) as the encoder packs them. A decoded NULL
    is written as the zero temporal value where the recorded image's NULL bit is clear."""
    plan = table_plan(table_map)
    sides = {"before": kind != c.WRITE, "after": kind != c.DELETE}
    images = {
        side: [python_values(a) for a in getattr(rows, side)] for side, on in sides.items() if on
    }
    out = bytearray()
    spans: list[tuple[int, str]] = []  # where each value starts, for the failure message
    for r in range(rows.rows):
        tally.rows += 1
        for side, columns in images.items():
            bitmap_at = len(out)
            bitmap = recorded[bitmap_at : bitmap_at + (len(plan) + 7) // 8]
            encoded = []
            for i, (column, entry) in enumerate(zip(table_map.columns, plan)):
                value = columns[i][r]
                name = _kind_name(column)
                if value is None:
                    null = len(bitmap) > i // 8 and bitmap[i // 8] & (1 << (i % 8))
                    if null or entry[0] not in _ZERO:
                        encoded.append(None)
                        tally.values["NULL"] += 1
                        continue
                    value, name = _ZERO[entry[0]], f"{name} zero value"
                else:
                    value = encoder_value(column, entry, value)
                    if column.type == c.T_JSON:
                        tally.json_documents.append(value)
                        json_shapes(value, tally.json)
                encoded.append(enc.pack_value(column.type, column.meta, value, column.collation))
                tally.values[name] += 1
            image = enc.row_image(encoded, mariadb)
            offset = len(out) + (len(plan) + 7) // 8
            for i, value_bytes in enumerate(encoded):
                if value_bytes is not None:
                    spans.append((offset, f"row {r} {side} {table_map.columns[i].name}"))
                    offset += len(value_bytes)
            out += image
    if bytes(out) != recorded:
        at = next((i for i, (x, y) in enumerate(zip(out, recorded)) if x != y), len(out))
        what = max((s for s in spans if s[0] <= at), default=(0, "a NULL bitmap"))[1]
        tally.differences.append(
            f"{where}: row data differ in {what}: {first_difference(bytes(out), recorded)}"
        )
    return bytes(out)


@functools.cache
def compare(flavour: str) -> Tally:
    tally = Tally()
    mariadb = flavour.startswith("mariadb")
    for path in corpus_files(flavour):
        maps: dict[int, TableMap] = {}
        for recorded in recorded_events(path):
            event, fmt = recorded.event, recorded.fmt
            if event.type == c.TABLE_MAP:
                table_map = parse_table_map(
                    event.body, fmt.post_header_len(c.TABLE_MAP, 8), mariadb
                )
                maps[table_map.table_id] = table_map
                ours = reencoded_event(recorded, reencoded_table_map(table_map, flavour))
                tally.table_maps += 1
            elif event.type in c.ROW_EVENTS:
                kind, v2, compressed, partial = c.ROW_EVENTS[event.type]
                assert not partial, f"{recorded.where}: partial JSON updates are not recorded"
                post_header = fmt.post_header_len(event.type, 10 if v2 else 8)
                table_map = maps[table_id_of(event.body, post_header)]
                rows_event = parse_rows_event(event, fmt, len(table_map.columns))
                sink = RowSink(table_plan(table_map), json_columns(table_map), decoder="python")
                sink.decode(rows_event.data, rows_event.start, len(rows_event.data), kind)
                rows = sink.take()
                row_data = reencoded_rows(
                    table_map,
                    rows,
                    kind,
                    rows_event.data[rows_event.start :],
                    mariadb,
                    tally,
                    recorded.where,
                )
                body = enc.rows_body(
                    table_map.table_id,
                    len(table_map.columns),
                    row_data,
                    update=kind == c.UPDATE,
                    v2=v2,
                    flags=ROWS_FLAGS[flavour],
                    compressed=compressed,
                    mariadb=mariadb,
                )
                ours = reencoded_event(recorded, body)
                tally.rows_events[c.event_name(event.type)] += 1
            else:
                continue
            if ours != recorded.raw:
                tally.differences.append(
                    f"{recorded.where}: {first_difference(ours, recorded.raw)}"
                )
    return tally


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_table_map_and_rows_event_is_what_the_server_wrote(flavour):
    tally = compare(flavour)
    assert not tally.differences, "\n".join(tally.differences)
    assert tally.table_maps >= 5 and sum(tally.rows_events.values()) >= 20, tally
    print(
        f"\n{flavour}: {tally.table_maps} TABLE_MAP and {sum(tally.rows_events.values())} rows "
        f"events byte-equal ({dict(tally.rows_events)}), {tally.rows} rows; values by column "
        f"kind: {dict(sorted(tally.values.items()))}; JSON values by type: "
        f"{dict(sorted(tally.json.items()))}"
    )


def test_the_corpus_holds_the_shapes_the_encoder_must_match():
    """What the comparison above must have covered for the proof to mean anything."""
    mysql, mariadb = compare("mysql-9.7"), compare("mariadb-10.11")
    for tally in (mysql, mariadb):
        for kind in (
            "TINYINT SIGNED",
            "TINYINT UNSIGNED",
            "BIGINT SIGNED",
            "BIGINT UNSIGNED",
            "MEDIUMINT SIGNED",
            "MEDIUMINT UNSIGNED",
            "FLOAT",
            "DOUBLE",
            "DECIMAL",
            "DATE",
            "DATE zero value",
            "DATETIME(fsp)",
            "DATETIME(fsp) zero value",
            "TIMESTAMP(fsp)",
            "TIMESTAMP(fsp) zero value",
            "TIME(fsp)",
            "YEAR",
            "CHAR",
            "BINARY",
            "VARCHAR/VARBINARY",
            "BLOB/TEXT",
            "BIT",
            "ENUM",
            "SET",
            "NULL",
        ):
            assert tally.values[kind], kind
    assert mysql.rows_events.keys() >= {"WRITE_ROWS", "UPDATE_ROWS", "DELETE_ROWS"}
    assert mariadb.rows_events.keys() >= {
        "WRITE_ROWS_V1",
        "UPDATE_ROWS_V1",
        "DELETE_ROWS_V1",
        "WRITE_ROWS_COMPRESSED_V1",
        "UPDATE_ROWS_COMPRESSED_V1",
        "DELETE_ROWS_COMPRESSED_V1",
    }
    for shape in (
        "small object",
        "large object",
        "small array",
        "large array",
        "literal",
        "literal (inlined)",
        "int16",
        "int16 (inlined)",
        "int32",
        "int32 (inlined)",
        "int64",
        "uint64",
        "double",
        "string",
        f"opaque type {c.T_NEWDECIMAL}",
        f"opaque type {c.T_DATE}",
        f"opaque type {c.T_TIME}",
        f"opaque type {c.T_DATETIME}",
        f"opaque type {c.T_TIMESTAMP}",
        f"opaque type {c.T_BLOB}",
    ):
        assert mysql.json[shape], shape


def test_the_documents_test_json_binary_builds_are_the_servers():
    documents = compare("mysql-9.7").json_documents
    built = [
        enc.json_binary(json_documents.SCALARS_AND_CONTAINERS),
        enc.json_binary(json_documents.CANONICAL_DOCUMENT),
        bytes([0x01]) + enc._json_value(json_documents.LARGE_OBJECT, large=True)[1],
        enc.json_binary(json_documents.LARGE_OBJECT),
        *(enc.json_binary({"v": opaque}) for opaque, _ in json_documents.OPAQUE_CASES),
    ]
    missing = [data[:40].hex() for data in built if data not in documents]
    assert not missing, missing


def test_transaction_payloads_are_what_the_server_wrote():
    """Each TRANSACTION_PAYLOAD, built by the encoder from the events it holds (compared
    one by one above), with the recorded header's clock, server id and position."""
    payloads = 0
    for path in corpus_files("mysql-9.7"):
        fmt = Format()
        for raw in _split(path.read_bytes(), 4):
            event = split_header(raw, fmt, path.name)
            if event.type == c.FORMAT_DESCRIPTION:
                fmt = parse_format_description(event.body)
            if event.type != c.TRANSACTION_PAYLOAD:
                continue
            payloads += 1
            _, payload = payload_parts(event.body)
            inner = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
            ours = enc.transaction_payload(
                _split(inner), event.end_pos, timestamp=event.timestamp, server_id=event.server_id
            )
            assert ours == raw, f"{path.name} payload ending at {event.end_pos}: " + (
                first_difference(ours, raw)
            )
    assert payloads == 2


def test_corpus_has_a_large_json_file():
    assert [p.relative_to(CORPUS).as_posix() for p in corpus_files("mysql-9.7")] == [
        "mysql-9.7/binlog.000002",
        "mysql-9.7/large-json/binlog.000003",
    ]
