"""An online schema-change tool's cut-over read as a schema change of the table it alters
(cdc_source.online_schema_change), and how the driver's table set
(coordinator.table_set) and a binlog task (reader.table_follow) follow it, alike."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog.ddl import TableChange, table_changes
from cdc_source.offsets import SnapshotCursor
from cdc_source.online_schema_change import is_shadow_table, near_miss, swap_changes
from cdc_source.options import parse_options
from coordinator.table_set import Membership, tables_at
from reader.table_follow import ALL, NONE, TableFollow

OPTION = "scan.parse.online.schema.changes.enabled"


def read(statement: str) -> tuple[TableChange, ...]:
    return swap_changes(table_changes(statement, "db"))


def swap(table: str, shadow: str, aside: str) -> TableChange:
    return TableChange("swap", table, new_name=shadow, aside=aside)


def matches(name: str) -> bool:
    return name.startswith("db.t") and not is_shadow_table(name.split(".", 1)[1])


# -- the pattern ----------------------------------------------------------------------------


def test_a_gh_ost_swap_in_one_rename_is_a_schema_change_of_the_table():
    assert read("RENAME TABLE `t` TO `_t_del`, `_t_gho` TO `t`") == (
        swap("db.t", "db._t_gho", "db._t_del"),
    )


def test_gh_osts_own_cut_over_statement_is_a_swap():
    statement = "rename /* gh-ost */ table `db`.`t` to `db`.`_t_del`, `db`.`_t_gho` to `db`.`t`"
    assert swap_changes(table_changes(statement, "other")) == (
        swap("db.t", "db._t_gho", "db._t_del"),
    )


def test_a_swap_logged_in_another_case_is_recognised_under_lower_case_table_names():
    changes = table_changes("RENAME TABLE T TO _T_DEL, _T_GHO TO T", "DB", lower_case_names=True)
    assert swap_changes(changes) == (swap("db.t", "db._t_gho", "db._t_del"),)


def test_a_pt_online_schema_change_swap_in_one_rename_is_a_schema_change_of_the_table():
    assert read("RENAME TABLE `db`.`t` TO `db`.`_t_old`, `db`.`_t_new` TO `db`.`t`") == (
        swap("db.t", "db._t_new", "db._t_old"),
    )


def test_a_swap_in_two_rename_statements_stays_two_renames_and_says_why():
    for statement in ("RENAME TABLE t TO _t_del", "RENAME TABLE _t_gho TO t"):
        changes = table_changes(statement, "db")
        assert swap_changes(changes) == changes
        assert "not an online schema-change tool's swap" in near_miss(changes)


def test_a_shadow_whose_name_is_not_the_tables_stays_renames():
    for statement in (
        "RENAME TABLE t TO _t_del, _u_gho TO t",  # another table's shadow
        "RENAME TABLE t TO _t_old, _t_gho TO t",  # one tool's shadow, the other's aside
        "RENAME TABLE t TO _t_del, __t_gho TO t",
        "RENAME TABLE _t_gho TO t, t TO _t_del",  # the order the server could not run
        "RENAME TABLE db.t TO other._t_del, db._t_gho TO db.t",  # aside in another database
        "RENAME TABLE db.t TO db._t_del, other._t_gho TO db.t",
        "RENAME TABLE t TO _t_del, _t_gho TO t, x TO y",
    ):
        changes = table_changes(statement, "db")
        assert swap_changes(changes) == changes, statement
        assert near_miss(changes) is not None, statement


def test_renames_of_no_tool_table_are_neither_swaps_nor_near_misses():
    changes = table_changes("RENAME TABLE a TO b, c TO a", "db")
    assert swap_changes(changes) == changes and near_miss(changes) is None
    assert swap_changes(table_changes("DROP TABLE _t_gho", "db")) == (
        TableChange("drop", "db._t_gho"),
    )


def test_the_tools_tables_are_shadow_tables_and_others_are_not():
    for name in ("_t_gho", "_t_ghc", "_t_del", "_t_new", "_t_old", "_order_items_gho"):
        assert is_shadow_table(name), name
    for name in ("t", "t_gho", "_t_ghost", "_gho", "t_new", "_t_new_", "orders"):
        assert not is_shadow_table(name), name


names = st.text(alphabet="abcxyz_1", min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(table=names, tool=st.sampled_from([("gho", "del"), ("new", "old")]))
def test_any_tables_swap_by_either_tool_is_recognised(table, tool):
    shadow, aside = tool
    statement = f"RENAME TABLE `{table}` TO `_{table}_{aside}`, `_{table}_{shadow}` TO `{table}`"
    assert read(statement) == (
        swap(f"db.{table}", f"db._{table}_{shadow}", f"db._{table}_{aside}"),
    )


@settings(max_examples=500, deadline=None)
@given(pairs=st.lists(st.tuples(names, names), min_size=1, max_size=3))
def test_a_rename_is_a_swap_only_when_its_two_renames_are_the_pattern_and_loses_nothing(pairs):
    changes = tuple(TableChange("rename", f"db.{a}", f"db.{b}") for a, b in pairs)
    result = swap_changes(changes)
    if result == changes:
        return
    (change,) = result
    assert change.kind == "swap"
    # the swap is exactly the two renames it stands for
    assert changes == (
        TableChange("rename", change.table, change.aside),
        TableChange("rename", change.new_name, change.table),
    )
    table = change.table.split(".", 1)[1]
    assert change.new_name.split(".", 1)[1] in (f"_{table}_gho", f"_{table}_new")


def test_with_the_option_the_tools_tables_never_match_table_name():
    raw = {
        "hostname": "h",
        "username": "u",
        "password": "p",
        "database-name": "db",
        "table-name": r"db\..*",
    }
    off, on = parse_options(raw), parse_options({**raw, OPTION: "true"})
    assert off.online_schema_changes is False and on.online_schema_changes is True
    for table in ("_t_gho", "_t_ghc", "_t_del", "_t_new", "_t_old"):
        assert off.matches("db", table) and not on.matches("db", table)
    assert on.matches("db", "t") and on.matches("db", "t_new")


# -- the table set and a binlog task -----------------------------------------------------


def test_the_swap_of_a_table_owned_entirely_keeps_it_owned_with_no_reset():
    change = swap("db.t", "db._t_gho", "db._t_del")
    after, effect = Membership(frozenset({"db.t", "db.tb"})).apply([change], None, matches)
    assert after == Membership(frozenset({"db.t", "db.tb"}))
    assert effect.swapped == ("db.t",) and not effect.left and not effect.joined
    follow = TableFollow({"db.t": ALL, "db.tb": ALL})
    assert follow.statement((change,), (1, 100)) == []
    assert follow.state("db.t") == ALL


def test_the_swap_of_the_main_snapshots_table_is_read_again_from_its_first_key():
    change = swap("db.t", "db._t_new", "db._t_old")
    cursor = SnapshotCursor("db.t", (5,))
    after, effect = Membership(frozenset({"db.a", "db.t"})).apply([change], cursor, matches)
    assert effect.unswapped == ("db.t",) and effect.restart_cursor_table
    assert after.owned == {"db.a", "db.t"}
    follow = TableFollow.at_start(["db.t"], cursor, None)
    assert follow.statement((change,), (1, 100)) == ["db.t"]
    assert follow.state("db.t") == NONE


def test_the_swap_of_a_joining_table_starts_its_snapshot_again():
    change = swap("db.t", "db._t_gho", "db._t_del")
    start = Membership(frozenset({"db.a"}), pending=("db.u",), added="db.t")
    after, effect = start.apply([change], None, matches)
    assert effect.unswapped == ("db.t",)
    assert after.added is None and set(after.pending) == {"db.t", "db.u"}


def test_the_swap_of_a_table_not_captured_changes_nothing():
    change = swap("db.x", "db._x_gho", "db._x_del")
    start = Membership(frozenset({"db.t"}))
    assert start.apply([change], None, matches) == (start, start.apply([], None, matches)[1])


def test_tables_at_undoes_a_swap():
    change = swap("db.t", "db._t_gho", "db._t_del")
    assert tables_at({"db.t", "db._t_del"}, [change]) == {"db.t", "db._t_gho"}


TABLES = ["db.ta", "db.tb", "db.tc", "db.td"]


@st.composite
def ranges(draw, owned: frozenset[str]) -> list[TableChange]:
    """Statements a server could log in a range, from the tables ``owned`` (and maybe
    others) existing: a name is created only where none is, renamed only to a free one."""
    existing = set(owned) | draw(st.sets(st.sampled_from(TABLES)))
    changes = []
    for _ in range(draw(st.integers(0, 6))):
        free = sorted(set(TABLES) - existing)
        kind = draw(st.sampled_from(["create", "drop", "truncate", "partition", "rename", "swap"]))
        if kind == "create" and free:
            name = draw(st.sampled_from(free))
            existing.add(name)
            changes.append(TableChange("create", name))
        elif kind != "create" and existing:
            name = draw(st.sampled_from(sorted(existing)))
            if kind == "swap":
                changes.append(swap(name, f"db._{name[3:]}_gho", f"db._{name[3:]}_del"))
            elif kind == "rename" and free:
                target = draw(st.sampled_from(free))
                existing = (existing - {name}) | {target}
                changes.append(TableChange("rename", name, target))
            elif kind in ("drop", "truncate", "partition"):
                if kind == "drop":
                    existing.discard(name)
                changes.append(TableChange(kind, name))
    return changes


@settings(max_examples=400, deadline=None)
@given(
    owned=st.sets(st.sampled_from(TABLES), min_size=1),
    cursor=st.one_of(
        st.none(),
        st.builds(
            lambda t, a: SnapshotCursor(t, a),
            st.sampled_from(TABLES),
            st.sampled_from([None, (3,)]),
        ),
    ),
    data=st.data(),
)
def test_the_driver_and_a_binlog_task_keep_the_same_swaps(owned, cursor, data):
    """Whether a swap keeps its table is decided alike by the driver and by the binlog
    tasks, whatever came before it in the range: else a table's rows would be lost or
    emitted twice."""
    changes = data.draw(ranges(frozenset(owned)))
    membership = Membership(frozenset(owned))
    _, effect = membership.apply(changes, cursor, matches)
    follow = TableFollow.at_start(
        sorted(membership.names), cursor, None, effect.streamed_from_creation
    )
    kept = []
    for where, change in enumerate(changes):
        if change.kind == "swap" and follow.state(change.table) == ALL:
            kept.append(change.table)
        follow.statement((change,), (1, where + 10))
    assert kept == list(effect.swapped)
