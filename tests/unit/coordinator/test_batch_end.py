"""Bounded stream batches (coordinator.batch_end, cdc_source.binlog.row_count): where a
batch ends when its range holds more row changes or bytes than it may take, over binlog
bytes from tests/support/binlog_encoder.py; and the row count without decoding agrees
with the row decoder on random rows (a differential property test)."""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog import constants as c
from cdc_source.binlog import framing
from cdc_source.binlog.events import Event, Format
from cdc_source.binlog.row_count import RowCounter, count_rows, value_sizes
from cdc_source.binlog.row_plan import table_plan
from cdc_source.binlog.rows_event import RowsEvent
from cdc_source.binlog.table_map import parse_table_map
from cdc_source.binlog.wire import MalformedEventError
from cdc_source.offsets import BinlogPosition
from coordinator.batch_end import BatchEnds, RowCount, StreamLimit
from reader.row_decoder_py import PyRowSink
from tests.support import binlog_encoder as enc
from tests.support.small_rows import COLUMNS, UUID, row_image

_COUNTERS = [RowCounter("native")] if framing.native_available() else []  # C, where built


def _transaction(binlog, gno: int, rows: int, table: str = "orders", table_id: int = 5) -> int:
    binlog.add(c.GTID, enc.mysql_gtid_body(UUID, gno))
    binlog.add(c.TABLE_MAP, enc.table_map_body(table_id, "shop", table, COLUMNS))
    images = b"".join(row_image(gno * 100 + i, "n" * (i % 7)) for i in range(rows))
    binlog.add(30, enc.rows_body(table_id, len(COLUMNS), images, False, True))
    return binlog.add(c.XID, enc.xid_body(gno))


def _ends(binlog):
    source = enc.FakeDumpSource(binlog)
    return BatchEnds(None, 1, {"shop.orders"}, source=source)


def _one_pass(source, start, head, limit, state, *others):
    """The batch end from one pass over ``(start, head]`` that also finds the GTID state
    (left in ``state``) and hands its events to ``others`` (coordinator.range_pass)."""
    from coordinator.batch_end import bounded
    from coordinator.gtid_tracker import GtidListener
    from coordinator.range_pass import RangePass

    rows = BatchEnds(None, 1, {"shop.orders"}, source=source).listener(limit)
    listeners = [GtidListener(state, head), *others, rows]
    return bounded(
        head, limit, RangePass(source).run((start.file, start.pos), head, listeners), rows
    )


def _binlog_of(*rows_per_transaction: int, other_table: int = 0):
    binlog = enc.BinlogFile()
    start = binlog.pos
    ends = []  # where each transaction of the captured table ends
    other_ends = []  # where each transaction of the other table ends
    for gno, rows in enumerate(rows_per_transaction, 1):
        if other_table:
            other_ends.append(_transaction(binlog, 1000 + gno, other_table, "audit", 6))
        ends.append(_transaction(binlog, gno, rows))
    if other_table:
        return binlog, BinlogPosition(binlog.name, start), ends, other_ends
    return binlog, BinlogPosition(binlog.name, start), ends


def test_a_batch_ends_at_the_last_transaction_boundary_within_the_row_limit():
    binlog, start, ends = _binlog_of(3, 3, 3, 3, 3)
    head = BinlogPosition(binlog.name, binlog.pos)
    assert _ends(binlog).end(start, head, StreamLimit(rows=7)).pos == ends[1]
    assert _ends(binlog).end(start, head, StreamLimit(rows=6)).pos == ends[1]
    assert _ends(binlog).end(start, head, StreamLimit(rows=15)) == head
    assert _ends(binlog).end(start, head, StreamLimit()) == head


def test_a_transaction_larger_than_the_limit_is_a_batch_of_its_own():
    binlog, start, ends = _binlog_of(10, 2, 2)
    head = BinlogPosition(binlog.name, binlog.pos)
    assert _ends(binlog).end(start, head, StreamLimit(rows=4)).pos == ends[0]
    after_first = BinlogPosition(binlog.name, ends[0])
    assert _ends(binlog).end(after_first, head, StreamLimit(rows=4)) == head


def test_rows_of_tables_not_captured_are_not_counted_and_bytes_bound_too():
    binlog, start, ends, other_ends = _binlog_of(2, 2, 2, other_table=50)
    head = BinlogPosition(binlog.name, binlog.pos)
    assert _ends(binlog).end(start, head, StreamLimit(rows=6)) == head
    # 4 captured rows up to the third transaction of the other table, whose 50 rows do
    # not count: the batch takes it too.
    assert _ends(binlog).end(start, head, StreamLimit(rows=5)).pos == other_ends[2]
    one_transaction_pair = ends[0] - start.pos
    assert (
        _ends(binlog).end(start, head, StreamLimit(bytes=one_transaction_pair + 10)).pos
        == (ends[0])
    )


def test_the_end_is_a_function_of_start_limit_and_binlog():
    binlog, start, _ = _binlog_of(3, 1, 4, 1, 5, 9, 2, 6)
    head = BinlogPosition(binlog.name, binlog.pos)
    first = _ends(binlog).end(start, head, StreamLimit(rows=8))
    assert first == _ends(binlog).end(start, head, StreamLimit(rows=8))
    # Successive bounded batches reach the head, each within the limit or one transaction.
    position, batches = start, 0
    while position.coordinates < head.coordinates:
        position = _ends(binlog).end(position, head, StreamLimit(rows=8))
        batches += 1
    assert position == head and batches == 4  # [3, 1, 4] [1, 5] [9] [2, 6]


_VALUES = st.one_of(st.none(), st.text(max_size=30))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), _VALUES), min_size=1, max_size=40))
def test_row_count_without_decoding_agrees_with_the_decoder(rows):
    body = enc.table_map_body(5, "shop", "orders", COLUMNS)
    table_map = parse_table_map(body, 8)
    data = b"".join(
        enc.row_image(
            [
                struct.pack("<i", i),
                None if n is None else bytes([len(n.encode())]) + n.encode(),
            ]
        )
        for i, n in rows
        if n is None or len(n.encode()) < 256
    )
    if not data:
        return
    for kind, doubled in ((c.WRITE, data), (c.UPDATE, data + data)):
        event = RowsEvent(5, kind, doubled if kind == c.WRITE else _pairs(data, rows), 0, False)
        sink = PyRowSink(table_plan(table_map))
        decoded = sink.decode(event.data, 0, len(event.data), kind)
        assert count_rows(event, table_map, value_sizes(table_map)) == decoded
        for counter in _COUNTERS:
            assert counter.count(event, table_map) == decoded


# Every type family the counter walks: fixed sizes, DECIMAL, fractional temporals, and
# 1-, 2- and 4-byte length prefixes (VARCHAR, BLOB, JSON).
WIDE_COLUMNS = [
    ("i", enc.LONGLONG, b"", True, False),
    ("d", enc.NEWDECIMAL, bytes([20, 6]), True, False),
    ("t", enc.DATETIME2, bytes([6]), True, False),
    ("v", enc.VARCHAR, struct.pack("<H", 300), True, False),
    ("s", enc.VARCHAR, struct.pack("<H", 40), True, False),
    ("b", enc.BLOB, bytes([4]), True, False),
    ("j", enc.JSON, bytes([4]), True, False),
    ("y", enc.YEAR, b"", True, False),
]


@settings(max_examples=400, deadline=None)
@given(
    st.binary(max_size=200),
    st.sampled_from([c.WRITE, c.UPDATE, c.DELETE]),
    st.booleans(),
)
def test_the_native_row_count_agrees_with_the_python_one_on_any_bytes(data, kind, partial):
    """The C counter and its Python twin give the same count, or both refuse the bytes
    (MalformedEventError), never a crash, for valid and arbitrary row data alike."""
    if not _COUNTERS:
        pytest.skip("the native extension is not built")  # the Python twin runs alone
    table_map = parse_table_map(enc.table_map_body(7, "shop", "wide", WIDE_COLUMNS), 8)
    event = RowsEvent(7, kind, data, 0, partial and kind == c.UPDATE)
    results = []
    for counter in (RowCounter("python"), *_COUNTERS):
        try:
            results.append(counter.count(event, table_map))
        except MalformedEventError:
            results.append("refused")
    assert results[0] == results[1]


def test_the_native_row_count_agrees_on_valid_wide_rows():
    if not _COUNTERS:
        pytest.skip("the native extension is not built")
    table_map = parse_table_map(enc.table_map_body(7, "shop", "wide", WIDE_COLUMNS), 8)
    image = enc.row_image(
        [
            struct.pack("<q", 7),
            None,
            enc.datetime2(dt.datetime(2024, 5, 6, 7, 8, 9, 123456), 6),
            struct.pack("<H", 3) + b"abc",
            bytes([2]) + b"xy",
            struct.pack("<I", 5) + b"hello",
            None,
            bytes([124]),
        ]
    )
    for kind, data in ((c.WRITE, image * 3), (c.UPDATE, image * 4), (c.DELETE, image)):
        event = RowsEvent(7, kind, data, 0, False)
        expected = RowCounter("python").count(event, table_map)
        assert expected == (len(data) // len(image)) // (2 if kind == c.UPDATE else 1)
        assert _COUNTERS[0].count(event, table_map) == expected
    partial = image + b"\x00" + image  # value_options 0: no JSON bitmap
    event = RowsEvent(7, c.UPDATE, partial, 0, True)
    assert _COUNTERS[0].count(event, table_map) == RowCounter("python").count(event, table_map) == 1


def _pairs(data: bytes, rows) -> bytes:
    """Update rows: each row's image twice (before, after)."""
    images = [
        enc.row_image(
            [struct.pack("<i", i), None if n is None else bytes([len(n.encode())]) + n.encode()]
        )
        for i, n in rows
        if n is None or len(n.encode()) < 256
    ]
    return b"".join(image + image for image in images)


# -- one pass for the end, its GTID state and the range's statements ------------------------

_ITEMS = st.lists(
    st.one_of(
        st.tuples(st.just("rows"), st.integers(1, 6)),
        st.tuples(st.just("other"), st.integers(1, 6)),
        st.tuples(
            st.just("ddl"),
            st.sampled_from(
                [
                    "CREATE TABLE shop.t (id INT)",
                    "DROP TABLE shop.t",
                    "RENAME TABLE shop.a TO shop.orders",
                ]
            ),
        ),
        st.tuples(st.just("mariadb_list"), st.just(0)),
    ),
    min_size=1,
    max_size=14,
)


def _mixed_binlog(items, flavor: str):
    """A binlog of captured-table, other-table and statement transactions (each with
    its GTID) in ``flavor``; returns it and the end of every transaction."""
    binlog = enc.BinlogFile()
    if flavor == "mysql":
        binlog.add(c.PREVIOUS_GTIDS, enc.previous_gtids_body({(UUID, ""): [(1, 50)]}))
    else:
        binlog.add(c.MARIADB_GTID_LIST, enc.mariadb_gtid_list_body([(0, 1, 50)]))
    ends = []
    for number, (kind, value) in enumerate(items, 51):
        if kind == "mariadb_list":  # a starting-state event inside the range: no change
            if flavor == "mariadb":
                binlog.add(c.MARIADB_GTID_LIST, enc.mariadb_gtid_list_body([(0, 1, 50)]))
            continue
        if flavor == "mysql":
            binlog.add(c.GTID, enc.mysql_gtid_body(UUID, number))
        else:
            binlog.add(
                c.MARIADB_GTID, enc.mariadb_gtid_body(number, flags=1 if kind == "ddl" else 0)
            )
        if kind == "ddl":
            ends.append(binlog.add(c.QUERY, enc.query_body("shop", value)))
            continue
        table, table_id = ("orders", 5) if kind == "rows" else ("audit", 6)
        binlog.add(c.TABLE_MAP, enc.table_map_body(table_id, "shop", table, COLUMNS))
        images = b"".join(row_image(number * 100 + i, "x") for i in range(value))
        binlog.add(30, enc.rows_body(table_id, len(COLUMNS), images, False, True))
        ends.append(binlog.add(c.XID, enc.xid_body(number)))
    return binlog, ends


@settings(max_examples=150, deadline=None)
@given(
    _ITEMS,
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(1, 12)),
    st.one_of(st.none(), st.integers(60, 2000)),
    st.sampled_from(["mysql", "mariadb"]),
)
def test_one_pass_finds_the_same_end_gtid_state_and_statements_as_three(
    items, skip, max_rows, max_bytes, flavor
):
    """One pass (the batch end, with the GTID state and the statements as listeners of
    the same pass) agrees with the batch-end pass, the GTID tracker's pass and the statement
    scan's pass run apart, from any transaction boundary and under any limit."""
    from cdc_source.gtid import parse_state
    from coordinator.ddl_scan import DdlScan
    from coordinator.gtid_tracker import GtidTracker

    binlog, ends = _mixed_binlog(items, flavor)
    if not ends:
        return
    first = ends[min(skip, len(ends) - 1)]
    tracker = GtidTracker(lambda: None, 1, flavor, source=enc.FakeDumpSource(binlog))
    start = BinlogPosition(binlog.name, first)
    start = replace(start, gtids=tracker.state_from_file(start))
    head = BinlogPosition(binlog.name, binlog.pos)
    limit = StreamLimit(max_rows, max_bytes)
    if not _ends(binlog).reads(start, head, limit):
        assert _ends(binlog).end(start, head, limit) == head
        return

    apart = _ends(binlog).end(start, head, limit)
    apart_gtids = tracker.at(start, apart)
    apart_statements = DdlScan(lambda: None, 1, source=enc.FakeDumpSource(binlog)).changes(
        start, apart
    )

    source = enc.FakeDumpSource(binlog)
    scan = DdlScan(lambda: None, 1, source=source)
    state = parse_state(start.gtids, flavor)
    together = _one_pass(source, start, head, limit, state, scan.listener(start, head))
    assert together == apart
    assert tracker.stored(state) == apart_gtids
    assert scan.changes(start, together) == apart_statements
    assert len(source.opened) == 1  # the statements came from the one pass


def test_one_pass_refuses_an_end_that_is_not_where_an_event_ends():
    from cdc_source.gtid import parse_state
    from coordinator.gtid_tracker import GtidTrackingError

    binlog, start, ends = _binlog_of(3, 3)
    state = parse_state("", "mysql")
    inside = BinlogPosition(binlog.name, ends[1] - 3)  # inside the last transaction's XID
    with pytest.raises(GtidTrackingError, match="not where an event ends"):
        _one_pass(enc.FakeDumpSource(binlog), start, inside, StreamLimit(rows=100), state)
    beyond = BinlogPosition(binlog.name, binlog.pos + 100)  # the binlog ends before it
    with pytest.raises(GtidTrackingError, match="ended at"):
        _one_pass(enc.FakeDumpSource(binlog), start, beyond, StreamLimit(rows=100), state)


def test_row_data_of_a_table_of_no_columns_is_refused_not_looped_over():
    """A row image of no column takes no bytes: counting it would never end (the fuzzer
    found the C counter spinning on it); both counters refuse it."""
    table_map = parse_table_map(enc.table_map_body(8, "shop", "empty", []), 8)
    event = RowsEvent(8, c.WRITE, b"\x00\x00", 0, False)
    for counter in (RowCounter("python"), *_COUNTERS):
        with pytest.raises(MalformedEventError, match="no columns"):
            counter.count(event, table_map)


def _blob(prefix: int, limit: int):
    return st.binary(max_size=limit).map(lambda b, p=prefix: len(b).to_bytes(p, "little") + b)


def _packed(real_type: int, meta: int, values):
    return values.map(lambda v, t=real_type, m=meta: enc.pack_value(t, m, v))


_DATETIMES = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(
    lambda v: v.replace(microsecond=0)
)


def _old_datetime(v: dt.datetime) -> bytes:
    """A pre-5.6 DATETIME: YYYYMMDDhhmmss as 8 bytes little-endian."""
    date = (v.year * 100 + v.month) * 100 + v.day
    return (date * 1_000_000 + (v.hour * 100 + v.minute) * 100 + v.second).to_bytes(8, "little")


# Every column kind the counter walks, as (table-map column, encoded value strategy):
# fixed sizes of each width, DECIMALs, fractional and old-format temporals, and length
# prefixes of 1 to 4 bytes (VARCHAR short and long, CHAR, the BLOBs, JSON).
_SHAPES = [
    (enc.TINY, 0, _packed(enc.TINY, 0, st.integers(-128, 127))),
    (enc.SHORT, 0, _packed(enc.SHORT, 0, st.integers(0, 65535))),
    (enc.INT24, 0, _packed(enc.INT24, 0, st.integers(0, 2**24 - 1))),
    (enc.LONG, 0, _packed(enc.LONG, 0, st.integers(0, 2**32 - 1))),
    (enc.LONGLONG, 0, _packed(enc.LONGLONG, 0, st.integers(0, 2**64 - 1))),
    (enc.FLOAT, 4, _packed(enc.FLOAT, 4, st.floats(width=32, allow_nan=False))),
    (enc.DOUBLE, 8, _packed(enc.DOUBLE, 8, st.floats(allow_nan=False))),
    (
        enc.NEWDECIMAL,
        10 | 2 << 8,
        _packed(enc.NEWDECIMAL, 10 | 2 << 8, st.integers(-(10**9), 10**9)),
    ),
    (enc.NEWDECIMAL, 65 | 30 << 8, _packed(enc.NEWDECIMAL, 65 | 30 << 8, st.integers(0, 10**30))),
    (enc.DATE, 0, st.just(enc.date3(2024, 2, 29))),
    (enc.YEAR, 0, st.sampled_from([b"\x00", b"\x7c"])),
    (enc.DATETIME2, 0, _DATETIMES.map(lambda v: enc.datetime2(v, 0))),
    (enc.DATETIME2, 6, _DATETIMES.map(lambda v: enc.datetime2(v, 6))),
    (enc.TIMESTAMP2, 3, st.integers(1, 2**31 - 1).map(lambda s: enc.timestamp2(s, 0, 3))),
    (enc.TIME2, 5, st.integers(-(10**12), 10**12).map(lambda m: enc.time2(m, 5))),
    (enc.DATETIME, 0, _DATETIMES.map(_old_datetime)),
    (enc.TIMESTAMP, 0, st.binary(min_size=4, max_size=4)),
    (
        enc.TIME,
        0,
        st.integers(-8385959, 8385959).map(lambda n: n.to_bytes(3, "little", signed=True)),
    ),
    (enc.VARCHAR, 40, _blob(1, 40)),
    (enc.VARCHAR, 300, _blob(2, 300)),
    (enc.BLOB, 1, _blob(1, 255)),
    (enc.BLOB, 2, _blob(2, 300)),
    (enc.BLOB, 3, _blob(3, 300)),
    (enc.BLOB, 4, _blob(4, 300)),
    (enc.JSON, 4, _blob(4, 100)),
    (enc.BIT, 5 << 8 | 3, st.binary(min_size=6, max_size=6)),
    (enc.SET, 3, st.binary(min_size=3, max_size=3)),
    (enc.ENUM, 2, st.binary(min_size=2, max_size=2)),
]


@st.composite
def _valid_rows(draw):
    """A table of 1 to 14 columns of any kinds and rows of 1 to 6 images' worth of valid
    values (NULLs too), for a write, update (possibly a partial-JSON one) or delete."""
    shapes = draw(st.lists(st.sampled_from(_SHAPES), min_size=1, max_size=14))
    columns = []
    for i, (real_type, meta, _) in enumerate(shapes):
        type_byte, meta_bytes = enc.column_meta(real_type, meta)
        columns.append((f"c{i}", type_byte, meta_bytes, True, False))
    kind = draw(st.sampled_from([c.WRITE, c.UPDATE, c.DELETE]))
    partial = kind == c.UPDATE and draw(st.booleans())
    json_count = sum(real_type == enc.JSON for real_type, _, _ in shapes)
    count = draw(st.integers(1, 6))
    data = b""
    for _ in range(count):
        for image in range(2 if kind == c.UPDATE else 1):
            if image == 1 and partial:
                with_bitmap = json_count > 0 and draw(st.booleans())
                data += b"\x01" + bytes((json_count + 7) // 8) if with_bitmap else b"\x00"
            values = [draw(st.none() | strategy) for _, _, strategy in shapes]
            data += enc.row_image(values, mariadb=draw(st.booleans()))
    return columns, kind, partial, data, count


@settings(max_examples=300, deadline=None)
@given(_valid_rows())
def test_both_row_counters_count_valid_rows_of_every_shape(case):
    columns, kind, partial, data, count = case
    table_map = parse_table_map(enc.table_map_body(9, "shop", "shapes", columns), 8)
    event = RowsEvent(9, kind, data, 0, partial)
    assert count_rows(event, table_map, value_sizes(table_map)) == count
    assert RowCounter("python").count(event, table_map) == count
    for counter in _COUNTERS:
        assert counter.count(event, table_map) == count
    if not partial:
        assert PyRowSink(table_plan(table_map)).decode(data, 0, len(data), kind) == count


_COUNTED_EVENTS = st.lists(
    st.one_of(
        # a table map: table id, table, and whether its columns are the usual ones
        st.tuples(st.just("map"), st.sampled_from([5, 6]), st.sampled_from(["orders", "audit"])),
        # a rows event: type, table id, flags, rows, and a columns-present bitmap cut short
        st.tuples(
            st.just("rows"),
            st.sampled_from(
                [c.WRITE_ROWS_V2, c.UPDATE_ROWS_V2, c.DELETE_ROWS_V1, c.WRITE_ROWS_COMPRESSED_V1]
            ),
            st.sampled_from([5, 6]),
            st.sampled_from([0, 1]),
            st.integers(0, 4),
            st.booleans(),
        ),
    ),
    max_size=40,
)


def _counted(count, event, fmt) -> object:
    try:
        return count.rows(event, fmt)
    except Exception as err:  # the same refusal, by type and message
        return (type(err), str(err))


@settings(max_examples=200, deadline=None)
@given(items=_COUNTED_EVENTS, tables=st.sampled_from([{"shop.orders"}, {"shop.audit"}]))
def test_a_row_count_that_remembers_headers_counts_as_a_fresh_one(items, tables):
    """RowCount takes an event whose bytes up to its row data are the header it last
    counted for its type as that header: every count (or refusal) is the one a count
    that never saw an earlier rows event gives."""
    fmt = Format()
    remembering = RowCount(set(tables))
    maps: list[Event] = []
    for n, item in enumerate(items):
        if item[0] == "map":
            _, table_id, table = item
            body = enc.table_map_body(table_id, "shop", table, COLUMNS)
            event = Event(c.TABLE_MAP, 0, 0, "binlog.000001", 100 + n, body)
            maps.append(event)
            remembering.rows(event, fmt)
            continue
        _, event_type, table_id, flags, rows, short = item
        update = event_type == c.UPDATE_ROWS_V2
        images = b"".join(
            row_image(i, "n" * i) + (row_image(i, "m") if update else b"") for i in range(rows)
        )
        present = b"" if short else None
        body = enc.rows_body(
            table_id,
            len(COLUMNS),
            images,
            update,
            event_type in (c.WRITE_ROWS_V2, c.UPDATE_ROWS_V2),
            present,
            flags=flags,
            compressed=event_type == c.WRITE_ROWS_COMPRESSED_V1,
        )
        event = Event(event_type, 0, 0, "binlog.000001", 100 + n, body)
        fresh = RowCount(set(tables))
        for table_map in maps:
            fresh.rows(table_map, fmt)
        assert _counted(remembering, event, fmt) == _counted(fresh, event, fmt)
