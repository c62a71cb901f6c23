"""GTID sets of MySQL and GTID positions of MariaDB, as values.

An offset carries the exact GTID state at its binlog position (``BinlogPosition.gtids``):
the set of transactions whose events end at or before it. The driver keeps it exact by
adding the GTID events between two planned positions to the state of the first
(:mod:`coordinator.gtid_tracker`); it is never read from ``SHOW MASTER STATUS``, whose
``Executed_Gtid_Set`` is read under another lock than the position and can lag it
(MySQL ``sql/rpl_source.cc``, ``show_binlog_info``).

Two kinds of state, one interface (``add``, ``text``, ``contains``):

- **MySQL** (:class:`GtidSet`): per transaction source (server UUID and, since 8.3, an
  optional tag) a set of closed intervals of sequence numbers. Text:
  ``uuid:1-5:7,uuid2:1-3``; tagged GTIDs follow their UUID after the untagged intervals,
  ``uuid:1-5:tag_a:1-3`` (a tag applies to the intervals after it; MySQL manual 19.1.3.1,
  "GTID Format and Storage"). UUIDs and tags are compared case-insensitively and printed
  in lower case.
- **MariaDB** (:class:`MariaGtidPos`): per replication domain the last GTID,
  ``domain-server-seq`` (MariaDB KB "Global Transaction ID", ``gtid_binlog_pos``).

The text form is deterministic (sorted), so an offset built twice from the same
positions is the same string, as Spark's string comparison of offsets needs.

What bounds its size: the number of transaction sources (one UUID per server that was
ever a primary, plus tags) and of gaps in their sequence numbers (a gap comes from a
transaction filtered or skipped on a replica), never the number of transactions. A
GTID set of a healthy topology is one interval per source. :func:`compact` stores a
long set in a binary form (about 30 bytes a source, 3 to 4 a gap), which keeps an offset
under 1 KiB for a set of up to about 25 sources or 200 gaps (measured in
``tests/unit/cdc_source/test_gtid.py``); a larger set is stored whole and the driver warns.
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_TAG = re.compile(r"^[a-z_][a-z0-9_]{0,31}$")
_MARIA_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
MAX_GNO = (1 << 63) - 1  # MySQL's GNO_END - 1 (rpl_gtid.h)


class GtidError(ValueError):
    """A GTID set or position that cannot be read."""


def _uuid(text: str) -> str:
    value = text.strip().lower()
    if not _UUID.match(value):
        raise GtidError(f"'{text}' is not a server UUID")
    value = value.replace("-", "")
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"


def _merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, with overlapping and adjacent intervals joined (``1-3`` + ``4-5`` = ``1-5``)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


@dataclass
class GtidSet:
    """A MySQL GTID set: ``{(uuid, tag): [(first, last), ...]}`` with closed intervals,
    sorted and merged; ``tag`` is ``""`` for untagged GTIDs."""

    intervals: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)

    flavor = "mysql"

    @staticmethod
    def parse(text: str) -> GtidSet:
        result = GtidSet()
        text = "".join(text.split())  # @@gtid_executed prints a newline after each comma
        if not text:
            return result
        for part in text.split(","):
            items = part.split(":")
            uuid, tag = _uuid(items[0]), ""
            if len(items) < 2:
                raise GtidError(f"'{part}' has a UUID and no transaction numbers")
            for item in items[1:]:
                if item and (item[0].isalpha() or item[0] == "_"):
                    tag = item.lower()
                    if not _TAG.match(tag):
                        raise GtidError(f"'{item}' is not a GTID tag")
                    continue
                first, dash, last = item.partition("-")
                try:
                    start = int(first)
                    end = int(last) if dash else start
                except ValueError:
                    raise GtidError(f"'{item}' is not an interval of '{part}'") from None
                if not 1 <= start <= end <= MAX_GNO:
                    raise GtidError(f"interval '{item}' of '{part}' is empty or out of range")
                result.add_interval(uuid, tag, start, end)
        return result

    def add_interval(self, uuid: str, tag: str, start: int, end: int) -> None:
        key = (uuid, tag)
        current = self.intervals.get(key)
        if current and current[-1][1] + 1 == start:  # the common case: the next number
            current[-1] = (current[-1][0], end)
        elif current and current[-1][1] < start:
            current.append((start, end))
        else:
            self.intervals[key] = _merge([*(current or []), (start, end)])

    def add(self, uuid: str, gno: int, tag: str = "") -> None:
        """One transaction's GTID (a GTID event)."""
        self.add_interval(uuid.lower(), tag.lower(), gno, gno)

    def update(self, other: GtidSet) -> None:
        for (uuid, tag), intervals in other.intervals.items():
            for start, end in intervals:
                self.add_interval(uuid, tag, start, end)

    def contains(self, other: GtidSet) -> bool:
        for key, intervals in other.intervals.items():
            mine = self.intervals.get(key, [])
            for start, end in intervals:
                if not any(a <= start and end <= b for a, b in mine):
                    return False
        return True

    def copy(self) -> GtidSet:
        return GtidSet({key: list(value) for key, value in self.intervals.items()})

    def text(self) -> str:
        by_uuid: dict[str, list[str]] = {}
        for uuid, tag in sorted(self.intervals):
            parts = by_uuid.setdefault(uuid, [uuid])
            if tag:
                parts.append(tag)
            parts.extend(str(a) if a == b else f"{a}-{b}" for a, b in self.intervals[(uuid, tag)])
        return ",".join(":".join(parts) for parts in by_uuid.values())

    def __str__(self) -> str:
        return self.text()


@dataclass
class MariaGtidPos:
    """A MariaDB GTID position: per domain the last GTID ``(server_id, seq_no)``."""

    domains: dict[int, tuple[int, int]] = field(default_factory=dict)

    flavor = "mariadb"

    @staticmethod
    def parse(text: str) -> MariaGtidPos:
        result = MariaGtidPos()
        for part in "".join(text.split()).split(","):
            if not part:
                continue
            match = _MARIA_GTID.match(part)
            if not match:
                raise GtidError(f"'{part}' is not a MariaDB GTID (domain-server-seq)")
            domain, server, seq = (int(g) for g in match.groups())
            if domain in result.domains:
                raise GtidError(f"domain {domain} appears twice in '{text}'")
            result.domains[domain] = (server, seq)
        return result

    def add(self, domain: int, server_id: int, seq: int) -> None:
        """One transaction's GTID: it becomes its domain's last."""
        self.domains[domain] = (server_id, seq)

    def contains(self, other: MariaGtidPos) -> bool:
        return all(
            domain in self.domains and self.domains[domain][1] >= seq
            for domain, (_, seq) in other.domains.items()
        )

    def copy(self) -> MariaGtidPos:
        return MariaGtidPos(dict(self.domains))

    def text(self) -> str:
        return ",".join(
            f"{domain}-{server}-{seq}" for domain, (server, seq) in sorted(self.domains.items())
        )

    def __str__(self) -> str:
        return self.text()


GtidState = GtidSet | MariaGtidPos


def missing(have: GtidState, want: GtidState) -> GtidState:
    """What of ``want`` ``have`` lacks, in the same form: the GTIDs of ``want`` not in
    ``have`` (MySQL), or ``want``'s last GTID of each domain ``have`` is behind in
    (MariaDB, whose state names only the last transaction of a domain)."""
    if isinstance(want, MariaGtidPos):
        return MariaGtidPos(
            {
                domain: (server, seq)
                for domain, (server, seq) in want.domains.items()
                if have.domains.get(domain, (0, 0))[1] < seq
            }
        )
    lacking = GtidSet()
    for key, intervals in want.intervals.items():
        mine = have.intervals.get(key, [])
        for start, end in intervals:
            for a, b in mine:
                if b < start or a > end:
                    continue
                if a > start:
                    lacking.add_interval(*key, start, a - 1)
                start = b + 1
                if start > end:
                    break
            if start <= end:
                lacking.add_interval(*key, start, end)
    return lacking


def parse_state(stored: str, flavor: str) -> GtidState:
    """A GTID state from its text (or :func:`compact` form) for ``flavor``."""
    text = expand(stored)
    return MariaGtidPos.parse(text) if flavor == "mariadb" else GtidSet.parse(text)


# -- the compact form an offset stores a long GTID set in --------------------------------

COMPACT_PREFIX = "b:"
COMPACT_ABOVE = 120  # characters of text; shorter states stay readable in the offset


def compact(state: GtidState) -> str:
    """``state`` as it goes into an offset: its text when short, else ``b:`` and the
    url-safe base64 of a binary form (per source: the UUID's 16 bytes, the tag, the
    number of intervals, then each interval as two varints, the distance from the end
    of the one before and its length), zlib-compressed when that is smaller. A UUID
    costs 22 characters instead of 37 and a typical interval 3 to 6 instead of 10 to 20.
    :func:`expand` gives the text back exactly."""
    text = state.text()
    if len(text) <= COMPACT_ABOVE or not isinstance(state, GtidSet):
        return text
    raw = bytearray()
    for (uuid, tag), intervals in sorted(state.intervals.items()):
        raw += bytes.fromhex(uuid.replace("-", ""))
        raw.append(len(tag))
        raw += tag.encode("ascii")
        _varint(raw, len(intervals))
        previous = 0
        for start, end in intervals:
            _varint(raw, start - previous - 1)
            _varint(raw, end - start)
            previous = end
    packed = zlib.compress(bytes(raw), 9)
    body = b"\x01" + packed if len(packed) < len(raw) else b"\x00" + bytes(raw)
    encoded = base64.urlsafe_b64encode(body).decode().rstrip("=")
    return COMPACT_PREFIX + encoded if len(encoded) + 2 < len(text) else text


def expand(stored: str) -> str:
    """The text of a GTID state as :func:`compact` stored it."""
    if not stored.startswith(COMPACT_PREFIX):
        return stored
    data = stored[len(COMPACT_PREFIX) :]
    try:
        body = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        raw = zlib.decompress(body[1:]) if body[:1] == b"\x01" else body[1:]
        return _from_binary(raw).text()
    except (ValueError, IndexError, zlib.error) as err:
        raise GtidError(f"a compact GTID set in the offset is damaged: {err}") from None


def _from_binary(raw: bytes) -> GtidSet:
    result = GtidSet()
    pos = 0
    while pos < len(raw):
        if pos + 17 > len(raw):
            raise GtidError("a compact GTID set ends inside a source")
        uuid = _uuid(raw[pos : pos + 16].hex())
        tag_len = raw[pos + 16]
        tag = raw[pos + 17 : pos + 17 + tag_len].decode("ascii")
        pos += 17 + tag_len
        count, pos = _read_varint(raw, pos)
        previous = 0
        for _ in range(count):
            gap, pos = _read_varint(raw, pos)
            length, pos = _read_varint(raw, pos)
            start = previous + gap + 1
            result.add_interval(uuid, tag, start, start + length)
            previous = start + length
    return result


def _varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(raw) or shift > 63:
            raise GtidError("a compact GTID set has a damaged number")
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos
