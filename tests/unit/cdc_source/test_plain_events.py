"""The driver's plain events (cdc_source/binlog/plain_events.py and the C splitter's
PlainEvents): which event types a pass may fold, what the registry calls plain, and the
runs split_events folds them into. That a pass folding them finds what a pass over every
event finds is tests/unit/coordinator/test_range_pass.py's."""

from __future__ import annotations

import zlib

import pytest

from cdc_source.binlog import constants as c
from cdc_source.binlog import framing
from cdc_source.binlog.events import Event, parse_format_description
from cdc_source.binlog.plain_events import (
    ALWAYS,
    BEGINS,
    PLAIN_RUN,
    ROWS,
    TABLE_MAPS,
    plain_modes,
)
from cdc_source.binlog.row_count import count_rows, packed_sizes, value_sizes
from cdc_source.binlog.rows_event import RowsEventHeaders
from cdc_source.binlog.table_map import parse_table_map
from tests.support import binlog_encoder as enc
from tests.support.small_rows import COLUMNS, UUID, row_image

ROW_KINDS = frozenset({c.TABLE_MAP, *c.ROW_EVENTS})
_COUNTED = frozenset({*ROW_KINDS, c.TRANSACTION_PAYLOAD})
_GTIDS = frozenset({c.GTID, c.MARIADB_GTID, c.PREVIOUS_GTIDS})
_QUERIES = frozenset({c.QUERY, c.QUERY_COMPRESSED})

needs_native = pytest.mark.skipif(
    not framing.native_available(), reason="the C splitter is not built here"
)


def test_a_type_no_listener_wants_is_always_plain_and_a_transaction_start_never():
    modes = plain_modes([(_GTIDS, frozenset(), False), (_QUERIES, frozenset(), False)])
    assert modes[c.XID] == ALWAYS
    assert modes[c.TABLE_MAP] == ALWAYS and modes[c.WRITE_ROWS_V2] == ALWAYS
    for kind in (c.GTID, c.MARIADB_GTID, c.QUERY, c.PREVIOUS_GTIDS):
        assert modes[kind] == 0
    for kind in (c.ROTATE, c.FORMAT_DESCRIPTION, c.HEARTBEAT, c.TRANSACTION_PAYLOAD):
        assert modes[kind] == 0


def test_table_maps_and_rows_are_plain_only_where_the_row_count_alone_wants_them():
    counted = (_COUNTED, ROW_KINDS, True)
    modes = plain_modes([(_GTIDS, frozenset(), False), counted])
    assert modes[c.TABLE_MAP] == TABLE_MAPS
    assert modes[c.WRITE_ROWS_V2] == ROWS and modes[c.PARTIAL_UPDATE_ROWS] == ROWS
    assert modes[c.WRITE_ROWS_COMPRESSED] == 0  # never registered: seen one by one
    assert modes[c.TRANSACTION_PAYLOAD] == 0
    watcher = (frozenset({c.TABLE_MAP}), frozenset(), False)  # (the signal table's)
    modes = plain_modes([counted, watcher])
    assert modes[c.TABLE_MAP] == 0 and modes[c.WRITE_ROWS_V2] == ROWS
    no_registry = (_COUNTED, ROW_KINDS, False)
    assert plain_modes([no_registry])[c.WRITE_ROWS_V2] == 0
    assert plain_modes([(None, frozenset(), False)]) == bytes(256)


def test_a_begin_is_plain_where_every_listener_of_queries_takes_it_as_nothing():
    statements = (_QUERIES, frozenset({c.QUERY}), False)
    xa = (frozenset({c.QUERY, c.XA_PREPARE}), frozenset({c.QUERY}), False)
    assert plain_modes([statements, xa])[c.QUERY] == BEGINS
    assert plain_modes([statements, (_QUERIES, frozenset(), False)])[c.QUERY] == 0
    assert plain_modes([statements])[c.QUERY_COMPRESSED] == 0


@needs_native
def test_only_a_query_whose_statement_is_begin_is_plain():
    registry = _registry()
    assert registry.rows(c.QUERY, enc.query_body("shop", "BEGIN")) == 0
    assert registry.rows(c.QUERY, enc.query_body("", "BEGIN")) == 0
    for text in ("BEGIN ", "begin", "COMMIT", "XA START X'61',X'',1", "BEGI", ""):
        assert registry.rows(c.QUERY, enc.query_body("shop", text)) is None
    assert registry.rows(c.QUERY, b"\x00" * 12) is None  # shorter than its post-header


# -- the C registry ------------------------------------------------------------------------

TABLE_ID = 77


def _table_map_body(table_id: int = TABLE_ID, name: str = "orders") -> bytes:
    return enc.table_map_body(table_id, "shop", name, COLUMNS)


def _rows_body(ids: list[int], table_id: int = TABLE_ID, flags: int = 1) -> bytes:
    images = b"".join(row_image(i, "x" * (i % 5) if i % 3 else None) for i in ids)
    return enc.rows_body(table_id, len(COLUMNS), images, False, True, flags=flags)


def _registry(table_body: bytes | None = None, captured: bool = True):
    registry = framing.plain_events()
    statements = (_QUERIES, frozenset({c.QUERY}), False)
    registry.set_modes(plain_modes([(_COUNTED, ROW_KINDS, True), statements]))
    if table_body is not None:
        _register_table(registry, table_body, captured)
    return registry


def _register_table(registry, body: bytes, captured: bool = True):
    table_map = parse_table_map(body, 8, False)
    sizes = packed_sizes(value_sizes(table_map)) if captured else b""
    registry.table(table_map.table_id, body, captured, sizes, -1)
    return table_map


def _register_rows(registry, body: bytes, table_map, event_type: int = c.WRITE_ROWS_V2):
    start = _header_length(body)
    registry.rows_header(event_type, body[:start], table_map.table_id, 1, False)
    return start


def _header_length(body: bytes) -> int:
    """Table id (6), flags (2), extra-data length (2, no extra), column count (1), the
    columns-present bitmap (1): where the row data starts in :func:`_rows_body`."""
    return 6 + 2 + 2 + 1 + 1


@needs_native
def test_a_table_map_is_plain_once_its_body_is_registered_for_its_table_id():
    registry = _registry()
    body = _table_map_body()
    assert registry.rows(c.TABLE_MAP, body) is None
    _register_table(registry, body)
    assert registry.rows(c.TABLE_MAP, body) == 0
    assert registry.rows(c.TABLE_MAP, _table_map_body(name="other")) is None  # id reused
    assert registry.rows(c.TABLE_MAP, _table_map_body(TABLE_ID + 1)) is None
    assert registry.rows(c.XID, enc.xid_body(5)) == 0
    assert registry.rows(c.GTID, enc.mysql_gtid_body(UUID, 5)) is None
    registry.clear()
    assert registry.rows(c.TABLE_MAP, body) is None


@needs_native
def test_a_plain_rows_event_counts_what_the_python_count_counts():
    registry = _registry()
    table_map = _register_table(registry, _table_map_body())
    first = _rows_body([1])
    start = _register_rows(registry, first, table_map)
    sizes = value_sizes(table_map)
    for ids in ([1], [2, 3], list(range(10, 60))):
        body = _rows_body(ids)
        fmt = parse_format_description(enc.format_description()[19:-4])
        event = Event(c.WRITE_ROWS_V2, 0, 0, "f", 0, body)
        rows = RowsEventHeaders().parse(event, fmt, len(COLUMNS))
        assert rows.start == start
        assert registry.rows(c.WRITE_ROWS_V2, body) == count_rows(rows, table_map, sizes)
        assert registry.rows(c.WRITE_ROWS_V2, body) == len(ids)


@needs_native
def test_a_rows_header_is_kept_by_type_table_id_and_flags():
    registry = _registry()
    table_map = _register_table(registry, _table_map_body())
    _register_rows(registry, _rows_body([1], flags=0), table_map)
    assert registry.rows(c.WRITE_ROWS_V2, _rows_body([1, 2], flags=0)) == 2
    assert registry.rows(c.WRITE_ROWS_V2, _rows_body([1, 2], flags=1)) is None
    _register_rows(registry, _rows_body([1], flags=1), table_map)
    assert registry.rows(c.WRITE_ROWS_V2, _rows_body([1, 2], flags=1)) == 2
    assert registry.rows(c.WRITE_ROWS_V2, _rows_body([1, 2], flags=0)) == 2  # both kept
    assert registry.rows(c.DELETE_ROWS_V2, _rows_body([1], flags=1)) is None  # another type


@needs_native
def test_a_new_table_map_for_the_table_id_makes_its_rows_headers_stale():
    registry = _registry()
    table_map = _register_table(registry, _table_map_body())
    _register_rows(registry, _rows_body([1]), table_map)
    _register_table(registry, _table_map_body())  # the same map again: still current
    assert registry.rows(c.WRITE_ROWS_V2, _rows_body([4])) == 1
    _register_table(registry, _table_map_body(name="renamed"))
    assert registry.rows(c.WRITE_ROWS_V2, _rows_body([4])) is None


@needs_native
def test_the_rows_of_an_uncaptured_table_are_plain_and_count_nothing():
    registry = _registry()
    table_map = _register_table(registry, _table_map_body(), captured=False)
    _register_rows(registry, _rows_body([1]), table_map)
    assert registry.rows(c.WRITE_ROWS_V2, _rows_body([1, 2, 3])) == 0


@needs_native
def test_malformed_row_data_in_a_plain_rows_event_is_refused_with_its_position():
    registry = _registry()
    table_map = _register_table(registry, _table_map_body())
    _register_rows(registry, _rows_body([1]), table_map)
    body = _rows_body([1, 2])[:-2]
    stream = _stream([(c.WRITE_ROWS_V2, body)])
    with pytest.raises(ValueError, match="rows event type 30 ending at"):
        framing._framing.split_events(stream, 0, True, registry, 0, 0xFFFFFFFF)


# -- split_events folding ------------------------------------------------------------------


def _stream(events: list[tuple[int, bytes]], first: int = 1000, flags: dict | None = None):
    """Events as a dump sends them, each ending where its size puts it from ``first``;
    ``flags``: header flags by index."""
    out, pos = bytearray(), first
    for index, (event_type, body) in enumerate(events):
        pos += 19 + len(body) + 4
        data = enc.event(event_type, body, pos, flags=(flags or {}).get(index, 0))
        out += (len(data) + 1).to_bytes(3, "little") + bytes([index & 0xFF]) + b"\x00" + data
    return bytes(out)


def _transactions(count: int) -> list[tuple[int, bytes]]:
    events = []
    for i in range(count):
        events += [
            (c.GTID, enc.mysql_gtid_body(UUID, i + 1)),
            (c.TABLE_MAP, _table_map_body()),
            (c.WRITE_ROWS_V2, _rows_body([i, i + 100])),
            (c.XID, enc.xid_body(i)),
        ]
    return events


def _split(stream: bytes, registry, after: int = 0, stop: int = 0xFFFFFFFF):
    found, used, status = framing._framing.split_events(stream, 0, True, registry, after, stop)
    return [(e[0], e[3], e[5]) for e in found], used, status


def _ends(events: list[tuple[int, bytes]], first: int = 1000) -> list[int]:
    ends, pos = [], first
    for _, body in events:
        pos += 19 + len(body) + 4
        ends.append(pos)
    return ends


def _registered():
    registry = _registry()
    table_map = _register_table(registry, _table_map_body())
    _register_rows(registry, _rows_body([1, 2]), table_map)
    return registry


@needs_native
def test_each_transactions_plain_events_are_one_run_between_its_gtid_events():
    events = _transactions(3)
    ends = _ends(events)
    found, used, status = _split(_stream(events), _registered())
    assert found == [
        (c.GTID, ends[0], 1),
        (PLAIN_RUN, ends[3], 2),
        (c.GTID, ends[4], 1),
        (PLAIN_RUN, ends[7], 2),
        (c.GTID, ends[8], 1),
        (PLAIN_RUN, ends[11], 2),
    ]
    assert status == 0 and used == len(_stream(events))


@needs_native
def test_without_a_registry_every_event_is_handed_as_before():
    stream = _stream(_transactions(2))
    plain = framing._framing.split_events(stream, 0, True)
    assert [e[0] for e in plain[0]] == [c.GTID, c.TABLE_MAP, c.WRITE_ROWS_V2, c.XID] * 2
    assert framing._framing.split_events(stream, 0, True, None, 0, 0xFFFFFFFF) == plain


@needs_native
def test_an_unregistered_table_map_stops_the_split_after_it():
    events = _transactions(2)
    found, used, status = _split(_stream(events), _registry())
    assert [e[0] for e in found] == [c.GTID, c.TABLE_MAP] and status == 3
    assert used == len(_stream(events[:2]))


@needs_native
def test_nothing_past_stop_nothing_sent_again_and_no_artificial_event_is_folded():
    events = _transactions(2)
    ends = _ends(events)
    found, _, _ = _split(_stream(events), _registered(), stop=ends[5])
    assert [e[0] for e in found] == [c.GTID, PLAIN_RUN, c.GTID, PLAIN_RUN, c.WRITE_ROWS_V2, c.XID]
    assert found[3][1] == ends[5]
    found, _, _ = _split(_stream(events), _registered(), after=ends[2])
    assert [e[0] for e in found][:4] == [c.GTID, c.TABLE_MAP, c.WRITE_ROWS_V2, PLAIN_RUN]
    found, _, _ = _split(_stream(events, flags={1: 0x20}), _registered())
    assert [e[0] for e in found][:3] == [c.GTID, c.TABLE_MAP, PLAIN_RUN]


@needs_native
def test_nothing_is_folded_after_a_rotate():
    events = _transactions(1) + [(c.ROTATE, enc.rotate("binlog.000002")[19:-4])]
    events += _transactions(1)
    found, _, _ = _split(_stream(events), _registered())
    assert [e[0] for e in found] == [
        c.GTID,
        PLAIN_RUN,
        c.ROTATE,
        c.GTID,
        c.TABLE_MAP,
        c.WRITE_ROWS_V2,
        c.XID,
    ]


@needs_native
def test_an_artificial_events_end_does_not_hold_back_the_folding_after_it():
    """The reader drops an artificial event without moving where the next event starts,
    so an end far ahead in one (regressions/plain/artificial-event-ending-far-ahead)
    leaves the events after it foldable."""
    events = _transactions(2)
    ends = _ends(events)
    stream = bytearray(_stream(events, flags={1: 0x20}))
    # the artificial TABLE_MAP (second packet) claims to end far ahead
    second = 4 + 1 + 19 + len(events[0][1]) + 4
    end_field = second + 4 + 1 + 13
    stream[end_field : end_field + 4] = (0xFFFF0000).to_bytes(4, "little")
    tail = second + 4 + 1 + 19 + len(events[1][1])
    stream[tail : tail + 4] = zlib.crc32(bytes(stream[second + 5 : tail])).to_bytes(4, "little")
    found, _, _ = _split(bytes(stream), _registered())
    assert [e[0] for e in found] == [c.GTID, c.TABLE_MAP, PLAIN_RUN, c.GTID, PLAIN_RUN]
    assert found[-1][1] == ends[-1]
