"""Binlog positions near and past 4 GiB, over hand-built events (no 4 GiB file).

An event header's ``log_pos`` and ``COM_BINLOG_DUMP``'s position are 4 bytes; servers
store the low 32 bits of an end position, so in a file grown past 4 GiB the end
positions wrap. The reader refuses the first event that ends past 2^32, naming it and
its real position, instead of taking the wrapped position for an event sent again.
Every test runs with the C splitter and the Python one."""

from __future__ import annotations

import pytest

from cdc_source.binlog import constants as c
from cdc_source.binlog import framing
from cdc_source.binlog.events import MAX_DUMP_POSITION, EventReader, UnsupportedEventError
from cdc_source.binlog.transport import start_dump
from tests.support import binlog_encoder as enc

SPLITTERS = ["python"] + (["native"] if framing.native_available() else [])
FILE = "binlog.000007"
BODY = b"x" * 40  # a QUERY-typed event's body: its bytes are not decoded here
SIZE = 19 + len(BODY) + 4


def _events(start: int, ends: list[int], decoder: str, checksum: bool = True):
    """What a dump from ``FILE:start`` yields: a fake ROTATE, the FORMAT_DESCRIPTION as
    a server sends it mid-file (``log_pos`` 0), then one event per header ``log_pos``."""
    size = 19 + len(BODY) + (4 if checksum else 0)
    payloads = [enc.rotate(FILE, start, checksum), enc.format_description(checksum)]
    payloads += [enc.event(c.QUERY, BODY, end, checksum=checksum) for end in ends]
    reader = EventReader(FILE, start, checksum)
    read = enc.packet_stream(payloads, chunk=61)
    return reader, reader.events_from_stream(read, framing.splitter(decoder)), size


@pytest.mark.parametrize("decoder", SPLITTERS)
def test_events_up_to_the_last_32_bit_position_keep_their_exact_positions(decoder):
    start = MAX_DUMP_POSITION + 1 - 3 * SIZE
    ends = [start + SIZE, start + 2 * SIZE]
    reader, events, _ = _events(start, ends, decoder)
    got = list(events)
    assert [e.end_pos for e in got] == ends
    assert [e.start_pos for e in got] == [start, start + SIZE]
    assert reader.next_start == ends[-1]


@pytest.mark.parametrize("decoder", SPLITTERS)
@pytest.mark.parametrize("past", [0, 1, SIZE - 1])
def test_an_event_ending_past_4_gib_is_refused_with_its_real_position(decoder, past):
    """``past`` bytes beyond 2^32: the header says ``past``, which is at most the
    position the reader is at, so without the check the event would be dropped."""
    start = (1 << 32) + past - 2 * SIZE
    ends = [start + SIZE, ((1 << 32) + past) & MAX_DUMP_POSITION]
    reader, events, _ = _events(start, ends, decoder)
    first = next(events)
    assert first.end_pos == start + SIZE
    with pytest.raises(UnsupportedEventError) as err:
        next(events)
    message = str(err.value)
    assert f"QUERY event starting at {FILE}:{start + SIZE}" in message
    assert f"ends at {(1 << 32) + past}, past 4 GiB" in message
    assert "max_binlog_size" in message


@pytest.mark.parametrize("decoder", SPLITTERS)
def test_the_size_counted_is_the_one_on_the_wire_without_checksums(decoder):
    start = (1 << 32) - 10
    reader, events, size = _events(
        start, [(start + 19 + len(BODY)) & MAX_DUMP_POSITION], decoder, checksum=False
    )
    with pytest.raises(UnsupportedEventError, match=f"\\({size} bytes\\) ends at {start + size}"):
        next(events)


@pytest.mark.parametrize("decoder", SPLITTERS)
def test_an_event_sent_again_below_4_gib_is_still_dropped(decoder):
    """A header position at or before the reader's that is not the wrapped end of the
    next event: an event the server sends again on a new dump, as before."""
    start = MAX_DUMP_POSITION - 2 * SIZE
    ends = [start, start - SIZE, start + SIZE]
    _, events, _ = _events(start, ends, decoder)
    assert [e.end_pos for e in events] == [start + SIZE]


def test_a_dump_past_4_gib_is_refused_before_anything_is_sent():
    class Conn:
        sent: list = []

        def _execute_command(self, command, payload):
            self.sent.append((command, payload))

    conn = Conn()
    with pytest.raises(UnsupportedEventError, match=f"{FILE}:{1 << 32}: the dump command"):
        start_dump(conn, 1234, FILE, 1 << 32)
    assert conn.sent == []
    conn._rfile = type("R", (), {"read1": None})()
    start_dump(conn, 1234, FILE, MAX_DUMP_POSITION)
    assert conn.sent[0][1][:4] == b"\xff\xff\xff\xff"
