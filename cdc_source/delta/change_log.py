"""Mode ``append``: the change log itself, each change once.

Every change of the source becomes one row (the typed columns, ``_op``, ``_seq``,
``_ts_ms`` and ``_key``; a reset's typed columns and ``_key`` are null). A change is
inserted only when no row of its ``_seq`` is in the table, so a slice written again (by a
query started anew on the same table) adds nothing; within a query the application
transactions already skip slices applied before a crash.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.delta.changes import KEY, sql_string
from cdc_source.delta.lake_table import LakeTable


class ChangeLogTable(LakeTable):
    mode = "append"
    own_columns = ("_op", "_seq", "_ts_ms")

    def own_fields(self) -> list[pa.Field]:
        return [
            pa.field("_op", pa.string(), False),
            pa.field("_seq", pa.string(), False),
            pa.field("_ts_ms", pa.int64(), False),
            pa.field(KEY, pa.binary(), True),
        ]

    def merge(self, table, changes: pa.Table, commit, alone: bool) -> str:
        rows = changes.sort_by("_seq").combine_chunks()
        low = sql_string(pc.min(rows.column("_seq")).as_py())
        high = sql_string(pc.max(rows.column("_seq")).as_py())
        (
            table.merge(
                rows,
                f"t._seq = s._seq AND t._seq >= {low} AND t._seq <= {high}",
                source_alias="s",
                target_alias="t",
                commit_properties=commit,
            )
            .when_not_matched_insert({f"`{c}`": f"s.`{c}`" for c in rows.column_names})
            .execute()
        )
        return f"{rows.num_rows} change(s) appended"
