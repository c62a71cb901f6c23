"""The cut-over of an online schema-change tool read as a schema change of the table it
alters (``scan.parse.online.schema.changes.enabled``; docs/design.md, 'Tables joining
and leaving'): the single place for the tools' patterns, used alike by the driver's
table set and by every task that follows tables along a binlog range.

gh-ost and pt-online-schema-change alter a table ``t`` by building an altered copy, the
*shadow* table, and swapping names in one statement:

- gh-ost: ``_t_gho`` (the copy) and ``_t_ghc`` (its changelog); the cut-over is
  ``RENAME TABLE t TO _t_del, _t_gho TO t``, run while gh-ost holds a lock on ``t``
  taken after the last change of ``t`` was applied to ``_t_gho``;
- pt-online-schema-change: ``_t_new`` (the copy), kept equal to ``t`` by triggers that
  write each change of ``t`` to ``_t_new`` in the same transaction; the cut-over is
  ``RENAME TABLE t TO _t_old, _t_new TO t``.

Both tools guarantee that at the swap the shadow table holds exactly ``t``'s rows, and
the RENAME is atomic: no statement sees ``t`` between the two renames. So the rows the
stream emitted for ``t`` stay the rows of the new ``t``; only its columns changed. A
statement whose renames are exactly one tool's swap, ``t`` aside then the shadow to
``t`` in the same database, becomes one ``swap`` change of ``t``
(:func:`swap_changes`); any other rename of such names stays renames (the table leaves
and joins again, and is read again), with the reason (:func:`near_miss`).

The tools' own tables (``_t_gho``, ``_t_ghc``, ``_t_del``, ``_t_new``, ``_t_old``) are
never captured while the option is on (:func:`is_shadow_table`), whatever
``table-name`` matches: their rows are a copy of ``t``'s, not changes of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cdc_source.binlog.ddl import TableChange

__all__ = ["TOOLS", "is_shadow_table", "near_miss", "swap_changes"]

_SHADOW = re.compile(r"_(?P<table>.+)_(?P<role>gho|ghc|del|new|old)", re.S)

# The shadow table's suffix -> (the suffix the altered table is renamed aside to, the tool)
TOOLS = {"gho": ("del", "gh-ost"), "new": ("old", "pt-online-schema-change")}


def is_shadow_table(table: str) -> bool:
    """Whether a table name (without its database) is one an online schema-change tool
    creates for the table it alters: ``_<t>_gho``, ``_<t>_ghc``, ``_<t>_del``,
    ``_<t>_new`` or ``_<t>_old``."""
    return _SHADOW.fullmatch(table) is not None


def _split(name: str) -> tuple[str, str]:
    database, _, table = name.partition(".")
    return database, table


def _swap(renames: Sequence[TableChange]) -> TableChange | None:
    """The ``swap`` change that ``renames`` (a statement's changes) are, or None."""
    if len(renames) != 2 or any(r.kind != "rename" or r.new_name is None for r in renames):
        return None
    aside, shadow = renames
    database, table = _split(aside.table)
    if shadow.new_name != aside.table or _split(shadow.table)[0] != database:
        return None
    if _split(aside.new_name)[0] != database:
        return None
    for suffix, (aside_suffix, _) in TOOLS.items():
        if shadow.table == f"{database}._{table}_{suffix}" and aside.new_name == (
            f"{database}._{table}_{aside_suffix}"
        ):
            return TableChange("swap", aside.table, new_name=shadow.table, aside=aside.new_name)
    return None


def swap_changes(changes: tuple[TableChange, ...]) -> tuple[TableChange, ...]:
    """A statement's table changes, with a tool's swap (exactly ``t`` TO ``_t_del``,
    ``_t_gho`` TO ``t``, or ``t`` TO ``_t_old``, ``_t_new`` TO ``t``, in this order, in
    one RENAME) as one ``swap`` change of ``t``; any other statement's unchanged."""
    swap = _swap(changes)
    return changes if swap is None else (swap,)


def near_miss(changes: tuple[TableChange, ...]) -> str | None:
    """Why a statement that renames a tool's table is not read as a swap (the table it
    renames leaves and joins again, read in full again), or None when it is a swap or
    renames no such table."""
    if _swap(changes) is not None:
        return None
    renames = [c for c in changes if c.kind == "rename" and c.new_name]
    shadows = [
        r
        for r in renames
        if is_shadow_table(_split(r.table)[1]) or is_shadow_table(_split(r.new_name)[1])
    ]
    if not shadows:
        return None
    shown = ", ".join(f"{r.table} TO {r.new_name}" for r in renames)
    return (
        f"RENAME {shown} is not an online schema-change tool's swap (one RENAME TABLE of "
        "exactly t TO _t_del, _t_gho TO t (gh-ost) or t TO _t_old, _t_new TO t "
        "(pt-online-schema-change), in one database)"
    )
