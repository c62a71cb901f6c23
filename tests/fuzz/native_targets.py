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

Every input is handed to the C code in a buffer of exactly its size (``array``), so an
AddressSanitizer build sees a read one byte past it (``bytes`` keep a NUL there).
"""

from __future__ import annotations

import array

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


TARGETS = {"rows": rows, "split": split, "count": count, "json": json, "textscan": textscan}
# Targets whose code under test is Python: atheris instruments those modules.
PYTHON_TARGETS = {"json": ["reader.json_binary"]}
