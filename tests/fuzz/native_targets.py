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
``statement`` ``reader._textscan.StatementScan`` over the same fake server: the payloads
              (as ``textscan``'s, the column count cut the same way) answer a prepared
              statement's execution: column count, column definitions, EOF, rows in the
              binary protocol, EOF.
``values``    ``reader._textvalues`` (temporal and decimal text, integer sort keys,
              ``_seq`` as hex): 1 byte mode m; bit 1 set: raw buffers, else the entry
              point ``VALUE_ENTRIES[(m >> 2) * 2 + (m & 1)]`` (modulo their count; a
              ``decimal128`` input then has 2 bytes, precision and scale, modulo their
              ranges; an ``integer_sort_keys`` input 1 byte, unsigned when odd).
              Values: each as 1 byte length (255: null) and its bytes,
              made into an Arrow array; a result must equal a pure-Python reference (the
              first value is ``hex_seq``'s prefix). Raw: 1 byte n, 1 byte offset, 4 * (n +
              offset + 1) bytes of int32 offsets, the validity bitmap, then the data,
              each in a buffer of its own: every entry point must refuse what is
              inconsistent with a ValueError.

Every input is handed to the C code in a buffer of exactly its size (``array``), so an
AddressSanitizer build sees a read one byte past it (``bytes`` keep a NUL there).
"""

from __future__ import annotations

import array
import datetime
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


def plain_input(checksum: bool, stream: bytes) -> bytes:
    """A split stream for the plain target: flags (checksum, tables captured), the rows
    headers' length, the columns of every table, then the stream."""
    return bytes([int(checksum) | 2, 10, 3]) + stream


def _plain_modes() -> bytes:
    from cdc_source.binlog import constants as c
    from cdc_source.binlog.plain_events import BEGINS, NEVER_PLAIN, ROWS, TABLE_MAPS

    modes = bytearray(256)
    for event_type in range(256):
        if event_type == c.QUERY:
            modes[event_type] = BEGINS
        elif event_type == c.TABLE_MAP:
            modes[event_type] = TABLE_MAPS
        elif event_type in c.ROW_EVENTS:
            modes[event_type] = ROWS
        elif event_type not in NEVER_PLAIN:
            modes[event_type] = 1
    return bytes(modes)


def plain(data: bytes) -> None:
    """split_events folding the driver's plain events, registered from the stream itself:
    a first read registers every TABLE_MAP and rows event it hands back, and a second
    read of the same stream folds what is registered."""
    from cdc_source.binlog import _framing

    if len(data) < 3:
        return
    flags, header_len, columns = data[0], data[1], data[2] % 16
    registry = _framing.PlainEvents()
    registry.set_modes(_plain_modes())
    registry.set_format(4 if flags & 4 else 6, 13 + (flags >> 6))
    sizes = b"".join(
        (0x80000000 | (1 + i % 2) if i % 3 == 0 else i + 1).to_bytes(4, "little")
        for i in range(columns)
    )
    buffer = exact(data[3:])
    for _ in range(2):
        start, after = 0, 0
        while True:
            try:
                events, used, status = _framing.split_events(
                    buffer, start, flags & 1, registry, after, 0xFFFFFFFF
                )
            except ValueError:
                break
            for event_type, _, event_flags, end, body, rows in events:
                if event_type == 256:
                    if end <= after or rows < 0:
                        raise AssertionError(f"a plain run ending at {end} after {after}")
                    after = end
                    continue
                if _kept(event_type, event_flags, end, after):
                    after = end
                _register(registry, event_type, body, flags, header_len, sizes)
            start += used
            if not used or status:
                break


def _kept(event_type: int, flags: int, end: int, after: int) -> bool:
    """Whether the event reader keeps an event, so that its end is where the next starts
    (``EventReader._keep``; a ROTATE's position is its body's, left alone here)."""
    return not flags & 0x20 and end > after and event_type not in (4, 15, 27, 41)


def _register(registry, event_type: int, body: bytes, flags: int, header_len: int, sizes: bytes):
    width = 4 if flags & 4 else 6
    if len(body) < width:
        return
    table_id = int.from_bytes(body[:width], "little")
    try:
        if event_type == 19:
            registry.table(table_id, body, bool(flags & 2), sizes, (flags >> 4) - 1)
        elif event_type in (23, 24, 25, 30, 31, 32, 39):
            images = 2 if event_type in (24, 31, 39) else 1
            registry.rows_header(event_type, body[:header_len], table_id, images, flags & 8)
        registry.rows(event_type, body)
    except ValueError:
        pass


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


def _result_payloads(data: bytes) -> list[bytes]:
    payloads = parse_textscan_input(data)
    if payloads:
        payloads[0] = bytes([payloads[0][0] % 251]) if payloads[0] else b"\x00"
    return payloads


def textscan(data: bytes) -> None:
    from tests.fuzz import fake_server

    fake_server.scan(_result_payloads(data))


def statement(data: bytes) -> None:
    from tests.fuzz import fake_server

    fake_server.statement_scan(_result_payloads(data))


NULL_LENGTH = 255
VALUE_ENTRIES = (
    "time_micros",
    "hex_seq",
    "date_days",
    "datetime_micros",
    "decimal128",
    "integer_sort_keys",
)
_TIME = re.compile(rb"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_DATE = re.compile(rb"(\d{4})-(\d\d)-(\d\d)")
_DATETIME = re.compile(rb"(\d{4}-\d\d-\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_DECIMAL = re.compile(rb"(-?)(\d+)(?:\.(\d+))?")
_INTEGER = re.compile(rb"-?\d+")
_EPOCH = datetime.date(1970, 1, 1)


def values_input(entry: str, values: list[bytes | None], head: bytes = b"") -> bytes:
    """A list-mode input of ``entry`` (``head``: a decimal128 input's precision and scale
    bytes)."""
    index = VALUE_ENTRIES.index(entry)
    out = bytearray([(index // 2) << 2 | index % 2]) + head
    for value in values:
        if value is None:
            out.append(NULL_LENGTH)
        else:
            out += bytes([min(len(value), NULL_LENGTH - 1)]) + value[: NULL_LENGTH - 1]
    return bytes(out)


def parse_values_input(data: bytes, start: int = 1) -> list[bytes | None]:
    values: list[bytes | None] = []
    pos = start
    while pos < len(data):
        size = data[pos]
        if size == NULL_LENGTH:
            values.append(None)
            pos += 1
            continue
        values.append(data[pos + 1 : pos + 1 + size])
        pos += 1 + size
    return values


def _fraction(digits: bytes | None) -> int:
    return int((digits or b"").ljust(6, b"0"))


def reference_time(text: bytes) -> int | None:
    """TIME text as microseconds, as the Python twin's regular expression reads it."""
    match = _TIME.fullmatch(text)
    if match is None:
        return None
    sign, hours, minutes, seconds, fraction = match.groups()
    whole = (int(hours) * 60 + int(minutes)) * 60 + int(seconds)
    micros = whole * 1_000_000 + _fraction(fraction)
    return -micros if sign else micros


def reference_date(text: bytes) -> int | None:
    """DATE text as days since 1970-01-01 (valid dates of years 1..9999 only)."""
    match = _DATE.fullmatch(text)
    if match is None:
        return None
    try:
        day = datetime.date(*(int(part) for part in match.groups()))
    except ValueError:
        return None
    return (day - _EPOCH).days


def reference_datetime(text: bytes) -> int | None:
    match = _DATETIME.fullmatch(text)
    if match is None:
        return None
    day, hour, minute, second, fraction = match.groups()
    days = reference_date(day)
    if days is None or int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        return None
    seconds = ((days * 24 + int(hour)) * 60 + int(minute)) * 60 + int(second)
    return seconds * 1_000_000 + _fraction(fraction)


def reference_decimal(text: bytes, precision: int, scale: int) -> int | None:
    """The unscaled value of DECIMAL(precision, scale) text, if the type holds it."""
    match = _DECIMAL.fullmatch(text)
    if match is None:
        return None
    sign, whole, fraction = match.groups()
    if fraction is not None and len(fraction) > scale:
        return None
    units = int(whole + (fraction or b"").ljust(scale, b"0"))
    if units and len(str(units)) > precision:
        return None
    return -units if sign else units


def reference_integer(text: bytes, low: int, high: int) -> int | None:
    """Integer text (``[-]D+``) within ``[low, high]``."""
    if _INTEGER.fullmatch(text) is None:
        return None
    value = int(text)
    return value if low <= value <= high else None


def reference_sort_key(text: bytes | None, unsigned: bool) -> bytes | None:
    """An integer's 9-byte sort key: sign-extended to 72 bits, big-endian, the top bit
    flipped, which is ``value + 2**71`` (``cdc_source.keys``)."""
    if text is None:
        return None
    low, high = (0, 2**64 - 1) if unsigned else (-(2**63), 2**63 - 1)
    value = reference_integer(text, low, high)
    return None if value is None else (value + 2**71).to_bytes(9, "big")


def _values_as_arrays(values: list[bytes | None]) -> tuple:
    bits, ends, data = bytearray((len(values) + 7) // 8), array.array("i", [0]), bytearray()
    for i, value in enumerate(values):
        if value is not None:
            bits[i // 8] |= 1 << (i % 8)
            data += value
        ends.append(len(data))
    return exact(bytes(bits)), ends, exact(bytes(data))


def _checked(built, items: list[bytes | None], reference, width: int) -> None:
    """A parser's result against the reference: equal values where it took the column
    (it may decline a column the reference reads: the twin then decides)."""
    if built is None:
        return
    expected = [reference(v) if v is not None else 0 for v in items]
    assert None not in expected, (items, built)
    got = [
        int.from_bytes(built[1][i * width : (i + 1) * width], "little", signed=True)
        for i in range(len(items))
    ]
    assert got == expected, (items, got, expected)


def values(data: bytes) -> None:
    from reader import _textvalues

    if not data:
        return
    if data[0] & 2:
        _raw_values(data)
        return
    entry = VALUE_ENTRIES[((data[0] >> 2) * 2 + (data[0] & 1)) % len(VALUE_ENTRIES)]
    if entry == "hex_seq":
        items = parse_values_input(data)
        prefix = (items[0] or b"") if items else b""
        keys = [v or b"" for v in items[1:]]
        _, ends, body = _values_as_arrays(keys)
        out_ends, text = _textvalues.hex_seq(prefix, ends, body, 0, len(keys))
        expected = [prefix + k.hex().encode() for k in keys]
        starts = array.array("i", out_ends)
        got = [text[starts[i] : starts[i + 1]] for i in range(len(keys))]
        assert got == expected, (got, expected)
        return
    if entry == "decimal128":
        if len(data) < 3:
            return
        precision = data[1] % 38 + 1
        scale = data[2] % (precision + 1)
        items = parse_values_input(data, 3)
        bits, ends, body = _values_as_arrays(items)
        built = _textvalues.decimal128(bits, ends, body, 0, len(items), precision, scale)
        _checked(built, items, lambda v: reference_decimal(v, precision, scale), 16)
        return
    if entry == "integer_sort_keys":
        if len(data) < 2:
            return
        unsigned = bool(data[1] & 1)
        items = parse_values_input(data, 2)
        bits, ends, body = _values_as_arrays(items)
        built = _textvalues.integer_sort_keys(bits, ends, body, 0, len(items), unsigned)
        expected = [reference_sort_key(v, unsigned) for v in items]
        if built is None:
            return  # declined: the twin reads the fetch (it may decline more than needed)
        assert None not in expected, (items, built)
        starts = array.array("i", built[0])
        keys = [built[1][starts[i] : starts[i + 1]] for i in range(len(items))]
        assert keys == expected, (items, keys, expected)
        return
    items = parse_values_input(data)
    bits, ends, body = _values_as_arrays(items)
    built = getattr(_textvalues, entry)(bits, ends, body, 0, len(items))
    reference = {
        "time_micros": (reference_time, 8),
        "date_days": (reference_date, 4),
        "datetime_micros": (reference_datetime, 8),
    }[entry]
    _checked(built, items, *reference)


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
        lambda: _textvalues.date_days(bits, ends, body, offset, n),
        lambda: _textvalues.datetime_micros(bits, ends, body, offset, n),
        lambda: _textvalues.decimal128(bits, ends, body, offset, n, 20, 6),
        lambda: _textvalues.hex_seq(b"p.", ends, body, offset, n),
        lambda: _textvalues.integer_sort_keys(bits, ends, body, offset, n, False),
    ):
        try:
            call()
        except ValueError:
            pass


TARGETS = {
    "rows": rows,
    "split": split,
    "count": count,
    "plain": plain,
    "json": json,
    "textscan": textscan,
    "statement": statement,
    "values": values,
}
# Targets whose code under test is Python: atheris instruments those modules.
PYTHON_TARGETS = {"json": ["reader.json_binary"]}
