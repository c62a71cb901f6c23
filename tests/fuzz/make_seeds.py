"""Writes the fuzz targets' seed inputs (``tests/data/fuzz_seeds/<target>/``) from the
recorded corpus of real servers (``tests/data/binlog``: MariaDB 10.11 and MySQL 9.7
binlogs; ``tests/data/server_answers``: their answers to the source's queries), in the
layouts of :mod:`tests.fuzz.native_targets`:

* ``rows``, ``count``: every rows event of the corpus with its table's plan or sizes,
  plus one hand-built row of each pre-5.6 temporal kind, which no current server writes;
* ``split``, ``plain``: the corpus files as dump streams, a few events per seed;
* ``json``: every JSON column value of the MySQL corpus;
* ``textscan``: the recorded answers as text-protocol result sets;
* ``statement``: the rows of ``tests.support.typed_rows`` (every column kind the binary
  protocol sends differently: integers of each width, signed and unsigned, DOUBLE,
  FLOAT, DATE, DATETIME, TIMESTAMP, TIME, YEAR, length-encoded text, NULLs) as
  binary-protocol result sets;
* ``values``: every TIME value of the binlog corpus as the server prints it, every
  text value of the recorded answers as key bytes for ``_seq``, and DATE, DATETIME,
  DECIMAL text of the server's forms and integers as sort keys.

Run ``python -m tests.fuzz.make_seeds``; it replaces the directory. Findings' inputs are
not seeds: they stay in ``tests/data/fuzz_seeds/regressions/<target>/``, untouched here.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
from pathlib import Path

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import CHECKSUM_CRC32, EventReader
from cdc_source.binlog.row_count import packed_sizes, value_sizes
from cdc_source.binlog.row_plan import K_DATETIME, K_TIME, K_TIMESTAMP, json_columns, table_plan
from cdc_source.binlog.rows_event import parse_rows_event
from cdc_source.binlog.table_map import TableMaps, table_id_of
from cdc_source.keys import time_literal
from reader.row_decoding import RowSink
from tests.fuzz import native_targets as t
from tests.support import server_answers
from tests.support.binlog_corpus import CORPUS, FLAVOURS
from tests.support.typed_rows import NAMES, ROWS

SEEDS = Path(__file__).resolve().parents[1] / "data" / "fuzz_seeds"
MAGIC = b"\xfebin"
EVENTS_PER_STREAM = 6
MAX_SEED = 4096  # bytes: keeps the directory small and the fuzzer's inputs short


def split_file(data: bytes) -> list[bytes]:
    assert data[:4] == MAGIC
    events, pos = [], 4
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        events.append(data[pos : pos + size])
        pos += size
    return events


def dump_stream(events: list[bytes]) -> bytes:
    """Events as a dump sends them: each in a packet after an OK byte, then EOF."""
    out, seq = bytearray(), 1
    for data in events:
        out += (len(data) + 1).to_bytes(3, "little") + bytes([seq & 0xFF]) + b"\x00" + data
        seq += 1
    return bytes(out + (5).to_bytes(3, "little") + bytes([seq & 0xFF]) + b"\xfe\0\0\2\0")


def binlog_seeds(path: Path, seeds: dict[str, list[bytes]]) -> None:
    raw = split_file(path.read_bytes())
    reader = EventReader(path.name)
    maps = TableMaps()
    for event in reader.events(raw):
        fmt = reader.format
        if event.type == c.TABLE_MAP:
            maps.add(event.body, fmt.post_header_len(c.TABLE_MAP, 8), fmt.mariadb)
        elif event.type in c.ROW_EVENTS:
            table_map = maps.by_id[table_id_of(event.body, fmt.post_header_len(event.type, 8))]
            rows = parse_rows_event(event, fmt, len(table_map.columns))
            data = rows.data[rows.start :]
            plan = table_plan(table_map)
            json_count = json_columns(table_map)
            seeds["rows"].append(t.rows_input(plan, rows.kind, rows.partial, json_count, data))
            images = 2 if rows.kind == c.UPDATE else 1
            bitmap = (json_count + 7) // 8 if rows.partial else -1
            sizes = packed_sizes(value_sizes(table_map))
            seeds["count"].append(t.count_input(images, bitmap, sizes, data))
            json_at = [i for i, col in enumerate(table_map.columns) if col.type == c.T_JSON]
            time_at = [
                i for i, col in enumerate(table_map.columns) if col.type in (c.T_TIME, c.T_TIME2)
            ]
            if json_at or time_at:
                sink = RowSink(plan, json_count, decoder="python")
                sink.decode(rows.data, rows.start, len(rows.data), rows.kind, rows.partial)
                decoded = sink.take()
                for image in (decoded.before, decoded.after):
                    for i in json_at:
                        seeds["json"] += [v for v in image[i].to_pylist() if v]
                    for i in time_at:
                        seeds["values"].append(time_seed(image[i].to_pylist()))
    checksum = reader.format.checksum == CHECKSUM_CRC32
    for i in range(0, len(raw), EVENTS_PER_STREAM):
        stream = dump_stream(raw[i : i + EVENTS_PER_STREAM])
        seeds["split"].append(t.split_input(checksum, stream))
        seeds["plain"].append(t.plain_input(checksum, stream))


def time_seed(micros: list[int | None]) -> bytes:
    """TIME values as the server prints them: with six digits of fraction, and without
    one when it is zero."""
    texts = []
    for value in micros:
        text = time_literal(value).encode() if value is not None else None
        texts.append(text[:-7] if text is not None and text.endswith(b".000000") else text)
    return t.values_input("time_micros", texts)


def answer_key_seeds() -> list[bytes]:
    """The recorded answers' text values, each answer's as the keys of one ``_seq``
    column."""
    seeds = []
    for flavour in ("mariadb-10.11", "mysql-9.7"):
        for setting in server_answers.load(flavour)["answers"].values():
            for answer in setting.values():
                values = [server_answers.value_of(v) for row in answer.get("rows", []) for v in row]
                texts = [
                    v if isinstance(v, bytes) else str(v).encode() for v in values if v is not None
                ]
                if texts:
                    prefix = b"000001.000000000004.1.0000."
                    seeds.append(t.values_input("hex_seq", [prefix, *texts]))
    return seeds


def typed_text_seeds() -> list[bytes]:
    """DATE, DATETIME and DECIMAL text in the forms the server prints, and integers as sort
    keys, the zero date and the extremes included (hand-built: the recorded answers hold
    none)."""
    dates = [b"2024-02-29", b"1970-01-01", b"0001-01-01", b"9999-12-31", b"0000-00-00", None]
    datetimes = [
        b"2024-02-29 23:59:59",
        b"1969-12-31 00:00:00.5",
        b"9999-12-31 23:59:59.999999",
        b"0000-00-00 00:00:00",
        b"2020-01-01 00:00:00.123",
        None,
    ]
    decimals = [b"-123.45", b"0.00", b"99999.99", b"-0.50", None]
    unsigned = [b"18446744073709551615", b"0", b"42"]
    signed = [b"-9223372036854775808", b"9223372036854775807", b"-1", b"0", b"127", None]
    return [
        t.values_input("integer_sort_keys", signed[:-1], bytes([0])),
        t.values_input("integer_sort_keys", unsigned, bytes([1])),  # BIGINT UNSIGNED
        t.values_input("date_days", dates),
        t.values_input("datetime_micros", datetimes),
        t.values_input("decimal128", decimals, bytes([6, 2])),  # DECIMAL(7, 2)
        t.values_input("decimal128", unsigned, bytes([19, 0])),  # BIGINT UNSIGNED
    ]


def old_temporal_seeds() -> list[bytes]:
    """One row of each pre-5.6 temporal kind (DATETIME as YYYYMMDDhhmmss in 8 bytes,
    TIMESTAMP as 4 bytes of seconds, TIME as HHMMSS in 3 bytes), and the zero values."""
    plan = ((K_DATETIME, 0, 0), (K_TIMESTAMP, 0, 0), (K_TIME, 0, 0))
    values = (20240229235959).to_bytes(8, "little")
    values += (1_700_000_000).to_bytes(4, "little") + (123456).to_bytes(3, "little")
    zero = bytes(8 + 4 + 3)
    return [t.rows_input(plan, c.WRITE, False, 0, b"\x00" + values + b"\x00" + zero)]


def _lenenc_text(value) -> bytes:
    if value is None:
        return b"\xfb"
    data = value if isinstance(value, bytes) else str(value).encode()
    size = len(data)
    if size < 251:
        return bytes([size]) + data
    if size < 1 << 16:
        return b"\xfc" + size.to_bytes(2, "little") + data
    return b"\xfd" + size.to_bytes(3, "little") + data


def _column_definition(
    name: str,
    field_type: int = c.T_VAR_STRING,
    flags: int = 0,
    decimals: int = 0,
    charset: int = 45,
    length: int = 1024,
) -> bytes:
    parts = [b"def", b"", b"", b"", name.encode(), name.encode()]
    head = b"".join(_lenenc_text(p) for p in parts)
    # fixed fields: charset (utf8mb4 by default), length, type, flags, decimals, filler
    return (
        head
        + b"\x0c"
        + charset.to_bytes(2, "little")
        + length.to_bytes(4, "little")
        + bytes([field_type])
        + flags.to_bytes(2, "little")
        + bytes([decimals])
        + b"\x00\x00"
    )


UNSIGNED = 0x20


def _binary_integer(width: int):
    return lambda v: int(v).to_bytes(width, "little", signed=int(v) < 0)


def _binary_date(text: str) -> bytes:
    year, month, day = (int(p) for p in text[:10].split("-"))
    return bytes([4]) + year.to_bytes(2, "little") + bytes([month, day])


def _binary_datetime(text: str) -> bytes:
    date = _binary_date(text)[1:]
    clock, _, fraction = text[11:].partition(".")
    hour, minute, second = (int(p) for p in clock.split(":"))
    micros = int((fraction + "000000")[:6])
    return bytes([11]) + date + bytes([hour, minute, second]) + micros.to_bytes(4, "little")


def _binary_time(text: str) -> bytes:
    negative = text.startswith("-")
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minute, second = (int(p) for p in clock.split(":"))
    micros = int((fraction + "000000")[:6])
    days, hour = divmod(hours, 24)
    return (
        bytes([12, negative])
        + days.to_bytes(4, "little")
        + bytes([hour, minute, second])
        + micros.to_bytes(4, "little")
    )


# typed_rows' columns the binary protocol sends in each of its forms: (name, field
# type, flags, decimals, encoder of the row's value).
STATEMENT_COLUMNS = (
    ("id", c.T_LONG, 0, 0, _binary_integer(4)),
    ("ti", c.T_TINY, 0, 0, _binary_integer(1)),
    ("siu", c.T_SHORT, UNSIGNED, 0, lambda v: int(v).to_bytes(2, "little")),
    ("mi", c.T_INT24, 0, 0, _binary_integer(4)),
    ("biu", c.T_LONGLONG, UNSIGNED, 0, lambda v: int(v).to_bytes(8, "little")),
    ("bi", c.T_LONGLONG, 0, 0, _binary_integer(8)),
    ("f", c.T_FLOAT, 0, 31, lambda v: struct.pack("<f", float(v))),
    ("db", c.T_DOUBLE, 0, 31, lambda v: struct.pack("<d", float(v))),
    ("d10", c.T_NEWDECIMAL, 0, 2, _lenenc_text),
    ("vc", c.T_VARCHAR, 0, 0, _lenenc_text),
    ("bl", c.T_BLOB, 0, 0, _lenenc_text),
    ("dt", c.T_DATE, 0, 0, _binary_date),
    ("dtm6", c.T_DATETIME, 0, 6, _binary_datetime),
    ("ts", c.T_TIMESTAMP, 0, 3, _binary_datetime),
    ("tm6", c.T_TIME, 0, 6, _binary_time),
    ("yr", c.T_YEAR, UNSIGNED, 0, lambda v: int(v).to_bytes(2, "little")),
)


TEXT_TYPES = (c.T_VARCHAR, c.T_BLOB)
# A number's or a temporal value's display length, as the servers give it (libmariadb
# 3.3.20 refuses a value longer than its column's length; 1024 it takes for no number).
NUMBER_LENGTH = 26


def _binary_row(values: list) -> bytes:
    nulls = bytearray((len(values) + 9) // 8)
    body = b""
    for index, value in enumerate(values):
        if value is None:
            nulls[(index + 2) // 8] |= 1 << ((index + 2) % 8)
        else:
            body += value
    return b"\x00" + bytes(nulls) + body


def statement_seeds() -> list[bytes]:
    eof = b"\xfe\x00\x00\x02\x00"
    head = [bytes([len(STATEMENT_COLUMNS)])]
    head += [
        _column_definition(n, k, f, d)
        if k in TEXT_TYPES
        else _column_definition(n, k, f, d, charset=63, length=NUMBER_LENGTH)
        for n, k, f, d, _ in STATEMENT_COLUMNS
    ]
    head.append(eof)
    rows = []
    for row in ROWS:
        by_name = dict(zip(NAMES, row))
        values = []
        for name, _, _, _, encode in STATEMENT_COLUMNS:
            value = by_name[name]
            values.append(None if value is None else encode(value))
        rows.append(_binary_row(values))
    seeds = [t.textscan_input(head + rows + [eof])]
    seeds += [t.textscan_input(head + [row, eof]) for row in rows]
    return seeds


def textscan_seeds() -> list[bytes]:
    eof = b"\xfe\x00\x00\x02\x00"
    seeds = []
    for flavour in ("mariadb-10.11", "mysql-9.7"):
        answers = server_answers.load(flavour)["answers"]
        for setting in answers.values():
            for answer in setting.values():
                if "columns" not in answer or not answer["columns"]:
                    continue
                payloads = [bytes([len(answer["columns"])])]
                payloads += [_column_definition(str(name)) for name in answer["columns"]]
                payloads.append(eof)
                for row in answer["rows"]:
                    values = [server_answers.value_of(v) for v in row]
                    payloads.append(b"".join(_lenenc_text(v) for v in values))
                payloads.append(eof)
                seeds.append(t.textscan_input(payloads))
    return seeds


def main() -> None:
    seeds: dict[str, list[bytes]] = {name: [] for name in t.TARGETS}
    for flavour in FLAVOURS:
        for path in sorted((CORPUS / flavour).glob("binlog.[0-9]*[0-9]")):
            binlog_seeds(path, seeds)
    seeds["rows"] += old_temporal_seeds()
    seeds["textscan"] = textscan_seeds()
    seeds["statement"] = statement_seeds()
    seeds["values"] += answer_key_seeds() + typed_text_seeds()
    for name, inputs in seeds.items():
        directory = SEEDS / name
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        kept = {hashlib.sha1(data).hexdigest()[:16]: data for data in inputs}
        kept = {key: data for key, data in kept.items() if len(data) <= MAX_SEED}
        for key, data in sorted(kept.items()):
            (directory / key).write_bytes(data)
        print(f"{name}: {len(kept)} seeds of {len(inputs)}")


if __name__ == "__main__":
    main()
