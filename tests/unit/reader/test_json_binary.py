"""MySQL binary JSON (reader/json_binary.py) against documents built by
tests/support/binlog_encoder.py from the format in json_binary.h: every value type, small
and large containers, opaque DECIMAL/DATE/TIME/DATETIME values printed as the server
prints them, and damaged documents refused."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reader.json_binary import LARGE_ARRAY, SMALL_ARRAY, STRING, JsonBinaryError, decode
from tests.support import binlog_encoder as enc
from tests.support.json_documents import (
    CANONICAL_DOCUMENT,
    LARGE_OBJECT,
    OPAQUE_CASES,
    SCALARS_AND_CONTAINERS,
)


def test_scalars_and_containers_decode_to_the_values_encoded():
    document = SCALARS_AND_CONTAINERS
    assert decode(enc.json_binary(document)) == document


def test_large_containers_with_inlined_32_bit_integers():
    big = LARGE_OBJECT
    kind, body = enc._json_value(big, large=True)
    assert kind == 0x01
    assert decode(bytes([kind]) + body) == big


def test_a_document_over_64_kib_takes_the_large_form_and_its_small_children_stay_small():
    kind, body = enc._json_value(LARGE_OBJECT)
    assert kind == 0x01  # too big for 2-byte offsets
    first_value_entry = 8 + 800 * 6
    assert body[first_value_entry] == 0x02  # a small array inside the large object
    assert decode(bytes([kind]) + body) == LARGE_OBJECT


def test_negative_16_bit_integers_inlined_in_the_large_form_fill_the_entry():
    kind, body = enc._json_value([-5, True, 40000, "s"], large=True)
    assert kind == 0x03
    entries = body[8 : 8 + 4 * 5]
    assert entries[:5] == b"\x05\xfb\xff\xff\xff"  # int16 -5, sign-extended to 4 bytes
    assert entries[5:10] == b"\x04\x01\x00\x00\x00"  # true
    assert entries[10:15] == b"\x07\x40\x9c\x00\x00"  # int32 40000, inlined
    assert decode(bytes([kind]) + body) == [-5, True, 40000, "s"]


def test_integers_are_typed_as_the_servers_json_parser_types_them():
    document = [-5, 65535, 4294967295, 4294967296, -2147483649]
    data = enc.json_binary(document)
    kinds = [data[1 + 4 + 3 * i] for i in range(len(document))]
    assert kinds == [0x05, 0x07, 0x09, 0x0A, 0x09]  # over 2^32 - 1: UINT64, as rapidjson
    assert decode(data) == document


@pytest.mark.parametrize("opaque, printed", OPAQUE_CASES)
def test_opaque_values_read_as_the_server_prints_them(opaque, printed):
    assert decode(enc.json_binary({"v": opaque})) == {"v": printed}


def test_the_canonical_text_matches_the_snapshot_form():
    from cdc_source.binlog.table_map import Column
    from cdc_source.catalog import ColumnSpec
    from reader.binlog_columns import canonical_column

    document = CANONICAL_DOCUMENT
    column = Column("doc", 245, 4, False, True, None)
    spec = ColumnSpec("doc", "json", "json", True)
    out = canonical_column(spec, column, pa.array([enc.json_binary(document), None]), pa.string())
    snapshot_text = '{"b": [1, 2.5, "x"], "a": null}'  # as the server's SELECT prints it
    expected = json.dumps(json.loads(snapshot_text), separators=(",", ":"), sort_keys=True)
    assert out.to_pylist() == [expected, None]


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**63 - 1)
        | st.text(max_size=20)
        | st.floats(allow_nan=False, allow_infinity=False),
        lambda children: (
            st.lists(children, max_size=5)
            | st.dictionaries(st.text(max_size=8), children, max_size=5)
        ),
        max_leaves=20,
    )
)
def test_any_document_round_trips(document):
    assert decode(enc.json_binary(document)) == document


@pytest.mark.parametrize(
    "data",
    [b"\x00\x05\x00", b"\x0c\x85", b"\x04\x07", b"\x0f\xf6\x01\x00", b"\x02\x01\x00\xff\x00"],
)
def test_damaged_documents_are_refused(data):
    with pytest.raises((JsonBinaryError, ValueError)):
        decode(data)


def _arrays_sharing_their_elements(levels: int) -> bytes:
    """``levels`` small arrays, each of two elements that are both the next array (the
    last is empty): offsets a server never writes, whose naive decoding visits
    2**levels arrays."""
    inner = (0).to_bytes(2, "little") + (4).to_bytes(2, "little")
    for _ in range(levels):
        entry = bytes([SMALL_ARRAY]) + (10).to_bytes(2, "little")
        header = (2).to_bytes(2, "little") + (10 + len(inner)).to_bytes(2, "little")
        inner = header + entry * 2 + inner
    return bytes([SMALL_ARRAY]) + inner


def test_containers_that_share_elements_are_refused_before_the_work_doubles():
    """Finding (the json fuzz target, 'slow unit'): containers pointing into each other
    made one element be decoded again and again. 40 levels (404 bytes) would be 2**40
    arrays; the decoder stops once it has met more elements than the document has
    bytes."""
    data = _arrays_sharing_their_elements(40)
    assert len(data) < 500
    with pytest.raises(JsonBinaryError, match="more than its bytes hold"):
        decode(data)
    assert decode(_arrays_sharing_their_elements(1)) == [[], []]  # shared, but small


def test_entries_sharing_one_string_are_refused_before_it_is_copied_for_each():
    """Many entries of a large array pointing at one long string would decode a copy of
    it each (a 200 KB document took 1.9 GB): the bytes decoded are charged against the
    document's size too."""
    entries, text = 1000, b"x" * 1000
    head = 1 + 4 + 4 + entries * 5  # type, count, size, value entries
    string = bytes([0x80 | (len(text) & 0x7F), len(text) >> 7]) + text
    body = entries.to_bytes(4, "little") + (head - 1 + len(string)).to_bytes(4, "little")
    body += (bytes([STRING]) + (head - 1).to_bytes(4, "little")) * entries
    data = bytes([LARGE_ARRAY]) + body + string
    assert len(data) < 10 * len(text)
    with pytest.raises(JsonBinaryError, match="more than its bytes hold"):
        decode(data)
    one = (
        bytes([LARGE_ARRAY]) + (1).to_bytes(4, "little") + (13 + len(string)).to_bytes(4, "little")
    )
    one += bytes([STRING]) + (13).to_bytes(4, "little") + string
    assert decode(one) == [text.decode()]
