"""Binlog bytes built from the MySQL/MariaDB format descriptions, written apart from the
decoder (it shares no code with ``cdc_source.binlog`` or ``reader``), for what the test
server cannot produce: MySQL events, TRANSACTION_PAYLOAD, PARTIAL_UPDATE_ROWS, binary
JSON with opaque values, v2 rows events, and malformed bytes.

Value encoders follow the server's ``Field::pack`` functions: integers little-endian,
DECIMAL as ``decimal2bin``, temporal types as ``my_*_packed_to_binary``.
``tests/unit/cdc_source/test_binlog_encoder_matches_servers.py`` checks its TABLE_MAP, rows and
TRANSACTION_PAYLOAD events byte for byte against the binlogs MySQL 9.7 and MariaDB 10.11
wrote (``tests/data/binlog/``).
"""

from __future__ import annotations

import datetime as dt
import struct
import zlib
from collections.abc import Callable
from decimal import Decimal

# column type codes (field_types.h)
TINY, SHORT, LONG, FLOAT, DOUBLE, TIMESTAMP, LONGLONG, INT24, DATE = 1, 2, 3, 4, 5, 7, 8, 9, 10
TIME, DATETIME, YEAR, VARCHAR, BIT, TIMESTAMP2, DATETIME2, TIME2 = 11, 12, 13, 15, 16, 17, 18, 19
JSON, NEWDECIMAL, ENUM, SET, BLOB, STRING = 245, 246, 247, 248, 252, 254
NEWDATE, VAR_STRING, GEOMETRY = 14, 253, 255
TINY_BLOB, MEDIUM_BLOB, LONG_BLOB = 249, 250, 251
BLOBS = (TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB)
BINARY_COLLATION = 63

MAX_PACKET = 0xFFFFFF
DIGITS_BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def decimal_bin(value: Decimal, precision: int, scale: int) -> bytes:
    negative = value < 0
    text = f"{value.copy_abs():.{scale}f}"  # copy_abs is exact; abs() rounds to 28 digits
    int_text, _, frac_text = text.partition(".")
    int_digits = precision - scale
    int_text = int_text.rjust(int_digits, "0")[-int_digits:] if int_digits else ""
    out = bytearray()
    lead = int_digits % 9
    if lead:
        out += int(int_text[:lead]).to_bytes(DIGITS_BYTES[lead], "big")
    for i in range(lead, int_digits, 9):
        out += int(int_text[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(frac_text[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac_text[scale - scale % 9 :]).to_bytes(DIGITS_BYTES[scale % 9], "big")
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def frac_bytes(micros: int, fsp: int) -> bytes:
    if fsp in (1, 2):
        return (micros // 10000).to_bytes(1, "big")
    if fsp in (3, 4):
        return (micros // 100).to_bytes(2, "big")
    if fsp in (5, 6):
        return micros.to_bytes(3, "big")
    return b""


def datetime2(value: dt.datetime | tuple, fsp: int) -> bytes:
    """``value`` may be a tuple (y, m, d, hh, mm, ss, us) to write zero dates."""
    if isinstance(value, dt.datetime):
        value = (
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    y, mo, d, h, mi, s, us = value
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    packed = ((ymd << 17) | hms) + 0x8000000000
    return packed.to_bytes(5, "big") + frac_bytes(us, fsp)


def timestamp2(seconds: int, micros: int, fsp: int) -> bytes:
    return seconds.to_bytes(4, "big") + frac_bytes(micros, fsp)


def time2(micros: int, fsp: int) -> bytes:
    """TIME(fsp) as ``my_time_packed_to_binary`` writes it: the integer part is
    ``packed >> 24`` (an arithmetic shift, so floor) and the fraction ``packed % 2^24`` with
    C's truncating remainder, stored in one or two bytes."""
    negative = micros < 0
    seconds, us = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    packed = (((hours << 12) | (minutes << 6) | secs) << 24) + us
    if negative:
        packed = -packed
    if fsp in (5, 6):
        return (packed + 0x800000000000).to_bytes(6, "big")
    intpart = packed >> 24
    quotient = abs(packed) >> 24
    frac = packed - (quotient if packed >= 0 else -quotient) * (1 << 24)  # C remainder
    head = (intpart + 0x800000).to_bytes(3, "big")
    if fsp in (1, 2):
        return head + bytes([int(frac / 10000) & 0xFF])
    if fsp in (3, 4):
        return head + (int(frac / 100) & 0xFFFF).to_bytes(2, "big")
    return head


def date3(y: int, m: int, d: int) -> bytes:
    return ((y << 9) | (m << 5) | d).to_bytes(3, "little")


def null_bitmap(values: list, mariadb: bool = False) -> bytes:
    """A row image's NULL bits, one per column from the low bit of each byte. The bits past
    the last column are clear as MySQL 9.7 writes them and set as MariaDB 10.11 does (its
    ``pack_row`` starts every byte at 0xFF and clears the bits of the columns that are not
    NULL)."""
    bits = bytearray((b"\xff" if mariadb else b"\x00") * ((len(values) + 7) // 8))
    for i, value in enumerate(values):
        if value is None:
            bits[i // 8] |= 1 << (i % 8)
        else:
            bits[i // 8] &= ~(1 << (i % 8))
    return bytes(bits)


def row_image(encoded: list[bytes | None], mariadb: bool = False) -> bytes:
    """One row image from already encoded values (None for NULL)."""
    return null_bitmap(encoded, mariadb) + b"".join(v for v in encoded if v is not None)


_INT_WIDTHS = {TINY: 1, SHORT: 2, INT24: 3, LONG: 4, LONGLONG: 8}


def pack_value(real_type: int, meta: int, value, collation: int | None = None) -> bytes:
    """One non-NULL column value of a row image as ``Field::pack`` writes it, for the real
    type and metadata number of :func:`column_meta`:

    * integers: little-endian two's complement of the column's width (``value`` signed or
      unsigned); YEAR: one byte, the year - 1900 (0 for YEAR 0); ENUM/SET: the index or
      member mask, little-endian in ``meta`` bytes; BIT: big-endian in the column's bytes
      (``value`` an int or big-endian bytes);
    * FLOAT, DOUBLE: IEEE little-endian; DECIMAL: :func:`decimal_bin` (``value`` a Decimal);
    * DATE: :func:`date3` (a date, or a (y, m, d) tuple for zero dates); DATETIME(fsp):
      :func:`datetime2` (a datetime or tuple); TIMESTAMP(fsp): :func:`timestamp2` from
      microseconds since the epoch (0 is the zero timestamp); TIME(fsp): :func:`time2`
      from signed microseconds;
    * VARCHAR: a length of one byte, or two where the column's maximum exceeds 255 bytes;
      CHAR/BINARY: the same, after the trailing pad characters (``Field_string::pack``:
      zero bytes for the binary collation, spaces otherwise); BLOB, TEXT, JSON: a
      ``meta``-byte length. ``value`` is bytes (JSON: :func:`json_binary`)."""
    if real_type in _INT_WIDTHS:
        width = _INT_WIDTHS[real_type]
        return (value % (1 << (8 * width))).to_bytes(width, "little")
    if real_type == YEAR:
        return bytes([value - 1900 if value else 0])
    if real_type in (ENUM, SET):
        return value.to_bytes(meta, "little")
    if real_type == BIT:
        width = (meta >> 8) + (1 if meta & 0xFF else 0)
        number = value if isinstance(value, int) else int.from_bytes(value, "big")
        return number.to_bytes(width, "big")
    if real_type == FLOAT:
        return struct.pack("<f", value)
    if real_type == DOUBLE:
        return struct.pack("<d", value)
    if real_type == NEWDECIMAL:
        return decimal_bin(Decimal(value), meta & 0xFF, meta >> 8)
    if real_type in (DATE, NEWDATE):
        if isinstance(value, dt.date):
            return date3(value.year, value.month, value.day)
        return date3(*value)
    if real_type == DATETIME2:
        return datetime2(value, meta)
    if real_type == TIMESTAMP2:
        seconds, micros = divmod(value, 1_000_000)
        return timestamp2(seconds, micros, meta)
    if real_type == TIME2:
        return time2(value, meta)
    if real_type in (VARCHAR, VAR_STRING):
        return (len(value)).to_bytes(1 if meta < 256 else 2, "little") + value
    if real_type == STRING:
        value = value.rstrip(b"\0" if collation == BINARY_COLLATION else b" ")
        return (len(value)).to_bytes(1 if meta < 256 else 2, "little") + value
    if real_type in (*BLOBS, JSON, GEOMETRY):
        return len(value).to_bytes(meta, "little") + value
    raise ValueError(f"no packing for column type {real_type}")


# ---- events -------------------------------------------------------------------------


def event(
    event_type: int,
    body: bytes,
    log_pos: int,
    timestamp: int = 1_700_000_000,
    checksum: bool = True,
    server_id: int = 1,
    flags: int = 0,
) -> bytes:
    size = 19 + len(body) + (4 if checksum else 0)
    header = struct.pack("<IBIIIH", timestamp, event_type, server_id, size, log_pos, flags)
    data = header + body
    if checksum:
        data += struct.pack("<I", zlib.crc32(data))
    return data


def format_description(checksum: bool = True, row_post_header: int = 10) -> bytes:
    post = bytearray(41)
    post[2 - 1] = 13  # QUERY
    post[19 - 1] = 8  # TABLE_MAP
    for t in (23, 24, 25):
        post[t - 1] = 8
    for t in (30, 31, 32, 39):
        post[t - 1] = row_post_header
    body = struct.pack("<H", 4) + b"8.0.36".ljust(50, b"\0") + struct.pack("<I", 0)
    body += bytes([19]) + bytes(post) + bytes([1 if checksum else 0])
    size = 19 + len(body) + 4
    header = struct.pack("<IBIIIH", 0, 15, 1, size, 0, 0)
    data = header + body
    return data + struct.pack("<I", zlib.crc32(data) if checksum else 0)


def column_meta(real_type: int, meta: int) -> tuple[int, bytes]:
    """The type byte and metadata bytes a TABLE_MAP writes for a column, from its real type
    and its metadata as one number (the form ``cdc_source.binlog.table_map.Column`` holds):
    ``Field::do_save_field_metadata``. CHAR, ENUM and SET are written as STRING with the
    real type first; a CHAR longer than 255 bytes keeps the two high bits of its length in
    the real-type byte (``real_type ^ ((length & 0x300) >> 4)``). DECIMAL's precision and
    scale, BIT's bits and bytes and VARCHAR's length are two little-endian bytes."""
    if real_type in (ENUM, SET):
        return STRING, bytes([real_type, meta])
    if real_type == STRING:
        return STRING, bytes([STRING ^ ((meta & 0x300) >> 4), meta & 0xFF])
    if real_type in (FLOAT, DOUBLE, TIMESTAMP2, DATETIME2, TIME2, JSON, GEOMETRY, *BLOBS):
        return real_type, bytes([meta])
    if real_type in (VARCHAR, VAR_STRING, BIT, NEWDECIMAL):
        return real_type, meta.to_bytes(2, "little")
    return real_type, b""


def _is_character(column: tuple, mariadb: bool) -> bool:
    """The columns of the DEFAULT_CHARSET/COLUMN_CHARSET field: CHAR, VARCHAR and the BLOB
    types (MariaDB counts GEOMETRY too); ENUM and SET have a field of their own."""
    kind, meta = column[1], column[2]
    if kind == STRING:
        return meta[0] not in (ENUM, SET)
    return kind in (VARCHAR, VAR_STRING, *BLOBS) or (mariadb and kind == GEOMETRY)


def _is_enum_or_set(column: tuple) -> bool:
    return column[1] == STRING and column[2][0] in (ENUM, SET)


def _charset_field(collations: list[int], default_kind: int, column_kind: int) -> bytes:
    """``Table_map_log_event::init_charset_field``: the most used collation (the lowest
    number among equals) is the default, and the field is written in the default form
    (default, then (index among these columns, collation) for the others) unless listing
    every column's collation is shorter, reckoned at one byte per number:
    ``count < 1 + 2 * (count - uses of the default)``."""
    if not collations:
        return b""
    uses: dict[int, int] = {}
    for collation in collations:
        uses[collation] = uses.get(collation, 0) + 1
    default = min(uses, key=lambda collation: (-uses[collation], collation))
    if len(collations) < 1 + 2 * (len(collations) - uses[default]):
        value = b"".join(lenenc(collation) for collation in collations)
        return bytes([column_kind]) + lenenc(len(value)) + value
    value = lenenc(default) + b"".join(
        lenenc(i) + lenenc(collation)
        for i, collation in enumerate(collations)
        if collation != default
    )
    return bytes([default_kind]) + lenenc(len(value)) + value


def _collations(chosen: list[tuple]) -> list[int]:
    """The collations (sixth item) of ``chosen``: all of them or, for callers that give
    none, no charset field."""
    given = [c[5] for c in chosen if len(c) > 5 and c[5] is not None]
    if given and len(given) != len(chosen):
        raise ValueError("give a collation for every character, ENUM and SET column or none")
    return given


def table_map_body(
    table_id: int,
    db: str,
    table: str,
    columns: list[tuple],
    enum_values: list[list[str]] | None = None,
    set_values: list[list[str]] | None = None,
    primary_key: list[int] | None = None,
    mariadb: bool = False,
    visibility: bool = False,
) -> bytes:
    """``columns``: (name, type, meta bytes, nullable, unsigned[, collation]), type and meta
    as :func:`column_meta` gives them. The optional metadata fields are written in the
    order of ``Table_map_log_event::init_metadata_fields`` (binlog_row_metadata=FULL; MySQL's
    libbinlogevents rows_event.h ``Optional_metadata_field_type``, which MariaDB 10.5+
    shares): SIGNEDNESS 1 (when there is a numeric column), the character columns'
    collations (DEFAULT_CHARSET 2 or COLUMN_CHARSET 3, when collations are given),
    COLUMN_NAME 4, the ENUM/SET columns' collations (ENUM_AND_SET_DEFAULT_CHARSET 10 or
    ENUM_AND_SET_COLUMN_CHARSET 11), SET_STR_VALUE 5 and ENUM_STR_VALUE 6 (per column of
    that kind a packed count, then packed-length strings), SIMPLE_PRIMARY_KEY 8 (packed
    column indexes) and, with ``visibility`` (MySQL 8.0.23+, every column visible),
    COLUMN_VISIBILITY 12. ``mariadb``: GEOMETRY counts as a character column."""
    body = table_id.to_bytes(6, "little") + b"\x01\x00"
    body += bytes([len(db)]) + db.encode() + b"\0" + bytes([len(table)]) + table.encode() + b"\0"
    body += lenenc(len(columns)) + bytes(c[1] for c in columns)
    meta = b"".join(c[2] for c in columns)
    body += lenenc(len(meta)) + meta
    body += _bits([bool(c[3]) for c in columns], msb_first=False)
    numeric = [
        c
        for c in columns
        # MySQL's has_signedess_information_type: the numeric types and YEAR
        if c[1] in (TINY, SHORT, INT24, LONG, LONGLONG, FLOAT, DOUBLE, NEWDECIMAL, YEAR)
    ]
    if numeric:
        signedness = _bits([bool(c[4]) for c in numeric], msb_first=True)
        body += b"\x01" + lenenc(len(signedness)) + signedness
    character = [c for c in columns if _is_character(c, mariadb)]
    body += _charset_field(_collations(character), 2, 3)
    names = b"".join(lenenc(len(c[0])) + c[0].encode() for c in columns)
    body += b"\x04" + lenenc(len(names)) + names
    members = [c for c in columns if _is_enum_or_set(c)]
    body += _charset_field(_collations(members), 10, 11)
    for kind, lists in ((5, set_values), (6, enum_values)):
        if lists is not None:
            value = b"".join(
                lenenc(len(members))
                + b"".join(lenenc(len(m.encode())) + m.encode() for m in members)
                for members in lists
            )
            body += bytes([kind]) + lenenc(len(value)) + value
    if primary_key is not None:
        value = b"".join(lenenc(i) for i in primary_key)
        body += b"\x08" + lenenc(len(value)) + value
    if visibility:
        value = _bits([True] * len(columns), msb_first=True)
        body += b"\x0c" + lenenc(len(value)) + value
    return body


def _bits(flags: list[bool], msb_first: bool) -> bytes:
    """One bit per flag, eight to a byte: the optional metadata fields fill each byte from
    its high bit, the nullable and null bitmaps from its low bit."""
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            out[i // 8] |= (0x80 >> (i % 8)) if msb_first else (1 << (i % 8))
    return bytes(out)


def rows_body(
    table_id: int,
    ncols: int,
    rows: bytes,
    update: bool,
    v2: bool,
    present: bytes | None = None,
    flags: int = 0x0001,
    compressed: bool = False,
    mariadb: bool = False,
) -> bytes:
    """Post-header (table id, ``flags``: STMT_END_F by default; v2: an empty extra-data
    field, its length counting itself), the column count, the columns-present bitmap(s),
    then ``rows``; MariaDB's compressed rows events (``compressed``) zlib-compress the rows
    (:func:`mariadb_compressed`). A bitmap of every column (``present`` None) has its bits
    past the last column set as MySQL 9.7 writes it (``bitmap_set_all``) and clear as
    MariaDB 10.11 does."""
    if present is None:
        present = b"\xff" * ((ncols + 7) // 8)
        if mariadb and ncols % 8:
            present = present[:-1] + bytes([(1 << (ncols % 8)) - 1])
    body = table_id.to_bytes(6, "little") + struct.pack("<H", flags)
    if v2:
        body += b"\x02\x00"  # extra-data length counts itself: no extra data
    body += lenenc(ncols) + present + (present if update else b"")
    return body + (mariadb_compressed(rows) if compressed else rows)


def transaction_payload(
    inner_events: list[bytes],
    log_pos: int,
    compress: bool = True,
    timestamp: int = 1_700_000_000,
    server_id: int = 1,
) -> bytes:
    """MySQL TRANSACTION_PAYLOAD: lenenc (type, length, value) fields, an end mark, the
    payload (one zstd frame of events without checksums, at zstd's level 3, the server's
    default binlog_transaction_compression_level_zstd)."""
    import zstandard

    raw = b"".join(inner_events)
    payload = zstandard.ZstdCompressor().compress(raw) if compress else raw

    def field(kind: int, value: int) -> bytes:
        encoded = lenenc(value)
        return lenenc(kind) + lenenc(len(encoded)) + encoded

    body = field(2, 0 if compress else 255)
    if compress:
        body += field(3, len(raw))
    body += field(1, len(payload)) + lenenc(0) + payload
    return event(40, body, log_pos, timestamp=timestamp, server_id=server_id)


def mariadb_compressed(data: bytes) -> bytes:
    packed = zlib.compress(data)
    size = len(data)
    nbytes = 1 if size < 1 << 8 else 2 if size < 1 << 16 else 3 if size < 1 << 24 else 4
    return bytes([0x80 | nbytes]) + size.to_bytes(nbytes, "big") + packed


def query_body(schema: str, query: str) -> bytes:
    return struct.pack("<IIBHH", 1, 0, len(schema), 0, 0) + schema.encode() + b"\0" + query.encode()


def xa_prepare_body(
    gtrid: bytes, bqual: bytes = b"", format_id: int = 1, one_phase: bool = False
) -> bytes:
    return (
        bytes([1 if one_phase else 0])
        + struct.pack("<III", format_id, len(gtrid), len(bqual))
        + gtrid
        + bqual
    )


def xid_body(xid: int) -> bytes:
    return struct.pack("<Q", xid)


# -- GTID events (MySQL libbinlogevents control_events.cpp, Gtid_event::write_data_header
# and Previous_gtids; MariaDB log_event.cc, Gtid_log_event and Gtid_list_log_event) -----


def mysql_gtid_body(uuid: str, gno: int, last_committed: int = 0, sequence: int = 1) -> bytes:
    """GTID (33): flags, SID, GNO, logical clock (type 2, last committed, sequence)."""
    sid = bytes.fromhex(uuid.replace("-", ""))
    return (
        b"\x01"
        + sid
        + struct.pack("<q", gno)
        + b"\x02"
        + struct.pack("<qq", last_committed, sequence)
    )


def previous_gtids_body(sources: dict[tuple[str, str], list[tuple[int, int]]]) -> bytes:
    """PREVIOUS_GTIDS (35), untagged format: sources, each with half-open intervals."""
    out = struct.pack("<Q", len(sources))
    for (uuid, tag), intervals in sources.items():
        assert not tag
        out += bytes.fromhex(uuid.replace("-", "")) + struct.pack("<Q", len(intervals))
        for first, last in intervals:
            out += struct.pack("<QQ", first, last + 1)
    return out


def serialized_uint(value: int) -> bytes:
    """MySQL's serialization varint (libs/mysql/serialization/variable_length_integers.h):
    N bytes, N-1 trailing one-bits in the first, the value shifted left by N."""
    if value >= 1 << 56:
        return b"\xff" + value.to_bytes(8, "little")
    length = 1
    while value >= 1 << (7 * length):
        length += 1
    return ((value << length) | ((1 << (length - 1)) - 1)).to_bytes(length, "little")


def serialized_int(value: int) -> bytes:
    return serialized_uint(value << 1 if value >= 0 else ((-(value + 1)) << 1) | 1)


def mysql_tagged_gtid_body(uuid: str, gno: int, tag: str, commit_ts: int = 1_770_000_000) -> bytes:
    """GTID_TAGGED (42): version 1, size, last non-ignorable id 0, then fields 0-6, 8, 9."""
    fields = (
        b"\x00"
        + serialized_uint(0)
        + serialized_uint(1)
        + b"".join(serialized_uint(b) for b in bytes.fromhex(uuid.replace("-", "")))
        + serialized_uint(2)
        + serialized_int(gno)
        + serialized_uint(3)
        + serialized_uint(len(tag))
        + tag.encode()
        + serialized_uint(4)
        + serialized_int(0)
        + serialized_uint(5)
        + serialized_int(1)
        + serialized_uint(6)
        + serialized_uint(commit_ts)
        + serialized_uint(8)
        + serialized_uint(300)
        + serialized_uint(9)
        + serialized_uint(90600)
    )
    head = serialized_uint(1)
    for size_guess in range(len(fields) + 3, len(fields) + 12):
        body = head + serialized_uint(size_guess) + serialized_uint(0) + fields
        if len(body) == size_guess:
            return body
    raise AssertionError("no consistent size")


def mariadb_gtid_body(seq_no: int, domain_id: int = 0, flags: int = 0) -> bytes:
    """GTID (162): seq_no, domain, flags2, then six zero bytes (no commit id, no XA)."""
    return struct.pack("<QIB", seq_no, domain_id, flags) + b"\x00" * 6


def mariadb_gtid_list_body(gtids: list[tuple[int, int, int]]) -> bytes:
    """GTID_LIST (163): count, then (domain, server id, seq_no) each."""
    out = struct.pack("<I", len(gtids))
    for domain, server, seq in gtids:
        out += struct.pack("<IIQ", domain, server, seq)
    return out


def rotate(file: str, pos: int = 4, checksum: bool = True) -> bytes:
    body = struct.pack("<Q", pos) + file.encode()
    return event(4, body, 0, timestamp=0, checksum=checksum, flags=0x20)


# ---- MySQL binary JSON (json_binary.h) ----------------------------------------------


def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def json_binary(value) -> bytes:
    """A Python value as MySQL binary JSON (type byte + value), laid out as the server's
    ``json_binary::serialize`` does. ``Opaque`` for opaque values (:func:`opaque_decimal`,
    :func:`opaque_datetime`, :func:`opaque_time` build the server's DECIMAL and temporal
    ones)."""
    kind, data = _json_value(value)
    return bytes([kind]) + data


class Opaque:
    def __init__(self, field_type: int, data: bytes) -> None:
        self.field_type, self.data = field_type, data


def opaque_decimal(value: Decimal, precision: int, scale: int) -> Opaque:
    """A DECIMAL in JSON (``Json_decimal::get_binary``): precision and scale bytes, then
    :func:`decimal_bin`. The precision is that of the server's ``my_decimal`` (integer
    digits + scale), which depends on how the value was made (a DECIMAL(10,2) column's
    value has 10; ``CAST(12.340 AS DECIMAL(10,3))`` has 12), so the caller gives it."""
    return Opaque(NEWDECIMAL, bytes([precision, scale]) + decimal_bin(value, precision, scale))


def opaque_datetime(
    field_type: int, y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, us: int = 0
) -> Opaque:
    """A DATE, DATETIME or TIMESTAMP in JSON (``Json_datetime::to_packed``): the packed
    datetime (``TIME_to_longlong_datetime_packed``; a date's time is zero) as eight
    little-endian bytes."""
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return Opaque(field_type, struct.pack("<q", (((ymd << 17) | hms) << 24) + us))


def opaque_time(micros: int) -> Opaque:
    """A TIME in JSON: ``TIME_to_longlong_time_packed`` (hh:mm:ss packed, shifted, plus
    the microseconds; negated for a negative time) as eight little-endian bytes."""
    seconds, us = divmod(abs(micros), 1_000_000)
    hms = ((seconds // 3600) << 12) | ((seconds // 60 % 60) << 6) | (seconds % 60)
    packed = (hms << 24) + us
    return Opaque(TIME, struct.pack("<q", -packed if micros < 0 else packed))


_JSON_SMALL_MAX = 0xFFFF


def _json_int(value: int) -> tuple[int, bytes]:
    """An integer as the server's JSON parser types it (rapidjson hands a non-negative
    number above 2^32 - 1 to ``Uint64``, which makes a ``Json_uint``; every other integer
    is a ``Json_int``), then the narrowest of the type's 16/32/64-bit forms."""
    if value > 0xFFFFFFFF:
        if value >= 1 << 64:
            raise ValueError(f"{value} is no JSON integer")
        return 0x0A, struct.pack("<Q", value)
    if -(1 << 15) <= value < 1 << 15:
        return 0x05, struct.pack("<h", value)
    if -(1 << 31) <= value < 1 << 31:
        return 0x07, struct.pack("<i", value)
    if -(1 << 63) <= value:
        return 0x09, struct.pack("<q", value)
    raise ValueError(f"{value} is no JSON integer")


def _json_value(value, large: bool = False) -> tuple[int, bytes]:
    """(type, value bytes). A container takes the small form (2-byte counts and offsets)
    unless it does not fit in it; ``large`` forces the large form on this container only:
    each nested one is small when it fits (``serialize_json_value`` tries small first
    under a large parent)."""
    if isinstance(value, Opaque):
        return 0x0F, bytes([value.field_type]) + _varlen(len(value.data)) + value.data
    if value is None:
        return 0x04, b"\x00"
    if value is True:
        return 0x04, b"\x01"
    if value is False:
        return 0x04, b"\x02"
    if isinstance(value, int):
        return _json_int(value)
    if isinstance(value, float):
        return 0x0B, struct.pack("<d", value)
    if isinstance(value, str):
        data = value.encode()
        return 0x0C, _varlen(len(data)) + data
    if isinstance(value, (dict, list)):
        is_object = isinstance(value, dict)
        items = list(value.items()) if is_object else [(None, v) for v in value]
        if not large:
            kind, data = _container(items, is_object, False)
            if len(items) <= _JSON_SMALL_MAX and len(data) <= _JSON_SMALL_MAX:
                return kind, data
        return _container(items, is_object, True)
    raise TypeError(value)


_INLINE = {0x04, 0x05, 0x06}  # literals and 16-bit integers; 32-bit ones in the large form


def _container(items: list, is_object: bool, large: bool) -> tuple[int, bytes]:
    size_len = 4 if large else 2
    count = len(items)
    if is_object:  # keys sorted by length, then bytes
        items = sorted(items, key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
    header = 2 * size_len
    key_entries = count * (size_len + 2) if is_object else 0
    value_entries = count * (1 + size_len)
    offset = header + key_entries + value_entries
    keys = b""
    key_entry_bytes = b""
    if is_object:
        for key, _ in items:
            encoded = key.encode()
            key_entry_bytes += _offset(offset, size_len) + struct.pack("<H", len(encoded))
            keys += encoded
            offset += len(encoded)
    values = b""
    value_entry_bytes = b""
    for _, v in items:
        kind, data = _json_value(v)
        if kind in _INLINE or (large and kind in (0x07, 0x08)):
            # attempt_inline_value: the value as a signed number of the entry's width
            # (a negative 16-bit integer fills all four bytes in the large form)
            number = data[0] if kind == 0x04 else int.from_bytes(data, "little", signed=True)
            value_entry_bytes += bytes([kind]) + number.to_bytes(size_len, "little", signed=True)
        else:
            value_entry_bytes += bytes([kind]) + _offset(offset, size_len)
            values += data
            offset += len(data)
    body = key_entry_bytes + value_entry_bytes + keys + values
    total = header + len(body)
    kind = (0x00 if is_object else 0x02) + (1 if large else 0)
    head = _offset(count, size_len) + _offset(total, size_len)
    return kind, head + body


def _offset(number: int, size_len: int) -> bytes:
    """A count, size or offset of a container; one past the small form's 2 bytes is
    written truncated here and makes :func:`_json_value` take the large form."""
    return (number & ((1 << (8 * size_len)) - 1)).to_bytes(size_len, "little")


class BinlogFile:
    """A binlog file built event by event, with real positions, that serves a dump from
    any event boundary the way a server does: a fake ROTATE, the FORMAT_DESCRIPTION, then
    the events from that position on."""

    def __init__(self, name: str = "binlog.000001", checksum: bool = True) -> None:
        self.name = name
        self.checksum = checksum
        self.fde = format_description(checksum)
        self.events: list[tuple[int, bytes]] = []  # (start position, bytes)
        self.pos = 4 + len(self.fde)

    def add(
        self,
        event_type: int,
        body: bytes,
        timestamp: int = 1_700_000_000,
        flags: int = 0,
        server_id: int = 1,
    ) -> int:
        """Appends an event; returns its end position."""
        size = 19 + len(body) + (4 if self.checksum else 0)
        end = self.pos + size
        data = event(event_type, body, end, timestamp, self.checksum, server_id, flags)
        self.events.append((self.pos, data))
        self.pos = end
        return end

    def add_raw(self, data_for_end) -> int:
        """Appends an event built by ``data_for_end(end_position)`` (e.g. a payload)."""
        probe = data_for_end(0)
        end = self.pos + len(probe)
        self.events.append((self.pos, data_for_end(end)))
        self.pos = end
        return end

    def packets(self, file: str, pos: int) -> list[bytes]:
        assert file == self.name
        out = [rotate(self.name, pos, self.checksum), self.fde]
        out += [data for start, data in self.events if start >= pos]
        return out


def packet_stream(payloads: list[bytes], chunk: int = 7) -> Callable[[int], bytes]:
    """The dump's raw bytes as a server sends them: each event in a MySQL packet (3-byte
    length, sequence number, 0x00), then the EOF packet; read back ``chunk`` bytes at a
    time, so packets straddle reads."""
    raw = bytearray()
    seq = 0
    for data in payloads:
        body = b"\x00" + data
        # A payload of 2^24-1 bytes or more goes in packets of 2^24-1 bytes and a last,
        # shorter (possibly empty) one (the client/server protocol's packet splitting).
        for offset in range(0, len(body) + 1, MAX_PACKET):
            part = body[offset : offset + MAX_PACKET]
            raw += len(part).to_bytes(3, "little") + bytes([seq % 256]) + part
            seq += 1
            if len(part) < MAX_PACKET:
                break
    raw += (5).to_bytes(3, "little") + bytes([seq % 256]) + b"\xfe\x00\x00\x02\x00"
    position = [0]

    def read(size: int) -> bytes:
        take = min(size, chunk)
        part = bytes(raw[position[0] : position[0] + take])
        position[0] += len(part)
        return part

    return read


class FakeDumpSource:
    """Stands in for ``cdc_source.binlog.transport.DumpSource`` over a :class:`BinlogFile`,
    with the native packet splitter or the Python one."""

    def __init__(self, binlog: BinlogFile, splitter=None, chunk: int = 97) -> None:
        self.binlog = binlog
        self.splitter = splitter
        self.chunk = chunk
        self.opened: list[tuple[str, int]] = []

    def open(self, file: str, pos: int, until: tuple[int, int] | None = None):
        reader, runs, close = self.open_runs(file, pos, until)
        return reader, (event for run in runs for event in run), close

    def open_runs(self, file: str, pos: int, until: tuple[int, int] | None = None):
        from cdc_source.binlog.events import EventReader

        self.opened.append((file, pos))
        reader = EventReader(file, pos, self.binlog.checksum)
        read = packet_stream(self.binlog.packets(file, pos), chunk=self.chunk)
        return reader, reader.event_runs(read, self.splitter), lambda: None


def with_checksum(data_without_crc: bytes) -> bytes:
    """An event (header and body, sizes already counting 4 checksum bytes) with its CRC32."""
    return data_without_crc + struct.pack("<I", zlib.crc32(data_without_crc))
