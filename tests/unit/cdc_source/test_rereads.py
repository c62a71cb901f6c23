"""Requests for snapshots on demand (cdc_source.rereads, cdc-mysql signal): Debezium's
signal data, the request files, and the re-reads' progress in the offset."""

from __future__ import annotations

import json

import pytest

from cdc_source.cli import main as cli_main
from cdc_source.offsets import (
    REREAD_OFFSET_VERSION,
    BinlogPosition,
    SourceOffset,
    same_progress,
)
from cdc_source.rereads import (
    MAX_CONDITION,
    MAX_REREADS,
    SNAPSHOT,
    STOP,
    Request,
    RequestError,
    Reread,
    Rereads,
    check_condition,
    delete_request_files,
    parse_signal,
    read_between,
    read_request_file,
    request_files,
    write_request_file,
)

POSITION = BinlogPosition("binlog.000007", 4242, "0-1-99", 1_700_000_000_000)


def test_debezium_signal_data_is_read_with_its_conditions():
    data = {
        "data-collections": ["shop.orders", "shop.items"],
        "type": "INCREMENTAL",
        "additional-conditions": [{"data-collection": "shop.orders", "filter": "id > 10"}],
    }
    request = parse_signal("execute-snapshot", json.dumps(data))
    assert request == Request(
        SNAPSHOT, ("shop.orders", "shop.items"), (("shop.orders", "id > 10"),)
    )
    assert request.condition("shop.orders") == "id > 10"
    assert request.condition("shop.items") is None
    assert parse_signal("stop-snapshot", None) == Request(STOP, ())
    assert parse_signal("stop-snapshot", '{"data-collections": ["a.b"]}').tables == ("a.b",)


@pytest.mark.parametrize(
    "kind, data, says",
    [
        ("log", "{}", "is not execute-snapshot"),
        ("execute-snapshot", "{}", "names no table"),
        ("execute-snapshot", "not json", "not JSON"),
        ("execute-snapshot", '["shop.orders"]', "not a JSON object"),
        ("execute-snapshot", '{"data-collections": ["orders"]}', "db.table"),
        ("execute-snapshot", '{"data-collections": ["a.b"], "type": "blocking"}', "incremental"),
        (
            "execute-snapshot",
            '{"data-collections": ["a.b"], "additional-conditions": '
            '[{"data-collection": "a.c", "filter": "id > 1"}]}',
            "not requested",
        ),
        (
            "execute-snapshot",
            '{"data-collections": ["a.b"], "additional-conditions": '
            '[{"data-collection": "a.b", "filter": "id > 1; DROP TABLE a.b"}]}',
            "';'",
        ),
    ],
)
def test_malformed_signals_are_refused_with_their_reason(kind, data, says):
    with pytest.raises(RequestError, match=says):
        parse_signal(kind, data)


@pytest.mark.parametrize(
    "condition, says",
    [
        ("id > 1 -- and the rest", "'--'"),
        ("id > 1 # and the rest", "'#'"),
        ("id > 1 /* x */", "'/\\*'"),
        ("(id > 1", "balance"),
        ("x" * (MAX_CONDITION + 1), "at most"),
    ],
)
def test_conditions_are_one_bounded_expression(condition, says):
    with pytest.raises(RequestError, match=says):
        check_condition(condition)
    assert check_condition("  ") is None
    assert check_condition(" name LIKE 'a%' ") == "name LIKE 'a%'"


def test_request_files_are_taken_in_order_once_and_deleted_up_to_the_last_taken(tmp_path):
    first = write_request_file(str(tmp_path), Request(SNAPSHOT, ("shop.orders",)))
    second = write_request_file(
        str(tmp_path), Request(SNAPSHOT, ("shop.items",), (("shop.items", "id < 5"),))
    )
    third = write_request_file(str(tmp_path), Request(STOP, ()))
    assert request_files(str(tmp_path)) == [first, second, third]
    assert request_files(str(tmp_path), after=first) == [second, third]
    assert read_request_file(str(tmp_path), second).condition("shop.items") == "id < 5"
    # A name after the last one taken, even if the clock is behind it.
    ahead = f"{int(third[:20]) + 10**15:020d}-1.json"
    later = write_request_file(str(tmp_path), Request(STOP, ()), after=ahead)
    assert later > ahead
    delete_request_files(str(tmp_path), second)
    delete_request_files(str(tmp_path), second)  # idempotent
    assert request_files(str(tmp_path)) == [third, later]
    assert not list((tmp_path / "signals").glob(".*"))  # nothing half-written left


def test_the_command_line_writes_a_request_or_refuses_it(tmp_path, capsys):
    assert cli_main(["signal", str(tmp_path), "snapshot", "shop.orders", "--where", "id > 3"]) == 0
    (name,) = request_files(str(tmp_path))
    assert read_request_file(str(tmp_path), name) == Request(
        SNAPSHOT, ("shop.orders",), (("shop.orders", "id > 3"),)
    )
    assert cli_main(["signal", str(tmp_path), "snapshot", "shop.orders", "--where", "1; x"]) == 2
    assert cli_main(["signal", str(tmp_path), "snapshot"]) == 2
    assert cli_main(["signal", str(tmp_path), "stop-snapshot", "--where", "id > 1"]) == 2
    assert "';'" in capsys.readouterr().err
    assert cli_main(["signal", str(tmp_path), "stop-snapshot"]) == 0
    assert len(request_files(str(tmp_path))) == 2
    assert cli_main(["signal", str(tmp_path), "list"]) == 0
    assert "stop-snapshot" in capsys.readouterr().out


def _in_flight() -> Rereads:
    rereads = Rereads(file="00000000000000000042-7.json", signal_id=12, count=3)
    rereads = rereads.taking(
        Request(SNAPSHOT, ("shop.orders", "shop.items"), (("shop.items", "v > 2"),))
    )
    return rereads.advanced(("k\u00e9y", 17))


def test_an_offset_with_a_reread_in_flight_round_trips():
    offset = SourceOffset(POSITION, None, "00000000000000ff", "server_id=1", None, _in_flight())
    text = offset.to_json()
    back = SourceOffset.from_json_obj(text)
    assert back == offset and back.to_json() == text
    obj = json.loads(text)
    assert obj["v"] == REREAD_OFFSET_VERSION
    assert obj["rereads"]["queue"][0] == {"n": 4, "table": "shop.orders", "after": ["k\u00e9y", 17]}
    assert obj["rereads"]["queue"][1]["where"] == "v > 2"
    assert "re-read #4 of shop.orders" in back.describe()
    # Requests taken and done leave only their cursors, at version 1.
    done = SourceOffset(POSITION, None, "00000000000000ff", rereads=Rereads(file="x", count=4))
    assert json.loads(done.to_json())["v"] == 1
    assert not same_progress(offset, done)
    assert SourceOffset.from_json_obj(SourceOffset(POSITION, None).to_json()).rereads == Rereads()


def test_the_offset_stays_small_with_every_reread_it_may_hold():
    rereads = Rereads(file="0" * 20 + "-99999.json", signal_id=2**40, count=10**6)
    for i in range(MAX_REREADS):
        request = Request(
            SNAPSHOT, (f"shop.table_{i:02d}",), ((f"shop.table_{i:02d}", "x" * MAX_CONDITION),)
        )
        assert rereads.fits(request)
        rereads = rereads.taking(request)
    assert not rereads.fits(Request(SNAPSHOT, ("shop.one_more",)))
    assert rereads.fits(Request(STOP, ()))
    rereads = rereads.advanced(("a" * 64, 2**63 - 1))
    offset = SourceOffset(POSITION, None, "00000000000000ff", "server_id=1", None, rereads)
    assert len(offset.to_json()) < (MAX_CONDITION + 200) * MAX_REREADS + 512


def test_stop_drops_the_named_rereads_or_all():
    rereads = _in_flight()
    assert [r.table for r in rereads.taking(Request(STOP, ("shop.orders",))).queue] == [
        "shop.items"
    ]
    assert rereads.taking(Request(STOP, ())).queue == ()


def test_the_reread_a_batch_reads_is_known_from_its_two_offsets():
    start = Rereads().taking(Request(SNAPSHOT, ("a.t", "a.u")))
    # Taken and read in the same batch.
    first = start.advanced((100,))
    assert read_between(Rereads(), first) == (first.queue[0], None)
    assert read_between(start, first) == (first.queue[0], None)
    second = first.advanced((200,))
    assert read_between(first, second) == (second.queue[0], (100,))
    finished = second.advanced(None)
    assert finished.queue[0].done and finished.current.table == "a.u"
    assert read_between(second, finished) == (finished.queue[0], (200,))
    # The next batch drops the finished one; reading nothing reads nothing.
    assert read_between(finished, finished.without_finished()) is None
    assert read_between(finished, finished) is None
    # Two re-reads of one table in a row are told apart by their numbers.
    again = Rereads().taking(Request(SNAPSHOT, ("a.t", "a.t")))
    one_done = again.advanced(None)
    assert read_between(again, one_done) == (Reread(1, "a.t", after=None, done=True), None)


def test_a_reread_row_sorts_at_its_position_after_the_snapshots_row_there():
    from cdc_source.sequence import binlog_seq, reread_seq_prefix, snapshot_seq

    key = bytes([0x80, 0, 0, 7]).hex()
    at_p = binlog_seq(7, 4242, 3, sub=2)
    snapshot = snapshot_seq(7, 4242, 5, bytes.fromhex(key))
    first, second = (reread_seq_prefix(7, 4242, n) + key for n in (1, 2))
    later = binlog_seq(7, 4243, 0)
    assert at_p < snapshot < first < second < later
    assert reread_seq_prefix(7, 4242, 1, epoch=2) > later  # a later epoch sorts after


def test_the_lake_sink_merges_a_rereads_rows_instead_of_appending_them():
    import pyarrow as pa

    from cdc_source.delta.changes import only_reads
    from cdc_source.sequence import reread_seq_prefix, snapshot_seq

    first = snapshot_seq(7, 4242, 0, b"\x01")
    again = reread_seq_prefix(7, 4242, 1) + "01"
    assert only_reads(pa.table({"_op": ["r"], "_seq": [first]}))
    assert not only_reads(pa.table({"_op": ["r", "r"], "_seq": [first, again]}))
    assert only_reads(pa.table({"_op": ["r"], "_seq": [snapshot_seq(7, 9, 0, b"R")]}))  # key hex
