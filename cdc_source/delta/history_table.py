"""Mode ``history``: a slowly changing dimension of type 2, every version of every row.

Each change that leaves a row (``r``, ``i``, ``u``) adds a version: the typed columns,
``_seq``, ``_key``, ``valid_from`` (the change's time, ``_ts_ms``), ``valid_to`` (the time of
the key's next change, null while it is the current version) and ``is_current``. A delete
adds no version and closes the current one; a reset (op ``t``) closes every version current
before it. Versions follow ``_seq``, not the clock: ``_ts_ms`` has second precision, so
versions of one second have ``valid_from == valid_to``, and the table as of a time ``T`` is
the versions with ``valid_from <= T < valid_to`` (or ``valid_to`` null).

A slice is written in one MERGE: a closing row per key it changes (matching that key's
current version, if any, and setting ``valid_to`` to the time of the key's first change or
the slice's first reset, whichever comes first), the slice's versions (never matching,
inserted), and with a reset every other current version closed at the reset's time.
A slice of snapshot reads alone, in a table this query claimed, is appended instead: each
read is its key's first version (:func:`~cdc_source.delta.changes.only_reads`), current,
and closes nothing, so the table is not read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.delta.changes import DELETE_OP, KEY, RESET_OP, only_reads
from cdc_source.delta.lake_table import LakeTable

TIME = pa.timestamp("us", tz="UTC")
KIND = "_kind"  # of a merge source row: 'v' a version to insert, 'c' a closing row


def _times(ms: np.ndarray, positions: np.ndarray) -> pa.Array:
    """The times at ``positions`` (-1: none, null) of the slice's ``_ts_ms``."""
    valid = positions >= 0
    micros = np.where(valid, ms[np.where(valid, positions, 0)], 0) * 1000
    return pa.array(micros, pa.int64(), mask=~valid).cast(TIME)


class HistoryTable(LakeTable):
    mode = "history"
    own_columns = ("_seq", "valid_from", "valid_to", "is_current")

    def own_fields(self) -> list[pa.Field]:
        return [
            pa.field("_seq", pa.string(), False),
            pa.field(KEY, pa.binary(), False),
            pa.field("valid_from", TIME, False),
            pa.field("valid_to", TIME, True),
            pa.field("is_current", pa.bool_(), False),
        ]

    def merge(self, table, changes: pa.Table, commit, alone: bool) -> str:
        if alone and only_reads(changes):
            return self._append_first_versions(table, changes, commit)
        changes = changes.sort_by("_seq")
        ops = np.asarray(changes.column("_op").to_pylist(), dtype=object)
        ms = changes.column("_ts_ms").to_numpy()
        resets = np.flatnonzero(ops == RESET_OP)
        positions = np.flatnonzero(ops != RESET_OP)  # the data changes, in _seq order
        data = changes.take(positions)
        key_ids = pc.index_in(data.column(KEY), value_set=pc.unique(data.column(KEY)))
        key_ids = key_ids.to_numpy()
        # The next change of the same key, and the next reset, after each data change.
        order = np.lexsort((positions, key_ids))
        same = key_ids[order][1:] == key_ids[order][:-1]
        next_same = np.full(len(positions), -1)
        next_same[order[:-1][same]] = positions[order[1:][same]]
        after = np.searchsorted(resets, positions, side="right")
        next_reset = np.append(resets, -1)[after]  # -1: no reset after it
        closer = np.where(
            (next_same >= 0) & ((next_reset < 0) | (next_same < next_reset)), next_same, next_reset
        )
        fields = [f for f in pa.schema(table.schema()) if f.name not in self.own_columns]
        fields = [f for f in fields if f.name != KEY]
        names = [f.name for f in fields]
        kept = ops[positions] != DELETE_OP
        versions = pa.table(
            {n: data.column(n).cast(f.type) for n, f in zip(names, fields)}
            | {
                "_seq": data.column("_seq"),
                KEY: data.column(KEY),
                "valid_from": _times(ms, positions),
                "valid_to": _times(ms, closer),
                "is_current": pa.array(closer < 0),
                KIND: pa.array(["v"] * len(positions), pa.string()),
            }
        ).filter(pa.array(kept))
        # One closing row per key: its first change, or the first reset if that is earlier.
        first = order[np.concatenate([[True], ~same])] if len(order) else order
        close_at = positions[first]
        if len(resets):
            close_at = np.minimum(close_at, resets[0])
        closing = pa.table(
            {n: pa.nulls(len(first), f.type) for n, f in zip(names, fields)}
            | {
                "_seq": data.column("_seq").take(first),
                KEY: data.column(KEY).take(first),
                "valid_from": _times(ms, close_at),
                "valid_to": pa.nulls(len(first), TIME),
                "is_current": pa.array([False] * len(first)),
                KIND: pa.array(["c"] * len(first), pa.string()),
            }
        )
        source = pa.concat_tables([versions, closing.cast(versions.schema)])
        columns = names + ["_seq", KEY, "valid_from", "valid_to", "is_current"]
        merge = (
            table.merge(
                source,
                f"t.`{KEY}` = s.`{KEY}` AND t.is_current = true AND s.{KIND} = 'c'",
                source_alias="s",
                target_alias="t",
                commit_properties=commit,
            )
            .when_matched_update({"valid_to": "s.valid_from", "is_current": "false"})
            .when_not_matched_insert(
                {f"`{c}`": f"s.`{c}`" for c in columns}, predicate=f"s.{KIND} = 'v'"
            )
        )
        if len(resets):
            micros = int(ms[resets[0]]) * 1000
            at = f"arrow_cast({micros}, 'Timestamp(Microsecond, Some(\"UTC\"))')"
            merge = merge.when_not_matched_by_source_update(
                {"valid_to": at, "is_current": "false"}, predicate="t.is_current = true"
            )
        merge.execute()
        text = f"{versions.num_rows} version(s) added, {len(first)} key(s) changed"
        if len(resets):
            text += ", versions before the reset closed"
        return text

    def _append_first_versions(self, table, reads: pa.Table, commit) -> str:
        count = reads.num_rows
        ms = reads.column("_ts_ms").to_numpy()
        versions = reads.append_column("valid_from", _times(ms, np.arange(count)))
        versions = versions.append_column("valid_to", _times(ms, np.full(count, -1)))
        versions = versions.append_column("is_current", pa.array([True] * count))
        self.append(table, versions, commit)
        return f"{count} first version(s) read by the snapshot appended"
