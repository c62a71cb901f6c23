"""Real binlog files, decoded by the event layer and both row decoders, against what the
writing server version's own dump tool prints for them.

The corpus (``tests/data/binlog/<flavour>-<series>/``, recorded by
``python -m tests.support.record_binlog_corpus``, see its README) holds a binlog file of
MySQL 9.7 and one of MariaDB 10.11, and ``<file>.verbose.txt``: ``mysqlbinlog
--base64-output=DECODE-ROWS -v`` (MySQL) / ``mariadb-binlog ... -v`` (MariaDB) of it. No
server or dump tool is needed here.

Each file is split into events (``\\xfebin`` magic, then each event's own length) and read
with the project's :class:`~cdc_source.binlog.events.EventReader` (checksums, format
description, MySQL TRANSACTION_PAYLOAD unwrapped); TABLE_MAPs are parsed by
:mod:`cdc_source.binlog.table_map`, every rows event (MariaDB's compressed ones too) by
:func:`~cdc_source.binlog.rows_event.parse_rows_event` and decoded with
``RowSink(plan, decoder="python")`` and, where the C extension is built,
``decoder="native"``. Checked:

* the two decoders give identical Arrow arrays (types, validity, values; both images and
  the image-presence flags);
* the rows events, in order, are the dump tool's (same ``end_log_pos``, table, kind and
  row count; the events inside a MySQL payload share the payload's end position in
  both);
* every column value of every image equals the tool's ``@N=`` text, compared as follows.

Most values are compared exactly by printing ours in the tool's notation (the one of
``log_event_print_value``) and comparing the text byte for byte:

=====================  ==================================================================
column kind            the tool prints, and the comparison
=====================  ==================================================================
NULL                   ``NULL``; ours is NULL (but see the zero temporal values below)
integers (all widths)  the value read signed, then `` (unsigned)`` when that is negative,
                       whatever the column's signedness (``@2=-1 (255)``): ours is printed
                       so from its two's complement of the column's width
FLOAT                  C ``%-20g`` of the value widened to double (6 significant digits,
                       padded to 20): ours, printed the same way, is the same text (Python's
                       and glibc's ``%g`` both round correctly)
DOUBLE                 C ``%-.20g``: the same text (20 significant digits also determine the
                       double exactly, so this is exact equality)
DECIMAL                integer digits (``0`` for none), exactly ``scale`` fraction digits:
                       ours (Decimal for p <= 38, the decoders' text above) in that form
BIT(n), SET            ``b'...'``: the stored bytes' bits, first byte first, each byte's
                       high bit first; n bits of BIT's big-endian bytes (ours), all 8 per
                       byte of a SET's little-endian mask (so ``SET('m1',...,'m9')`` value
                       ``m1`` prints ``b'0000000100000000'``): ours in that order
ENUM                   the 1-based index: ours
YEAR                   byte + 1900 (a YEAR 0000 prints as ``1900``, a value YEAR never
                       holds): ours, 0 mapped to 1900
DATE                   ``'YYYY:MM:DD'`` (colons): ours
DATETIME(fsp)          ``'YYYY-MM-DD hh:mm:ss[.fsp digits]'``: ours
TIMESTAMP(fsp)         seconds since the epoch ``[.fsp digits]``, unquoted: ours (UTC)
TIME(fsp)              ``'[-]hh:mm:ss[.fsp digits]'`` (hours up to 838): ours
CHAR, VARCHAR, TEXT,   the stored bytes in quotes, bytes < 0x20 as ``\\xNN`` (MySQL also
BINARY, VARBINARY,     ``\\b \\t \\n \\f \\r`` and escapes ``'`` and ``\\``; MariaDB writes
BLOB                   those two raw): ours quoted so. BINARY(n): the server stores the
                       value without its trailing zero bytes and the tool prints it so; ours
                       is padded to n, so it must be n bytes and, stripped, print the same
=====================  ==================================================================

Zero temporal values: the decoders give NULL for the zero DATE, DATETIME and TIMESTAMP
(no Spark value holds them, ``cdc_source.binlog.row_plan``); the tool prints
``'0000:00:00'``, ``'0000-00-00 00:00:00[.000]'``, ``0[.0]``. Such a pair is counted as
agreeing (and counted apart); any other printed value against our NULL is a disagreement.

JSON (MySQL): the tool prints the document as the server's JSON text
(``Json_wrapper::to_string``; a top-level string or date/time scalar unquoted) inside its
string quoting. The text is unquoted and parsed (numbers with a fraction or exponent as
Decimal) and compared with :func:`reader.json_binary.decode` of ours, structurally:
same types (a boolean is not a number), object keys and values equal, a double equal to
the printed number read as a double (MySQL prints doubles in their shortest round-trip
form), a DECIMAL equal as a decimal; a top-level string (or opaque date/time, which
``json_binary`` gives as its text) equal to the unquoted text.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import EventReader
from cdc_source.binlog.row_plan import (
    K_BIT,
    K_DATE,
    K_DATETIME2,
    K_DECIMAL,
    K_DOUBLE,
    K_ENUM,
    K_FLOAT,
    K_SET,
    K_SINT,
    K_TIME2,
    K_TIMESTAMP2,
    K_UINT,
    K_VAR,
    K_YEAR,
    json_columns,
    table_plan,
)
from cdc_source.binlog.rows_event import parse_rows_event
from cdc_source.binlog.table_map import Column, TableMap, TableMaps, table_id_of
from reader import json_binary
from reader.row_decoding import RowSink, native_available
from tests.support.binlog_corpus import CORPUS, FLAVOURS

MAGIC = b"\xfebin"
EPOCH = dt.datetime(1970, 1, 1)


# -- the dump tool's output ---------------------------------------------------------------


@dataclass
class PrintedRow:
    table: str  # `db`.`table` as printed
    kind: int
    before: list[bytes] | None = None
    after: list[bytes] | None = None


@dataclass
class PrintedEvent:
    end_pos: int
    name: str  # Write_rows, Update_compressed_rows, ...
    rows: list[PrintedRow] = field(default_factory=list)


_ROWS_HEADER = re.compile(rb"^#\d{6} .* end_log_pos (\d+) .*\t(\w+_rows\w*): table id \d+")
_STATEMENT = re.compile(rb"^### (INSERT INTO|UPDATE|DELETE FROM) (`.*`\.`.*`)$")
_VALUE = re.compile(rb"^###   @(\d+)=(.*)$", re.S)


def parse_verbose(text: bytes) -> list[PrintedEvent]:
    """The rows events of a ``-v`` listing, with their rows' printed values (bytes as
    printed: the values of text columns are not UTF-8 for every charset)."""
    events: list[PrintedEvent] = []
    image: list[bytes] | None = None
    for line in text.split(b"\n"):
        if match := _ROWS_HEADER.match(line):
            events.append(PrintedEvent(int(match.group(1)), match.group(2).decode()))
            image = None
        elif match := _STATEMENT.match(line):
            kind = {b"INSERT INTO": c.WRITE, b"UPDATE": c.UPDATE, b"DELETE FROM": c.DELETE}
            row = PrintedRow(match.group(2).decode(), kind[match.group(1)])
            events[-1].rows.append(row)
            image = None
        elif line == b"### WHERE":
            image = events[-1].rows[-1].before = []
        elif line == b"### SET":
            image = events[-1].rows[-1].after = []
        elif match := _VALUE.match(line):
            assert image is not None and int(match.group(1)) == len(image) + 1, line
            image.append(match.group(2))
        else:
            assert not line.startswith(b"###"), line
    return events


# -- the binlog file through the event layer ----------------------------------------------


def split_file(data: bytes) -> list[bytes]:
    """The events of a binlog file, each as the bytes a dump sends (header to checksum)."""
    assert data[:4] == MAGIC
    events, pos = [], 4
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        assert size >= 19 and pos + size <= len(data), f"event at {pos} of {size} bytes"
        events.append(data[pos : pos + size])
        pos += size
    return events


@dataclass
class DecodedEvent:
    end_pos: int
    type: int
    table_map: TableMap
    plan: tuple
    kind: int
    rows: dict  # decoder -> DecodedRows


def decoders() -> list[str]:
    return ["python", "native"] if native_available() else ["python"]


def decode_file(path: Path) -> list[DecodedEvent]:
    reader = EventReader(path.name)
    maps = TableMaps()
    out = []
    for event in reader.events(split_file(path.read_bytes())):
        fmt = reader.format
        if event.type == c.TABLE_MAP:
            maps.add(event.body, fmt.post_header_len(c.TABLE_MAP, 8), fmt.mariadb)
        elif event.type in c.ROW_EVENTS:
            table_map = maps.by_id[table_id_of(event.body, fmt.post_header_len(event.type, 8))]
            rows_event = parse_rows_event(event, fmt, len(table_map.columns))
            plan = table_plan(table_map)
            decoded = {}
            for decoder in decoders():
                sink = RowSink(plan, json_columns(table_map), decoder=decoder)
                count = sink.decode(
                    rows_event.data,
                    rows_event.start,
                    len(rows_event.data),
                    rows_event.kind,
                    rows_event.partial,
                )
                decoded[decoder] = sink.take()
                assert decoded[decoder].rows == count
            out.append(
                DecodedEvent(event.end_pos, event.type, table_map, plan, rows_event.kind, decoded)
            )
    return out


# -- our values in the tool's notation -----------------------------------------------------

_MYSQL_ESCAPES = {0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0C: b"\\f", 0x0D: b"\\r"}
_MYSQL_ESCAPES |= {ord("'"): b"\\'", ord("\\"): b"\\\\"}


def quoted(value: bytes, mariadb: bool) -> bytes:
    """``my_b_write_quoted``: bytes below 0x20 as ``\\xNN``; MySQL's spells five of them
    C-style and escapes the quote and the backslash, MariaDB's writes those raw."""
    out = bytearray(b"'")
    for byte in value:
        if not mariadb and byte in _MYSQL_ESCAPES:
            out += _MYSQL_ESCAPES[byte]
        elif byte < 0x20:
            out += b"\\x%02x" % byte
        else:
            out.append(byte)
    return bytes(out + b"'")


def unquoted_mysql(text: bytes) -> bytes:
    """The bytes of MySQL's quoted form (unambiguous: it escapes the backslash)."""
    assert text[:1] == b"'" and text[-1:] == b"'", text
    reverse = {v[1:]: bytes([k]) for k, v in _MYSQL_ESCAPES.items()}
    return re.sub(
        rb"\\(x[0-9a-f]{2}|.)",
        lambda m: bytes([int(m.group(1)[1:], 16)]) if len(m.group(1)) == 3 else reverse[m.group(1)],
        text[1:-1],
    )


def _fraction(micros: int, fsp: int) -> str:
    return f".{micros:06d}"[: fsp + 1] if fsp else ""


def _bits(value: int, width: int) -> bytes:
    return b"b'" + format(value, f"0{width}b").encode() + b"'"


def printed_form(value, column: Column, entry: tuple, mariadb: bool) -> bytes | None:
    """``value`` (ours, as the raw Python value of the decoder's Arrow type) as the tool
    prints it; None for JSON, which is compared by :func:`same_json`."""
    kind, a, b = entry
    if value is None:
        return b"NULL"
    if kind in (K_SINT, K_UINT):
        bits = 8 * a
        unsigned = value % (1 << bits)
        signed = unsigned - (1 << bits) if unsigned >> (bits - 1) else unsigned
        return f"{signed}".encode() + (f" ({unsigned})".encode() if signed < 0 else b"")
    if kind == K_FLOAT:
        return b"%-20g" % value
    if kind == K_DOUBLE:
        return b"%-.20g" % value
    if kind == K_DECIMAL:
        if isinstance(value, bytes):  # precision > 38: the decoders' text
            return value
        return f"{value:f}".encode()
    if kind == K_BIT:
        assert len(value) == a
        nbits = (column.meta >> 8) * 8 + (column.meta & 0xFF)
        return _bits(int.from_bytes(value, "big"), nbits)
    if kind == K_SET:  # the stored bytes (little-endian) in storage order
        return _bits(int.from_bytes(value.to_bytes(a, "little"), "big"), 8 * a)
    if kind == K_ENUM:
        return str(value).encode()
    if kind == K_YEAR:
        return str(value or 1900).encode()
    if kind == K_DATE:
        return f"'{value.year:04d}:{value.month:02d}:{value.day:02d}'".encode()
    if kind == K_DATETIME2:
        moment = EPOCH + dt.timedelta(microseconds=value)
        day = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        return f"'{day} {moment:%H:%M:%S}{_fraction(moment.microsecond, a)}'".encode()
    if kind == K_TIMESTAMP2:
        seconds, micros = divmod(value, 1_000_000)
        return f"{seconds}{_fraction(micros, a)}".encode()
    if kind == K_TIME2:
        sign = "-" if value < 0 else ""
        seconds, micros = divmod(abs(value), 1_000_000)
        hms = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return f"'{sign}{hms}{_fraction(micros, a)}'".encode()
    if kind == K_VAR:
        if column.type == c.T_JSON:
            return None
        if b:  # BINARY(n)
            assert len(value) == b, (value, b)
            value = value.rstrip(b"\0")
        return quoted(value, mariadb)
    raise AssertionError(f"plan kind {kind} is not in the corpus comparison")


_ZERO_FORMS = {
    K_DATE: re.compile(rb"^'0000:00:00'$"),
    K_DATETIME2: re.compile(rb"^'0000-00-00 00:00:00(\.0+)?'$"),
    K_TIMESTAMP2: re.compile(rb"^0(\.0+)?$"),
}


def same_json(ours, printed) -> bool:
    if isinstance(ours, bool) or isinstance(printed, bool) or ours is None or printed is None:
        return type(ours) is type(printed) and ours == printed
    if isinstance(ours, dict):
        return (
            isinstance(printed, dict)
            and ours.keys() == printed.keys()
            and all(same_json(ours[k], printed[k]) for k in ours)
        )
    if isinstance(ours, list):
        return (
            isinstance(printed, list)
            and len(ours) == len(printed)
            and all(same_json(x, y) for x, y in zip(ours, printed))
        )
    if isinstance(ours, float):
        return isinstance(printed, (int, Decimal)) and float(printed) == ours
    if isinstance(ours, Decimal):
        return isinstance(printed, (int, Decimal)) and Decimal(printed) == ours
    if isinstance(ours, int):
        return type(printed) is int and printed == ours
    return isinstance(ours, str) and isinstance(printed, str) and ours == printed


def printed_json(text: bytes, ours):
    """The tool's JSON text as a Python value; a top-level string (or date/time) scalar
    is printed without JSON quotes, so it is the text itself when ours is a string."""
    raw = unquoted_mysql(text).decode("utf-8")
    if isinstance(ours, str):
        return raw
    return json.loads(raw, parse_float=Decimal)


def python_values(array: pa.Array) -> list:
    """Raw Python values: timestamps as integer microseconds (the UTC ones too)."""
    if pa.types.is_timestamp(array.type):
        return array.cast(pa.int64()).to_pylist()
    return array.to_pylist()


# -- the test -----------------------------------------------------------------------------


@dataclass
class Tally:
    events: int = 0
    rows: int = 0
    values: int = 0
    zero_temporals: int = 0
    json_values: int = 0
    disagreements: list[str] = field(default_factory=list)


def compare(flavour: str) -> Tally:
    directory = CORPUS / flavour
    (binlog,) = [p for p in directory.iterdir() if re.fullmatch(r".*\.\d{6}", p.name)]
    mariadb = flavour.startswith("mariadb")
    printed = parse_verbose((directory / f"{binlog.name}.verbose.txt").read_bytes())
    decoded = decode_file(binlog)
    tally = Tally()
    assert len(decoded) == len(printed), (len(decoded), len(printed))
    for ours, theirs in zip(decoded, printed):
        where = f"{flavour}/{binlog.name} {c.event_name(ours.type)} ending at {ours.end_pos}"
        # the decoders agree
        reference = ours.rows["python"]
        for decoder, rows in ours.rows.items():
            for name in ("has_before", "has_after"):
                assert getattr(rows, name).equals(getattr(reference, name)), (where, decoder)
            for side in ("before", "after"):
                for i, (x, y) in enumerate(zip(getattr(rows, side), getattr(reference, side))):
                    assert x.type == y.type and x.equals(y), (where, decoder, side, i, x, y)
        # the events are the tool's
        table = f"`{ours.table_map.database}`.`{ours.table_map.table}`"
        assert theirs.end_pos == ours.end_pos, (where, theirs.end_pos)
        assert len(theirs.rows) == reference.rows, (where, len(theirs.rows), reference.rows)
        tally.events += 1
        images = {
            side: [python_values(a) for a in getattr(reference, side)]
            for side in ("before", "after")
        }
        for r, row in enumerate(theirs.rows):
            assert (row.table, row.kind) == (table, ours.kind), (where, r, row.table, row.kind)
            tally.rows += 1
            for side in ("before", "after"):
                values = getattr(row, side)
                assert (values is not None) == getattr(reference, f"has_{side}")[r].as_py()
                if values is None:
                    continue
                assert len(values) == len(ours.plan), (where, r, side)
                for i, (column, entry, text) in enumerate(
                    zip(ours.table_map.columns, ours.plan, values)
                ):
                    value = images[side][i][r]
                    tally.values += 1
                    if column.type == c.T_JSON and value is not None:
                        tally.json_values += 1
                        document = json_binary.decode(value)
                        agrees = same_json(document, printed_json(text, document))
                        shown = repr(document)
                    elif value is None and entry[0] in _ZERO_FORMS and text != b"NULL":
                        tally.zero_temporals += 1
                        agrees = bool(_ZERO_FORMS[entry[0]].match(text))
                        shown = "NULL"
                    else:
                        expected = printed_form(value, column, entry, mariadb)
                        agrees = expected == text
                        shown = f"{value!r} (printed {expected!r})"
                    if not agrees:
                        tally.disagreements.append(
                            f"{where}, {table} row {r} {side}-image column @{i + 1} "
                            f"{column.name}: ours {shown}, the tool's {text!r}"
                        )
    return tally


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_decoders_agree_with_the_dump_tool(flavour):
    tally = compare(flavour)
    assert not tally.disagreements, "\n".join(tally.disagreements)
    assert tally.events >= 20 and tally.rows >= 40 and tally.values >= 500, tally
    print(
        f"{flavour}: {tally.events} rows events, {tally.rows} rows, {tally.values} values "
        f"({tally.zero_temporals} zero temporals, {tally.json_values} JSON) agree, "
        f"decoders {decoders()}"
    )


def test_corpus_has_both_flavours():
    assert FLAVOURS == ["mariadb-10.11", "mysql-9.7"]
    for flavour in FLAVOURS:
        version = (CORPUS / flavour / "VERSION").read_text()
        assert version.startswith(f"server {flavour.split('-')[1]}."), version
