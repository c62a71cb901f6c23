"""The dump stream's framing: MySQL packets into whole payloads (:class:`PacketStream`,
the one loop every reader of a dump runs), and which twin runs the hot walks. Splitting
the raw stream into events (``split_events``) and counting a rows event's rows
(``count_rows``) are in C in the optional extension ``cdc_source.binlog._framing`` where
it is built, and in Python (here and in :mod:`cdc_source.binlog.events`,
:mod:`cdc_source.binlog.row_count`) everywhere.

Both give the same events and counts. The driver's passes read every event of a batch's
range, and in Python they cost it more than its tasks spent reading the range (100K
single-row transactions: 5.0 s against 1.4 s; 1M rows in 1,000-row transactions: 9 s
against 4 s). The choice follows ``scan.binlog.decoder``, as the row decoder's does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from cdc_source.retry import TRANSIENT_CODES

try:
    from cdc_source.binlog import _framing
except ImportError:  # built without a compiler
    _framing = None

# Set (to anything), it makes ``auto`` mean Python here and in the row decoder.
FORCE_PYTHON_ENV = "CDC_MYSQL_PURE_PYTHON_DECODER"
READ_SIZE = 1 << 20
_MAX_PACKET = 0xFFFFFF


class BinlogServerError(RuntimeError):
    """The server refused or ended the dump with an error packet."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"binlog dump failed: ({code}) {message}")
        self.code = code

    @property
    def transient(self) -> bool:
        """A lost or refused connection (a new dump may succeed); the server's refusals,
        e.g. 1236 for a purged or unknown binlog position, are permanent."""
        return self.code in TRANSIENT_CODES


def native_available() -> bool:
    return _framing is not None


def runs_native(decoder: str | None = "auto") -> bool:
    """Whether ``decoder`` (``scan.binlog.decoder``: auto, native or python; None is
    auto) runs the C walks: ``python`` never, ``native`` and ``auto`` where the extension
    is built, ``auto`` only while :data:`FORCE_PYTHON_ENV` is not set. A ``native`` that
    cannot be honoured is refused by the row decoder (``reader.row_decoding``), built
    alongside; the walks give the same events either way."""
    if decoder == "python" or _framing is None:
        return False
    return decoder == "native" or not os.environ.get(FORCE_PYTHON_ENV)


def splitter(decoder: str | None = "auto") -> Callable | None:
    """The C packet/event splitter for ``decoder``, or None: the Python one."""
    return _framing.split_events if runs_native(decoder) else None


def row_counter(decoder: str | None = "auto") -> Callable[..., int] | None:
    """The C row counter for ``decoder``, or None: the Python one."""
    return _framing.count_rows if runs_native(decoder) else None


def payload_extent(buffer: bytearray, start: int) -> tuple[bool, int]:
    """Where the payload at ``buffer[start:]`` ends: ``(True, end)`` when all its packets
    (a payload of 16 MiB or more spans several) are in the buffer, else ``(False, n)``
    with ``n`` the buffer length needed before asking again. Reads headers only, so a
    caller waiting for a 1 GiB event does not copy it at every read."""
    pos = start
    while True:
        if len(buffer) - pos < 4:
            return False, pos + 4
        length = buffer[pos] | buffer[pos + 1] << 8 | buffer[pos + 2] << 16
        if len(buffer) - pos < 4 + length:
            return False, pos + 4 + length
        pos += 4 + length
        if length != _MAX_PACKET:
            return True, pos


def take_payload(buffer: bytearray, start: int) -> tuple[bytes | None, int]:
    """One whole payload at ``buffer[start:]`` (joined when it spans several 16 MiB
    packets) and the bytes it used, or (None, 0) when it is not all there yet. An EOF
    packet gives ``(b"", used)``; an error packet raises :class:`BinlogServerError`."""
    complete, end = payload_extent(buffer, start)
    if not complete:
        return None, 0
    first_length = buffer[start] | buffer[start + 1] << 8 | buffer[start + 2] << 16
    first = buffer[start + 4] if first_length else 0xFE
    skip = 1 if first == 0x00 else 0  # an event's payload without its OK byte, copied once
    with memoryview(buffer) as view:
        parts = []
        pos = start
        while pos < end:
            length = buffer[pos] | buffer[pos + 1] << 8 | buffer[pos + 2] << 16
            parts.append(view[pos + 4 + skip : pos + 4 + length])
            pos += 4 + length
            skip = 0
        body = b"".join(parts)
        for part in parts:
            part.release()
    if first == 0x00:
        return body, end - start
    if first == 0xFE and len(body) < 9:
        return b"", end - start
    if first == 0xFF:
        code = int.from_bytes(body[1:3], "little")
        message = body[9:] if body[3:4] == b"#" else body[3:]
        raise BinlogServerError(code, message.decode("utf-8", "replace"))
    raise BinlogServerError(0, f"unexpected packet starting with {first:#x}")


def read_chunk(read: Callable[[int], bytes]) -> bytes:
    chunk = read(READ_SIZE)
    if not chunk:
        raise BinlogServerError(2013, "the server closed the binlog connection")
    return chunk


class PacketStream:
    """The raw dump stream, read a chunk at a time into :attr:`buffer`, of which
    ``buffer[start:]`` is not yet used. The C splitter walks the buffer itself and moves
    :attr:`start`; payloads it leaves (error packets, events of 16 MiB or more) and
    every payload of the Python path come from :meth:`take`."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self.buffer = bytearray()
        self.start = 0
        self._needed = 0

    def take(self) -> bytes | None:
        """The next payload when all its packets are buffered (``b""``: the EOF packet),
        else None: :meth:`fill` then reads at least that far."""
        complete, needed = payload_extent(self.buffer, self.start)
        if not complete:
            self._needed = needed
            return None
        payload, used = take_payload(self.buffer, self.start)
        self.start += used
        if used > READ_SIZE:  # let a big payload's raw bytes go before it is decoded
            self.buffer = bytearray(self.buffer[self.start :])
            self.start = 0
        return payload

    def fill(self) -> None:
        """Drops the used bytes and reads a chunk, and more while the payload that
        :meth:`take` last found cut short is not all there (read whole before it is
        joined, so a payload of many packets is not copied at every read)."""
        needed, self._needed = self._needed, 0
        if self.start:
            needed -= self.start
            del self.buffer[: self.start]
            self.start = 0
        self.buffer += read_chunk(self._read)
        while len(self.buffer) < needed:
            self.buffer += read_chunk(self._read)

    def payloads(self) -> Iterator[bytes]:
        """Every payload up to the EOF packet (event payloads without their OK byte)."""
        while True:
            payload = self.take()
            if payload is None:
                self.fill()
            elif not payload:
                return
            else:
                yield payload


def plain_events():
    """A new C registry of the driver's plain events (:mod:`cdc_source.binlog.plain_events`)."""
    return _framing.PlainEvents()
