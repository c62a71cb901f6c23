"""The columns a lake table keeps for its own, and what one table's changes reduce to."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.sequence import REREAD_MARK

RESET_OP = "t"
DELETE_OP = "d"
KEY = "_key"  # each row's primary-key bytes, equal exactly when the server's keys are equal
ROW_KEY = "row_key"  # the source's metadata column the lake tables take their _key from
# Column names the lake tables need for their own (a source table with one is refused).
RESERVED = ("_op", "_seq", "_ts_ms", KEY, "valid_from", "valid_to", "is_current")


def reserved_clash(table) -> None:
    """Refuses a source table with a column the lake tables need for their own."""
    clash = set(RESERVED) & set(table.column_names)
    if clash:
        raise ValueError(
            f"table {table.name} has column(s) {sorted(clash)}, which the Delta tables "
            "need for their own columns"
        )


READ_OP = "r"


def only_reads(changes: pa.Table) -> bool:
    """Whether every change of ``changes`` is a first snapshot read (op ``r``, not a
    re-read's).

    The source emits a key's snapshot ``r`` before any other change of it since the
    table's last reset (a key's changes are emitted only once the snapshot has read it),
    and at most once: in a lake table whose every row came from this query in ``_seq``
    order, no row of such a key exists yet, so a slice of reads adds rows without
    matching any. A re-read (a snapshot on demand, its ``_seq`` marked with
    :data:`~cdc_source.sequence.REREAD_MARK`) restates keys that are there: it merges."""
    ops = changes.column("_op")
    if changes.num_rows == 0 or not pc.all(pc.equal(ops, READ_OP)).as_py():
        return False
    seqs = changes.column("_seq")
    return not pc.any(pc.match_substring(seqs, REREAD_MARK)).as_py()


def latest_changes(batch: pa.Table) -> pa.Table:
    """Per key (its ``_key`` bytes), the row with the highest ``_seq`` of the batch
    (``_seq`` is unique per change, so the rows holding their key's maximum are exactly
    one per key)."""
    if batch.num_rows == 0:
        return batch
    newest = batch.group_by([KEY]).aggregate([("_seq", "max")])
    return batch.filter(pc.is_in(batch.column("_seq"), value_set=newest.column("_seq_max")))


def after_last_reset(batch: pa.Table) -> tuple[pa.Table, str | None]:
    """The changes of one table's batch that follow its last reset (op ``t``), and that
    reset's ``_seq`` (None without a reset: then every change of the batch)."""
    resets = pc.equal(batch.column("_op"), RESET_OP)
    if not pc.any(resets).as_py():
        return batch, None
    last = pc.max(batch.filter(resets).column("_seq")).as_py()
    return batch.filter(pc.greater(batch.column("_seq"), last)), last


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal of a MERGE predicate."""
    return "'" + value.replace("'", "''") + "'"
