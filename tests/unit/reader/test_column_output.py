"""The writer applies column control on every road a row takes: the snapshot's columns,
the per-row images (binlog, restored snapshot rows) and the envelope's JSON agree, left-out
columns are absent, and a refused value of a masked column is not shown."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.column_masks import HASH, MASK, TRUNCATE, Mask
from cdc_source.column_policy import ColumnPolicy
from cdc_source.offsets import BinlogPosition
from cdc_source.refusals import ValueRefusedError
from reader.arrow_output import ArrowWriter, Emitted, RowOrigins


def _text(name: str) -> ColumnSpec:
    return ColumnSpec(name, "varchar", "varchar(40)", True, char_length=40, charset="utf8mb4")


TABLE = TableSchema(
    "shop",
    "customers",
    (
        ColumnSpec("id", "int", "int(11)", False),
        _text("secret"),
        _text("email"),
        _text("phone"),
        _text("note"),
        ColumnSpec("flag", "tinyint", "tinyint(1)", True, boolean=True),
    ),
    ("id",),
)
POLICY = ColumnPolicy(
    exclude=(r"shop\.customers\.secret",),
    masks=(
        (Mask(HASH, algorithm="sha256", salt="pepper"), (r".*\.email", r".*\.flag")),
        (Mask(MASK, length=4), (r".*\.phone",)),
        (Mask(TRUNCATE, length=3), (r".*\.note",)),
    ),
)
ROW = {
    "id": 1,
    "secret": "s3cr3t",
    "email": "a@b.c",
    "phone": "555-1234",
    "note": "Grüße",
    "flag": 1,
}
EXPECTED = {
    "id": 1,
    "email": hashlib.sha256(b"peppera@b.c").hexdigest(),
    "phone": "****",
    "note": "Grü",
    "flag": hashlib.sha256(b"peppertrue").hexdigest(),
}


def _snapshot_text(row: dict) -> list[pa.Array]:
    """The SELECT's columns of one row: the kept columns only, as the server's text."""
    texts = {**row, "flag": str(row["flag"]), "id": str(row["id"])}
    return [
        pa.array([None if texts[n] is None else str(texts[n]).encode()], pa.binary())
        for n in ("id", "email", "phone", "note", "flag")
    ]


def test_the_snapshot_columns_and_the_per_row_images_give_the_same_masked_row():
    writer = ArrowWriter([TABLE], columns=POLICY)
    (columnar,) = writer.snapshot_text_batches(TABLE, _snapshot_text(ROW), pa.array(["s"]), 9)
    (per_row,) = writer.batches([Emitted(TABLE, "c", None, ROW, "s", 9)])
    expected = {**EXPECTED, "_op": "r", "_seq": "s", "_ts_ms": 9}
    assert columnar.to_pylist() == [expected]
    assert per_row.to_pylist() == [{**expected, "_op": "c"}]


def test_the_envelope_images_hold_the_kept_columns_masked():
    other = TableSchema("shop", "other", (TABLE.columns[0],), ("id",))
    writer = ArrowWriter([TABLE, other], columns=POLICY)
    at = BinlogPosition("binlog.000002", 4321, "", 1)
    origins = RowOrigins.snapshot(at, pa.array([b"k"]))
    (batch,) = writer.batches([Emitted(TABLE, "u", ROW, ROW, "s", 9)], origins)
    (row,) = batch.to_pylist()
    assert json.loads(row["after"]) == EXPECTED == json.loads(row["before"])
    text = json.dumps(row, default=str)
    assert "s3cr3t" not in text and "555-1234" not in text
    text_columns = _snapshot_text(ROW)
    (snap,) = writer.snapshot_text_batches(
        TABLE, text_columns, pa.array(["s"]), 9, at, pa.array([b"k"])
    )
    assert json.loads(snap.to_pylist()[0]["after"]) == EXPECTED


def test_a_refused_value_of_a_masked_column_is_not_shown():
    writer = ArrowWriter([TABLE], columns=POLICY)
    bad = {**ROW, "flag": 7}  # a TINYINT(1) read as BOOLEAN holds only 0 and 1
    with pytest.raises(ValueRefusedError) as err:
        list(writer.batches([Emitted(TABLE, "c", None, bad, "s", 9)]))
    assert "7" not in str(err.value) and "masked" in str(err.value)
    with pytest.raises(ValueRefusedError) as err:
        list(writer.snapshot_text_batches(TABLE, _snapshot_text(bad), pa.array(["s"]), 9))
    assert "7" not in str(err.value) and "masked" in str(err.value)


def test_the_snapshot_select_does_not_read_an_excluded_column():
    from cdc_source.partitions import ChunkSpec
    from reader.chunk_reader import select_sql

    query, _ = select_sql(ChunkSpec(TABLE, 0, None, (10,)), POLICY)
    assert "`secret`" not in query
    assert query.startswith("SELECT `id`, `email`, `phone`, `note`, `flag` FROM")
