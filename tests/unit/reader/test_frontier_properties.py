"""The frontier filter (reader/frontier.py) against a reference model (docs/design.md,
'Ownership').

Ownership at a batch start: tables sorting before the frontier table are owned entirely;
in the frontier table the keys ``<= after_key`` (sort-key bytes) are owned, none of them
when ``after_key`` is None; tables after it are not owned; ``Ownership(None)`` owns all.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reader.frontier import DELETE, INSERT, UPDATE, Ownership, emitted_ops

SETTINGS = settings(max_examples=200, deadline=None)
TABLES = ("db.a", "db.b", "db.c")
KEY_SPACE = 12


def k(i: int) -> bytes:
    return b"k%03d" % i


def owned(frontier: Ownership, table: str, key: bytes | None) -> bool:
    if frontier.table is None:
        return True
    if table < frontier.table:
        return True
    return table == frontier.table and frontier.after_key is not None and key <= frontier.after_key


keys = st.one_of(
    st.integers(0, KEY_SPACE - 1).map(k),
    st.binary(max_size=5),
)
frontiers = st.one_of(
    st.just(Ownership(None)),
    st.builds(
        Ownership,
        st.sampled_from(TABLES + ("db.", "db.b0", "db.d")),
        st.none() | keys,
    ),
)


@st.composite
def row_changes(draw):
    """(table, before_key, after_key, has_before, has_after, same_key) of one row event."""
    table = draw(st.sampled_from(TABLES))
    kind = draw(st.sampled_from(["insert", "delete", "update", "key-update"]))
    if kind == "insert":
        return table, None, draw(keys), False, True, False
    if kind == "delete":
        return table, draw(keys), None, True, False, False
    if kind == "update":
        key = draw(keys)
        return table, key, key, True, True, True
    old = draw(keys)
    new = draw(keys.filter(lambda key: key != old))
    return table, old, new, True, True, False


def expected_ops(frontier, table, before_key, after_key, has_before, has_after, same_key):
    if has_before and has_after and same_key:
        return (UPDATE,) if owned(frontier, table, before_key) else ()
    ops = []
    if has_before and owned(frontier, table, before_key):
        ops.append(DELETE)
    if has_after and owned(frontier, table, after_key):
        ops.append(INSERT)
    return tuple(ops)


@SETTINGS
@given(frontiers, st.sampled_from(TABLES + ("db.b0",)), st.none() | keys)
def test_owns_matches_the_model(frontier, table, key):
    if key is None and frontier.table is not None and table == frontier.table:
        # A key-less question about the frontier table owns nothing that is not owned.
        assert frontier.owns(table, None) is False
        return
    assert frontier.owns(table, key) is owned(frontier, table, key)


@SETTINGS
@given(frontiers, st.sampled_from(TABLES), keys, keys)
def test_key_is_needed_only_in_the_frontier_table(frontier, table, key1, key2):
    needs = frontier.needs_key(table)
    assert needs is (
        frontier.table is not None and table == frontier.table and frontier.after_key is not None
    )
    if not needs:
        # Outside the frontier table, ownership cannot depend on the key.
        assert frontier.owns(table, key1) == frontier.owns(table, key2)
        assert frontier.owns(table, None) == frontier.owns(table, key1)


@SETTINGS
@given(frontiers, row_changes())
def test_emitted_ops_match_the_model(frontier, change):
    assert emitted_ops(frontier, *change) == expected_ops(frontier, *change)


def test_explicit_frontier_cases():
    f = Ownership("db.b", k(5))
    # Whole tables before / after the frontier table.
    assert emitted_ops(f, "db.a", k(9), k(9), True, True, True) == (UPDATE,)
    assert emitted_ops(f, "db.c", k(0), k(0), True, True, True) == ()
    # Inside the frontier table: "<= after" is owned, the bound itself included.
    assert emitted_ops(f, "db.b", None, k(5), False, True, False) == (INSERT,)
    assert emitted_ops(f, "db.b", None, k(6), False, True, False) == ()
    assert emitted_ops(f, "db.b", k(4), None, True, False, False) == (DELETE,)
    assert emitted_ops(f, "db.b", k(6), None, True, False, False) == ()
    # A key update crossing the frontier emits just the owned side, delete before insert.
    assert emitted_ops(f, "db.b", k(1), k(9), True, True, False) == (DELETE,)
    assert emitted_ops(f, "db.b", k(9), k(1), True, True, False) == (INSERT,)
    assert emitted_ops(f, "db.b", k(1), k(2), True, True, False) == (DELETE, INSERT)
    assert emitted_ops(f, "db.b", k(7), k(8), True, True, False) == ()
    # Frontier table with no key owned yet; hand-over done.
    assert emitted_ops(Ownership("db.b"), "db.b", k(0), k(0), True, True, True) == ()
    assert emitted_ops(Ownership(None), "db.z", k(0), k(1), True, True, False) == (
        DELETE,
        INSERT,
    )


# -- end to end: a consumer applying the emitted ops keeps exactly the owned rows -----


def apply_ops(consumer: dict, table, before_key, after_key, after, ops) -> None:
    for op in ops:
        if op == UPDATE:
            assert (table, before_key) in consumer, "update of a row the consumer never saw"
            consumer[(table, before_key)] = after
        elif op == DELETE:
            assert (table, before_key) in consumer, "delete of a row the consumer never saw"
            del consumer[(table, before_key)]
        elif op == INSERT:
            assert (table, after_key) not in consumer, "insert over an existing row"
            consumer[(table, after_key)] = after
        else:
            raise AssertionError(op)


@st.composite
def multi_table_histories(draw):
    state: dict[tuple[str, bytes], int] = {}
    for table in TABLES:
        for i in draw(st.sets(st.integers(0, KEY_SPACE - 1), max_size=KEY_SPACE // 2)):
            state[(table, k(i))] = draw(st.integers(0, 9))
    initial = dict(state)
    events = []
    for _ in range(draw(st.integers(0, 30))):
        table = draw(st.sampled_from(TABLES))
        present = sorted(key for t, key in state if t == table)
        absent = [k(i) for i in range(KEY_SPACE) if (table, k(i)) not in state]
        kinds = (["insert"] if absent else []) + (["update", "delete"] if present else [])
        if present and absent:
            kinds.append("key-update")
        kind = draw(st.sampled_from(kinds))
        value = draw(st.integers(0, 99))
        if kind == "insert":
            key = draw(st.sampled_from(absent))
            state[(table, key)] = value
            events.append((table, None, key, value, False, True, False))
        elif kind == "update":
            key = draw(st.sampled_from(present))
            state[(table, key)] = value
            events.append((table, key, key, value, True, True, True))
        elif kind == "delete":
            key = draw(st.sampled_from(present))
            del state[(table, key)]
            events.append((table, key, None, None, True, False, False))
        else:
            old, new = draw(st.sampled_from(present)), draw(st.sampled_from(absent))
            del state[(table, old)]
            state[(table, new)] = value
            events.append((table, old, new, value, True, True, False))
    return initial, events, state


@SETTINGS
@given(frontiers, multi_table_histories())
def test_consumer_reproduces_the_owned_part(frontier, history):
    initial, events, final = history

    def owned_part(state):
        return {(t, key): v for (t, key), v in state.items() if owned(frontier, t, key)}

    consumer = owned_part(initial)
    for table, before_key, after_key, after, has_before, has_after, same_key in events:
        ops = emitted_ops(frontier, table, before_key, after_key, has_before, has_after, same_key)
        apply_ops(consumer, table, before_key, after_key, after, ops)
    assert consumer == owned_part(final)


@given(
    st.sampled_from(["a.t", "b.t", "c.t"]),
    st.one_of(st.none(), st.binary(min_size=1, max_size=3)),
    st.sampled_from(["a.t", "b.t", "c.t"]),
    st.binary(min_size=1, max_size=3),
)
def test_tables_not_decoded_are_exactly_those_with_nothing_owned(frontier, after, table, key):
    ownership = Ownership(frontier, after)
    if not ownership.may_own(table):
        assert not ownership.owns(table, key)
