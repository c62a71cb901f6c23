"""Turning emitted changes into bounded ``pyarrow.RecordBatch``es of the output schema."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.column_masks import Mask
from cdc_source.column_policy import ALL_COLUMNS, ColumnPolicy
from cdc_source.offsets import BinlogPosition
from cdc_source.output_schema import is_envelope, output_metadata, output_schema
from cdc_source.refusals import ValueRefusedError, masked_failure
from cdc_source.types import (
    canonical_value,
    json_default,
    row_json,
    spark_type,
)
from reader.text_columns import text_column_to_arrow, text_to_python

ROWS_PER_BATCH = 8192


@dataclass(frozen=True)
class Emitted:
    """One output row before conversion: raw images as decoded by the snapshot or binlog."""

    table: TableSchema
    op: str
    before: dict | None
    after: dict | None
    seq: str
    ts_ms: int


@dataclass(frozen=True)
class RowOrigins:
    """Where each output row comes from, for the ``metadata.list`` columns: Arrow arrays
    of one length (never crosses a process)."""

    op_ts_ms: pa.Array  # int64, epoch milliseconds
    binlog_file: pa.Array  # string
    binlog_pos: pa.Array  # int64
    gtid: pa.Array  # string, null without one
    server_id: pa.Array  # int64, null for snapshot rows
    row_index: pa.Array  # int64, null for snapshot rows
    row_key: pa.Array  # binary, null for a table reset ('t'); see reader.row_keys

    def slice(self, offset: int, length: int) -> RowOrigins:
        return RowOrigins(
            *(getattr(self, name).slice(offset, length) for name in self.__dataclass_fields__)
        )

    @staticmethod
    def snapshot(target: BinlogPosition, row_key: pa.Array) -> RowOrigins:
        """Snapshot rows (op 'r') are exact as of the batch's target position: its file and
        end position, and for ``op_ts`` the time the driver read that position (the
        ``_ts_ms`` they already carry; Debezium stamps a snapshot row with the time it was
        read, Flink CDC with 0). No event wrote them: no GTID, server id or row index.
        ``row_key`` is their key bytes (null for a table reset)."""
        count = len(row_key)
        return RowOrigins(
            _constant(pa.scalar(target.ts, pa.int64()), count),
            _constant(pa.scalar(target.file), count),
            _constant(pa.scalar(target.pos, pa.int64()), count),
            pa.nulls(count, pa.string()),
            pa.nulls(count, pa.int64()),
            pa.nulls(count, pa.int64()),
            row_key.cast(pa.binary()),
        )


def _constant(value: pa.Scalar, count: int) -> pa.Array:
    """``count`` times ``value``. A string (the op column, a database or table name) is
    built from its buffers: Arrow's fill of a string column costs ten times as much."""
    if pa.types.is_string(value.type) and value.is_valid:
        data = value.as_py().encode()
        if len(data) * count < 2**31:  # int32 offsets
            offsets = np.arange(count + 1, dtype=np.int32) * np.int32(len(data))
            buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data * count)]
            return pa.Array.from_buffers(pa.string(), count, buffers)
    return pc.fill_null(pa.nulls(count, value.type), value)


class ArrowWriter:
    def __init__(
        self,
        tables: Iterable[TableSchema],
        rows_per_batch: int = ROWS_PER_BATCH,
        metadata: tuple[str, ...] = (),
        columns: ColumnPolicy = ALL_COLUMNS,
        native_text: bool = False,
    ):
        """``native_text``: snapshot text columns are typed with
        :mod:`reader.native_columns` where it has their kind."""
        self.tables = tuple(tables)
        self.native_text = native_text
        self.envelope = is_envelope(self.tables)
        self.columns = columns
        self.arrow_schema = to_arrow_schema(
            output_schema(self.tables, metadata, columns), timezone="UTC"
        )
        self._kept: dict[tuple, tuple[tuple[int, ColumnSpec, Mask | None], ...]] = {}
        # The metadata.list columns, last in the schema (all of them in the envelope).
        self.metadata = output_metadata(self.tables, metadata)
        self._base_width = len(self.arrow_schema) - len(self.metadata)
        self.rows_per_batch = rows_per_batch
        self._converters: dict[str, tuple] = {}

    @property
    def row_keys(self) -> bool:
        """Whether the output carries ``row_key``, each row's key bytes."""
        return "row_key" in self.metadata

    def column_types(self, table: TableSchema) -> list[pa.DataType]:
        """The Arrow type of each of ``table``'s columns as the typed output holds it
        unmasked (a hash, a string, is taken of the value in this type)."""
        return [to_arrow_type(spark_type(c), timezone="UTC") for c in table.columns]

    def kept(self, table: TableSchema) -> tuple[tuple[int, ColumnSpec, Mask | None], ...]:
        """The columns of ``table`` the output has (column.include.list and
        column.exclude.list), each with its index among ``table.columns`` and its mask."""
        key = (table.database, table.table, table.column_names)
        if key not in self._kept:
            excluded = self.columns.excluded_names(table, table.column_names)
            self._kept[key] = tuple(
                (index, column, self.columns.mask(table, column.name))
                for index, column in enumerate(table.columns)
                if column.name not in excluded
            )
        return self._kept[key]

    def output_column(
        self, table: TableSchema, column: ColumnSpec, mask: Mask | None, convert: Callable
    ) -> pa.Array:
        """The output column ``convert()`` gives (canonical values), masked; a refusal of
        a masked column's value does not show the value."""
        if mask is None:
            return convert()
        try:
            return mask.column(convert())
        except ValueRefusedError as err:
            raise err.hidden() from None
        except Exception as err:  # noqa: BLE001 - its message may quote the value
            raise masked_failure(column.name, err).in_table(table.name) from None

    def _output_value(self, column: ColumnSpec, mask: Mask | None, raw) -> object:
        """One canonical value, masked (the per-row road of :meth:`output_column`)."""
        if mask is None:
            return canonical_value(column, raw)
        try:
            return mask.value(canonical_value(column, raw))
        except ValueRefusedError as err:
            raise err.hidden() from None
        except Exception as err:  # noqa: BLE001 - its message may quote the value
            raise masked_failure(column.name, err) from None

    def _image(self, table: TableSchema, image: dict | None) -> dict | None:
        """A row image as the output holds it: the kept columns, canonical and masked."""
        if image is None:
            return None
        return {
            column.name: self._output_value(column, mask, image.get(column.name))
            for _, column, mask in self.kept(table)
        }

    def split(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """``batch`` in slices of at most ``rows_per_batch`` rows."""
        for start in range(0, batch.num_rows, self.rows_per_batch):
            yield batch.slice(start, self.rows_per_batch)

    def metadata_columns(
        self, database: pa.Array, table: pa.Array, origins: RowOrigins
    ) -> list[pa.Array]:
        """The ``metadata.list`` columns of rows of ``database``.``table`` (one value per
        row) that come from ``origins``, in the schema's order."""
        width = self._base_width
        columns = []
        for offset, name in enumerate(self.metadata):
            if name == "database_name":
                column = database
            elif name == "table_name":
                column = table
            elif name == "op_ts":  # milliseconds -> Spark's timestamp[us, UTC]
                ms = pc.cast(origins.op_ts_ms, pa.int64())
                column = pc.multiply(ms, 1000)
            else:
                column = getattr(origins, name)
            columns.append(column.cast(self.arrow_schema.field(width + offset).type))
        return columns

    def table_metadata_columns(self, schema: TableSchema, origins: RowOrigins) -> list[pa.Array]:
        """:meth:`metadata_columns` of rows all of table ``schema``."""
        count = len(origins.op_ts_ms)
        return self.metadata_columns(
            _constant(pa.scalar(schema.database), count),
            _constant(pa.scalar(schema.table), count),
            origins,
        )

    def batches(
        self, rows: Iterable[Emitted], origins: RowOrigins | None = None
    ) -> Iterator[pa.RecordBatch]:
        """``rows`` in batches; ``origins`` gives their metadata columns, per row in the
        order of ``rows`` (needed only when the output has metadata columns)."""
        columns = self._empty()
        count = done = 0
        for row in rows:
            self._append(columns, row)
            count += 1
            if count >= self.rows_per_batch:
                yield self._batch(columns, origins, done)
                columns, done, count = self._empty(), done + count, 0
        if count:
            yield self._batch(columns, origins, done)

    def snapshot_text_batches(
        self,
        table: TableSchema,
        columns: list[pa.Array],
        seqs: pa.Array,
        ts_ms: int,
        target: BinlogPosition | None = None,
        keys: pa.Array | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Snapshot rows (``op`` 'r') from the SELECT's text columns (one binary array per
        column of ``table``), typed column by column by Arrow: no per-value Python for
        most types. The envelope schema (several tables) takes the per-row path.
        ``columns`` are those of :meth:`kept` (the SELECT reads no other).
        ``target``, the position the rows are exact as of, and ``keys``, their key bytes,
        give the metadata columns (needed only when the output has them)."""
        count = len(seqs)
        origins = None
        if self.metadata:
            if target is None or keys is None:
                raise ValueError(
                    "the output has metadata columns, but these rows came without their origins"
                )
            origins = RowOrigins.snapshot(target, keys)
        if not count:
            return
        kept = self.kept(table)
        if self.envelope:
            values = [column.to_pylist() for column in columns]
            rows = (
                Emitted(
                    table,
                    "r",
                    None,
                    {c.name: text_to_python(c, v[i]) for (_, c, _), v in zip(kept, values)},
                    seq,
                    ts_ms,
                )
                for i, seq in enumerate(seqs.to_pylist())
            )
            yield from self.batches(rows, origins)
            return
        types = self.column_types(table)
        try:
            arrays = [
                self.output_column(
                    table,
                    column,
                    mask,
                    lambda column=column, values=values, index=index: text_column_to_arrow(
                        column, values, types[index], self.native_text
                    ),
                )
                for (index, column, mask), values in zip(kept, columns)
            ]
        except ValueRefusedError as err:
            raise err.in_table(table.name, f"read by the snapshot as of {target}") from None
        arrays.append(_constant(pa.scalar("r"), count))
        arrays.append(seqs)
        arrays.append(_constant(pa.scalar(ts_ms, pa.int64()), count))
        if self.metadata:
            arrays += self.table_metadata_columns(table, origins)
        yield pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _origins(self, origins: RowOrigins | None, offset: int, count: int) -> RowOrigins:
        if origins is None:
            raise ValueError(
                "the output has metadata columns, but these rows came without their origins"
            )
        if offset + count > len(origins.op_ts_ms):
            raise ValueError(
                f"{offset + count} rows, but origins for {len(origins.op_ts_ms)} of them"
            )
        return origins.slice(offset, count)

    def _empty(self) -> list[list]:
        return [[] for _ in range(self._base_width)]

    def _append(self, columns: list[list], row: Emitted) -> None:
        try:
            values = self._values(row)
        except ValueRefusedError as err:
            raise err.in_table(row.table.name) from None
        for column, value in zip(columns, values):
            column.append(value)

    def _values(self, row: Emitted) -> list:
        """The output columns of one row (the per-row road)."""
        if self.envelope:
            before = self._image(row.table, row.before)
            after = self._image(row.table, row.after)
            image = after if after is not None else before
            # A table reset ('t') has no image and no key: it stands for the whole table.
            key = {} if image is None else {name: image[name] for name in row.table.primary_key}
            values = [
                row.table.database,
                row.table.table,
                row.op,
                json.dumps(key, default=json_default, separators=(",", ":"), ensure_ascii=False),
                row_json(before),
                row_json(after),
                row.seq,
                row.ts_ms,
            ]
        else:  # typed columns carry one image: the after-image, or a delete's before-image
            image = row.after if row.after is not None else row.before
            image = image or {}  # a table reset ('t'): every column NULL
            values = list(self._image(row.table, image).values())
            values += [row.op, row.seq, row.ts_ms]
        return values

    def _batch(
        self, columns: list[list], origins: RowOrigins | None, offset: int
    ) -> pa.RecordBatch:
        arrays = [
            pa.array(values, type=field.type) for values, field in zip(columns, self.arrow_schema)
        ]
        if self.metadata:
            count = len(columns[0])
            origins = self._origins(origins, offset, count)
            if self.envelope:  # the rows' own database and table columns
                arrays += self.metadata_columns(arrays[0], arrays[1], origins)
            else:
                table = self.tables[0]
                arrays += self.table_metadata_columns(table, origins)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
