"""Following a fail-over: a checkpoint position found on another server by its GTID
state (binlogs of two servers built by the independent test encoder, laid out
differently), and ``_seq`` ordering across the servers' epochs."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog import constants as c
from cdc_source.binlog.gtid_scan import GtidLocateError, locate
from cdc_source.failover import relocate
from cdc_source.offsets import BinlogPosition
from cdc_source.sequence import binlog_seq, binlog_seq_array, snapshot_seq
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


class Server:
    """A server's binlog files, each served by a dump from any event boundary."""

    def __init__(self, files: list[BinlogFile]) -> None:
        self.files = {f.name: f for f in files}
        self.names = [f.name for f in files]

    def open(self, file: str, pos: int, until=None):
        return FakeDumpSource(self.files[file]).open(file, pos)


def _mysql_file(name: str, previous: dict, gnos: list[tuple[str, int]], filler: int = 0):
    binlog = BinlogFile(name)
    binlog.add(c.PREVIOUS_GTIDS, previous_gtids_body(previous))
    ends = {}
    for uuid, gno in gnos:
        binlog.add(c.GTID, mysql_gtid_body(uuid, gno))
        binlog.add(c.QUERY, query_body("shop", "BEGIN" + " " * filler))
        ends[(uuid, gno)] = binlog.add(c.XID, xid_body(gno))
    return binlog, ends


def test_a_position_is_found_where_its_gtid_state_holds_on_another_server():
    old, old_ends = _mysql_file("binlog.000001", {}, [(U1, n) for n in range(1, 8)])
    # The new server: other file names, another layout, the first transactions purged.
    first, _ = _mysql_file("mysql-bin.000003", {(U1, ""): [(1, 2)]}, [(U1, 3), (U1, 4)], 40)
    second, second_ends = _mysql_file(
        "mysql-bin.000004", {(U1, ""): [(1, 4)]}, [(U1, n) for n in range(5, 8)], 9
    )
    new = Server([first, second])
    after_five = BinlogPosition(old.name, old_ends[(U1, 5)], f"{U1}:1-5", 1_700, None, 2)
    moved = relocate(after_five, new.open, new.names, "mysql")
    assert (moved.file, moved.pos) == ("mysql-bin.000004", second_ends[(U1, 5)])
    assert moved.epoch == 3 and moved.gtids == after_five.gtids and moved.ts == 1_700
    # The end of the first file: no transaction after it there; the next file's start.
    assert locate(new.open, new.names, f"{U1}:1-4", "mysql")[0] == "mysql-bin.000004"
    # The whole binlog: its end.
    assert locate(new.open, new.names, f"{U1}:1-7", "mysql") == (
        "mysql-bin.000004",
        second_ends[(U1, 7)],
    )


def test_a_server_lacking_a_transaction_the_query_read_is_refused():
    first, _ = _mysql_file("mysql-bin.000001", {}, [(U1, 1), (U1, 2)])
    new = Server([first])
    with pytest.raises(GtidLocateError, match="lacks transactions"):
        locate(new.open, new.names, f"{U1}:1-3", "mysql")


def test_a_replica_built_from_a_dump_is_found_with_what_it_executed_before_its_binlog():
    # MySQL writes the dump's GTIDs (SET GLOBAL gtid_purged) into no file's PREVIOUS_GTIDS.
    first, first_ends = _mysql_file("replica-bin.000001", {}, [(U1, n) for n in range(5, 8)])
    second, second_ends = _mysql_file("replica-bin.000002", {(U1, ""): [(5, 7)]}, [(U1, 8)])
    new = Server([first, second])
    with pytest.raises(GtidLocateError, match="lacks transactions the query has read"):
        locate(new.open, new.names, f"{U1}:1-8", "mysql")
    assert locate(new.open, new.names, f"{U1}:1-8", "mysql", f"{U1}:1-4") == (
        second.name,
        second_ends[(U1, 8)],
    )
    # Exactly at the dump: before the first transaction the replica logged.
    file, pos = locate(new.open, new.names, f"{U1}:1-4", "mysql", f"{U1}:1-4")
    assert file == first.name and pos < first_ends[(U1, 5)]
    # Before the dump: the replica never had that position.
    with pytest.raises(GtidLocateError, match="purged"):
        locate(new.open, new.names, f"{U1}:1-3", "mysql", f"{U1}:1-4")


def test_a_mariadb_replica_built_from_a_dump_is_found_at_the_dump_itself():
    # gtid_slave_pos was set to 0-1-4,1-1-9 by the dump; the replica logged 0-1-5 on.
    new = BinlogFile("replica-bin.000001")
    new.add(c.MARIADB_GTID_LIST, mariadb_gtid_list_body([]))
    ends = {}
    for seq in (5, 6):
        new.add(c.MARIADB_GTID, mariadb_gtid_body(seq), server_id=1)
        ends[seq] = new.add(c.XID, xid_body(seq))
    server = Server([new])
    slave_pos = "0-1-6,1-1-9"  # moved on with replication in domain 0
    at_dump = locate(server.open, server.names, "0-1-4,1-1-9", "mariadb", slave_pos)
    assert at_dump[0] == new.name and at_dump[1] < ends[5]
    assert locate(server.open, server.names, "0-1-5,1-1-9", "mariadb", slave_pos) == (
        new.name,
        ends[5],
    )
    assert locate(server.open, server.names, "0-1-6,1-1-9", "mariadb", slave_pos) == (
        new.name,
        ends[6],
    )
    for before_the_dump in ("0-1-3,1-1-9", "0-1-4,1-1-8"):
        with pytest.raises(GtidLocateError, match="lacks transactions"):
            locate(server.open, server.names, before_the_dump, "mariadb", slave_pos)


def test_the_refusal_names_the_transactions_the_new_server_lacks():
    # The replica missed U1:6-7 (asynchronous replication) and, promoted, wrote its own.
    first, _ = _mysql_file("replica-bin.000001", {}, [(U1, n) for n in range(1, 6)] + [(U2, 1)])
    new = Server([first])
    with pytest.raises(GtidLocateError) as refused:
        locate(new.open, new.names, f"{U1}:1-7", "mysql")
    assert f"lacks transactions the query has read: transactions {U1}:6-7" in str(refused.value)
    assert refused.value.lacks == f"{U1}:6-7" and not refused.value.at_end
    assert "restart the query" in str(refused.value)
    with pytest.raises(GtidLocateError) as ended:
        locate(new.open, new.names, f"{U1}:1-5,{U2}:1-2", "mysql")
    assert ended.value.lacks == f"{U2}:2" and ended.value.at_end
    maria = BinlogFile("replica-bin.000001")
    maria.add(c.MARIADB_GTID_LIST, mariadb_gtid_list_body([]))
    for seq in (1, 2):
        maria.add(c.MARIADB_GTID, mariadb_gtid_body(seq), server_id=1)
        maria.add(c.XID, xid_body(seq))
    maria.add(c.MARIADB_GTID, mariadb_gtid_body(3), server_id=2)
    maria.add(c.XID, xid_body(3))
    server = Server([maria])
    with pytest.raises(GtidLocateError) as lost:
        locate(server.open, server.names, "0-1-4", "mariadb")
    assert "lacks transactions the query has read: the transactions up to 0-1-4" in str(lost.value)


def test_a_server_with_the_transactions_in_another_order_is_refused():
    first, _ = _mysql_file("mysql-bin.000001", {}, [(U1, 1), (U2, 1), (U1, 2)])
    new = Server([first])
    with pytest.raises(GtidLocateError, match="another order"):
        locate(new.open, new.names, f"{U1}:1-2", "mysql")


def test_a_position_whose_binlog_the_new_server_purged_is_refused():
    first, _ = _mysql_file("mysql-bin.000009", {(U1, ""): [(1, 50)]}, [(U1, 51)])
    new = Server([first])
    with pytest.raises(GtidLocateError, match="purged"):
        locate(new.open, new.names, f"{U1}:1-10", "mysql")


def test_mariadb_positions_are_found_by_domain_and_sequence_number():
    new = BinlogFile("replica-bin.000002")
    new.add(c.MARIADB_GTID_LIST, mariadb_gtid_list_body([(0, 1, 7)]))
    ends = []
    for seq in (8, 9, 10):
        new.add(c.MARIADB_GTID, mariadb_gtid_body(seq), server_id=1)
        ends.append(new.add(c.XID, xid_body(seq)))
    server = Server([new])
    assert locate(server.open, server.names, "0-1-9", "mariadb") == (new.name, ends[1])
    with pytest.raises(GtidLocateError):
        locate(server.open, server.names, "0-1-5", "mariadb")  # purged: starts at 0-1-7


def test_positions_without_gtids_or_with_an_open_xa_transaction_do_not_follow():
    server = Server([_mysql_file("b.000001", {}, [(U1, 1)])[0]])
    with pytest.raises(GtidLocateError, match="no GTID state"):
        relocate(BinlogPosition("a.000001", 100), server.open, server.names, "mysql")
    with pytest.raises(GtidLocateError, match="XA"):
        relocate(
            BinlogPosition("a.000001", 100, f"{U1}:1", xa=("a.000001", 50)),
            server.open,
            server.names,
            "mysql",
        )


positions = st.tuples(
    st.integers(0, 3), st.integers(1, 999_999), st.integers(4, 2**40), st.integers(0, 99)
)


@settings(deadline=None)
@given(positions, positions)
def test_seq_orders_by_epoch_first_then_position(a, b):
    """A change read from a later server sorts after every change read before, whatever
    file numbers the servers use; the epoch-0 form is the one written before fail-overs."""
    seq_a = binlog_seq(a[1], a[2], a[3], epoch=a[0])
    seq_b = snapshot_seq(b[1], b[2], 0, b"\x01", epoch=b[0])
    if a[0] != b[0]:
        assert (seq_a < seq_b) == (a[0] < b[0])
    if a[0] == 0:
        assert seq_a[0].isdigit()


def test_the_columnar_seq_is_the_scalar_one_in_every_epoch():
    for epoch in (0, 1, 12):
        column = binlog_seq_array(
            pa.array([5]), pa.array([1234]), pa.array([1]), pa.array([7]), pa.array([1]), epoch
        )
        assert column.to_pylist() == [binlog_seq(5, 1234, 7, 1, 1, epoch)]


def test_an_offset_after_a_fail_over_is_version_2_and_reads_back():
    """An older package (which knows only version 1) refuses it rather than order the new
    server's changes by their file numbers; a first-epoch offset stays version 1."""
    import json

    from cdc_source.offsets import SourceOffset

    first = SourceOffset(BinlogPosition("b.000001", 100, "0-1-5"), None, "abcd", "server_id=1")
    later = SourceOffset(
        BinlogPosition("r.000002", 40, "0-1-5", epoch=1), None, "abcd", "server_id=2"
    )
    assert json.loads(first.to_json())["v"] == 1 and "epoch" not in first.to_json()
    assert json.loads(later.to_json())["v"] == 2
    assert SourceOffset.from_json_obj(later.to_json()) == later
