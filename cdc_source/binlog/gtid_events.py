"""The GTID events' bodies: MariaDB's GTID and GTID_LIST, MySQL's GTID, tagged GTID
(8.3+) and PREVIOUS_GTIDS. Each parser takes the bytes of one event body (framed by
:mod:`cdc_source.binlog.events`) and refuses what it cannot read whole with a
:class:`~cdc_source.binlog.wire.MalformedEventError`."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import FL_COMPLETED_XA, FL_GROUP_COMMIT_ID, FL_PREPARED_XA, Event, Xid
from cdc_source.binlog.wire import Cursor, MalformedEventError
from cdc_source.gtid import GtidSet


@dataclass(frozen=True)
class MariaGtid:
    flags: int
    xid: Xid | None
    seq_no: int = 0
    domain_id: int = 0


_MARIA_GTID = struct.Struct("<QIB")
_MARIA_SEQ_AND_DOMAIN = struct.Struct("<QI")
_MARIA_OPTIONAL_FIELDS = FL_GROUP_COMMIT_ID | FL_PREPARED_XA | FL_COMPLETED_XA


def parse_mariadb_gtid(body: bytes) -> MariaGtid:
    """Seq no (8), domain id (4), flags2 (1), [commit id (8)], [XA id: format id (4),
    gtrid length (1), bqual length (1), data] (log_event.cc, Gtid_log_event). The GTID's
    server id is the event header's."""
    if len(body) < _MARIA_GTID.size:
        raise MalformedEventError(f"a MariaDB GTID event of {len(body)} bytes")
    seq_no, domain_id, flags = _MARIA_GTID.unpack_from(body)
    if not flags & _MARIA_OPTIONAL_FIELDS:
        return MariaGtid(flags, None, seq_no, domain_id)  # the common case, read per event
    cur = Cursor(body, _MARIA_GTID.size)
    if flags & FL_GROUP_COMMIT_ID:
        cur.skip(8)
    xid = None
    if flags & (FL_PREPARED_XA | FL_COMPLETED_XA):
        format_id = cur.uint(4)
        gtrid_len, bqual_len = cur.uint(1), cur.uint(1)
        xid = Xid(format_id, cur.take(gtrid_len), cur.take(bqual_len))
    return MariaGtid(flags, xid, seq_no, domain_id)


def mariadb_gtid_key(body: bytes, server_id: int) -> tuple[int, int, int]:
    """(domain id, server id, seq no) of a MariaDB GTID event whose header names
    ``server_id``: what :func:`parse_mariadb_gtid` reads, without building its record
    where no optional field follows the flags (the common case, read per transaction by
    the driver's follower)."""
    if len(body) >= _MARIA_GTID.size and not body[12] & _MARIA_OPTIONAL_FIELDS:
        seq_no, domain_id = _MARIA_SEQ_AND_DOMAIN.unpack_from(body)
        return (domain_id, server_id, seq_no)
    parsed = parse_mariadb_gtid(body)
    return (parsed.domain_id, server_id, parsed.seq_no)


def parse_mariadb_gtid_list(body: bytes) -> list[tuple[int, int, int]]:
    """MariaDB GTID_LIST (163), the GTID position at the start of a binlog file: a count
    (4; its top 4 bits are flags, log_event.h ``Gtid_list_log_event``), then per domain
    domain id (4), server id (4), seq no (8)."""
    cur = Cursor(body)
    count = cur.uint(4) & 0x0FFFFFFF
    if count * 16 > cur.remaining():
        raise MalformedEventError(f"GTID_LIST of {count} GTIDs in {len(body)} bytes")
    return [(cur.uint(4), cur.uint(4), cur.uint(8)) for _ in range(count)]


def _uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_mysql_gtid(event: Event) -> tuple[str, str, int]:
    """(server UUID, tag or '', transaction number) of a MySQL GTID event.

    GTID (33): commit flags (1), the source's UUID (16 bytes, in the order it is
    printed), the number (8), then logical-clock and timestamp fields this reader does
    not need (libbinlogevents ``Gtid_event``). GTID_TAGGED (42, MySQL 8.3+) is
    :func:`parse_tagged_gtid`."""
    if event.type == c.GTID_TAGGED:
        return parse_tagged_gtid(event.body, event.where)
    cur = Cursor(event.body)
    cur.skip(1)
    uuid = _uuid_text(cur.take(16))
    gno = cur.uint(8)
    if not 1 <= gno < 1 << 63:
        raise MalformedEventError(f"{event.where}: GTID number {gno} is out of range")
    return uuid, "", gno


def parse_previous_gtids(body: bytes):
    """The GTID set of MySQL's PREVIOUS_GTIDS (35): every transaction in earlier files
    (``Gtid_set::encode``): a 64-bit header, then per transaction source its UUID (16),
    in the tagged format its tag, the number of intervals (8), and each interval's first
    and one-past-last number (8 + 8).

    The header's highest byte is the format: 0 untagged, the number of sources in the 7
    bytes below; 1 tagged (8.3+), the number in the 6 bytes between it and a low byte 1
    (``sql/rpl_gtid_set.cc``, ``decode_nsids_format``); a tag is a serialized string
    (:func:`_serialized_uint` length, then ASCII). Another format is refused."""
    cur = Cursor(body)
    header = cur.uint(8)
    form = header >> 56
    if form not in (0, 1) or (form == 1 and header & 0xFF != 1):
        raise MalformedEventError(f"PREVIOUS_GTIDS in an unknown format {form}")
    tagged = form == 1
    count = (header >> 8) & 0xFFFFFFFFFFFF if tagged else header & 0x00FFFFFFFFFFFFFF
    if count * 24 > cur.remaining():
        raise MalformedEventError(f"PREVIOUS_GTIDS of {count} sources in {len(body)} bytes")
    result = GtidSet()
    for _ in range(count):
        uuid = _uuid_text(cur.take(16))
        tag = ""
        if tagged:
            tag = cur.take(_serialized_uint(cur)).decode("ascii", "replace").lower()
        intervals = cur.uint(8)
        if intervals * 16 > cur.remaining():
            raise MalformedEventError(f"PREVIOUS_GTIDS of {intervals} intervals is cut short")
        for _ in range(intervals):
            start, end = cur.uint(8), cur.uint(8)
            if not 1 <= start < end:
                raise MalformedEventError(f"PREVIOUS_GTIDS interval [{start}, {end}) is empty")
            result.add_interval(uuid, tag, start, end - 1)
    return result


def _serialized_uint(cur: Cursor) -> int:
    """An unsigned integer of MySQL's serialization library (libs/mysql/serialization,
    ``variable_length_integers.h``): the trailing one-bits of the first byte, plus one,
    are its length N in bytes; for N <= 8 the value is the N bytes little-endian shifted
    right by N, and a first byte 0xFF is followed by the value's 8 bytes. Not LEB128."""
    first = cur.uint(1)
    if first == 0xFF:
        return cur.uint(8)
    length = 1
    while first & (1 << (length - 1)):
        length += 1
    rest = cur.take(length - 1)
    return int.from_bytes(bytes([first]) + rest, "little") >> length


def _serialized_int(cur: Cursor) -> int:
    """A signed integer of the same library: zigzag over :func:`_serialized_uint`."""
    value = _serialized_uint(cur)
    return (value >> 1) ^ -(value & 1)


_TAGGED_UUID, _TAGGED_GNO, _TAGGED_TAG = 1, 2, 3


def parse_tagged_gtid(body: bytes, where: str) -> tuple[str, str, int]:
    """MySQL 8.3+ GTID_TAGGED (42): one message of the serialization library
    (``Gtid_event::define_fields``, libs/mysql/binlog/event/control_events.h): the format
    version, the message's size (all of it), the last non-ignorable field id, then
    (field id, value) pairs in increasing id order, optional ones left out. Field 0 is
    the flags, 1 the UUID as 16 unsigned varints (one per byte), 2 the number (signed),
    3 the tag (length and ASCII); later fields are not needed here."""
    cur = Cursor(body)
    version = _serialized_uint(cur)
    size = _serialized_uint(cur)
    _serialized_uint(cur)  # last non-ignorable field id
    if version != 1 or size > len(body):
        raise MalformedEventError(f"{where}: tagged GTID of format {version}, {size} bytes")
    end = size
    fields: dict[int, object] = {}
    for field_id in range(4):
        if cur.pos >= end:
            break
        mark = cur.pos
        if _serialized_uint(cur) != field_id:
            cur.pos = mark  # an optional field left out
            continue
        if field_id == _TAGGED_UUID:
            raw = [_serialized_uint(cur) for _ in range(16)]
            if max(raw) > 255:
                raise MalformedEventError(f"{where}: a UUID byte of {max(raw)}")
            fields[field_id] = _uuid_text(bytes(raw))
        elif field_id == _TAGGED_GNO:
            fields[field_id] = _serialized_int(cur)
        elif field_id == _TAGGED_TAG:
            length = _serialized_uint(cur)
            if length > 32:
                raise MalformedEventError(f"{where}: a GTID tag of {length} characters")
            fields[field_id] = cur.take(length).decode("ascii").lower()
        else:
            _serialized_uint(cur)  # the flags
    if cur.pos > end or not {_TAGGED_UUID, _TAGGED_GNO, _TAGGED_TAG} <= set(fields):
        raise MalformedEventError(f"{where}: tagged GTID without its UUID, number or tag")
    gno = fields[_TAGGED_GNO]
    if not 1 <= gno < 1 << 63:  # type: ignore[operator]
        raise MalformedEventError(f"{where}: GTID number {gno} is out of range")
    return fields[_TAGGED_UUID], fields[_TAGGED_TAG], gno  # type: ignore[return-value]
