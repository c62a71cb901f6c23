"""The schema Spark sees: typed columns for one table, an envelope for several."""

from __future__ import annotations

from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc_source.catalog import TableSchema
from cdc_source.types import spark_type

META_FIELDS = (
    StructField("_op", StringType(), False),
    StructField("_seq", StringType(), False),
    StructField("_ts_ms", LongType(), False),
)

ENVELOPE = StructType(
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


def is_envelope(tables: list[TableSchema] | tuple[TableSchema, ...]) -> bool:
    return len(tables) != 1


def output_schema(tables: list[TableSchema] | tuple[TableSchema, ...]) -> StructType:
    if is_envelope(tables):
        return ENVELOPE
    (table,) = tables
    names = {c.name for c in table.columns}
    clash = names & {f.name for f in META_FIELDS}
    if clash:
        raise ValueError(
            f"table {table.name} has column(s) {sorted(clash)} that clash with the source's "
            "metadata columns; capture it together with another table to get the envelope schema"
        )
    return StructType(
        [StructField(c.name, spark_type(c), True) for c in table.columns] + list(META_FIELDS)
    )
