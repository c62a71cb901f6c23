"""Which tables a running capture owns as tables are created, dropped and renamed, or
``table-name`` is changed between runs (docs/design.md, 'Tables joining and leaving').

A query's tables at an offset are three disjoint sets of ``db.table`` names:

- ``owned``: the tables whose changes the stream owns by the main snapshot cursor's rule
  (all of them once the hand-over is done). Their fingerprint is the offset's
  ``tables`` (:func:`cdc_source.offsets.table_fingerprint`).
- ``added``: at most one table that joined the capture with rows it already had (renamed
  into the pattern's reach, matched by a widened pattern, or whose partition was dropped
  or truncated), snapshotted on its own while the others stream: the offset's
  ``added`` cursor.
- ``pending``: tables waiting for that snapshot, one after another, by name.

How statements move tables between them (:meth:`Membership.apply`, in binlog order):

- ``CREATE TABLE`` of a matching name: the table has no row before the statement, so it
  needs no snapshot. If the main cursor has passed its name it is streamed from the
  statement on (the binlog tasks are told: ``streamed_from_creation``); else the main
  snapshot reads it in its turn.
- ``DROP TABLE``, ``RENAME`` away, ``DROP DATABASE``: the table leaves (its binlog task
  emits a ``t`` row where the statement is, when the stream owned any of it).
- ``RENAME`` to a matching name: its rows are older than the statement, so it waits for
  an added snapshot (``pending``), unless the main snapshot has yet to reach its name.
- ``TRUNCATE``: no change of the sets; the binlog task emits ``t``.
- An online schema-change tool's swap (``scan.parse.online.schema.changes.enabled``,
  :mod:`cdc_source.online_schema_change`): a schema change of a table the stream owns
  entirely, which stays owned; of any other table, its two renames.
- ``ALTER TABLE ... DROP/TRUNCATE PARTITION``: the binlog task emits ``t`` and the
  table's snapshot starts again: a table the stream owns entirely waits for a snapshot of
  its own (``pending``), the joining table's snapshot starts over, and the main
  snapshot's current table is read again from its first key.

A restarted driver knows only the offset: the position P, the fingerprint of ``owned``
and the ``added`` cursor. It rebuilds the sets from the server's tables now and the
statements written since P (:func:`tables_at`), then checks them against the
fingerprint; a difference of up to three tables (a pattern widened or narrowed, tables
pending) is found by its hash sum (:func:`explain_difference`), anything else is a
clear error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from cdc_source.binlog.ddl import TableChange, TableSetError

__all__ = ["Membership", "RangeEffect", "TableSetError", "explain_difference", "tables_at"]
from cdc_source.offsets import FINGERPRINT_MASK, SnapshotCursor, table_fingerprint, table_hash

Matches = Callable[[str], bool]  # whether a 'db.table' name matches table-name
MAX_DIFFERENCE = 3


def fully_owned(name: str, cursor: SnapshotCursor | None) -> bool:
    """Whether the main snapshot cursor gives the stream all of table ``name``."""
    return cursor is None or name < cursor.table


def partly_owned(name: str, cursor: SnapshotCursor | None) -> bool:
    return cursor is not None and name == cursor.table and cursor.after is not None


@dataclass(frozen=True)
class RangeEffect:
    """What the statements of one batch range do, for the driver's planning and tasks."""

    streamed_from_creation: frozenset[str] = frozenset()  # binlog tasks stream from CREATE
    restart_cursor_table: bool = False  # the main cursor's table was dropped (and maybe remade)
    left: tuple[str, ...] = ()  # tables no longer captured (dropped, renamed away)
    joined: tuple[str, ...] = ()  # tables that joined (created, renamed in)
    swapped: tuple[str, ...] = ()  # tables a tool's swap changed the schema of, kept owned
    # captured tables whose swap left and joined them again: not owned entirely at the swap
    unswapped: tuple[str, ...] = ()


@dataclass(frozen=True)
class Membership:
    owned: frozenset[str]
    pending: tuple[str, ...] = ()
    added: str | None = None

    @property
    def fingerprint(self) -> str:
        return table_fingerprint(self.owned)

    @property
    def names(self) -> frozenset[str]:
        """Every table the query captures or will."""
        extra = {self.added} if self.added else set()
        return self.owned | set(self.pending) | extra

    def apply(
        self,
        changes: Iterable[TableChange],
        cursor: SnapshotCursor | None,
        matches: Matches,
    ) -> tuple[Membership, RangeEffect]:
        """The sets after ``changes`` (a batch range's statements, in binlog order), with
        the main snapshot ``cursor`` at the range's start."""
        state = _Sets(set(self.owned), set(self.pending), self.added)
        for change in changes:
            state.apply(change, cursor, matches)
        after = Membership(frozenset(state.owned), tuple(sorted(state.pending)), state.added)
        effect = RangeEffect(
            streamed_from_creation=frozenset(state.streamed),
            restart_cursor_table=state.restart_cursor,
            left=tuple(sorted(self.names - after.names)),
            joined=tuple(sorted(after.names - self.names)),
            swapped=tuple(state.swapped),
            unswapped=tuple(state.unswapped),
        )
        return after, effect

    def next_added(self) -> Membership:
        """The first pending table becomes the added snapshot (when none is under way)."""
        if self.added is not None or not self.pending:
            return self
        return replace(self, pending=self.pending[1:], added=self.pending[0])

    def finish_added(self) -> Membership:
        """The added table's snapshot is done: the stream owns it entirely."""
        if self.added is None:
            return self
        return replace(self, owned=self.owned | {self.added}, added=None)

    def without(self, names: Iterable[str]) -> Membership:
        gone = set(names)
        return Membership(
            self.owned - gone,
            tuple(n for n in self.pending if n not in gone),
            None if self.added in gone else self.added,
        )


@dataclass
class _Sets:
    owned: set[str]
    pending: set[str]
    added: str | None
    streamed: set[str] = field(default_factory=set)
    restart_cursor: bool = False
    swapped: list[str] = field(default_factory=list)
    unswapped: list[str] = field(default_factory=list)

    def has(self, name: str) -> bool:
        return name in self.owned or name in self.pending or name == self.added

    def remove(self, name: str, cursor: SnapshotCursor | None) -> None:
        # ``streamed`` keeps the name: a table created and dropped within one range has
        # its rows and its reset emitted, as another cut of the ranges would emit them.
        self.owned.discard(name)
        self.pending.discard(name)
        if name == self.added:
            self.added = None
        if cursor is not None and name == cursor.table:
            self.restart_cursor = True

    def join(self, name: str, cursor: SnapshotCursor | None, has_rows: bool) -> None:
        if fully_owned(name, cursor):
            if has_rows:
                self.pending.add(name)
            else:
                self.owned.add(name)
                self.streamed.add(name)
        else:
            self.owned.add(name)  # the main snapshot reads it in its turn

    def apply(self, change: TableChange, cursor: SnapshotCursor | None, matches: Matches) -> None:
        kind, name = change.kind, change.table
        if kind == "create":
            if matches(name) and not self.has(name):
                self.join(name, cursor, has_rows=False)
        elif kind == "populate":  # appears with rows of its own: snapshotted
            if matches(name) and not self.has(name):
                self.join(name, cursor, has_rows=True)
        elif kind == "drop":
            self.remove(name, cursor)
        elif kind == "drop_database":
            for table in [t for t in (*self.owned, *self.pending, self.added) if t]:
                if table.split(".", 1)[0] == name:
                    self.remove(table, cursor)
        elif kind == "rename":
            self.remove(name, cursor)
            target = change.new_name or ""
            if matches(target) and not self.has(target):
                self.join(target, cursor, has_rows=True)
        elif kind == "partition":
            self.partition_changed(name, cursor)
        elif kind == "swap":
            self.swap(change, cursor, matches)
        # truncate: the sets stay; the binlog task emits the reset.

    def swap(self, change: TableChange, cursor: SnapshotCursor | None, matches: Matches) -> None:
        """An online schema-change tool's swap (:mod:`cdc_source.online_schema_change`): a
        schema change of a table the stream owns entirely, which stays owned (the shadow
        table held exactly its rows); of any other table, the two renames it is made of.
        The binlog tasks judge alike (:mod:`reader.table_follow`)."""
        name = change.table
        if name in self.owned and (fully_owned(name, cursor) or name in self.streamed):
            self.swapped.append(name)
            return
        if self.has(name):
            self.unswapped.append(name)
        self.apply(TableChange("rename", name, change.aside), cursor, matches)
        self.apply(TableChange("rename", change.new_name or "", name), cursor, matches)

    def partition_changed(self, name: str, cursor: SnapshotCursor | None) -> None:
        """A partition dropped or truncated removes rows without row events: the binlog
        task resets the table (``t``) and its snapshot starts again. A table the stream
        owns entirely waits for a snapshot of its own; the joining table's snapshot starts
        over; the main snapshot's table is read again from its first key."""
        if name == self.added:
            self.added = None
            self.pending.add(name)
        elif name in self.owned and (fully_owned(name, cursor) or name in self.streamed):
            self.owned.discard(name)
            self.pending.add(name)
        elif name in self.owned and partly_owned(name, cursor):
            self.restart_cursor = True


# -- a restarted driver ------------------------------------------------------------------


def tables_at(now: Iterable[str], changes_since: Iterable[TableChange]) -> set[str]:
    """The server's tables at a position P, from those it has now and the statements
    written since P (undone from the last): a name created or renamed in since was not
    there, a name dropped or renamed away was. (Tables dropped with their database are
    not named in the statement, so they cannot be brought back here.)"""
    tables = set(now)
    for change in reversed(list(changes_since)):
        if change.kind in ("create", "populate"):
            tables.discard(change.table)
        elif change.kind == "drop":
            tables.add(change.table)
        elif change.kind == "rename":
            tables.discard(change.new_name or "")
            tables.add(change.table)
        elif change.kind == "swap":  # the table stays; its shadow was there, not the aside
            tables.discard(change.aside or "")
            tables.add(change.new_name or "")
    return tables


def explain_difference(
    fingerprint: str, guess: set[str], others: set[str], limit: int = MAX_DIFFERENCE
) -> tuple[set[str], set[str]] | None:
    """The owned set whose fingerprint is ``fingerprint``, as ``guess`` minus ``out``
    plus ``in_`` (``in_`` taken from ``others``), with at most ``limit`` (up to 3) tables
    moved: ``(out, in_)``, or None when no such move, or more than one, gives it.

    The fewest moves that give the sum win: a second, larger move giving the same 64-bit
    sum by chance has a probability of about n**3 / 2**64 (1e-5 for 100,000 tables).
    One or two moves are found in O(n log n) over the sorted hashes; three in O(n**2),
    vectorized, and only among at most ``THREE_MOVES_MAX`` tables."""
    target = (int(fingerprint, 16) - int(table_fingerprint(guess), 16)) & FINGERPRINT_MASK
    if target == 0:
        return set(), set()
    names = sorted(guess) + sorted(others - guess)
    signs = np.array([-1] * len(guess) + [1] * (len(names) - len(guess)))
    hashes = np.array([table_hash(n) for n in names], dtype=np.uint64)
    terms = np.where(signs < 0, np.uint64(0) - hashes, hashes)  # mod 2**64
    order = np.argsort(terms, kind="stable")
    ordered = terms[order]
    for size in range(1, limit + 1):
        if size == 3 and len(names) > THREE_MOVES_MAX:
            return None
        found = _sums(ordered, order, terms, np.uint64(target), size)
        if found:
            if len(found) > 1:
                return None
            (chosen,) = found
            out = {names[i] for i in chosen if signs[i] < 0}
            in_ = {names[i] for i in chosen if signs[i] > 0}
            return out, in_
    return None


THREE_MOVES_MAX = 5_000  # tables on the server up to which three moves are searched (~2 s)


def _sums(ordered, order, terms, target, size: int) -> set[tuple[int, ...]]:
    """The index sets of ``size`` distinct terms summing to ``target`` (mod 2**64)."""
    if size == 1:
        return {(int(i),) for i in np.flatnonzero(terms == target)}
    found: set[tuple[int, ...]] = set()
    if size == 2:
        for i, j in _pairs(ordered, order, target - terms):
            if i != j:
                found.add(tuple(sorted((i, j))))
        return found
    block = max(1, (1 << 22) // max(len(terms), 1))  # about 32 MiB of sums at a time
    for first in range(0, len(terms), block):
        firsts = np.arange(first, min(first + block, len(terms)))
        rests = (target - terms[firsts])[:, None] - terms[None, :]
        for flat, k in _pairs(ordered, order, rests.ravel()):
            i, j = int(firsts[flat // len(terms)]), flat % len(terms)
            if len({i, j, k}) == 3:
                found.add(tuple(sorted((i, j, k))))
    return found


def _pairs(ordered, order, wanted):
    """(position in ``wanted``, index of a term equal to it) for every match."""
    left = np.searchsorted(ordered, wanted, side="left")
    right = np.searchsorted(ordered, wanted, side="right")
    for at in np.flatnonzero(right > left):
        for position in range(left[at], right[at]):
            yield int(at), int(order[position])
