"""Fuzz targets over the native code's entry points, one function per target, each taking
the fuzzer's bytes. Bad bytes must end in a decoding error (a ValueError); any other
exception, or a crash, is a finding. The input layouts are fixed (no random provider),
so :mod:`tests.fuzz.make_seeds` can write real events and result sets in them:

``rows``      ``reader._rowdecoder.RowSink``: 1 byte n (columns, 1..256), 4 bytes per
              column (kind, a, b little-endian 16 bits: a plan entry of
              ``cdc_source.binlog.row_plan``, kind taken modulo the 17 kinds), 1 byte
              event kind (modulo 3) + 4 * partial, 1 byte JSON column count, then the row
              data of a rows event.
``split``     ``cdc_source.binlog._framing.split_events``: 1 byte checksum flag, then the
              raw dump stream (MySQL packets).
``count``     ``cdc_source.binlog._framing.count_rows``: 1 byte images (1 or 2, modulo),
              1 byte JSON bitmap bytes + 1 (0: no partial update), 1 byte n, 4 * n bytes
              of packed sizes (``row_count.packed_sizes``), then the row data.
``json``      ``reader.json_binary.decode`` (Python; the rows target hands JSON columns
              to it as bytes): the binary JSON document.
``textscan``  ``reader._textscan.TextScan`` over a fake server (:mod:`tests.fuzz.fake_server`):
              the result set's packet payloads, each as 2 bytes little-endian length and
              the payload, framed with sequence numbers by the server. The first payload,
              the column count, is cut to its first byte modulo 251 (at most 250
              columns): libmariadb allocates the column definitions for whatever count a
              server sends (an 8-byte length-encoded one asked for 6 GB in
              ``mysql_real_query``), an allocation in the client library, not this code.
``values``    ``reader._textvalues`` (TIME text as microseconds, ``_seq`` as hex): 1 byte
              mode (bit 0: ``hex_seq`` instead of ``time_micros``; bit 1: raw buffers).
              Values: each as 1 byte length (255: null) and its bytes, made into an Arrow
              array; the result must equal a pure-Python reference (the first value is
              ``hex_seq``'s prefix). Raw: 1 byte n, 1 byte offset, 4 * (n + offset + 1)
              bytes of int32 offsets, the validity bitmap, then the data, each in a
              buffer of its own: the entry point must refuse what is inconsistent.

Every input is handed to the C code in a buffer of exactly its size (``array``), so an
AddressSanitizer build sees a read one byte past it (``bytes`` keep a NUL there).
"""

from __future__ import annotations

import array
import re

ROW_KINDS = 17


def exact(data: bytes) -> array.array:
    """``data`` in a heap buffer of exactly its length."""
    return array.array("B", data)


def parse_rows_input(data: bytes):
    """(plan, kind, partial, json_count, row data) of a ``rows`` input, or None."""
    if len(data) < 1:
        return None
    n = data[0] + 1
    head = 1 + 4 * n
    if len(data) < head + 2:
        return None
    plan = []
    for i in range(n):
        k, a, b0, b1 = data[1 + 4 * i : 5 + 4 * i]
        plan.append((k % ROW_KINDS + 1, a, b0 | b1 << 8))
    flags, json_count = data[head], data[head + 1]
    return tuple(plan), (flags & 3) % 3, bool(flags & 4), json_count, data[head + 2 :]


def rows_input(plan, kind: int, partial: bool, json_count: int, row_data: bytes) -> bytes:
    out = bytearray([len(plan) - 1])
    for k, a, b in plan:
        out += bytes([k - 1, a]) + b.to_bytes(2, "little")
    out += bytes([kind | (4 if partial else 0), json_count])
    return bytes(out + row_data)


def rows(data: bytes) -> None:
    from reader import _rowdecoder

    parsed = parse_rows_input(data)
    if parsed is None:
        return
    plan, kind, partial, json_count, body = parsed
    try:
        sink = _rowdecoder.RowSink(plan, json_count)
    except ValueError:
        return
    buffer = exact(body)
    try:
        sink.decode(buffer, 0, len(body), kind % 3, partial)
    except ValueError:
        pass
    sink.take()


def split_input(checksum: bool, stream: bytes) -> bytes:
    return bytes([1 if checksum else 0]) + stream


def split(data: bytes) -> None:
    from cdc_source.binlog import _framing

    if not data:
        return
    buffer = exact(data[1:])
    start = 0
    while True:
        try:
            events, used, status = _framing.split_events(buffer, start, data[0] & 1)
        except ValueError:
            return
        start += used
        if not used or status:
            return


def count_input(images: int, json_bitmap: int, sizes: bytes, row_data: bytes) -> bytes:
    return bytes([images, json_bitmap + 1, len(sizes) // 4]) + sizes + row_data


def count(data: bytes) -> None:
    from cdc_source.binlog import _framing

    if len(data) < 3:
        return
    images = data[0] % 2 + 1
    json_bitmap = data[1] - 1
    n = data[2]
    sizes = exact(data[3 : 3 + 4 * n])
    if len(sizes) != 4 * n:
        return
    body = exact(data[3 + 4 * n :])
    try:
        _framing.count_rows(body, 0, len(body), images, sizes, json_bitmap)
    except ValueError:
        pass


def json(data: bytes) -> None:
    from reader import json_binary

    try:
        json_binary.decode(data)
    except ValueError:
        pass


def textscan_input(payloads: list[bytes]) -> bytes:
    return b"".join(len(p).to_bytes(2, "little") + p for p in payloads)


def parse_textscan_input(data: bytes) -> list[bytes]:
    payloads, pos = [], 0
    while pos + 2 <= len(data):
        size = int.from_bytes(data[pos : pos + 2], "little")
        payloads.append(data[pos + 2 : pos + 2 + size])
        pos += 2 + size
    return payloads


def textscan(data: bytes) -> None:
    from tests.fuzz import fake_server

    payloads = parse_textscan_input(data)
    if payloads:
        payloads[0] = bytes([payloads[0][0] % 251]) if payloads[0] else b"\x00"
    fake_server.scan(payloads)


NULL_LENGTH = 255
_TIME = re.compile(rb"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def values_input(hex_seq: bool, values: list[bytes | None]) -> bytes:
    out = bytearray([1 if hex_seq else 0])
    for value in values:
        if value is None:
            out.append(NULL_LENGTH)
        else:
            out += bytes([min(len(value), NULL_LENGTH - 1)]) + value[: NULL_LENGTH - 1]
    return bytes(out)


def parse_values_input(data: bytes) -> list[bytes | None]:
    values: list[bytes | None] = []
    pos = 1
    while pos < len(data):
        size = data[pos]
        if size == NULL_LENGTH:
            values.append(None)
            pos += 1
            continue
        values.append(data[pos + 1 : pos + 1 + size])
        pos += 1 + size
    return values


def reference_time(text: bytes) -> int | None:
    """TIME text as microseconds, as the Python twin's regular expression reads it."""
    match = _TIME.fullmatch(text)
    if match is None:
        return None
    sign, hours, minutes, seconds, fraction = match.groups()
    whole = (int(hours) * 60 + int(minutes)) * 60 + int(seconds)
    micros = whole * 1_000_000 + int((fraction or b"").ljust(6, b"0"))
    return -micros if sign else micros


def _values_as_arrays(values: list[bytes | None]) -> tuple:
    bits, ends, data = bytearray((len(values) + 7) // 8), array.array("i", [0]), bytearray()
    for i, value in enumerate(values):
        if value is not None:
            bits[i // 8] |= 1 << (i % 8)
            data += value
        ends.append(len(data))
    return exact(bytes(bits)), ends, exact(bytes(data))


def values(data: bytes) -> None:
    from reader import _textvalues

    if not data:
        return
    if data[0] & 2:
        _raw_values(data)
        return
    items = parse_values_input(data)
    if data[0] & 1:
        prefix = (items[0] or b"") if items else b""
        keys = [v or b"" for v in items[1:]]
        _, ends, body = _values_as_arrays(keys)
        out_ends, text = _textvalues.hex_seq(prefix, ends, body, 0, len(keys))
        expected = [prefix + k.hex().encode() for k in keys]
        starts = array.array("i", out_ends)
        got = [text[starts[i] : starts[i + 1]] for i in range(len(keys))]
        assert got == expected, (got, expected)
        return
    bits, ends, body = _values_as_arrays(items)
    built = _textvalues.time_micros(bits, ends, body, 0, len(items))
    expected = [reference_time(v) if v is not None else 0 for v in items]
    if built is None:
        return  # declined: the twin decides (it may read a value the C does not)
    assert None not in expected, (items, built)
    got = array.array("q", built[1]).tolist()
    assert got == expected, (items, got, expected)


def _raw_values(data: bytes) -> None:
    from reader import _textvalues

    if len(data) < 3:
        return
    n, offset = data[1], data[2]
    ends_size = 4 * (n + offset + 1)
    bits_size = (n + offset + 7) // 8
    ends = array.array("i")
    given = data[3 : 3 + ends_size]
    ends.frombytes(given[: len(given) - len(given) % 4])
    bits = exact(data[3 + ends_size : 3 + ends_size + bits_size])
    body = exact(data[3 + ends_size + bits_size :])
    for call in (
        lambda: _textvalues.time_micros(bits, ends, body, offset, n),
        lambda: _textvalues.hex_seq(b"p.", ends, body, offset, n),
    ):
        try:
            call()
        except ValueError:
            pass


TARGETS = {
    "rows": rows,
    "split": split,
    "count": count,
    "json": json,
    "textscan": textscan,
    "values": values,
}
# Targets whose code under test is Python: atheris instruments those modules.
PYTHON_TARGETS = {"json": ["reader.json_binary"]}
