"""The captured table set through statements and restarts (coordinator.table_set), and a
binlog task's ownership along its range (reader.table_follow)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog.ddl import TableChange
from cdc_source.offsets import SnapshotCursor, SourceOffset, same_progress, table_fingerprint
from coordinator.table_set import (
    Membership,
    explain_difference,
    tables_at,
)
from reader.table_follow import ALL, NONE, Partial, TableFollow


def matches(name: str) -> bool:
    return name.startswith("db.t_")


def create(name):
    return TableChange("create", name)


def drop(name):
    return TableChange("drop", name)


def rename(a, b):
    return TableChange("rename", a, b)


def test_a_created_table_is_streamed_from_its_create_after_the_hand_over():
    after, effect = Membership(frozenset({"db.t_a"})).apply([create("db.t_b")], None, matches)
    assert after.owned == {"db.t_a", "db.t_b"} and not after.pending
    assert effect.streamed_from_creation == {"db.t_b"} and effect.joined == ("db.t_b",)


def test_a_created_table_the_main_snapshot_has_not_reached_waits_for_its_turn():
    cursor = SnapshotCursor("db.t_m", (5,))
    after, effect = Membership(frozenset({"db.t_a", "db.t_m"})).apply(
        [create("db.t_z"), create("db.t_b")], cursor, matches
    )
    assert after.owned == {"db.t_a", "db.t_m", "db.t_z", "db.t_b"}
    assert effect.streamed_from_creation == {"db.t_b"}  # t_z is snapshotted in its turn


def test_a_table_created_that_does_not_match_is_ignored():
    after, effect = Membership(frozenset({"db.t_a"})).apply([create("db.x")], None, matches)
    assert after == Membership(frozenset({"db.t_a"})) and not effect.joined


def test_a_table_renamed_in_waits_for_an_added_snapshot_and_the_old_name_leaves():
    start = Membership(frozenset({"db.t_a", "db.t_b"}))
    after, effect = start.apply([rename("db.x", "db.t_c"), rename("db.t_b", "db.y")], None, matches)
    assert after.owned == {"db.t_a"} and after.pending == ("db.t_c",)
    assert effect.left == ("db.t_b",) and effect.joined == ("db.t_c",)
    assert after.next_added().added == "db.t_c"
    assert after.next_added().finish_added().owned == {"db.t_a", "db.t_c"}


def test_a_table_converted_from_a_partition_is_snapshotted_not_streamed():
    start = Membership(frozenset({"db.t_a"}))
    after, effect = start.apply([TableChange("populate", "db.t_p")], None, matches)
    assert after.pending == ("db.t_p",) and not effect.streamed_from_creation
    follow = TableFollow.at_start(["db.t_a"], None, None)
    follow.statement((TableChange("populate", "db.t_p"),), (1, 5))
    assert not follow.decodes("db.t_p")


def test_a_joining_table_at_an_idle_binlog_is_a_new_offset():
    """A pending table snapshotted in one batch at an unmoved position changes only the
    fingerprint: still progress, or the snapshot would wait for the next binlog write."""
    position = {"binlog": None, "snapshot": None}
    before = SourceOffset(**position, tables=table_fingerprint({"db.t_a"}))
    after = SourceOffset(**position, tables=table_fingerprint({"db.t_a", "db.t_p"}))
    assert not same_progress(before, after)


def test_dropping_the_main_snapshots_table_restarts_the_cursor():
    cursor = SnapshotCursor("db.t_m", (5,))
    start = Membership(frozenset({"db.t_a", "db.t_m", "db.t_z"}))
    after, effect = start.apply([drop("db.t_m")], cursor, matches)
    assert effect.restart_cursor_table and after.owned == {"db.t_a", "db.t_z"}


def test_drop_database_removes_its_tables_and_the_added_one():
    start = Membership(frozenset({"db.t_a", "other.t_b"}), ("db.t_p",), "db.t_q")
    after, _ = start.apply([TableChange("drop_database", "db")], None, lambda n: True)
    assert after == Membership(frozenset({"other.t_b"}))


def test_a_partition_drop_snapshots_the_table_again_wherever_its_snapshot_was():
    start = Membership(frozenset({"db.t_a", "db.t_m"}), (), "db.t_q")
    cursor = SnapshotCursor("db.t_m", (5,))
    # owned entirely: it waits for a snapshot of its own
    after, effect = start.apply([TableChange("partition", "db.t_a")], cursor, matches)
    assert after.owned == {"db.t_m"} and after.pending == ("db.t_a",)
    assert not effect.restart_cursor_table
    # the main snapshot's table: read again from its first key
    after, effect = start.apply([TableChange("partition", "db.t_m")], cursor, matches)
    assert effect.restart_cursor_table and after.owned == {"db.t_a", "db.t_m"}
    # the joining table: its own snapshot starts over
    after, _ = start.apply([TableChange("partition", "db.t_q")], cursor, matches)
    assert after.added is None and after.pending == ("db.t_q",)
    assert after.next_added().added == "db.t_q"


def test_a_table_created_and_dropped_in_one_range_is_streamed_to_its_reset():
    """Its rows and its ``t`` are emitted, as they would be were the range cut between
    the two statements; the table is not captured after the range."""
    start = Membership(frozenset({"db.t_a"}))
    after, effect = start.apply([create("db.t_n"), drop("db.t_n")], None, matches)
    assert after == start and effect.streamed_from_creation == {"db.t_n"}
    assert effect.joined == () and effect.left == ()
    follow = TableFollow.at_start(["db.t_a"], None, None, effect.streamed_from_creation)
    assert follow.statement((create("db.t_n"),), (1, 10)) == []
    assert follow.state_at("db.t_n", (1, 20)) == ALL
    assert follow.statement((drop("db.t_n"),), (1, 30)) == ["db.t_n"]
    assert follow.state_at("db.t_n", (1, 40)) == NONE


def test_tables_at_undoes_the_statements_since():
    now = {"db.t_a", "db.t_c", "db.t_new"}
    changes = [drop("db.t_b"), create("db.t_new"), rename("db.t_old", "db.t_c")]
    assert tables_at(now, changes) == {"db.t_a", "db.t_b", "db.t_old"}


names = st.sets(st.from_regex(r"db\.t_[a-z]{1,6}", fullmatch=True), min_size=0, max_size=25)


@settings(max_examples=150, deadline=None)
@given(names, names, st.data())
def test_a_difference_of_up_to_three_tables_is_found_exactly(owned, extra, data):
    """The checkpoint owned ``owned``; a restart guesses the tables matching now: some
    it owned no longer match (``in_``, among the server's other tables), some match now
    that it did not own (``out``: they wait for a snapshot)."""
    extra -= owned
    in_ = data.draw(st.sets(st.sampled_from(sorted(owned)), max_size=3)) if owned else set()
    room = 3 - len(in_)
    out = data.draw(st.sets(st.sampled_from(sorted(extra)), max_size=room)) if extra else set()
    guess = (owned - in_) | out
    others = in_ | (extra - out)
    assert explain_difference(table_fingerprint(owned), guess, others) == (out, in_)


def test_a_difference_of_more_than_three_tables_is_not_guessed():
    owned = {f"db.t_{i}" for i in range(10)}
    guess = owned | {f"db.t_new{i}" for i in range(4)}
    assert explain_difference(table_fingerprint(owned), guess, set()) is None


def test_offsets_carry_the_added_cursor_as_version_3():
    offset = SourceOffset(None, None, "0" * 16, added=SnapshotCursor("db.t_a", (3,)))
    text = offset.to_json()
    assert '"v":3' in text and '"added":{"table":"db.t_a","after":[3]}' in text
    assert SourceOffset.from_json_obj(text) == offset
    assert '"added"' not in SourceOffset(None, None, "0" * 16).to_json()


# -- a binlog task's ownership -----------------------------------------------------------


def test_a_drop_resets_an_owned_table_and_nothing_after_it_is_owned():
    follow = TableFollow.at_start(["db.t_a", "db.t_b"], SnapshotCursor("db.t_b", None), None)
    assert follow.state("db.t_a") == ALL and follow.state("db.t_b") == NONE
    assert follow.statement((drop("db.t_a"), drop("db.t_b")), (1, 100)) == ["db.t_a"]
    assert follow.state_at("db.t_a", (1, 50)) == ALL
    assert follow.state_at("db.t_a", (1, 150)) == NONE


def test_a_table_created_in_the_range_is_owned_from_its_create_and_truncate_keeps_it():
    follow = TableFollow.at_start(["db.t_a"], None, None, frozenset({"db.t_n"}))
    assert follow.statement((create("db.t_n"),), (1, 100)) == []
    assert follow.state_at("db.t_n", (1, 90)) == NONE and follow.decodes("db.t_n")
    assert follow.statement((TableChange("truncate", "db.t_n"),), (1, 200)) == ["db.t_n"]
    assert follow.state("db.t_n") == ALL


def test_a_partition_drop_of_a_table_in_its_snapshot_resets_what_the_stream_owned():
    added = SnapshotCursor("db.t_q", (9,))
    main = SnapshotCursor("db.t_m", (4,))
    follow = TableFollow.at_start(["db.t_m", "db.t_q"], main, added)
    assert follow.state("db.t_q") == Partial(added)
    partition = (TableChange("partition", "db.t_q"), TableChange("partition", "db.t_m"))
    assert follow.statement(partition, (1, 10)) == ["db.t_q", "db.t_m"]
    assert follow.state("db.t_q") == NONE and follow.state("db.t_m") == NONE
    assert follow.state_at("db.t_m", (1, 5)) == Partial(main)


def test_one_or_two_tables_are_found_among_many_and_three_only_up_to_a_bound(monkeypatch):
    """One or two moves cost O(n log n), so any server size is searched; three cost
    O(n**2) and are searched only up to ``THREE_MOVES_MAX`` tables."""
    import coordinator.table_set as table_set

    owned = {f"db.t_{i}" for i in range(40_000)}
    others = {f"db.u_{i}" for i in range(40_000)}
    guess = (owned - {"db.t_7", "db.t_99"}) | {"db.u_5"}
    found = explain_difference(table_fingerprint(owned), guess, others | {"db.t_7", "db.t_99"})
    assert found is None  # three moves among 80,000 tables: not searched
    monkeypatch.setattr(table_set, "THREE_MOVES_MAX", 200)
    small = {f"db.t_{i}" for i in range(100)}
    guess = (small - {"db.t_7", "db.t_9"}) | {"db.u_5"}
    assert explain_difference(table_fingerprint(small), guess, {"db.t_7", "db.t_9"}) == (
        {"db.u_5"},
        {"db.t_7", "db.t_9"},
    )
    guess = (owned - {"db.t_7"}) | {"db.u_5"}
    found = explain_difference(table_fingerprint(owned), guess, others | {"db.t_7"})
    assert found == ({"db.u_5"}, {"db.t_7"})


def test_statements_collected_by_a_pass_from_before_the_range_are_not_kept():
    """The statement scan keeps what another pass collected only if that pass read the
    range from its start: a pass from an earlier position would carry statements from
    before it, or miss some if cut short."""
    from types import SimpleNamespace

    from cdc_source.offsets import BinlogPosition
    from coordinator.ddl_scan import DdlScan

    scan = DdlScan(lambda: None, 1)
    start, end = BinlogPosition("binlog.000002", 100), BinlogPosition("binlog.000002", 300)
    event = lambda pos: SimpleNamespace(file="binlog.000002", end_pos=pos, type=0)  # noqa: E731
    early = scan.listener(start, end)
    for pos in (50, 100, 200, 300):
        early.see(event(pos), None, (2, pos))
    assert not early.complete
    whole = scan.listener(start, end)
    for pos in (200, 300):
        whole.see(event(pos), None, (2, pos))
    short = scan.listener(start, end)
    short.see(event(200), None, (2, 200))
    assert whole.complete and not short.complete
    whole.done()
    assert scan.changes(start, end) == () and scan.scans == 0
