"""The schema Spark sees: typed columns for one table, an envelope for several."""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.column_policy import ALL_COLUMNS, ColumnPolicy
from cdc_source.options import METADATA_NAMES, OptionError
from cdc_source.types import spark_type

META_FIELDS = (
    StructField("_op", StringType(), False),
    StructField("_seq", StringType(), False),
    StructField("_ts_ms", LongType(), False),
)

# metadata.list columns. op_ts is a timestamp as Flink CDC's op_ts (TIMESTAMP_LTZ(3)): a
# user who asks for it by Flink's name expects Flink's type, and the epoch milliseconds
# Debezium users read are already in _ts_ms. Positions and ids are longs (a binlog position
# passes 2^31 in a 4 GiB file; server ids are unsigned 32-bit). row_key is the key's
# order-preserving bytes under the server's collation (reader/row_keys.py): two rows have
# equal row_key exactly when the server holds their keys equal.
METADATA_FIELDS: dict[str, StructField] = {
    "database_name": StructField("database_name", StringType(), False),
    "table_name": StructField("table_name", StringType(), False),
    "op_ts": StructField("op_ts", TimestampType(), False),
    "binlog_file": StructField("binlog_file", StringType(), False),
    "binlog_pos": StructField("binlog_pos", LongType(), False),
    "gtid": StructField("gtid", StringType(), True),  # null for snapshot rows, no GTIDs
    "server_id": StructField("server_id", LongType(), True),  # null for snapshot rows
    "row_index": StructField("row_index", LongType(), True),  # null for snapshot rows
    "row_key": StructField("row_key", BinaryType(), True),  # null for a table reset ('t')
}
assert tuple(METADATA_FIELDS) == METADATA_NAMES

_ENVELOPE_BASE = StructType(
    [
        StructField("database", StringType(), False),
        StructField("table", StringType(), False),
        StructField("op", StringType(), False),
        StructField("key", StringType(), False),
        StructField("before", StringType(), True),
        StructField("after", StringType(), True),
        StructField("_seq", StringType(), False),
        StructField("_ts_ms", LongType(), False),
    ]
)
# The envelope (several tables) always carries every metadata column.
ENVELOPE = StructType(list(_ENVELOPE_BASE.fields) + list(METADATA_FIELDS.values()))


def is_envelope(tables: list[TableSchema] | tuple[TableSchema, ...]) -> bool:
    return len(tables) != 1


def output_metadata(
    tables: list[TableSchema] | tuple[TableSchema, ...], metadata: tuple[str, ...]
) -> tuple[str, ...]:
    """The metadata columns the output has: all for the envelope, else those asked for."""
    return METADATA_NAMES if is_envelope(tables) else tuple(metadata)


def column_type(columns: ColumnPolicy, table: TableSchema, column: ColumnSpec) -> DataType:
    """The Spark type of ``column`` in the output: its own, or a string when hashed."""
    mask = columns.mask(table, column.name) if columns.masks else None
    if mask is not None and mask.makes_string:
        return StringType()
    return spark_type(column)


def output_schema(
    tables: list[TableSchema] | tuple[TableSchema, ...],
    metadata: tuple[str, ...] = (),
    columns: ColumnPolicy = ALL_COLUMNS,
) -> StructType:
    """One table: its columns (those ``columns`` keeps, a hashed one as a string),
    ``_op``, ``_seq``, ``_ts_ms``, then the ``metadata.list`` columns in the order given.
    Several tables: :data:`ENVELOPE`."""
    if is_envelope(tables):
        return ENVELOPE
    (table,) = tables
    kept = columns.output_columns(table)
    names = {c.name for c in kept}
    clash = names & {f.name for f in META_FIELDS}
    if clash:
        raise ValueError(
            f"table {table.name} has column(s) {sorted(clash)} that clash with the source's "
            "metadata columns; capture it together with another table to get the envelope schema"
        )
    clash = [name for name in metadata if name in names]
    if clash:
        raise OptionError(
            f"option 'metadata.list' asks for {', '.join(clash)}, but table {table.name} has "
            f"column(s) of that name: remove {', '.join(clash)} from 'metadata.list' (or "
            "rename the column)"
        )
    return StructType(
        [StructField(c.name, column_type(columns, table, c), True) for c in kept]
        + list(META_FIELDS)
        + [METADATA_FIELDS[name] for name in metadata]
    )
