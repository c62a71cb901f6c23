"""The frontier filter: which binlog row changes a batch emits (docs/design.md,
'Ownership').

A key is owned by the stream at the batch start S when its table sorts before the
frontier table, or it is in the frontier table and ``key <= after`` (compared as sort-key
bytes, i.e. in the server's order). An update that changes the primary key is
a delete of the old key plus an insert of the new one, each emitted only if owned, so a
key update that crosses the frontier yields just the side the stream owns.
"""

from __future__ import annotations

from dataclasses import dataclass

INSERT, UPDATE, DELETE, READ = "c", "u", "d", "r"


@dataclass(frozen=True)
class Ownership:
    """The stream's ownership at a batch start. ``table`` None: everything is owned."""

    table: str | None
    after_key: bytes | None = None

    def needs_key(self, table: str) -> bool:
        """Whether deciding ownership for ``table`` requires the key's sort bytes."""
        return self.table is not None and table == self.table and self.after_key is not None

    def may_own(self, table: str) -> bool:
        """Whether any key of ``table`` is owned (so its row events must be decoded)."""
        if self.table is None or table < self.table:
            return True
        return table == self.table and self.after_key is not None

    def owns(self, table: str, key: bytes | None) -> bool:
        if self.table is None or table < self.table:
            return True
        if table > self.table or self.after_key is None:
            return False
        return key is not None and key <= self.after_key


def emitted_ops(
    ownership: Ownership,
    table: str,
    before_key: bytes | None,
    after_key: bytes | None,
    has_before: bool,
    has_after: bool,
    same_key: bool,
) -> tuple[str, ...]:
    """The ops to emit for one row change: () when it is not the stream's.

    An update that keeps its key is one ``u``. An update that changes the primary key
    is a delete of the old key and an insert of the new one, each emitted only when
    its key is owned, so a consumer that keeps the latest row per key never keeps a
    key that no longer exists.
    """
    if has_before and has_after and same_key:
        return (UPDATE,) if ownership.owns(table, before_key) else ()
    ops = []
    if has_before and ownership.owns(table, before_key):
        ops.append(DELETE)
    if has_after and ownership.owns(table, after_key):
        ops.append(INSERT)
    return tuple(ops)
