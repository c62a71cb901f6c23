"""metadata.list: the output schema places the columns after the source's own, in the
order asked; the envelope has all; values come column-wise from the rows' origins."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, TimestampType

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.offsets import BinlogPosition
from cdc_source.options import METADATA_NAMES, OptionError
from cdc_source.output_schema import ENVELOPE, output_schema
from reader.arrow_output import ArrowWriter, Emitted, RowOrigins

TABLE = TableSchema(
    "shop",
    "orders",
    (
        ColumnSpec("id", "int", "int(11)", False),
        ColumnSpec("note", "varchar", "varchar(10)", True, char_length=10, charset="utf8mb4"),
    ),
    ("id",),
)
OTHER = TableSchema("shop", "items", (ColumnSpec("id", "int", "int(11)", False),), ("id",))
TARGET = BinlogPosition("mysql-bin.000003", 7777, "0-1-42", 1_700_000_000_123)


def test_typed_schema_appends_the_asked_columns_in_their_order_with_their_types():
    schema = output_schema([TABLE], ("op_ts", "gtid", "database_name", "binlog_pos"))
    assert schema.names == [
        "id", "note", "_op", "_seq", "_ts_ms", "op_ts", "gtid", "database_name", "binlog_pos"
    ]  # fmt: skip
    types = {f.name: (f.dataType, f.nullable) for f in schema.fields}
    assert types["op_ts"] == (TimestampType(), False)
    assert types["gtid"] == (StringType(), True)
    assert types["database_name"] == (StringType(), False)
    assert types["binlog_pos"] == (LongType(), False)
    assert output_schema([TABLE]).names == ["id", "note", "_op", "_seq", "_ts_ms"]


def test_envelope_always_has_every_metadata_column():
    assert output_schema([TABLE, OTHER]) == ENVELOPE
    assert output_schema([TABLE, OTHER], ("gtid",)) == ENVELOPE
    assert ENVELOPE.names[-len(METADATA_NAMES) :] == list(METADATA_NAMES)


def test_a_metadata_name_that_is_a_column_of_the_table_is_a_clear_error():
    columns = (ColumnSpec("id", "int", "int", False), ColumnSpec("gtid", "text", "text", True))
    clashing = TableSchema("shop", "t", columns, ("id",))
    with pytest.raises(OptionError, match=r"'metadata.list' asks for gtid.*shop\.t"):
        output_schema([clashing], ("op_ts", "gtid"))
    output_schema([clashing], ("op_ts",))


def _expected_op_ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).replace(tzinfo=None)


def test_snapshot_rows_carry_the_target_position_and_null_event_fields():
    writer = ArrowWriter([TABLE], metadata=METADATA_NAMES)
    columns = [pa.array([b"1", b"2"]), pa.array([b"a", None], pa.binary())]
    (batch,) = writer.snapshot_text_batches(
        TABLE, columns, pa.array(["s1", "s2"]), TARGET.ts, TARGET
    )
    assert batch.schema == to_arrow_schema(output_schema([TABLE], METADATA_NAMES), timezone="UTC")
    row = batch.to_pylist()[1]
    assert row["database_name"] == "shop" and row["table_name"] == "orders"
    assert row["binlog_file"] == "mysql-bin.000003" and row["binlog_pos"] == 7777
    assert row["gtid"] is None and row["server_id"] is None and row["row_index"] is None
    assert row["op_ts"].replace(tzinfo=None) == _expected_op_ts(TARGET.ts)
    # The per-row path (restored rows of a normalized chunk) gives the same metadata.
    emitted = [Emitted(TABLE, "r", None, {"id": 2, "note": None}, "s2", TARGET.ts)]
    (restored,) = writer.batches(emitted, TARGET)
    assert restored.to_pylist()[0] == row


def test_binlog_origins_are_sliced_with_the_envelope_batches():
    writer = ArrowWriter([TABLE, OTHER], rows_per_batch=2)
    n = 5
    origins = RowOrigins(
        pa.array([1000 * i for i in range(n)], pa.int64()),
        pa.array(["b.000001"] * n),
        pa.array([100 + i for i in range(n)], pa.int64()),
        pa.array([f"0-1-{i}" for i in range(n)]),
        pa.array([1] * n, pa.int64()),
        pa.array(np.arange(n), pa.int64()),
    )
    rows = [Emitted(OTHER, "c", None, {"id": i}, f"{i:03d}", 1000 * i) for i in range(n)]
    out = [r for b in writer.batches(rows, origins) for r in b.to_pylist()]
    assert [r["binlog_pos"] for r in out] == [100, 101, 102, 103, 104]
    assert [r["gtid"] for r in out] == [f"0-1-{i}" for i in range(n)]
    assert {(r["database_name"], r["table_name"]) for r in out} == {("shop", "items")}
    assert out[3]["op_ts"].replace(tzinfo=None) == _expected_op_ts(3000)
    with pytest.raises(ValueError, match="without their origins"):
        list(writer.batches(rows))
