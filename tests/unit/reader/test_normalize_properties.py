"""Chunk normalization (reader/normalize.py) against a model table (docs/design.md,
'Normalization').

The model is a table as a dict ``key -> row``. A sequence of operations (insert a new key,
update the non-key columns, delete, change the primary key) gives the states
``state_at(0..n)`` and one ``KeyedChange`` per operation; ``changes[i]`` takes
``state_at(i)`` to ``state_at(i + 1)``. A chunk SELECT that saw ``state_at(Q)`` over the key
range ``(lo, hi]``, merged with the overrides of the changes between P and Q, must give
exactly ``state_at(P)`` over that range, whichever side of P the SELECT's Q falls on.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reader.normalize import (
    KeyedChange,
    in_any_key_range,
    in_key_range,
    redo_overrides,
    restored_rows,
    touched_keys,
    touches,
    undo_overrides,
    untouched_rows,
)

SETTINGS = settings(max_examples=200, deadline=None)
KEY_SPACE = 24


def k(i: int) -> bytes:
    return b"k%03d" % i


def row(key: bytes, value: int) -> dict:
    return {"id": key, "v": value}


def apply(state: dict, op: tuple) -> tuple[dict, KeyedChange]:
    """The next state and the row change of one operation."""
    new = dict(state)
    kind = op[0]
    if kind == "ins":
        _, key, value = op
        assert key not in state
        new[key] = row(key, value)
        return new, KeyedChange(None, None, key, new[key])
    if kind == "upd":
        _, key, value = op
        new[key] = row(key, value)
        return new, KeyedChange(key, state[key], key, new[key])
    if kind == "del":
        _, key = op
        del new[key]
        return new, KeyedChange(key, state[key], None, None)
    if kind == "pk":
        _, old, key, value = op
        assert key not in state
        del new[old]
        new[key] = row(key, value)
        return new, KeyedChange(old, state[old], key, new[key])
    raise AssertionError(op)


def run(initial: dict, ops: list[tuple]) -> tuple[list[dict], list[KeyedChange]]:
    states, changes = [dict(initial)], []
    for op in ops:
        state, change = apply(states[-1], op)
        states.append(state)
        changes.append(change)
    return states, changes


def restrict(state: dict, lo: bytes | None, hi: bytes | None) -> dict:
    inside = in_key_range(lo, hi)
    return {key: value for key, value in state.items() if inside(key)}


def normalized(
    states: list[dict], changes: list[KeyedChange], p: int, q: int, lo, hi
) -> list[tuple[bytes, dict]]:
    """What a chunk over (lo, hi] whose SELECT saw state_at(q) yields as of state_at(p)."""
    inside = in_key_range(lo, hi)
    selected = sorted(restrict(states[q], lo, hi).items())
    if q >= p:
        overrides = undo_overrides(changes[p:q], inside)
    else:
        overrides = redo_overrides(changes[q:p], inside)
    touched = touched_keys(overrides)
    if touched is not None:
        keep = untouched_rows(pa.array([key for key, _ in selected], pa.binary()), touched)
        selected = [row for row, kept in zip(selected, keep.to_pylist()) if kept]
    return selected + restored_rows(overrides)


def check(initial: dict, ops: list[tuple], p: int, q: int, lo, hi) -> None:
    states, changes = run(initial, ops)
    rows = normalized(states, changes, p, q, lo, hi)
    keys = [key for key, _ in rows]
    assert len(keys) == len(set(keys)), f"a key is emitted twice: {keys}"
    for key, value in rows:
        assert value["id"] == key
    assert dict(rows) == restrict(states[p], lo, hi)


@st.composite
def histories(draw):
    """(initial state, ops, P, Q, lo, hi) over a small key space, so keys collide often."""
    initial_keys = draw(st.sets(st.integers(0, KEY_SPACE - 1), max_size=KEY_SPACE // 2))
    state = {k(i): row(k(i), draw(st.integers(0, 9))) for i in sorted(initial_keys)}
    initial = dict(state)
    ops: list[tuple] = []
    for _ in range(draw(st.integers(0, 25))):
        present = sorted(state)
        absent = [k(i) for i in range(KEY_SPACE) if k(i) not in state]
        kinds = []
        if absent:
            kinds.append("ins")
        if present:
            kinds += ["upd", "del"]
        if present and absent:
            kinds.append("pk")
        kind = draw(st.sampled_from(kinds))
        value = draw(st.integers(0, 99))
        if kind == "ins":
            op = ("ins", draw(st.sampled_from(absent)), value)
        elif kind == "upd":
            op = ("upd", draw(st.sampled_from(present)), value)
        elif kind == "del":
            op = ("del", draw(st.sampled_from(present)))
        else:
            op = ("pk", draw(st.sampled_from(present)), draw(st.sampled_from(absent)), value)
        state, _ = apply(state, op)
        ops.append(op)
    p = draw(st.integers(0, len(ops)))
    q = draw(st.integers(0, len(ops)))
    # Bounds: real keys, keys between real keys (b"k005x"), and open ends.
    bound = st.one_of(
        st.none(),
        st.integers(-1, KEY_SPACE).map(k),
        st.integers(0, KEY_SPACE).map(lambda i: k(i) + b"x"),
    )
    lo, hi = draw(bound), draw(bound)
    return initial, ops, p, q, lo, hi


@SETTINGS
@given(histories())
def test_chunk_is_state_at_p_whatever_q(history):
    check(*history)


@SETTINGS
@given(histories())
def test_adjacent_chunks_partition_the_table(history):
    """Splitting a range anywhere gives the same rows as reading it whole."""
    initial, ops, p, q, lo, hi = history
    states, changes = run(initial, ops)
    whole = dict(normalized(states, changes, p, q, None, None))
    assert whole == states[p]
    if lo is not None:
        left = normalized(states, changes, p, q, None, lo)
        right = normalized(states, changes, p, q, lo, None)
        assert dict(left).keys().isdisjoint(dict(right))
        assert {**dict(left), **dict(right)} == whole


# -- explicit cases ---------------------------------------------------------------------

A, B, C, D = k(1), k(2), k(3), k(4)


def test_key_deleted_after_p_then_reinserted():
    initial = {A: row(A, 1), B: row(B, 1)}
    ops = [("upd", A, 2), ("del", A), ("ins", A, 3), ("upd", A, 4)]
    for p in range(len(ops) + 1):
        for q in range(len(ops) + 1):
            check(initial, ops, p, q, None, None)
    # P = 1 (A = 2), Q = 4: SELECT sees A = 4, the first before-image in (P, Q] is A = 2.
    states, changes = run(initial, ops)
    assert dict(normalized(states, changes, 1, 4, None, None)) == {A: row(A, 2), B: row(B, 1)}
    # Q = 2 (A deleted) before P = 4: roll forward, the last after-image wins.
    assert dict(normalized(states, changes, 4, 2, None, None)) == {A: row(A, 4), B: row(B, 1)}


def test_key_created_after_p_is_absent_at_p():
    initial = {A: row(A, 1)}
    ops = [("ins", B, 1), ("upd", B, 2), ("ins", C, 1)]
    states, changes = run(initial, ops)
    assert dict(normalized(states, changes, 0, 3, None, None)) == {A: row(A, 1)}
    assert dict(normalized(states, changes, 3, 0, None, None)) == states[3]
    check(initial, ops, 1, 3, A, B)


def test_key_created_and_deleted_between_p_and_q():
    initial = {A: row(A, 1)}
    ops = [("ins", B, 1), ("del", B)]
    check(initial, ops, 0, 2, None, None)
    check(initial, ops, 2, 0, None, None)
    check(initial, ops, 1, 2, None, None)


def test_pk_update_crossing_the_range_boundary():
    # Range (A, B] holds B only. B moves out to D, then C moves in as B.
    initial = {A: row(A, 1), B: row(B, 1), C: row(C, 1)}
    ops = [("pk", B, D, 2), ("pk", C, B, 3)]
    states, changes = run(initial, ops)
    assert dict(normalized(states, changes, 0, 2, A, B)) == {B: row(B, 1)}
    assert dict(normalized(states, changes, 1, 2, A, B)) == {}
    assert dict(normalized(states, changes, 2, 0, A, B)) == {B: row(B, 3)}
    # The upper neighbour (B, None] sees D appear and C vanish.
    assert dict(normalized(states, changes, 0, 2, B, None)) == {C: row(C, 1)}
    assert dict(normalized(states, changes, 2, 0, B, None)) == {D: row(D, 2)}
    for p in range(3):
        for q in range(3):
            for lo, hi in [(None, A), (A, B), (B, C), (C, None), (A, C), (None, None)]:
                check(initial, ops, p, q, lo, hi)


def test_pk_update_into_range_from_outside():
    initial = {A: row(A, 1)}
    ops = [("pk", A, C, 1), ("upd", C, 5)]
    states, changes = run(initial, ops)
    assert dict(normalized(states, changes, 0, 2, B, None)) == {}
    assert dict(normalized(states, changes, 0, 2, None, B)) == {A: row(A, 1)}
    assert dict(normalized(states, changes, 2, 0, B, None)) == {C: row(C, 5)}
    assert dict(normalized(states, changes, 2, 0, None, B)) == {}


def test_q_equal_to_p_is_the_select_itself():
    initial = {A: row(A, 1), C: row(C, 1)}
    ops = [("upd", A, 2), ("ins", B, 1), ("del", C)]
    states, changes = run(initial, ops)
    for p in range(len(ops) + 1):
        assert undo_overrides(changes[p:p], in_key_range(None, None)) == {}
        assert redo_overrides(changes[p:p], in_key_range(None, None)) == {}
        assert dict(normalized(states, changes, p, p, None, None)) == states[p]


@example(lo=None, hi=None, key=b"k001")
@example(lo=b"k001", hi=b"k001", key=b"k001")
@example(lo=b"k001", hi=b"k002", key=b"k002")
@example(lo=b"k001", hi=b"k002", key=b"k001")
@SETTINGS
@given(
    lo=st.none() | st.binary(max_size=4),
    hi=st.none() | st.binary(max_size=4),
    key=st.binary(max_size=4),
)
def test_in_key_range_is_lo_exclusive_hi_inclusive(lo, hi, key):
    expected = (lo is None or lo < key) and (hi is None or key <= hi)
    assert in_key_range(lo, hi)(key) is expected


@SETTINGS
@given(histories(), st.lists(st.tuples(st.integers(-1, KEY_SPACE), st.integers(0, 3)), max_size=3))
def test_keeping_only_the_changes_that_touch_a_tasks_chunks_changes_no_chunk(history, spans):
    """A task keeps, while it reads the window, only the changes that touch one of its
    chunks (memory bounded by its chunks, not by the table's writes): each chunk's
    overrides are the same as from every change of the window."""
    initial, ops, p, q, _, _ = history
    _, changes = run(initial, ops)
    window = changes[p:q] if q >= p else changes[q:p]
    build = undo_overrides if q >= p else redo_overrides
    bounds = [(k(start), k(start + width)) for start, width in spans]
    kept = [change for change in window if touches(change, in_any_key_range(bounds))]
    for lo, hi in bounds:
        assert build(kept, in_key_range(lo, hi)) == build(window, in_key_range(lo, hi))
