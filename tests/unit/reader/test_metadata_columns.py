"""metadata.list: the output schema places the columns after the source's own, in the
order asked; the envelope has all; values come column-wise from the rows' origins."""

from __future__ import annotations

import datetime as dt
import struct

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
from reader.binlog_range import RangeReader

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
    keys = pa.array([b"\x80\x01", b"\x80\x02"], pa.binary())
    (batch,) = writer.snapshot_text_batches(
        TABLE, columns, pa.array(["s1", "s2"]), TARGET.ts, TARGET, keys
    )
    assert batch.schema == to_arrow_schema(output_schema([TABLE], METADATA_NAMES), timezone="UTC")
    row = batch.to_pylist()[1]
    assert row["database_name"] == "shop" and row["table_name"] == "orders"
    assert row["binlog_file"] == "mysql-bin.000003" and row["binlog_pos"] == 7777
    assert row["gtid"] is None and row["server_id"] is None and row["row_index"] is None
    assert row["row_key"] == b"\x80\x02"  # the key bytes the snapshot read the row by
    assert row["op_ts"].replace(tzinfo=None) == _expected_op_ts(TARGET.ts)
    # The per-row path (restored rows of a normalized chunk) gives the same metadata.
    emitted = [Emitted(TABLE, "r", None, {"id": 2, "note": None}, "s2", TARGET.ts)]
    (restored,) = writer.batches(emitted, RowOrigins.snapshot(TARGET, keys.slice(1)))
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
        pa.array([bytes([i]) for i in range(n)], pa.binary()),
    )
    rows = [Emitted(OTHER, "c", None, {"id": i}, f"{i:03d}", 1000 * i) for i in range(n)]
    out = [r for b in writer.batches(rows, origins) for r in b.to_pylist()]
    assert [r["binlog_pos"] for r in out] == [100, 101, 102, 103, 104]
    assert [r["gtid"] for r in out] == [f"0-1-{i}" for i in range(n)]
    assert [r["row_key"] for r in out] == [bytes([i]) for i in range(n)]
    assert {(r["database_name"], r["table_name"]) for r in out} == {("shop", "items")}
    assert out[3]["op_ts"].replace(tzinfo=None) == _expected_op_ts(3000)
    with pytest.raises(ValueError, match="without their origins"):
        list(writer.batches(rows))


# -- origins of binlog rows (reader/binlog_range.py) -------------------------------------

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def _mysql_gtid(binlog, gno: int, server_id: int = 1) -> None:
    binlog.add(33, b"\x00" + bytes.fromhex(UUID.replace("-", "")) + struct.pack("<q", gno),
               server_id=server_id)  # fmt: skip


def test_binlog_rows_carry_file_gtid_and_server_id_and_xa_rows_those_of_the_commit():
    from tests.support import binlog_encoder as enc
    from tests.support.orders_events import image as _image
    from tests.support.orders_events import rows as _rows
    from tests.support.orders_events import table_map as _table_map

    binlog = enc.BinlogFile()
    _mysql_gtid(binlog, 5, server_id=7)
    xid = f"X'{b't2'.hex()}',X'',1"
    binlog.add(2, enc.query_body("shop", f"XA START {xid}"), server_id=7)
    _table_map(binlog)
    _rows(binlog, 30, _image(11, "xa", None, None))
    binlog.add(2, enc.query_body("shop", f"XA END {xid}"), server_id=7)
    binlog.add(38, enc.xa_prepare_body(b"t2"), server_id=7)
    _mysql_gtid(binlog, 6, server_id=8)
    _table_map(binlog)
    plain = _rows(binlog, 30, _image(12, "a", None, None) + _image(13, "b", None, None))
    _mysql_gtid(binlog, 7, server_id=9)
    commit = binlog.add(2, enc.query_body("shop", f"XA COMMIT {xid}"), server_id=9)
    source = enc.FakeDumpSource(binlog, None, 97)
    reader = RangeReader(
        source,
        BinlogPosition(binlog.name, 4),
        BinlogPosition(binlog.name, binlog.pos),
        {"shop.orders"},
        origins=True,
    )
    rows = [
        (pos, file, gtid, server_id, index)
        for block in reader.blocks()
        for pos, file, gtid, server_id, index in zip(
            block.end_pos.tolist(),
            block.file.tolist(),
            block.gtid.tolist(),
            block.server_id.tolist(),
            block.row_index.tolist(),
        )
    ]
    # server_id: the rows event's own header (1 here, its GTID event's is 8); an XA
    # transaction's rows take the commit's position, GTID and server id.
    assert rows == [
        (plain, binlog.name, f"{UUID}:6", 1, 0),
        (plain, binlog.name, f"{UUID}:6", 1, 1),
        (commit, binlog.name, f"{UUID}:7", 9, 0),
    ]


def test_a_reader_without_metadata_keeps_no_origins():
    from tests.support import binlog_encoder as enc
    from tests.support.orders_events import image as _image
    from tests.support.orders_events import rows as _rows
    from tests.support.orders_events import table_map as _table_map

    binlog = enc.BinlogFile()
    _mysql_gtid(binlog, 6)
    _table_map(binlog)
    _rows(binlog, 30, _image(12, "a", None, None))
    reader = RangeReader(
        enc.FakeDumpSource(binlog, None, 97),
        BinlogPosition(binlog.name, 4),
        BinlogPosition(binlog.name, binlog.pos),
        {"shop.orders"},
    )
    (block,) = list(reader.blocks())
    assert (block.file, block.gtid, block.server_id) == (None, None, None)
    assert reader.gtid is None  # GTID events are not even parsed
