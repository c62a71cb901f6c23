"""Binlog partitions: the changes in (P_S, P_E] that the stream owns at S, as Arrow batches.

Each :class:`ChangeBlock` of decoded rows becomes output columns without a Python loop per
row: ownership, the ops of each change (docs/design.md, 'Ownership'; see
:func:`reader.frontier.emitted_ops` for the rule), ``_seq`` and the values are computed
with numpy and pyarrow compute. Only keys that need the server's collation (a collated
string key at the frontier, or a string key whose spelling changed in an update) are
looked at one by one, through the weight resolver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.binlog.ddl import TableSetError
from cdc_source.binlog.transport import DumpSource
from cdc_source.catalog import INTEGER_TYPES, TableSchema
from cdc_source.keys import key_from_json, needs_weight
from cdc_source.offsets import SnapshotCursor
from cdc_source.partitions import BinlogTask
from cdc_source.retry import RetryPolicy
from cdc_source.sequence import binlog_seq, binlog_seq_array
from reader.arrow_output import ArrowWriter, Emitted, RowOrigins
from reader.binlog_columns import ImageColumns
from reader.binlog_range import RangeReader
from reader.change_blocks import ChangeBlock, TableReset
from reader.frontier import DELETE, INSERT, UPDATE
from reader.key_weights import WeightResolver
from reader.row_keys import RowKeys
from reader.schema_drift import event_schema, server_charsets
from reader.table_follow import ALL, Partial, TableFollow

log = logging.getLogger("cdc_mysql")

_OPS = np.array([INSERT, UPDATE, DELETE], dtype=object)
_OP_INSERT, _OP_UPDATE, _OP_DELETE = 0, 1, 2


class BinlogReader:
    def __init__(
        self,
        task: BinlogTask,
        connection_kwargs: dict,
        connect: Callable[..., object],
        policy: RetryPolicy | None = None,
    ) -> None:
        self.task = task
        self.connection_kwargs = connection_kwargs
        self.connect = connect
        self.policy = policy or RetryPolicy(max_retries=0)
        self.tables = {t.name: t for t in (*task.tables, *task.streamed_from_creation)}
        self._after_keys: dict[SnapshotCursor, bytes] = {}
        self._row_keys: dict[TableSchema, RowKeys] = {}
        self.weights = WeightResolver(lambda: connect(connection_kwargs), self.policy)
        self.charsets = server_charsets(lambda: connect(connection_kwargs))

    def _follow(self) -> TableFollow:
        task = self.task
        return TableFollow.at_start(
            [t.name for t in task.tables],
            task.owned_at,
            task.added,
            frozenset(t.name for t in task.streamed_from_creation),
        )

    def batches(self, writer: ArrowWriter) -> Iterator[pa.RecordBatch]:
        try:
            follow = self._follow()
            # Tables the stream owns nothing of yet are skipped before their rows are
            # decoded: the snapshot will read them later as of a later position.
            if not follow.may_decode():
                return
            reader = RangeReader(
                DumpSource(
                    # a dump reads raw events: its session needs no time zone
                    lambda: self.connect(self.connection_kwargs, init_command=None),
                    self.task.server_id,
                    self.task.decoder,
                    self.policy,  # a dump cut mid-range resumes at the next event
                    self.task.server,
                ),
                self.task.start,
                self.task.end,
                set(self.tables),
                stride=self.task.stride,
                slot=self.task.slot,
                decoder=self.task.decoder,
                origins=bool(writer.metadata),
                keyed_by_column={
                    name: (schema.primary_key[0], schema.key_indexes)
                    for name, schema in self.tables.items()
                    if schema.declared_key
                },
                follow=follow,
                lower_case_names=self.task.lower_case_names,
                online_schema_changes=self.task.online_schema_changes,
            )
            for block in reader.blocks():
                if isinstance(block, TableReset):
                    yield from self._reset(writer, block)
                else:
                    yield from self._emit(writer, follow, block)
        finally:
            self.weights.close()

    def _reset(self, writer: ArrowWriter, reset: TableReset) -> Iterator[pa.RecordBatch]:
        """A ``t`` row where a statement removed the table's rows without row events."""
        schema = self.tables.get(reset.table) or _placeholder(reset.table)
        file_number, end_pos = reset.where
        seq = binlog_seq(file_number, end_pos, 0, 0, reset.sub, self.task.start.epoch)
        ts_ms = reset.timestamp * 1000
        log.info(
            "%s: a statement at %s:%d removed its rows without row events: emitted 't' "
            "(table reset)",
            reset.table,
            reset.file,
            end_pos,
        )
        origins = None
        if writer.metadata:
            origins = RowOrigins(
                pa.array([ts_ms], pa.int64()),
                pa.array([reset.file], pa.string()),
                pa.array([end_pos], pa.int64()),
                pa.array([reset.gtid], pa.string()),
                pa.array([reset.server_id], pa.int64()),
                pa.array([0], pa.int64()),
                pa.nulls(1, pa.binary()),
            )
        yield from writer.batches([Emitted(schema, "t", None, None, seq, ts_ms)], origins)

    def _emit(
        self, writer: ArrowWriter, follow: TableFollow, block: ChangeBlock
    ) -> Iterator[pa.RecordBatch]:
        schema = self.tables.get(block.table)
        if schema is None or not schema.columns:  # a table gone before the driver read it
            schema = _from_table_map(block.table, block.table_map, self.charsets)
        images = ImageColumns.for_output(schema, block, writer, self.task.server, self.charsets)
        has_before = block.rows.has_before.to_numpy(zero_copy_only=False)
        has_after = block.rows.has_after.to_numpy(zero_copy_only=False)
        update = has_before & has_after
        same = self._same_key(schema, images, update)
        state = follow.state_at(schema.name, (int(block.file_number[0]), int(block.end_pos[0])))
        owned_before, owned_after = self._owned(state, schema, images, has_before, has_after)
        emit_u = update & same & owned_before
        emit_d = has_before & ~(update & same) & owned_before
        emit_c = has_after & ~(update & same) & owned_after
        rows = np.concatenate(
            [np.flatnonzero(emit_d), np.flatnonzero(emit_u), np.flatnonzero(emit_c)]
        )
        if not len(rows):
            return
        ops = np.concatenate(
            [
                np.full(int(emit_d.sum()), _OP_DELETE),
                np.full(int(emit_u.sum()), _OP_UPDATE),
                np.full(int(emit_c.sum()), _OP_INSERT),
            ]
        )
        parts = np.where((ops == _OP_INSERT) & has_before[rows], 1, 0)
        order = np.lexsort((parts, rows))
        rows, ops, parts = rows[order], ops[order], parts[order]
        seq = binlog_seq_array(
            pa.array(block.file_number[rows]),
            pa.array(block.end_pos[rows]),
            pa.array(block.sub[rows]),
            pa.array(block.row_index[rows]),
            pa.array(parts),
            self.task.start.epoch,
        )
        ts_ms = pa.array(block.timestamp[rows] * 1000, pa.int64())
        take = pa.array(rows)
        use_before = pa.array(ops == _OP_DELETE)

        taken: dict[int, pa.Array] = {}

        def image_column(i: int) -> pa.Array:  # a delete's before-image, else the after
            if i not in taken:  # a key column serves row_key and the output alike
                before = images.column("before", i).take(take)
                taken[i] = pc.if_else(use_before, before, images.column("after", i).take(take))
            return taken[i]

        origins = None
        if writer.metadata:
            row_key = pa.nulls(len(rows), pa.binary())
            if writer.row_keys:
                row_key = self._row_keys_of(images.schema, image_column)
            origins = _origins(block, rows, ts_ms, row_key)
        if writer.envelope:
            yield from self._envelope(writer, images.schema, images, rows, ops, seq, ts_ms, origins)
            return
        columns = [
            writer.output_column(schema, column, mask, lambda i=i: image_column(i))
            for i, column, mask in writer.kept(images.schema)
        ]
        columns += [pa.array(_OPS[ops].tolist(), pa.string()), seq, ts_ms]
        if origins is not None:
            columns += writer.table_metadata_columns(schema, origins)
        yield from writer.split(pa.RecordBatch.from_arrays(columns, schema=writer.arrow_schema))

    def _envelope(self, writer, schema, images, rows, ops, seq, ts_ms, origins):
        before = images.python_images("before")
        after = images.python_images("after")
        seqs = seq.to_pylist()
        ts = ts_ms.to_pylist()
        emitted = (
            Emitted(
                schema,
                _OPS[op],
                None if op == _OP_INSERT else before[row],
                None if op == _OP_DELETE else after[row],
                seqs[i],
                ts[i],
            )
            for i, (row, op) in enumerate(zip(rows.tolist(), ops.tolist()))
        )
        yield from writer.batches(emitted, origins)

    def _row_keys_of(self, schema: TableSchema, image_column) -> pa.Array:
        """The ``row_key`` of emitted rows whose ``i``-th typed column is
        ``image_column(i)``."""
        row_keys = self._row_keys.get(schema)
        if row_keys is None:
            row_keys = self._row_keys[schema] = RowKeys(schema, self.weights)
        names = list(schema.column_names)
        return row_keys([image_column(names.index(name)) for name in schema.primary_key])

    def _same_key(self, schema: TableSchema, images: ImageColumns, update: np.ndarray):
        """Whether each update keeps its primary key: equal raw key values, or, for a
        collated string key spelled differently, equal collation weights."""
        same = np.ones(len(update), dtype=bool)
        weighted = False
        for name in schema.primary_key:
            # The decoded values, not the output ones: TINYINT(1) 2 and 3 are both true.
            before, after = images.raw("before", name), images.raw("after", name)
            equal = pc.fill_null(pc.equal(before, after), False).to_numpy(zero_copy_only=False)
            if needs_weight(schema.column(name)):
                weighted = weighted or bool((update & ~equal).any())
                continue
            same &= equal
        if weighted:
            changed = np.flatnonzero(update)
            keys_b = images.key_tuples("before")
            keys_a = images.key_tuples("after")
            pairs = self.weights.image_sort_keys(
                schema,
                [
                    ({**_as_image(schema, keys_b[i])}, {**_as_image(schema, keys_a[i])})
                    for i in changed
                ],
            )
            for i, (kb, ka) in zip(changed, pairs):
                if kb != ka:
                    same[i] = False
        return same | ~update

    def _owned(
        self,
        state,
        schema: TableSchema,
        images: ImageColumns,
        has_before: np.ndarray,
        has_after: np.ndarray,
    ):
        """Which before and after images the stream owns: all, none, or (a table being
        snapshotted) those whose key is at most the snapshot cursor's ``after``."""
        if state == ALL:
            return has_before.copy(), has_after.copy()
        if not isinstance(state, Partial):
            return np.zeros_like(has_before), np.zeros_like(has_after)
        cursor = state.cursor
        key_columns = schema.key_columns
        if len(key_columns) == 1 and key_columns[0].data_type in INTEGER_TYPES:
            (after,) = key_from_json(schema, cursor.after)
            result = []
            for side, present in (("before", has_before), ("after", has_after)):
                values = images.raw(side, key_columns[0].name)
                bound = pa.scalar(after).cast(values.type)
                owned = pc.fill_null(pc.less_equal(values, bound), False)
                result.append(owned.to_numpy(zero_copy_only=False) & present)
            return result[0], result[1]
        after_key = self._after_key(schema, cursor)
        keys_b = images.key_tuples("before")
        keys_a = images.key_tuples("after")
        sort_b = self.weights.optional_sort_keys(schema, keys_b)
        sort_a = self.weights.optional_sort_keys(schema, keys_a)
        owned_b = np.array([k is not None and k <= after_key for k in sort_b], dtype=bool)
        owned_a = np.array([k is not None and k <= after_key for k in sort_a], dtype=bool)
        return owned_b, owned_a

    def _after_key(self, schema: TableSchema, cursor: SnapshotCursor) -> bytes:
        """The sort bytes of a snapshot cursor's ``after`` (the server's collation order)."""
        cached = self._after_keys.get(cursor)
        if cached is None:
            (cached,) = self.weights.sort_keys(schema, [key_from_json(schema, cursor.after)])
            self._after_keys[cursor] = cached
        return cached


def _placeholder(name: str) -> TableSchema:
    """A table the driver could not read (created and dropped within the batch's range):
    its rows carry the columns of their own events (envelope output)."""
    database, table = name.split(".", 1)
    return TableSchema(database=database, table=table, columns=(), primary_key=())


def _from_table_map(name: str, table_map, charsets) -> TableSchema:
    """The schema of a table the driver could not read (created and dropped within the
    batch's range), as its rows' TABLE_MAP describes it: its columns and primary key
    (binlog_row_metadata=FULL)."""
    if not table_map.primary_key:
        raise TableSetError(
            f"{name} joined the capture (created and dropped between two batches) without "
            "a primary key; its rows cannot be keyed. Narrow 'table-name' to exclude it, or "
            "start a new query with a new checkpoint location"
        )
    placeholder = replace(_placeholder(name), primary_key=tuple(table_map.primary_key))
    return event_schema(placeholder, table_map, charsets)


def _origins(
    block: ChangeBlock, rows: np.ndarray, ts_ms: pa.Array, row_key: pa.Array
) -> RowOrigins:
    """The metadata of the emitted ``rows`` of ``block`` (both halves of a primary-key
    update come from one row of its event): the event's file, end position, GTID, server
    id and the row's index in it, and the rows' ``row_key``."""
    return RowOrigins(
        ts_ms,
        pa.array(block.file[rows], pa.string()),
        pa.array(block.end_pos[rows], pa.int64()),
        pa.array(block.gtid[rows], pa.string()),
        pa.array(block.server_id[rows], pa.int64()),
        pa.array(block.row_index[rows], pa.int64()),
        row_key,
    )


def _as_image(schema: TableSchema, key: tuple | None) -> dict | None:
    return None if key is None else dict(zip(schema.primary_key, key))
