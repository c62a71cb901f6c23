"""A captured table's shape in row events against the query's schema (reader.schema_drift,
reader.binlog_columns.ImageColumns): what is a change, where it stops a typed read, how
rows of an earlier shape are placed by name, and how the envelope's images carry their own
columns. Event bytes come from tests/support/binlog_encoder.py (written apart from the
decoder); both row decoders run."""

from __future__ import annotations

import struct
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type

from cdc_source.binlog import framing
from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.offsets import BinlogPosition
from cdc_source.types import spark_type
from reader.binlog_columns import ImageColumns
from reader.binlog_range import RangeReader
from reader.row_decoding import native_available
from reader.schema_drift import SchemaChangedError, changes, column_change
from tests.support import binlog_encoder as enc
from tests.support.orders_events import (
    ENC_ID,
    ENC_NOTE,
    ENC_PRICE4,
    ENC_QTY,
    ENC_QTY_INT,
)
from tests.support.orders_events import parsed_table_map as _table_map

DECODERS = ["python"] + (["native"] if native_available() else [])
TABLE_ID = 91
UTF8MB4_GENERAL_CI = 45


def _spec(name, data_type, column_type, **kw) -> ColumnSpec:
    return ColumnSpec(name, data_type, column_type, True, **kw)


ID = _spec("id", "int", "int(11)")
NAME = _spec(
    "name",
    "varchar",
    "varchar(10)",
    charset="utf8mb4",
    collation="utf8mb4_general_ci",
    collation_id=UTF8MB4_GENERAL_CI,
)
QTY = _spec("qty", "bigint", "bigint(20)")
PRICE = _spec("price", "decimal", "decimal(10,2)", precision=10, scale=2)
STATE = _spec("state", "enum", "enum('new','paid')")


def _schema(*columns, key=("id",), read_at=None) -> TableSchema:
    return TableSchema("shop", "orders", tuple(columns), key, read_at=read_at, read_on="")


def test_table_map_carries_enum_and_set_members_and_the_primary_key():
    enum = ("state", enc.STRING, bytes([enc.ENUM, 1]), True, False)
    flags = ("flags", enc.STRING, bytes([enc.SET, 1]), True, False)
    table_map = _table_map(
        [ENC_ID, enum, flags],
        enum_values=[["new", "paid", "it's"]],
        set_values=[["a", "b"]],
        primary_key=[0],
    )
    assert [c.members for c in table_map.columns] == [None, ("new", "paid", "it's"), ("a", "b")]
    assert table_map.primary_key == ("id",)
    assert _table_map([ENC_ID]).primary_key is None


def test_the_same_shape_is_no_change_whatever_the_display_width_or_length():
    wider_name = ("name", enc.VARCHAR, struct.pack("<H", 400), True, False)
    assert changes(_schema(ID, NAME, QTY), _table_map([ENC_ID, wider_name, ENC_QTY])) == []


def test_each_kind_of_change_is_named():
    schema = _schema(ID, NAME, QTY, PRICE)
    found = changes(
        schema,
        _table_map([ENC_ID, ENC_QTY_INT, ENC_PRICE4, ENC_NOTE], primary_key=[0, 1]),
    )
    assert "column name (varchar(10)) is gone" in found
    assert "column qty changed from bigint(20) to int" in found
    assert "column price changed from decimal(10,2) to decimal(10,4)" in found
    assert "column note (varchar) was added" in found
    assert "primary key changed from (id) to (id, qty)" in found


def test_reordered_enum_members_are_a_change_the_index_alone_would_hide():
    enum = ("state", enc.STRING, bytes([enc.ENUM, 1]), True, False)
    same = _table_map([ENC_ID, enum], enum_values=[["new", "paid"]])
    reordered = _table_map([ENC_ID, enum], enum_values=[["paid", "new"]])
    assert column_change(STATE, same.columns[1]) is None
    assert "enum('paid','new')" in column_change(STATE, reordered.columns[1])


def test_another_collation_is_a_change():
    latin1 = ("name", enc.VARCHAR, struct.pack("<H", 10), True, False)
    table_map = _table_map([ENC_ID, latin1])
    column = table_map.columns[1]
    assert column_change(NAME, column) is None  # collation not reported: type class only
    other = type(column)(column.name, column.type, column.meta, False, True, 8)  # latin1
    assert column_change(NAME, other) is not None


def _block(columns, images, decoder, **table_map_kw):
    binlog = enc.BinlogFile()
    binlog.add(19, enc.table_map_body(TABLE_ID, "shop", "orders", columns, **table_map_kw))
    binlog.add(30, enc.rows_body(TABLE_ID, len(columns), b"".join(images), False, True))
    source = enc.FakeDumpSource(binlog, framing.splitter(decoder))
    reader = RangeReader(
        source,
        BinlogPosition(binlog.name, 4),
        BinlogPosition(binlog.name, binlog.pos),
        {"shop.orders"},
        decoder=decoder,
    )
    (block,) = list(reader.blocks())
    return block


def _types(schema):
    return [to_arrow_type(spark_type(c), timezone="UTC") for c in schema.columns]


def _old_shape_block(decoder):
    """Rows written before the query's schema was read: qty was INT (now BIGINT), name did
    not exist yet, note existed (since dropped)."""
    images = [
        enc.row_image([struct.pack("<i", 1), struct.pack("<i", 7), b"\x02hi"]),
        enc.row_image([struct.pack("<i", 2), None, None]),
    ]
    return _block([ENC_ID, ENC_QTY_INT, ENC_NOTE], images, decoder, primary_key=[0])


@pytest.mark.parametrize("decoder", DECODERS)
def test_rows_of_an_earlier_shape_are_placed_by_name_with_null_for_missing_columns(decoder):
    block = _old_shape_block(decoder)
    position = (int(block.file_number[-1]), int(block.end_pos[-1]))
    schema = _schema(ID, NAME, QTY, read_at=position)
    images = ImageColumns(schema, block, _types(schema), known_at=position)
    assert images.column("after", 0).to_pylist() == [1, 2]
    assert images.column("after", 1).to_pylist() == [None, None]
    qty = images.column("after", 2)
    assert qty.type == pa.int64() and qty.to_pylist() == [7, None]
    assert images.python_images("after")[0] == {"id": 1, "name": None, "qty": 7}


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_typed_read_stops_at_rows_written_after_the_schema_in_another_shape(decoder):
    block = _old_shape_block(decoder)
    before = (int(block.file_number[0]), int(block.end_pos[0]) - 1)
    schema = _schema(ID, NAME, QTY, read_at=before)
    with pytest.raises(SchemaChangedError) as err:
        ImageColumns(schema, block, _types(schema), known_at=before)
    message = str(err.value)
    assert "shop.orders was altered while the query ran" in message
    assert f"position {int(block.end_pos[0])}" in message
    assert "column name (varchar(10)) is gone" in message
    assert "column note (varchar) was added" in message
    assert "restart the query" in message
    # Where the schema's position is unknown (another server), any other shape stops too.
    with pytest.raises(SchemaChangedError):
        ImageColumns(schema, block, _types(schema), known_at=None)


@pytest.mark.parametrize("decoder", DECODERS)
def test_envelope_images_carry_the_columns_their_rows_had(decoder):
    block = _old_shape_block(decoder)
    schema = _schema(ID, NAME, QTY)

    def charsets(collation_id):
        raise AssertionError("no text column without a collation needs a lookup")

    images = ImageColumns(schema, block, _types(schema), strict=False, charsets=charsets)
    assert images.schema.column_names == ("id", "qty", "note")
    assert images.python_images("after") == [
        {"id": 1, "qty": 7, "note": "hi"},
        {"id": 2, "qty": None, "note": None},
    ]


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_changed_primary_key_stops_every_mode(decoder):
    images = [enc.row_image([struct.pack("<i", 1), struct.pack("<q", 5)])]
    block = _block([ENC_ID, ENC_QTY], images, decoder, primary_key=[0, 1])
    position = (int(block.file_number[-1]), int(block.end_pos[-1]))
    schema = _schema(ID, QTY, read_at=position)
    for strict in (True, False):
        with pytest.raises(SchemaChangedError, match="primary key changed from .id. to .id, qty."):
            ImageColumns(schema, block, _types(schema), strict=strict, known_at=position)


@pytest.mark.parametrize("decoder", DECODERS)
def test_earlier_values_that_do_not_fit_a_retyped_column_are_an_error(decoder):
    wide = ("price", enc.NEWDECIMAL, bytes([10, 4]), True, False)
    images = [enc.row_image([struct.pack("<i", 1), enc.decimal_bin(Decimal("1.2345"), 10, 4)])]
    block = _block([ENC_ID, wide], images, decoder, primary_key=[0])
    position = (int(block.file_number[-1]), int(block.end_pos[-1]))
    schema = _schema(ID, PRICE, read_at=position)
    images = ImageColumns(schema, block, _types(schema), known_at=position)
    with pytest.raises(SchemaChangedError, match="cannot be cast to its type now"):
        images.column("after", 1)


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_column_the_output_leaves_out_may_come_and_go_without_stopping_a_typed_read(decoder):
    """Rows written after the schema was read, in a shape that differs only in excluded
    columns (name gone, note added): the typed read goes on, and an excluded column is
    never converted (NULL in the images; the writer drops it)."""
    from cdc_source.column_policy import ColumnPolicy

    block = _old_shape_block(decoder)
    before = (int(block.file_number[0]), int(block.end_pos[0]) - 1)
    schema = _schema(ID, NAME, _spec("qty", "int", "int(11)"), read_at=before)
    policy = ColumnPolicy(exclude=(r"shop\.orders\.(name|note)",))
    images = ImageColumns(schema, block, _types(schema), known_at=before, columns=policy)
    assert images.python_images("after") == [
        {"id": 1, "name": None, "qty": 7},
        {"id": 2, "name": None, "qty": None},
    ]
    with pytest.raises(SchemaChangedError, match="column note"):
        ImageColumns(schema, block, _types(schema), known_at=before)
