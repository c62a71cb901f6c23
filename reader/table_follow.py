"""Which tables a binlog task owns along its range, as statements create, drop, rename
and truncate them (docs/design.md, 'Tables joining and leaving'; the driver's side is
:mod:`coordinator.table_set`).

At the range's start a table is owned entirely, in part (keys up to a snapshot cursor's
``after``: the main snapshot's table, or a table joining the capture), or not at all.
Along the range:

- a ``DROP``, ``RENAME`` away or ``DROP DATABASE`` of a table the task owns any of is
  a *reset* (``t`` row) where the statement is; the name is owned no more;
- ``TRUNCATE`` of such a table is a reset, and ownership stays: every later row is of
  the emptied table;
- ``CREATE`` of a name the driver lists in ``streamed_from_creation`` makes it owned
  entirely: every row of a new table comes after its CREATE;
- a name renamed in is not owned (the driver snapshots it);
- a partition drop or truncate of a table owned entirely or in part is a reset; the
  driver snapshots the table again from its first key;
- an online schema-change tool's swap (:mod:`cdc_source.online_schema_change`) of a
  table owned entirely changes nothing but its columns; of any other table it is its two
  renames.

The state of a name at any position is kept (``state_at``), so the rows of an XA
transaction, emitted after the pass at their commit, are judged where they happened.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_source.binlog.ddl import TableChange
from cdc_source.offsets import SnapshotCursor

ALL = "all"
NONE = "none"


class UnloggedRowChangeError(RuntimeError):
    """A statement changed a captured table's rows without row events in a way the
    stream cannot follow (inside a snapshot task's roll-forward window)."""


@dataclass(frozen=True)
class Partial:
    """Keys up to ``cursor.after`` are owned."""

    cursor: SnapshotCursor


State = str | Partial


class TableFollow:
    def __init__(
        self,
        initial: dict[str, State],
        streamed_from_creation: frozenset[str] = frozenset(),
    ) -> None:
        self._initial = dict(initial)
        self._created = streamed_from_creation
        self._changes: dict[str, list[tuple[tuple[int, int], State]]] = {}

    @classmethod
    def at_start(
        cls,
        names: list[str],
        main: SnapshotCursor | None,
        added: SnapshotCursor | None,
        streamed_from_creation: frozenset[str] = frozenset(),
    ) -> TableFollow:
        """Ownership at a batch start: the main snapshot ``main`` cursor's rule for every
        table but the one joining, ``added``."""
        initial: dict[str, State] = {}
        for name in names:
            if added is not None and name == added.table:
                initial[name] = NONE if added.after is None else Partial(added)
            elif main is None or name < main.table:
                initial[name] = ALL
            elif name == main.table and main.after is not None:
                initial[name] = Partial(main)
            else:
                initial[name] = NONE
        return cls(initial, streamed_from_creation)

    def state(self, name: str) -> State:
        """The state at the furthest position read."""
        changes = self._changes.get(name)
        return changes[-1][1] if changes else self._initial.get(name, NONE)

    def state_at(self, name: str, where: tuple[int, int]) -> State:
        """The state of ``name`` for a row at ``where`` (file number, end position)."""
        state = self._initial.get(name, NONE)
        for position, new in self._changes.get(name, ()):
            if position >= where:
                break
            state = new
        return state

    def decodes(self, name: str) -> bool:
        """Whether rows of ``name`` read now may be owned (so they must be decoded)."""
        return self.state(name) != NONE

    def may_decode(self) -> bool:
        """Whether the task may emit anything (a row or a reset)."""
        return any(s != NONE for s in self._initial.values()) or bool(self._created)

    def statement(self, changes: tuple[TableChange, ...], where: tuple[int, int]) -> list[str]:
        """Follow one statement at ``where``; the tables it resets, in order."""
        resets: list[str] = []
        for change in changes:
            for name, new, reset in self._effects(change):
                if reset and name not in resets:
                    resets.append(name)
                if new is not None and new != self.state(name):
                    self._changes.setdefault(name, []).append((where, new))
        return resets

    def _effects(self, change: TableChange):
        """(name, new state or None, whether it is a reset) for each table touched."""
        kind, name = change.kind, change.table
        owned = self.state(name) != NONE
        if kind == "create":
            if name in self._created:
                yield name, ALL, False
        elif kind == "populate":
            yield name, NONE, False  # its rows predate it: the driver snapshots it
        elif kind in ("drop", "rename"):
            yield name, NONE, owned
            if kind == "rename" and change.new_name:
                yield change.new_name, NONE, False
        elif kind == "truncate":
            yield name, None, owned
        elif kind == "swap":
            # An online schema-change tool's swap: a schema change of a table owned
            # entirely (the shadow held exactly its rows), else the two renames it is made
            # of; the driver judges alike (coordinator.table_set).
            if self.state(name) != ALL:
                yield from self._effects(TableChange("rename", name, change.aside))
                yield from self._effects(TableChange("rename", change.new_name or "", name))
        elif kind == "partition":
            # Rows removed without row events: a reset, and the driver snapshots the
            # table again (from its first key, also when its snapshot was under way).
            yield name, NONE, owned
        elif kind == "drop_database":
            for table in sorted(self.names()):
                if table.split(".", 1)[0] == name:
                    yield table, NONE, self.state(table) != NONE

    def names(self) -> set[str]:
        return set(self._initial) | set(self._changes) | set(self._created)
