"""The frontier filter: which binlog row changes a batch emits (DESIGN section 2, step 2).

A key is owned by the stream at the batch start S when its table sorts before the
frontier table, or it is in the frontier table and ``key <= after`` (compared as sort-key
bytes, i.e. in the server's order). A primary-key update that crosses the frontier is
emitted as the side that is owned: a delete of the old key or an insert of the new one.
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

    def owns(self, table: str, key: bytes | None) -> bool:
        if self.table is None or table < self.table:
            return True
        if table > self.table or self.after_key is None:
            return False
        return key is not None and key <= self.after_key


def emitted_op(
    ownership: Ownership,
    table: str,
    before_key: bytes | None,
    after_key: bytes | None,
    has_before: bool,
    has_after: bool,
) -> str | None:
    """The op to emit for one row change, or None when the change is not the stream's."""
    before_owned = has_before and ownership.owns(table, before_key)
    after_owned = has_after and ownership.owns(table, after_key)
    if before_owned and after_owned:
        return UPDATE
    if after_owned:
        return INSERT
    if before_owned:
        return DELETE
    return None
