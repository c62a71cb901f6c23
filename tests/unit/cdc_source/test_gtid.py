"""GTID sets and positions as values, their compact offset form, and the driver's GTID
tracker over MySQL binlog bytes built by the independent test encoder."""

from __future__ import annotations

import uuid as uuidlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog import constants as c
from cdc_source.gtid import (
    GtidError,
    GtidSet,
    MariaGtidPos,
    compact,
    expand,
    parse_state,
)
from cdc_source.offsets import BinlogPosition, SnapshotCursor, SourceOffset
from coordinator.gtid_tracker import GtidTracker, GtidTrackingError
from tests.support.binlog_encoder import (
    BinlogFile,
    FakeDumpSource,
    mariadb_gtid_body,
    mariadb_gtid_list_body,
    mysql_gtid_body,
    previous_gtids_body,
    query_body,
    xid_body,
)

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "0a0b0c0d-0000-1111-2222-333344445555"

sources = st.sampled_from([(U1, ""), (U2, ""), (U1, "tag_a"), (U2, "b7")])
members = st.sets(st.tuples(sources, st.integers(1, 60)), max_size=80)


def _build(gtids) -> GtidSet:
    result = GtidSet()
    for (uuid, tag), gno in gtids:
        result.add(uuid, gno, tag)
    return result


def _members(gtid_set: GtidSet) -> set:
    return {
        ((uuid, tag), n)
        for (uuid, tag), intervals in gtid_set.intervals.items()
        for a, b in intervals
        for n in range(a, b + 1)
    }


@settings(deadline=None)
@given(members)
def test_a_gtid_set_holds_exactly_what_was_added_and_its_text_reads_back(gtids):
    built = _build(gtids)
    assert _members(built) == gtids
    assert _members(GtidSet.parse(built.text())) == gtids
    assert GtidSet.parse(built.text()).text() == built.text()


@settings(deadline=None)
@given(members, members)
def test_contains_is_set_inclusion(a, b):
    assert _build(a | b).contains(_build(b))
    assert _build(a).contains(_build(b)) == (b <= a)


@settings(deadline=None)
@given(members)
def test_the_order_gtids_arrive_in_does_not_change_the_text(gtids):
    ordered = sorted(gtids, key=lambda m: m[1])
    assert _build(ordered).text() == _build(reversed(ordered)).text()


def test_mysql_text_with_newlines_upper_case_and_tags_is_read():
    text = f"{U1.upper()}:1-5:7,\n{U2}:1-3:TAG_A:4-9:tag_a:10"
    parsed = GtidSet.parse(text)
    assert parsed.text() == f"{U2}:1-3:tag_a:4-10,{U1}:1-5:7"
    assert GtidSet.parse("").text() == ""


@pytest.mark.parametrize(
    "bad", [f"{U1}", "not-a-uuid:1-3", f"{U1}:0-3", f"{U1}:5-3", f"{U1}:1-x", f"{U1}:9tag:1"]
)
def test_a_malformed_mysql_gtid_set_is_refused(bad):
    with pytest.raises(GtidError):
        GtidSet.parse(bad)


def test_a_mariadb_position_keeps_the_last_gtid_of_each_domain():
    pos = MariaGtidPos.parse("1-2-30, 0-1-100")
    pos.add(0, 3, 101)
    pos.add(5, 1, 1)
    assert pos.text() == "0-3-101,1-2-30,5-1-1"
    assert pos.contains(MariaGtidPos.parse("0-1-100,1-9-30"))
    assert not pos.contains(MariaGtidPos.parse("1-2-31"))
    with pytest.raises(GtidError):
        MariaGtidPos.parse("0-1-1,0-2-2")
    with pytest.raises(GtidError):
        MariaGtidPos.parse("0-1")


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(2, 40), st.integers(0, 70000)), max_size=300))
def test_the_compact_form_gives_the_text_back_exactly(steps):
    gtid_set, n = GtidSet(), 0
    for gap, length in steps:
        gtid_set.add_interval(U1, "", n + gap, n + gap + length)
        n += gap + length
    stored = compact(gtid_set)
    assert expand(stored) == gtid_set.text()
    assert len(stored) <= max(len(gtid_set.text()), 1)
    assert parse_state(stored, "mysql").text() == gtid_set.text()


def _offset_bytes(gtids: str) -> int:
    position = BinlogPosition("binlog.000123", 123_456_789, gtids, 1_790_000_000_000)
    cursor = SnapshotCursor("shop.orders", (123456789,))
    return len(SourceOffset(position, cursor, "0123abcd").to_json())


def test_an_offset_stays_under_one_kib_for_200_gaps_or_25_sources():
    """The bound the module docstring states: realistic gaps (a few numbers) between
    intervals of thousands of transactions, and random server UUIDs."""
    many_gaps, n = GtidSet(), 0
    for i in range(200):
        many_gaps.add_interval(U1, "", n + 2, n + 2 + 4000 + i * 7)
        n += 2 + 4000 + i * 7
    many_sources = GtidSet()
    for i in range(25):
        many_sources.add_interval(
            str(uuidlib.UUID(int=i * 0x1234567_89ABCDEF_1234567)), "", 1, 10**7 + i
        )
    for gtid_set in (many_gaps, many_sources):
        assert len(gtid_set.text()) > 1024
        assert _offset_bytes(compact(gtid_set)) < 1024


def test_a_damaged_compact_form_is_an_error_not_a_guess():
    gtid_set = GtidSet()
    for i in range(40):
        gtid_set.add_interval(U1, "", i * 10 + 1, i * 10 + 5)
    stored = compact(gtid_set)
    assert stored.startswith("b:")
    with pytest.raises(GtidError):
        expand(stored[:-6])


# -- the tracker over MySQL binlog bytes ---------------------------------------------------


def _transaction(binlog: BinlogFile, uuid: str, gno: int) -> int:
    binlog.add(c.GTID, mysql_gtid_body(uuid, gno))
    binlog.add(c.QUERY, query_body("shop", "BEGIN"))
    return binlog.add(c.XID, xid_body(gno))


def _tracker(binlog: BinlogFile, flavor: str = "mysql") -> GtidTracker:
    tracker = GtidTracker(lambda: None, 1, flavor)
    tracker._source = FakeDumpSource(binlog)
    return tracker


def test_the_state_at_a_position_is_the_files_previous_set_plus_its_gtids():
    binlog = BinlogFile()
    binlog.add(c.PREVIOUS_GTIDS, previous_gtids_body({(U1, ""): [(1, 100)], (U2, ""): [(1, 7)]}))
    ends = [_transaction(binlog, U1, 101), _transaction(binlog, U2, 8)]
    ends.append(_transaction(binlog, U1, 102))
    tracker = _tracker(binlog)
    first = BinlogPosition(binlog.name, ends[0])
    first = BinlogPosition(binlog.name, ends[0], tracker.at(None, first))
    assert first.gtids == f"{U2}:1-7,{U1}:1-101"
    last = BinlogPosition(binlog.name, ends[-1])
    assert tracker.at(first, last) == f"{U2}:1-8,{U1}:1-102"
    assert tracker.at(None, last) == f"{U2}:1-8,{U1}:1-102"
    assert tracker._source.opened == [(binlog.name, 4), (binlog.name, ends[0]), (binlog.name, 4)]


def test_a_position_inside_an_event_or_past_the_binlog_is_an_error():
    binlog = BinlogFile()
    binlog.add(c.PREVIOUS_GTIDS, previous_gtids_body({}))
    end = _transaction(binlog, U1, 1)
    tracker = _tracker(binlog)
    with pytest.raises(GtidTrackingError, match="not where an event ends"):
        tracker.at(None, BinlogPosition(binlog.name, end - 3))
    with pytest.raises(GtidTrackingError, match="lost binlog events"):
        tracker.at(None, BinlogPosition(binlog.name, end + 100))


def test_mariadb_state_comes_from_gtid_list_and_gtid_events_with_their_server_id():
    binlog = BinlogFile()
    binlog.add(c.MARIADB_GTID_LIST, mariadb_gtid_list_body([(0, 1, 10), (0, 2, 12), (3, 1, 4)]))
    binlog.add(c.MARIADB_GTID, mariadb_gtid_body(13, 0), server_id=2)
    end = binlog.add(c.XID, xid_body(1))
    binlog.add(c.MARIADB_GTID, mariadb_gtid_body(5, 3), server_id=9)
    last = binlog.add(c.XID, xid_body(2))
    tracker = _tracker(binlog, "mariadb")  # read from the file (a server is asked first)
    assert tracker.state_from_file(BinlogPosition(binlog.name, end)) == "0-2-13,3-1-4"
    assert tracker.state_from_file(BinlogPosition(binlog.name, last)) == "0-2-13,3-9-5"


# -- a dump that ends before the planned position (MySQL: the synced end) -------------------


def _dumps(batches: list[list[int]]):
    """A dump source whose n-th dump yields the event ends in ``batches[n]``."""
    state = {"dumps": 0, "at": 0}

    def one_dump():
        events = batches[state["dumps"]] if state["dumps"] < len(batches) else []
        state["dumps"] += 1
        for end in events:
            state["at"] = end
            yield end

    return one_dump, lambda: (1, state["at"]), state


def test_a_dump_that_ends_early_is_read_on_while_the_server_has_the_range():
    from cdc_source.binlog.transport import dump_until

    one_dump, reached, state = _dumps([[100, 200], [], [300, 400]])
    pauses: list[float] = []
    events = list(dump_until(one_dump, reached, lambda _: True, (1, 400), sleep=pauses.append))
    assert events == [100, 200, 300, 400]
    assert state["dumps"] == 3 and pauses == [0.01, 0.02]


def test_a_dump_that_ends_before_a_position_the_server_lacks_is_a_gap_at_once():
    from cdc_source.binlog.transport import dump_until

    one_dump, reached, state = _dumps([[100, 200]])
    events = list(dump_until(one_dump, reached, lambda _: False, (1, 400), sleep=lambda _: None))
    assert events == [100, 200] and state["dumps"] == 1  # the caller reports the gap


def test_waiting_for_an_early_end_is_bounded():
    from cdc_source.binlog.transport import dump_until

    one_dump, reached, state = _dumps([[100]])
    pauses: list[float] = []
    events = list(
        dump_until(one_dump, reached, lambda _: True, (1, 400), budget_s=2, sleep=pauses.append)
    )
    assert events == [100]
    assert sum(pauses) >= 2 and sum(pauses) < 2.6


# -- MySQL 8.3+ tagged GTIDs ------------------------------------------------------------------

# Recorded from a MySQL 9.6.0 binlog (rust_mysql_common test-data
# binlogs/binlog_transaction_with_GTID_TAG.000001): a GTID_TAGGED body without its CRC,
# and the file's PREVIOUS_GTIDS (tagged format) and an 8.0.40 one (untagged format).
TAGGED_9_6 = bytes.fromhex(
    "027800000002aaee25020804650222c503c502e1029cc10311035502dead03040c060a6d7974616708000a"
    "040c7f1cf3b814244a0610a10412430f0b"
)
PREVIOUS_TAGGED_9_6 = bytes.fromhex(
    "0102000000000001" + "55778904029911f1b1b84ef0c4956feb" + "00" + "0100000000000000"
    "0100000000000000" + "0e00000000000000" + "55778904029911f1b1b84ef0c4956feb" + "0a6d79746167"
    "0100000000000000" + "0100000000000000" + "0300000000000000"
)
PREVIOUS_8_0_40 = bytes.fromhex(
    "0100000000000000b9b88c66075511f198994a9da94c4d71010000000000000001000000000000000300000000000000"
)


def test_recorded_mysql_gtid_events_decode_as_the_server_printed_them():
    from cdc_source.binlog.gtid_events import parse_previous_gtids, parse_tagged_gtid

    assert parse_tagged_gtid(TAGGED_9_6, "here") == (
        "55778904-0299-11f1-b1b8-4ef0c4956feb",
        "mytag",
        3,
    )
    assert parse_previous_gtids(PREVIOUS_TAGGED_9_6).text() == (
        "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
    )
    assert (
        parse_previous_gtids(PREVIOUS_8_0_40).text() == "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"
    )


@settings(deadline=None)
@given(
    st.uuids().map(str),
    st.integers(1, (1 << 63) - 1),
    st.from_regex(r"[a-z_][a-z0-9_]{0,31}", fullmatch=True),
    st.integers(0, (1 << 64) - 1),
)
def test_tagged_gtids_built_by_the_encoder_decode_exactly(uuid, gno, tag, commit_ts):
    from cdc_source.binlog.gtid_events import parse_tagged_gtid
    from tests.support.binlog_encoder import mysql_tagged_gtid_body

    body = mysql_tagged_gtid_body(uuid, gno, tag, commit_ts)
    assert parse_tagged_gtid(body, "here") == (uuid, tag, gno)


def test_a_cut_or_foreign_tagged_gtid_is_refused():
    from cdc_source.binlog.gtid_events import parse_previous_gtids, parse_tagged_gtid
    from cdc_source.binlog.wire import MalformedEventError

    for bad in (TAGGED_9_6[:20], b"\x04" + TAGGED_9_6[1:]):
        with pytest.raises(MalformedEventError):
            parse_tagged_gtid(bad, "here")
    with pytest.raises(MalformedEventError):
        parse_previous_gtids(b"\x00" * 7 + b"\x02")


def test_the_tracker_follows_tagged_gtids():
    from tests.support.binlog_encoder import mysql_tagged_gtid_body

    binlog = BinlogFile()
    binlog.add(c.PREVIOUS_GTIDS, PREVIOUS_TAGGED_9_6)
    binlog.add(
        c.GTID_TAGGED, mysql_tagged_gtid_body("55778904-0299-11f1-b1b8-4ef0c4956feb", 3, "mytag")
    )
    end = binlog.add(c.XID, xid_body(1))
    _transaction(binlog, "55778904-0299-11f1-b1b8-4ef0c4956feb", 14)
    tracker = _tracker(binlog)
    assert tracker.at(None, BinlogPosition(binlog.name, end)) == (
        "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-3"
    )


def test_missing_is_what_one_state_lacks_of_another_in_the_same_syntax():
    from cdc_source.gtid import GtidSet, MariaGtidPos, missing

    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    have = GtidSet.parse(f"{u}:5-10:20,{u}:tag:1")
    want = GtidSet.parse(f"{u}:1-30,{u}:tag:1-2")
    assert missing(have, want).text() == f"{u}:1-4:11-19:21-30:tag:2"
    assert missing(want, have).text() == ""
    assert missing(GtidSet(), want).text() == want.text()
    lacking = missing(MariaGtidPos.parse("0-1-5,1-2-3"), MariaGtidPos.parse("0-1-9,1-2-3,2-1-1"))
    assert lacking.text() == "0-1-9,2-1-1"


def _mariadb_gtid_reading(body: bytes, server_id: int):
    """What the full parse reads of a MariaDB GTID body: its key, or its refusal."""
    from cdc_source.binlog.gtid_events import parse_mariadb_gtid
    from cdc_source.binlog.wire import MalformedEventError

    try:
        parsed = parse_mariadb_gtid(body)
    except MalformedEventError:
        return "refused"
    return (parsed.domain_id, server_id, parsed.seq_no)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 255),
    st.binary(max_size=40),
    st.integers(0, 2**32 - 1),
    st.integers(0, 60),
)
def test_a_mariadb_gtid_key_is_what_the_full_parse_reads(seq, domain, flags, tail, server, cut):
    """The key read without the parse's record (every flag, with or without the optional
    fields they announce, whole or cut short) names the same GTID, or is refused alike."""
    from cdc_source.binlog.gtid_events import mariadb_gtid_key
    from cdc_source.binlog.wire import MalformedEventError

    whole = seq.to_bytes(8, "little") + domain.to_bytes(4, "little") + bytes([flags]) + tail
    body = whole[: cut if cut % 3 == 0 else max(cut, 13)]  # a third may lose the fixed part
    expected = _mariadb_gtid_reading(body, server)
    try:
        assert mariadb_gtid_key(body, server) == expected
    except MalformedEventError:
        assert expected == "refused"
