"""Mode ``mirror``: a Delta table equal to the source table, upserted and deleted by key.

Per key (its ``_key`` bytes) the change with the highest ``_seq`` of a slice wins: ``d``
deletes the row, anything else upserts it, and a row is only replaced by a newer one (the
table keeps ``_seq``). Slices are applied in ``_seq`` order, so the table moves from one
state of the source table to a later one. An update that re-spells a key (``'a'`` to
``'A'`` under a case-insensitive collation) replaces the row and its spelling. A reset (op
``t``) deletes every row whose ``_seq`` is lower, in the same commit, before the slice's
later changes are applied.

A slice of snapshot reads alone (the whole of a snapshot batch without concurrent
writes) is appended to a table this query claimed, without a MERGE: none of its keys can
be in the table yet (:func:`~cdc_source.delta.changes.only_reads`), and an append does not
read the table, so its memory does not grow with the table.
"""

from __future__ import annotations

import pyarrow as pa

from cdc_source.delta.changes import KEY, after_last_reset, latest_changes, only_reads, sql_string
from cdc_source.delta.lake_table import LakeTable


class MirrorTable(LakeTable):
    """The typed columns, ``_seq`` and ``_key``: one row per key of the source table."""

    mode = "mirror"
    own_columns = ("_seq",)

    def own_fields(self) -> list[pa.Field]:
        return [pa.field("_seq", pa.string(), False), pa.field(KEY, pa.binary(), False)]

    def merge(self, table, changes: pa.Table, commit, alone: bool) -> str:
        if "_ts_ms" in changes.column_names:
            changes = changes.drop_columns(["_ts_ms"])
        if alone and only_reads(changes):
            self.append(table, changes, commit)
            return f"{changes.num_rows} row(s) read by the snapshot appended"
        later, reset = after_last_reset(changes)
        latest = latest_changes(later)
        columns = [name for name in latest.column_names if name != "_op"]
        values = {f"`{c}`": f"s.`{c}`" for c in columns}
        merge = (
            table.merge(
                latest,
                f"t.`{KEY}` = s.`{KEY}`",
                source_alias="s",
                target_alias="t",
                commit_properties=commit,
            )
            .when_matched_delete(predicate="s._op = 'd'")
            .when_matched_update(values, predicate="s._op != 'd' AND s._seq > t._seq")
            .when_not_matched_insert(values, predicate="s._op != 'd'")
        )
        if reset is not None:  # every row older than the reset goes, unless a change replaces it
            merge = merge.when_not_matched_by_source_delete(f"t._seq < {sql_string(reset)}")
        merge.execute()
        text = f"{latest.num_rows} key(s) merged"
        if reset is not None:
            text += f", rows before the reset at {reset} deleted"
        return text
