"""Turning emitted changes into bounded ``pyarrow.RecordBatch``es of the output schema."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from cdc_source.catalog import TableSchema
from cdc_source.output_schema import is_envelope, output_schema
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


def _canonical(table: TableSchema, image: dict | None) -> dict | None:
    if image is None:
        return None
    return {c.name: canonical_value(c, image.get(c.name)) for c in table.columns}


def _constant(value: pa.Scalar, count: int) -> pa.Array:
    return pc.fill_null(pa.nulls(count, value.type), value)


class ArrowWriter:
    def __init__(self, tables: Iterable[TableSchema], rows_per_batch: int = ROWS_PER_BATCH):
        self.tables = tuple(tables)
        self.envelope = is_envelope(self.tables)
        self.arrow_schema = to_arrow_schema(output_schema(self.tables), timezone="UTC")
        self.rows_per_batch = rows_per_batch
        self._converters: dict[str, tuple] = {}

    def column_types(self, table: TableSchema) -> list[pa.DataType]:
        """The Arrow type of each of ``table``'s columns as the typed output holds it."""
        return [to_arrow_type(spark_type(c), timezone="UTC") for c in table.columns]

    def split(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """``batch`` in slices of at most ``rows_per_batch`` rows."""
        for start in range(0, batch.num_rows, self.rows_per_batch):
            yield batch.slice(start, self.rows_per_batch)

    def batches(self, rows: Iterable[Emitted]) -> Iterator[pa.RecordBatch]:
        columns = self._empty()
        count = 0
        for row in rows:
            self._append(columns, row)
            count += 1
            if count >= self.rows_per_batch:
                yield self._batch(columns)
                columns, count = self._empty(), 0
        if count:
            yield self._batch(columns)

    def snapshot_text_batches(
        self, table: TableSchema, columns: list[pa.Array], seqs: pa.Array, ts_ms: int
    ) -> Iterator[pa.RecordBatch]:
        """Snapshot rows (``op`` 'r') from the SELECT's text columns (one binary array per
        column of ``table``), typed column by column by Arrow: no per-value Python for
        most types. The envelope schema (several tables) takes the per-row path."""
        count = len(seqs)
        if not count:
            return
        if self.envelope:
            values = [column.to_pylist() for column in columns]
            rows = (
                Emitted(
                    table,
                    "r",
                    None,
                    {c.name: text_to_python(c, v[i]) for c, v in zip(table.columns, values)},
                    seq,
                    ts_ms,
                )
                for i, seq in enumerate(seqs.to_pylist())
            )
            yield from self.batches(rows)
            return
        arrays = [
            text_column_to_arrow(column, values, field.type)
            for column, values, field in zip(table.columns, columns, self.arrow_schema)
        ]
        arrays.append(_constant(pa.scalar("r"), count))
        arrays.append(seqs)
        arrays.append(_constant(pa.scalar(ts_ms, pa.int64()), count))
        yield pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _empty(self) -> list[list]:
        return [[] for _ in self.arrow_schema.names]

    def _append(self, columns: list[list], row: Emitted) -> None:
        if self.envelope:
            before = _canonical(row.table, row.before)
            after = _canonical(row.table, row.after)
            image = after if after is not None else before
            key = {name: image[name] for name in row.table.primary_key}
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
            values = [canonical_value(c, image.get(c.name)) for c in row.table.columns]
            values += [row.op, row.seq, row.ts_ms]
        for column, value in zip(columns, values):
            column.append(value)

    def _batch(self, columns: list[list]) -> pa.RecordBatch:
        arrays = [
            pa.array(values, type=field.type) for values, field in zip(columns, self.arrow_schema)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
