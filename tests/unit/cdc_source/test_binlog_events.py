"""The binlog reader over hand-built MySQL events (what a MariaDB test server cannot
write): v2 rows events, TRANSACTION_PAYLOAD, PARTIAL_UPDATE_ROWS, XA, unknown events,
damaged bytes. Bytes come from tests/support/binlog_encoder.py, written apart from the
decoder. Every test runs with both row decoders."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog import framing
from cdc_source.binlog.wire import MalformedEventError
from cdc_source.offsets import BinlogPosition
from reader.binlog_range import (
    PartialRowImageError,
    RangeReader,
    UndecodableEventError,
    XaTransactionError,
)
from reader.row_decoding import native_available
from tests.support import binlog_encoder as enc
from tests.support.orders_events import COLUMNS, TABLE_ID
from tests.support.orders_events import image as _image
from tests.support.orders_events import rows as _rows
from tests.support.orders_events import table_map as _table_map

DECODERS = ["python"] + (["native"] if native_available() else [])


def _read(binlog, start=None, end=None, decoder="python", tables=("shop.orders",), chunk=97):
    source = enc.FakeDumpSource(binlog, framing.splitter(decoder), chunk)
    start = start or BinlogPosition(binlog.name, 4)
    end = end or BinlogPosition(binlog.name, binlog.pos)
    reader = RangeReader(source, start, end, set(tables), decoder=decoder)
    return list(reader.blocks()), source


def _after(block, column):
    return block.rows.after[column].to_pylist()


@pytest.mark.parametrize("decoder", DECODERS)
def test_v2_rows_events_decode_inserts_updates_and_deletes(decoder):
    binlog = enc.BinlogFile()
    _table_map(binlog)
    when = dt.datetime(2024, 2, 29, 23, 59, 58, 125000)
    insert_end = _rows(binlog, 30, _image(1, "a", "12.50", when) + _image(2, None, "-0.01", None))
    _table_map(binlog)
    _rows(binlog, 31, _image(1, "a", "12.50", when) + _image(1, "b", "13.00", when), update=True)
    _table_map(binlog)
    _rows(binlog, 32, _image(2, None, "-0.01", None))
    (block,), _ = _read(binlog, decoder=decoder)
    assert block.num_rows == 4
    assert block.rows.has_before.to_pylist() == [False, False, True, True]
    assert block.rows.has_after.to_pylist() == [True, True, True, False]
    assert _after(block, 0) == [1, 2, 1, None]
    assert _after(block, 1) == [b"a", None, b"b", None]
    assert _after(block, 2) == [Decimal("12.50"), Decimal("-0.01"), Decimal("13.00"), None]
    assert _after(block, 3)[0] == when
    assert block.rows.before[1].to_pylist() == [None, None, b"a", None]
    assert block.end_pos.tolist()[:2] == [insert_end, insert_end]
    assert block.row_index.tolist() == [0, 1, 0, 0]


@pytest.mark.parametrize("decoder", DECODERS)
def test_transaction_payload_rows_take_the_payload_position_in_order(decoder):
    binlog = enc.BinlogFile()
    inner = [
        enc.event(2, enc.query_body("shop", "BEGIN"), 0, checksum=False),
        enc.event(19, enc.table_map_body(TABLE_ID, "shop", "orders", COLUMNS), 0, checksum=False),
        enc.event(
            30,
            enc.rows_body(TABLE_ID, 5, _image(1, "x", "1.00", None), False, True),
            0,
            checksum=False,
        ),
        enc.event(
            30,
            enc.rows_body(TABLE_ID, 5, _image(2, "y", "2.00", None), False, True),
            0,
            checksum=False,
        ),
        enc.event(16, enc.xid_body(9), 0, checksum=False),
    ]
    end = binlog.add_raw(lambda end: enc.transaction_payload(inner, end))
    (block,), _ = _read(binlog, decoder=decoder)
    assert _after(block, 0) == [1, 2]
    assert block.end_pos.tolist() == [end, end]
    subs = block.sub.tolist()
    assert subs[0] < subs[1]  # two events at one position keep their order


@pytest.mark.parametrize("decoder", DECODERS)
def test_uncompressed_transaction_payload_is_read_too(decoder):
    binlog = enc.BinlogFile()
    inner = [
        enc.event(19, enc.table_map_body(TABLE_ID, "shop", "orders", COLUMNS), 0, checksum=False),
        enc.event(
            30,
            enc.rows_body(TABLE_ID, 5, _image(3, "z", None, None), False, True),
            0,
            checksum=False,
        ),
    ]
    binlog.add_raw(lambda end: enc.transaction_payload(inner, end, compress=False))
    (block,), _ = _read(binlog, decoder=decoder)
    assert _after(block, 0) == [3]


@pytest.mark.parametrize("decoder", DECODERS)
def test_partial_update_rows_without_json_diffs_decode(decoder):
    binlog = enc.BinlogFile()
    _table_map(binlog)
    doc = enc.json_binary({"a": 1})
    row = _image(1, "a", None, None, doc) + enc.lenenc(0) + _image(1, "b", None, None, doc)
    _rows(binlog, 39, row, update=True)
    (block,), _ = _read(binlog, decoder=decoder)
    assert _after(block, 1) == [b"b"]


@pytest.mark.parametrize("decoder", DECODERS)
def test_partial_json_after_image_is_refused_with_the_setting_named(decoder):
    binlog = enc.BinlogFile()
    _table_map(binlog)
    doc = enc.json_binary({"a": 1})
    row = (
        _image(1, "a", None, None, doc)
        + enc.lenenc(1)
        + b"\x01"
        + _image(1, "b", None, None, b"diff")
    )
    end = _rows(binlog, 39, row, update=True)
    with pytest.raises(PartialRowImageError, match="binlog_row_value_options") as info:
        _read(binlog, decoder=decoder)
    assert f"binlog.000001:{end}" in str(info.value)


@pytest.mark.parametrize("decoder", DECODERS)
def test_minimal_row_image_is_refused_naming_binlog_row_image_and_position(decoder):
    binlog = enc.BinlogFile()
    _table_map(binlog)
    row = enc.row_image([struct.pack("<i", 1)])
    end = _rows(binlog, 32, row, present=b"\x01")
    with pytest.raises(PartialRowImageError, match="binlog_row_image") as info:
        _read(binlog, decoder=decoder)
    assert f"binlog.000001:{end}" in str(info.value)


def test_unknown_event_is_refused_with_type_and_position():
    binlog = enc.BinlogFile()
    end = binlog.add(99, b"\x00" * 8)
    with pytest.raises(UndecodableEventError) as info:
        _read(binlog)
    assert "unknown type 99" in str(info.value) and f":{end}" in str(info.value)


def test_unknown_event_marked_ignorable_by_the_server_is_skipped():
    binlog = enc.BinlogFile()
    binlog.add(99, b"\x00" * 8, flags=0x80)
    _table_map(binlog)
    _rows(binlog, 30, _image(5, "k", None, None))
    (block,), _ = _read(binlog)
    assert _after(block, 0) == [5]


def test_incident_event_stops_the_read():
    binlog = enc.BinlogFile()
    binlog.add(26, b"\x01\x00\x00")
    with pytest.raises(UndecodableEventError, match="INCIDENT"):
        _read(binlog)


def test_a_damaged_event_fails_its_checksum():
    binlog = enc.BinlogFile()
    _table_map(binlog)
    _rows(binlog, 30, _image(1, "a", None, None))
    start, data = binlog.events[-1]
    damaged = bytearray(data)
    damaged[30] ^= 0x01
    binlog.events[-1] = (start, bytes(damaged))
    with pytest.raises(MalformedEventError, match="CRC32"):
        _read(binlog)


def _xa(binlog, gtrid: bytes, rows: bytes, one_phase=False) -> int:
    xid = f"X'{gtrid.hex()}',X'',1"
    binlog.add(33, b"\x00" * 25)  # GTID
    binlog.add(2, enc.query_body("shop", f"XA START {xid}"))
    _table_map(binlog)
    _rows(binlog, 30, rows)
    binlog.add(2, enc.query_body("shop", f"XA END {xid}"))
    return binlog.add(38, enc.xa_prepare_body(gtrid, one_phase=one_phase))


def _xa_end(binlog, gtrid: bytes, verb: str) -> int:
    binlog.add(33, b"\x00" * 25)
    return binlog.add(2, enc.query_body("shop", f"XA {verb} X'{gtrid.hex()}',X'',1"))


@pytest.mark.parametrize("decoder", DECODERS)
def test_xa_rows_are_emitted_at_the_commit_and_never_for_a_rollback(decoder):
    binlog = enc.BinlogFile()
    _xa(binlog, b"t1", _image(10, "rolled", None, None))
    _xa(binlog, b"t2", _image(11, "kept", None, None))
    _table_map(binlog)
    plain = _rows(binlog, 30, _image(12, "plain", None, None))
    _xa_end(binlog, b"t1", "ROLLBACK")
    commit = _xa_end(binlog, b"t2", "COMMIT")
    blocks, source = _read(binlog, decoder=decoder)
    rows = [(i, p) for b in blocks for i, p in zip(_after(b, 0), b.end_pos.tolist())]
    assert rows == [(12, plain), (11, commit)]
    assert len(source.opened) == 2  # the range, then the XA transaction re-read


@pytest.mark.parametrize("decoder", DECODERS)
def test_one_phase_xa_commit_is_emitted_at_its_prepare_event(decoder):
    binlog = enc.BinlogFile()
    end = _xa(binlog, b"t3", _image(13, "one", None, None), one_phase=True)
    (block,), _ = _read(binlog, decoder=decoder)
    assert _after(block, 0) == [13] and block.end_pos.tolist() == [end]


def test_xa_commit_of_a_prepare_before_the_range_is_a_clear_error():
    binlog = enc.BinlogFile()
    prepared = _xa(binlog, b"t4", _image(14, "early", None, None))
    _xa_end(binlog, b"t4", "COMMIT")
    with pytest.raises(XaTransactionError, match="prepared before"):
        _read(binlog, start=BinlogPosition(binlog.name, prepared))


def test_rows_of_other_tables_are_not_decoded():
    binlog = enc.BinlogFile()
    _table_map(binlog)
    _rows(binlog, 30, b"\xff\xff garbage that would not decode")
    blocks, _ = _read(binlog, tables=("shop.other",))
    assert blocks == []


def test_a_payload_that_ends_inside_an_inner_event_is_refused():
    binlog = enc.BinlogFile()
    table_map = enc.event(
        19, enc.table_map_body(TABLE_ID, "shop", "orders", COLUMNS), 0, checksum=False
    )
    binlog.add_raw(lambda end: enc.transaction_payload([table_map, table_map[:-7]], end))
    with pytest.raises(MalformedEventError, match="payload ends inside an inner event"):
        _read(binlog)


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_year_column_keeps_the_signedness_of_the_columns_after_it(decoder):
    """SIGNEDNESS has a bit for YEAR (MySQL has_signedess_information_type; MariaDB too):
    an INT UNSIGNED after a YEAR must not take the YEAR's bit."""
    binlog = enc.BinlogFile()
    columns = [
        ("id", enc.LONG, b"", False, False),
        ("y", enc.YEAR, b"", True, False),
        ("n", enc.LONG, b"", True, True),
    ]
    binlog.add(19, enc.table_map_body(TABLE_ID, "shop", "orders", columns))
    row = enc.row_image([struct.pack("<i", 1), bytes([124]), struct.pack("<I", 3_000_000_000)])
    binlog.add(30, enc.rows_body(TABLE_ID, 3, row, False, True))
    (block,), _ = _read(binlog, decoder=decoder)
    assert _after(block, 1) == [2024] and _after(block, 2) == [3_000_000_000]


def test_mariadb_counts_geometry_among_character_columns_for_collations():
    """Seen on MariaDB 10.11: (g GEOMETRY, b BINARY(4), c CHAR(4) latin1) writes
    DEFAULT_CHARSET binary with (2 -> latin1): index 2 counts g. MySQL does not count it."""
    from cdc_source.binlog.table_map import parse_table_map

    body = bytes.fromhex(
        "16000000000001000174000279720006030d03fffefe0504fe04fe043e01016002033f0208070100"
        "040d0269640179016e016701620163080100"
    )
    columns = {c.name: c for c in parse_table_map(body, 8, mariadb=True).columns}
    assert columns["b"].collation == 63 and columns["c"].collation == 8
    assert columns["n"].unsigned and not columns["id"].unsigned


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("entry", [(5, 5, 10), (7, 7, 0), (9, 9, 0), (8, 12, 0), (12, 9, 0)])
def test_metadata_no_server_writes_is_refused_by_both_decoders(decoder, entry):
    from reader.row_decoding import RowSink

    with pytest.raises(ValueError):
        RowSink((entry,), decoder=decoder)


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_dump_that_arrives_in_one_read_ends_at_its_eof(decoder):
    """The whole dump, EOF packet included, is already buffered when the splitter stops
    after the FORMAT_DESCRIPTION: the reader must not wait for more bytes."""
    binlog = enc.BinlogFile()
    _table_map(binlog)
    _rows(binlog, 30, _image(1, "a", None, None))
    (block,), _ = _read(binlog, decoder=decoder, chunk=1 << 20)
    assert _after(block, 0) == [1]


@pytest.mark.parametrize("decoder", DECODERS)
def test_an_event_of_several_16_mib_packets_is_joined_and_decoded(decoder):
    """A row of a 40 MB LONGBLOB: its event spans three protocol packets and many reads."""
    binlog = enc.BinlogFile()
    columns = [("id", enc.LONG, b"", False, False), ("b", enc.BLOB, bytes([4]), True, False)]
    blob = bytes(range(256)) * (40_000_000 // 256)
    binlog.add(19, enc.table_map_body(TABLE_ID, "shop", "files", columns))
    image = enc.row_image([struct.pack("<i", 7), struct.pack("<I", len(blob)) + blob])
    binlog.add(30, enc.rows_body(TABLE_ID, 2, image, False, True, None))
    (block,), _ = _read(binlog, decoder=decoder, tables=("shop.files",), chunk=1 << 20)
    assert block.rows.after[0].to_pylist() == [7]
    assert block.rows.after[1][0].as_py() == blob


@pytest.mark.skipif(not native_available(), reason="the C splitter is not built")
@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=80), flip=st.integers(0, 10_000))
def test_the_c_splitter_checks_every_events_crc32_as_zlib_computes_it(body, flip):
    """Every body length (whole eight-byte steps and each remainder): an event whose
    CRC32 is zlib's passes, and a bit flipped anywhere in it fails."""
    event = enc.event(30, body, 1_000)
    passed = framing.splitter("native")(_packet(event), 0, True)[0]
    assert [found[4] for found in passed] == [body]
    damaged = bytearray(event)
    damaged[flip % len(event)] ^= 1 << flip % 8
    with pytest.raises(ValueError):
        framing.splitter("native")(_packet(bytes(damaged)), 0, True)


def _packet(event: bytes) -> bytes:
    return (len(event) + 1).to_bytes(3, "little") + b"\x00\x00" + event
