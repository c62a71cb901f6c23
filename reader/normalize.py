"""Chunk normalization: the rows of a key range exactly as of the planned position P.

A chunk's SELECT sees the table as of the snapshot's position Q. The binlog between P and Q
tells how to get from one to the other, key by key:

- Q after P (the usual case): the state at P of a key touched in (P, Q] is the
  before-image of the *first* event that touched it, or absence if that event created it;
- Q before P: roll (Q, P] forward, the *last* after-image (or a delete) wins.

Keys nobody touched keep their SELECT value. The result depends only on P and the binlog,
never on where chunk boundaries fall or when the SELECT ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

ABSENT = None


@dataclass(frozen=True)
class KeyedChange:
    """A row change with the sort keys of its two images (None where the image is absent)."""

    before_key: bytes | None
    before: dict | None
    after_key: bytes | None
    after: dict | None


def undo_overrides(changes: Iterable[KeyedChange], in_range: Callable[[bytes], bool]) -> dict:
    """State at P of each touched key, from the changes in (P, Q] (first before-image wins)."""
    state: dict[bytes, dict | None] = {}
    for change in changes:
        if change.before_key is not None and in_range(change.before_key):
            state.setdefault(change.before_key, change.before)
        if change.after_key is not None and in_range(change.after_key):
            state.setdefault(change.after_key, ABSENT)
    return state


def redo_overrides(changes: Iterable[KeyedChange], in_range: Callable[[bytes], bool]) -> dict:
    """State at P of each touched key, from the changes in (Q, P] (last image wins)."""
    state: dict[bytes, dict | None] = {}
    for change in changes:
        if change.before_key is not None and in_range(change.before_key):
            state[change.before_key] = ABSENT
        if change.after_key is not None and in_range(change.after_key):
            state[change.after_key] = change.after
    return state


# Merging the SELECT with the overrides, on columns: every fetched row whose key was
# touched is dropped (one anti-join per fetch instead of a lookup per row), and the touched
# keys that exist at P are emitted from their images.


def touched_keys(overrides: dict) -> pa.Array | None:
    """The keys the overrides replace, as a binary column (None: nothing to replace)."""
    return pa.array(list(overrides), pa.binary()) if overrides else None


def untouched_rows(keys: pa.Array, touched: pa.Array) -> pa.Array:
    """Mask of the fetched rows (by sort key) that keep their SELECT value."""
    return pc.invert(pc.is_in(keys, value_set=touched))


def restored_rows(overrides: dict) -> list[tuple[bytes, dict]]:
    """The touched keys that exist at P, with their state then."""
    return [(key, row) for key, row in overrides.items() if row is not ABSENT]


def in_key_range(lo: bytes | None, hi: bytes | None) -> Callable[[bytes], bool]:
    """Membership in ``lo < key <= hi`` on sort-key bytes, with open ends for None."""

    def test(key: bytes) -> bool:
        return (lo is None or key > lo) and (hi is None or key <= hi)

    return test


def in_any_key_range(
    bounds: Iterable[tuple[bytes | None, bytes | None]],
) -> Callable[[bytes], bool]:
    """Membership in any of the ranges ``lo < key <= hi`` (a task's chunks of one table)."""
    tests = [in_key_range(lo, hi) for lo, hi in bounds]
    return lambda key: any(test(key) for test in tests)


def touches(change: KeyedChange, in_range: Callable[[bytes], bool]) -> bool:
    """Whether either image of ``change`` is of a key ``in_range``: the only changes a
    chunk's overrides can take, so the only ones a task keeps while it reads (P, Q]."""
    return (change.before_key is not None and in_range(change.before_key)) or (
        change.after_key is not None and in_range(change.after_key)
    )
