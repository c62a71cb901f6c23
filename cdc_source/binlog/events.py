"""Binlog events from raw bytes: framing, checksums, decompression and the few event
bodies the source needs (rotate, query, XA prepare, transaction payload; the GTID
events' bodies are :mod:`cdc_source.binlog.gtid_events`).

Every event is either understood or refused: :func:`classify` names the event type and
position in the error. Positions are event *end* positions (``log_pos``), as
``SHOW MASTER STATUS`` reports them.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from cdc_source.binlog import constants as c
from cdc_source.binlog.framing import PacketStream
from cdc_source.binlog.plain_events import PLAIN_RUN, PlainEvents, PlainRun
from cdc_source.binlog.wire import Cursor, MalformedEventError
from cdc_source.offsets import file_number

HEADER_SIZE = 19
LOG_EVENT_ARTIFICIAL_F = 0x20
CHECKSUM_NONE, CHECKSUM_CRC32 = 0, 1
# The largest position an event header (log_pos) and COM_BINLOG_DUMP can hold: 4 bytes.
MAX_DUMP_POSITION = 0xFFFFFFFF

# MariaDB GTID flags2 (log_event.h, Gtid_log_event)
FL_STANDALONE = 1
FL_GROUP_COMMIT_ID = 2
FL_PREPARED_XA = 64
FL_COMPLETED_XA = 128

# MySQL TRANSACTION_PAYLOAD fields (libbinlogevents codecs/binary.cpp, Transaction_payload)
_PAYLOAD_END, _PAYLOAD_SIZE, _PAYLOAD_COMPRESSION, _PAYLOAD_UNCOMPRESSED = 0, 1, 2, 3
_ZSTD, _NO_COMPRESSION = 0, 255


class UnsupportedEventError(RuntimeError):
    """An event the source cannot decode exactly and may not skip."""


@dataclass(slots=True)
class Event:
    """One event (never crosses a process: a plain, slotted record for speed)."""

    type: int
    timestamp: int
    flags: int
    file: str
    end_pos: int  # log_pos: where the next event starts
    body: bytes  # without header and checksum; decompressed
    start_pos: int = 0
    server_id: int = 0  # of the server that wrote it (MariaDB GTIDs need it)

    @property
    def where(self) -> str:
        return f"{c.event_name(self.type)} event ending at {self.file}:{self.end_pos}"


@dataclass(frozen=True)
class Format:
    """What the FORMAT_DESCRIPTION event says about the events after it."""

    checksum: int = CHECKSUM_CRC32
    post_header: bytes = b""
    mariadb: bool = False  # the server version says MariaDB

    def post_header_len(self, event_type: int, default: int) -> int:
        index = event_type - 1
        return self.post_header[index] if 0 <= index < len(self.post_header) else default


def parse_format_description(body: bytes) -> Format:
    """Binlog version (2), server version (50), timestamp (4), header length (1), one
    post-header length per event type, then the checksum algorithm byte (the 4 checksum
    bytes after it, which servers since 5.6.1 always append, are cut by
    :func:`split_header`)."""
    cur = Cursor(body)
    cur.skip(2)
    version = cur.take(50)
    cur.skip(4)
    header_len = cur.uint(1)
    if header_len != HEADER_SIZE:
        raise MalformedEventError(f"event header length {header_len}, expected {HEADER_SIZE}")
    rest = cur.rest()
    if not rest:
        raise MalformedEventError("FORMAT_DESCRIPTION event without a checksum algorithm")
    return Format(checksum=rest[-1], post_header=rest[:-1], mariadb=b"mariadb" in version.lower())


_HEADER = struct.Struct("<IBIIIH")


def split_header(data: bytes, fmt: Format, file: str, start_pos: int = 0) -> Event:
    if len(data) < HEADER_SIZE:
        raise MalformedEventError(f"an event of {len(data)} bytes in {file}")
    timestamp, event_type, server_id, size, end_pos, flags = _HEADER.unpack_from(data)
    if size != len(data):
        raise MalformedEventError(
            f"event type {event_type} at {file}:{end_pos} says {size} bytes, has {len(data)}"
        )
    checksum = fmt.checksum
    body_end = len(data)
    if event_type == c.FORMAT_DESCRIPTION:
        checksum = data[-5] if len(data) >= HEADER_SIZE + 57 + 5 else CHECKSUM_NONE
        body_end -= 4  # the checksum field is there even when the algorithm is NONE
    elif checksum == CHECKSUM_CRC32:
        body_end -= 4
    if checksum == CHECKSUM_CRC32:
        if body_end < HEADER_SIZE:
            raise MalformedEventError(f"event type {event_type} too short for its checksum")
        expected = int.from_bytes(data[body_end:], "little")
        with memoryview(data) as view, view[:body_end] as covered:  # no copy of a big event
            actual = zlib.crc32(covered)
        if actual != expected:
            raise MalformedEventError(
                f"CRC32 mismatch in {c.event_name(event_type)} event ending at {file}:{end_pos}"
            )
    body = data[HEADER_SIZE:body_end]
    return Event(event_type, timestamp, flags, file, end_pos, body, start_pos, server_id)


def uncompress_mariadb(data: bytes) -> bytes:
    """MariaDB's compressed buffer (``binlog_buf_uncompress``, log_event.cc): one byte
    ``1aaa0nnn`` (algorithm a = 0 for zlib, n = 1..4 length bytes), the uncompressed length
    big-endian, then a zlib stream."""
    if not data or (data[0] & 0xE0) != 0x80:
        raise MalformedEventError("compressed event without a valid compression header")
    size_len = data[0] & 0x07
    if not 1 <= size_len <= 4 or len(data) < 1 + size_len:
        raise MalformedEventError(f"compressed event with a {size_len}-byte length")
    expected = int.from_bytes(data[1 : 1 + size_len], "big")
    try:
        out = zlib.decompress(data[1 + size_len :])
    except zlib.error as err:
        raise MalformedEventError(f"zlib data of a compressed event is damaged: {err}") from None
    if len(out) != expected:
        raise MalformedEventError(f"compressed event inflates to {len(out)}, says {expected}")
    return out


@dataclass(frozen=True)
class Query:
    schema: str
    query: str


def parse_query(event: Event, fmt: Format) -> Query:
    """Post-header: thread id (4), exec time (4), schema length (1), error code (2),
    status-vars length (2); then status vars, schema + NUL, the statement."""
    post = fmt.post_header_len(c.QUERY, 13)
    cur = Cursor(event.body)
    cur.skip(8)
    schema_len = cur.uint(1)
    cur.skip(2)
    status_len = cur.uint(2)
    cur.pos = post
    cur.skip(status_len)
    schema = cur.take(schema_len).decode("utf-8", "replace")
    cur.skip(1)
    text = cur.rest()
    if event.type == c.QUERY_COMPRESSED:
        text = uncompress_mariadb(text)
    return Query(schema, text.decode("utf-8", "replace"))


@dataclass(frozen=True)
class Xid:
    """An XA transaction id, in the text form the server prints it (``serialize_xid``)."""

    format_id: int
    gtrid: bytes
    bqual: bytes

    def __str__(self) -> str:
        return f"X'{self.gtrid.hex()}',X'{self.bqual.hex()}',{self.format_id}"


def parse_xa_prepare(body: bytes) -> tuple[bool, Xid]:
    """One-phase flag (1), format id (4), gtrid length (4), bqual length (4), data."""
    cur = Cursor(body)
    one_phase = bool(cur.uint(1))
    format_id = cur.uint(4)
    gtrid_len, bqual_len = cur.uint(4), cur.uint(4)
    if gtrid_len > 64 or bqual_len > 64:
        raise MalformedEventError(f"XA id lengths {gtrid_len}/{bqual_len} exceed 64")
    return one_phase, Xid(format_id, cur.take(gtrid_len), cur.take(bqual_len))


def parse_rotate(body: bytes) -> tuple[str, int]:
    cur = Cursor(body)
    pos = cur.uint(8)
    return cur.rest().decode("utf-8", "replace"), pos


def unwrap_payload(event: Event) -> Iterator[Event]:
    """The events inside a MySQL TRANSACTION_PAYLOAD (8.0.20+, zstd). The body is a list of
    (type, length, value) length-encoded fields ended by a 0, then the payload: one zstd
    frame of whole events, each with a header and no checksum, ``log_pos`` 0 (events
    written to a cache; libbinlogevents ``Transaction_payload``, sql/binlog.cc). Inner
    events take the payload event's end position. The payload is inflated as a stream,
    one inner event at a time, so a huge transaction never sits in memory uncompressed."""
    cur = Cursor(event.body)
    size = compression = uncompressed = None
    while True:
        field = cur.lenenc()
        if field == _PAYLOAD_END:
            break
        value = Cursor(cur.take(cur.lenenc()))
        number = value.lenenc()
        if field == _PAYLOAD_SIZE:
            size = number
        elif field == _PAYLOAD_COMPRESSION:
            compression = number
        elif field == _PAYLOAD_UNCOMPRESSED:
            uncompressed = number
    if size is None or compression is None or size > cur.remaining():
        raise MalformedEventError(f"{event.where}: payload header is incomplete")
    payload = cur.take(size)
    if compression == _ZSTD:
        stream = _zstd_stream(payload, event)
    elif compression == _NO_COMPRESSION:
        stream = io.BytesIO(payload)
    else:
        raise UnsupportedEventError(f"{event.where}: unknown compression type {compression}")
    inner = Format(checksum=CHECKSUM_NONE)
    total = 0
    while True:
        header = _read_exactly(stream, HEADER_SIZE, event, allow_end=True)
        if not header:
            break
        size = int.from_bytes(header[9:13], "little")
        if size < HEADER_SIZE:
            raise MalformedEventError(f"{event.where}: inner event of {size} bytes")
        data = header + _read_exactly(stream, size - HEADER_SIZE, event)
        total += size
        inner_event = split_header(data, inner, event.file)
        yield Event(
            inner_event.type,
            inner_event.timestamp,
            inner_event.flags,
            event.file,
            event.end_pos,
            inner_event.body,
            event.start_pos,
            inner_event.server_id,
        )
    if uncompressed is not None and total != uncompressed:
        raise MalformedEventError(f"{event.where}: payload inflates to {total}, not {uncompressed}")


def _read_exactly(stream, size: int, event: Event, allow_end: bool = False) -> bytes:
    parts, missing = [], size
    while missing:
        try:
            part = stream.read(missing)
        except Exception as err:  # zstandard.ZstdError: damaged frame
            raise MalformedEventError(f"{event.where}: payload is damaged: {err}") from None
        if not part:
            if allow_end and missing == size:
                return b""
            raise MalformedEventError(f"{event.where}: payload ends inside an inner event")
        parts.append(part)
        missing -= len(part)
    return b"".join(parts)


def _zstd_stream(data: bytes, event: Event):
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a dependency
        raise UnsupportedEventError(
            f"{event.where}: binlog_transaction_compression is ON on the server; install "
            "the 'zstandard' package to read it"
        ) from None
    return zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=False)


class EventReader:
    """Raw event payloads -> :class:`Event`s, following FORMAT_DESCRIPTION and ROTATE.

    Each event gets its start position (the end of the event before it). Events that
    are not at a position of the file the dump reads (the fake ROTATE, the
    FORMAT_DESCRIPTION and GTID list a server sends first when a dump starts inside a
    file) are consumed here and never reach the caller.

    Where a walker sets :attr:`plain` (the driver's planning passes), the C splitter folds
    the plain events into :class:`~cdc_source.binlog.plain_events.PlainRun` items of the
    runs, in their place (:mod:`cdc_source.binlog.plain_events`)."""

    def __init__(self, file: str, pos: int = 4, checksum: bool = True) -> None:
        self.file = file
        self.next_start = pos
        self.format = Format(checksum=CHECKSUM_CRC32 if checksum else CHECKSUM_NONE)
        self.plain: PlainEvents | None = None

    @property
    def position(self) -> tuple[int, int]:
        """(file number, offset) where the next event starts: how far the dump has read."""
        return (file_number(self.file), self.next_start)

    def expect_checksum(self, checksum: bool) -> None:
        """Whether the events of a (new) dump carry a CRC32: the ROTATE a dump starts with
        comes before any FORMAT_DESCRIPTION says so."""
        wanted = CHECKSUM_CRC32 if checksum else CHECKSUM_NONE
        if self.format.checksum != wanted:
            self.format = replace(self.format, checksum=wanted)

    def events(self, packets: Iterable[bytes]) -> Iterator[Event]:
        """Events from whole payloads (one per event, the OK byte removed)."""
        for data in packets:
            for run in self._runs_of(split_header(data, self.format, self.file, self.next_start)):
                yield from run

    def events_from_stream(self, read, splitter=None) -> Iterator[Event]:
        """Events from the raw dump stream, one at a time (:meth:`event_runs`)."""
        for run in self.event_runs(read, splitter):
            yield from run

    def event_runs(self, read, splitter=None) -> Iterator[Iterable[Event]]:
        """Events from the raw dump stream, a run at a time: the events one read of the
        stream completed (a list), or the inner events of one transaction payload (inflated
        as they are iterated, so a huge transaction is never in memory whole). When a run
        is handed, :attr:`position` is already past its last event; a run never spans a
        FORMAT_DESCRIPTION, so :attr:`format` is that of each of its events. A caller
        loops over a run: one step per event, where a generator per event would cost more
        than most events' use.

        ``splitter`` (the C ``split_events`` of :mod:`cdc_source.binlog.framing`) frames
        packets, parses headers and checks CRC32s a read at a time; payloads it leaves
        (errors, events over 16 MiB) and streams without it go the Python way."""
        stream = PacketStream(read)
        if splitter is None:
            for payload in stream.payloads():
                yield from self._runs_of(
                    split_header(payload, self.format, self.file, self.next_start)
                )
            return
        while True:
            crc = self.format.checksum == CHECKSUM_CRC32
            plain = self.plain
            try:
                if plain is None:
                    found, used, status = splitter(stream.buffer, stream.start, crc)
                else:
                    found, used, status = splitter(
                        stream.buffer,
                        stream.start,
                        crc,
                        plain.native,
                        self.next_start,
                        plain.stop_in(self.file),
                    )
            except ValueError as err:  # the native splitter's FramingError
                raise MalformedEventError(f"{err} in {self.file}") from None
            stream.start += used
            run: list = []
            for event_type, timestamp, flags, end_pos, body, server_id in found:
                if event_type == PLAIN_RUN:  # (server_id holds the run's rows)
                    run.append(PlainRun(self.file, end_pos, self.next_start, server_id))
                    self.next_start = end_pos
                    continue
                if event_type == c.FORMAT_DESCRIPTION:
                    if run:  # the events before it are parsed with the format before it
                        yield run
                        run = []
                    event = split_header(body, self.format, self.file, self.next_start)
                else:
                    event = Event(
                        event_type,
                        timestamp,
                        flags,
                        self.file,
                        end_pos,
                        body,
                        self.next_start,
                        server_id,
                    )
                    if not (
                        event_type in _NOT_PLAIN
                        or flags & LOG_EVENT_ARTIFICIAL_F
                        or end_pos <= self.next_start
                    ):
                        run.append(event)  # (the common case, _keep's rules inlined)
                        self.next_start = end_pos
                        continue
                payload = self._keep(event, run)
                if payload is not None:
                    yield run
                    run = []
                    yield unwrap_payload(payload)
            if run:
                yield run
            if status == 1:
                return
            if status == 3 or (found and found[-1][0] == c.FORMAT_DESCRIPTION):
                continue  # the splitter stops there; what follows may already be buffered
            if status == 2:
                payload = stream.take()
                if payload is not None:
                    if not payload:
                        return
                    event = split_header(payload, self.format, self.file, self.next_start)
                    del payload  # the event holds its own copy of the body
                    yield from self._runs_of(event)
                    del event
                    continue
            stream.fill()

    def _runs_of(self, event: Event) -> Iterator[Iterable[Event]]:
        """The runs one event makes: itself, none, or a payload's inner events."""
        run: list[Event] = []
        payload = self._keep(event, run)
        if run:
            yield run
        if payload is not None:
            yield unwrap_payload(payload)

    def _keep(self, event: Event, run: list[Event]) -> Event | None:
        """Tracks ROTATE and FORMAT_DESCRIPTION, drops events not at a position of the file
        read, and appends the others to ``run``; a transaction payload is returned instead,
        for its inner events to be the next run."""
        if event.type == c.ROTATE:
            self.file, self.next_start = parse_rotate(event.body)
            return None
        if event.type == c.FORMAT_DESCRIPTION:
            self.format = parse_format_description(event.body)
            self.next_start = max(self.next_start, event.end_pos)
            if self.plain is not None:
                self.plain.format_changed(self.format)
            return None
        if event.type in _HEARTBEATS:  # a blocking dump's sign of life, at no position
            return None
        if event.flags & LOG_EVENT_ARTIFICIAL_F:
            return None
        if event.end_pos <= self.next_start:
            self._refuse_wrapped(event)
            return None  # sent again: a new dump starts at or before what was read
        self.next_start = event.end_pos
        if event.type == c.TRANSACTION_PAYLOAD:
            return event
        run.append(event)
        return None

    def _refuse_wrapped(self, event: Event) -> None:
        """Raises when ``event``, starting where the last one ended, ends past 4 GiB.

        An event header's ``log_pos`` is 4 bytes; servers store the low 32 bits of the
        real end, so in a file grown past 4 GiB (one transaction can take it past
        ``max_binlog_size``) the end positions wrap to small numbers, which would read as
        events sent again. The real end is the start plus the event's size: when that
        passes 2^32 and its low 32 bits are the header's, the event is past 4 GiB. A dump
        cannot be started there either (``COM_BINLOG_DUMP`` takes a 4-byte position), so
        the read is refused rather than made exact."""
        size = HEADER_SIZE + len(event.body)
        if self.format.checksum == CHECKSUM_CRC32:
            size += 4
        end = self.next_start + size
        if end > MAX_DUMP_POSITION and end & MAX_DUMP_POSITION == event.end_pos:
            raise UnsupportedEventError(
                f"{c.event_name(event.type)} event starting at {self.file}:{self.next_start} "
                f"({size} bytes) ends at {end}, past 4 GiB: the binlog's 4-byte event "
                "positions wrap there and a dump cannot start past it; keep binlog files "
                "under 4 GiB (max_binlog_size, and no transaction of that size)"
            )


_HEARTBEATS = frozenset({c.HEARTBEAT, c.HEARTBEAT_V2})
# Events a dump's reader does more with than hand on (EventReader._keep).
_NOT_PLAIN = frozenset({c.ROTATE, c.FORMAT_DESCRIPTION, c.TRANSACTION_PAYLOAD, *_HEARTBEATS})
