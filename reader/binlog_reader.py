"""Binlog partitions: the changes in (P_S, P_E] that the stream owns at S."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice

from cdc_source.catalog import TableSchema
from cdc_source.keys import key_from_json, needs_weight
from cdc_source.partitions import BinlogTask
from cdc_source.sequence import binlog_seq
from reader.arrow_output import Emitted
from reader.binlog_range import RowChange, read_changes
from reader.frontier import DELETE, INSERT, Ownership, emitted_ops
from reader.key_weights import WeightResolver, key_of

CHANGES_PER_ROUND = 2000


class BinlogReader:
    def __init__(
        self, task: BinlogTask, connection_kwargs: dict, connect: Callable[..., object]
    ) -> None:
        self.task = task
        self.connection_kwargs = connection_kwargs
        self.tables = {t.name: t for t in task.tables}
        self.weights = WeightResolver(lambda: connect(connection_kwargs))

    def _ownership(self) -> Ownership:
        cursor = self.task.owned_at
        if cursor is None:
            return Ownership(None)
        if cursor.after is None or cursor.table not in self.tables:
            return Ownership(cursor.table, None)
        schema = self.tables[cursor.table]
        (after_key,) = self.weights.sort_keys(schema, [key_from_json(schema, cursor.after)])
        return Ownership(cursor.table, after_key)

    def rows(self) -> Iterator[Emitted]:
        try:
            ownership = self._ownership()
            # Tables the stream owns nothing of yet are skipped before their rows are
            # decoded: the snapshot will read them later as of a later position.
            owned = {name for name in self.tables if ownership.may_own(name)}
            if not owned:
                return
            changes = read_changes(
                self.connection_kwargs,
                self.task.server_id,
                self.task.start,
                self.task.end,
                owned,
                stride=self.task.stride,
                slot=self.task.slot,
            )
            while True:
                round_ = list(islice(changes, CHANGES_PER_ROUND))
                if not round_:
                    break
                yield from self._emit(ownership, round_)
        finally:
            self.weights.close()

    def _needs_sort_keys(self, ownership: Ownership, change: RowChange) -> bool:
        """Sort keys are needed to decide ownership at the frontier, and to tell whether an
        update changed its key when the raw values differ but a collation may equate them."""
        if ownership.needs_key(change.table):
            return True
        if change.before is None or change.after is None:
            return False
        schema = self.tables[change.table]
        if key_of(schema, change.before) == key_of(schema, change.after):
            return False
        return any(needs_weight(c) for c in schema.key_columns)

    def _sort_keys(self, ownership: Ownership, changes: list[RowChange]) -> dict:
        needing: dict[str, list[int]] = {}
        for i, change in enumerate(changes):
            if self._needs_sort_keys(ownership, change):
                needing.setdefault(change.table, []).append(i)
        result: dict[int, tuple[bytes | None, bytes | None]] = {}
        for table, indexes in needing.items():
            schema: TableSchema = self.tables[table]
            images = [(changes[i].before, changes[i].after) for i in indexes]
            result.update(zip(indexes, self.weights.image_sort_keys(schema, images)))
        return result

    def _emit(self, ownership: Ownership, changes: list[RowChange]) -> Iterator[Emitted]:
        sort_keys = self._sort_keys(ownership, changes)
        for i, change in enumerate(changes):
            schema = self.tables[change.table]
            before_key, after_key = sort_keys.get(i, (None, None))
            if before_key is not None and after_key is not None:
                same_key = before_key == after_key
            else:
                same_key = key_of(schema, change.before) == key_of(schema, change.after)
            ops = emitted_ops(
                ownership,
                change.table,
                before_key,
                after_key,
                change.before is not None,
                change.after is not None,
                same_key,
            )
            for op in ops:
                before = None if op == INSERT else change.before
                after = None if op == DELETE else change.after
                part = 1 if op == INSERT and change.before is not None else 0
                yield Emitted(
                    schema,
                    op,
                    before,
                    after,
                    binlog_seq(change.file_number, change.end_pos, change.row_index, part),
                    change.ts_ms,
                )
