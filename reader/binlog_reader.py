"""Binlog partitions: the changes in (P_S, P_E] that the stream owns at S."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice

from cdc_source.keys import key_from_json
from cdc_source.partitions import BinlogTask
from cdc_source.sequence import binlog_seq
from reader.arrow_output import Emitted
from reader.binlog_range import RowChange, read_changes
from reader.frontier import Ownership, emitted_op
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
            changes = read_changes(
                self.connection_kwargs,
                self.task.server_id,
                self.task.start,
                self.task.end,
                set(self.tables),
            )
            while True:
                round_ = list(islice(changes, CHANGES_PER_ROUND))
                if not round_:
                    break
                yield from self._emit(ownership, round_)
        finally:
            self.weights.close()

    def _emit(self, ownership: Ownership, changes: list[RowChange]) -> Iterator[Emitted]:
        frontier = ownership.table
        sort_keys: dict[int, tuple[bytes | None, bytes | None]] = {}
        needing = [i for i, c in enumerate(changes) if ownership.needs_key(c.table)]
        if needing:
            schema = self.tables[frontier]
            keys = [key_of(schema, changes[i].before) for i in needing] + [
                key_of(schema, changes[i].after) for i in needing
            ]
            encoded = iter(self.weights.sort_keys(schema, [k for k in keys if k is not None]))
            resolved = [next(encoded) if k is not None else None for k in keys]
            n = len(needing)
            for j, i in enumerate(needing):
                sort_keys[i] = (resolved[j], resolved[n + j])
        for i, change in enumerate(changes):
            before_key, after_key = sort_keys.get(i, (None, None))
            op = emitted_op(
                ownership,
                change.table,
                before_key,
                after_key,
                change.before is not None,
                change.after is not None,
            )
            if op is None:
                continue
            before = change.before if op != "c" else None
            after = change.after if op != "d" else None
            yield Emitted(
                self.tables[change.table],
                op,
                before,
                after,
                binlog_seq(change.file_number, change.end_pos, change.row_index),
                change.ts_ms,
            )
