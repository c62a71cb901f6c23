"""The ``row_key`` metadata column: each output row's primary-key bytes, equal exactly
when the server holds the two keys equal.

The bytes are the source's own order-preserving key bytes (:func:`cdc_source.keys.sort_key`,
computed on columns by :func:`reader.key_columns.sort_key_reader`), the same bytes a
snapshot row's ``_seq`` ends with. A string key's bytes come from the server's
``WEIGHT_STRING`` under the column's collation (fetched in bulk and cached by
:class:`reader.key_weights.WeightResolver`), so under ``utf8mb4_general_ci`` ``'a'``,
``'A'`` and ``'a '`` are one key. A sink matches rows on them without a server
connection of its own.

The snapshot has these bytes already (its SELECT's text gives them); a change read from
the binlog has typed values, which :func:`key_text` turns back into the server's text.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.keys import needs_weight, time_literal
from reader.key_columns import sort_key_reader
from reader.key_weights import WeightResolver


def key_text(column: ColumnSpec, values: pa.Array) -> pa.Array:
    """A typed key column of the output as the server's text of it, binary (what
    :func:`reader.key_columns.sort_key_reader` reads from a snapshot fetch)."""
    if column.data_type == "time":  # microseconds (LongType): to the server's text
        return pa.array([time_literal(v) for v in values.to_pylist()], pa.binary())
    if pa.types.is_timestamp(values.type):  # TIMESTAMP's instants in UTC, as the session's
        values = values.cast(pa.timestamp(values.type.unit))
    elif pa.types.is_boolean(values.type):
        values = values.cast(pa.int8())
    if pa.types.is_binary(values.type):
        return values
    return values.cast(pa.string()).cast(pa.binary())


class RowKeys:
    """The key bytes of one table's output rows, from their typed key columns. Collated
    string key columns take the server's collation weights from ``weights`` (one round
    trip per 500 values not yet seen); a key without one never needs the server."""

    def __init__(self, table: TableSchema, weights: WeightResolver | None = None) -> None:
        self.table = table
        self.weights = weights
        self.names = list(table.column_names)
        self.weighted = [needs_weight(c) for c in table.key_columns]
        if any(self.weighted) and weights is None:
            raise ValueError(f"{table.name}: a string key needs the server's collation weights")
        self.read = sort_key_reader(table)

    def _weights(self, column: ColumnSpec, values: pa.Array) -> pa.Array:
        distinct = pc.unique(values)
        texts = distinct.to_pylist()
        self.weights.prefetch((column, text) for text in texts)  # one batched round trip
        weights = pa.array([self.weights.weight(column, text) for text in texts], pa.binary())
        return weights.take(pc.index_in(values, value_set=distinct))

    def __call__(self, key_values: list[pa.Array]) -> pa.Array:
        """The key bytes of rows whose key columns (in primary-key order, typed as the
        output holds them, no nulls) are ``key_values``."""
        count = len(key_values[0]) if key_values else 0
        if not count:
            return pa.array([], pa.binary())
        columns: list[pa.Array | None] = [None] * len(self.names)
        weights = []
        for column, weighted, values in zip(self.table.key_columns, self.weighted, key_values):
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            if values.null_count:
                raise ValueError(f"{self.table.name}: a change has no value of key {column.name}")
            columns[self.names.index(column.name)] = key_text(column, values)
            if weighted:
                weights.append(self._weights(column, values))
        # Row by row (a TIME key, DECIMAL beyond 38 digits), a DECIMAL's units are exact
        # only with the context's precision above its 65 digits (the default is 28).
        with decimal.localcontext() as context:
            context.prec = 100
            return self.read(columns + weights).cast(pa.binary())
