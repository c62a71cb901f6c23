"""One table's rows of the envelope schema (several tables captured) as the typed
columns the source gives when it captures that table alone.

Each row's ``after`` image (a delete's ``before``) is parsed by Arrow's JSON reader
against the table's Arrow schema, read from the server when the query starts.
"""

from __future__ import annotations

import base64

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from cdc_source.delta.changes import KEY, RESET_OP, ROW_KEY


def _json_read_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type Arrow's JSON reader reads a value of ``arrow_type`` as, from the envelope's
    JSON images (see ``cdc_source.types.json_default``): decimals (and unsigned BIGINT) are
    strings, binary values base64 strings, dates and timestamps ISO strings, FLOAT a
    double (JSON carries the shortest text of the double; read as float32 directly it
    could round differently)."""
    if pa.types.is_decimal(arrow_type) or pa.types.is_binary(arrow_type):
        return pa.string()
    if pa.types.is_date(arrow_type) or pa.types.is_timestamp(arrow_type):
        return pa.string()
    if pa.types.is_float32(arrow_type):
        return pa.float64()
    return arrow_type


def base64_decode(text: pa.Array) -> pa.Array:
    """Base64 strings as binary values, decoded all together in one call: each value is
    whole 4-character groups, so the values decode side by side once their padding ('=')
    reads as zero bits; the bytes the padding stood for are then dropped."""
    valid = text.is_valid()
    text = pc.fill_null(text.cast(pa.large_string()), "")
    count = len(text)
    offsets = np.frombuffer(text.buffers()[1], np.int64)[text.offset : text.offset + count + 1]
    lengths = np.diff(offsets)
    if (lengths % 4).any():
        raise ValueError("a binary value of the envelope is not base64 text")
    buffer = text.buffers()[2]
    data = np.frombuffer(buffer, np.uint8) if buffer is not None and buffer.size else _NO_BYTES
    data = data[offsets[0] : offsets[-1]].copy()
    ends = (offsets[1:] - offsets[0])[lengths > 0]  # one past each non-empty value's text
    last, second = np.zeros(count, bool), np.zeros(count, bool)
    last[lengths > 0] = data[ends - 1] == ord("=")
    second[lengths > 0] = data[ends - 2] == ord("=")
    pads = last.astype(np.int64) + (last & second)
    data[data == ord("=")] = ord("A")
    decoded = np.frombuffer(base64.b64decode(data.tobytes(), validate=True), np.uint8)
    whole = lengths // 4 * 3  # decoded bytes of each value, the padding's included
    out_ends = np.cumsum(whole)
    keep = np.ones(len(decoded), bool)
    keep[out_ends[pads >= 1] - 1] = False
    keep[out_ends[pads >= 2] - 2] = False
    out_offsets = np.concatenate([[0], np.cumsum(whole - pads)]).astype(np.int64)
    values = pa.Array.from_buffers(
        pa.large_binary(),
        count,
        [None, pa.py_buffer(out_offsets), pa.py_buffer(decoded[keep].tobytes())],
    )
    return pc.if_else(valid, values, pa.scalar(None, pa.large_binary())).cast(pa.binary())


_NO_BYTES = np.zeros(0, np.uint8)


def _typed(column: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    if column.type == arrow_type:
        return column
    if pa.types.is_binary(arrow_type):
        return base64_decode(column)
    if pa.types.is_timestamp(arrow_type):  # naive ISO text; TIMESTAMP's is UTC
        return column.cast(pa.timestamp(arrow_type.unit)).cast(arrow_type)
    return column.cast(arrow_type)  # decimals, dates, FLOAT


class EnvelopeImages:
    """Turns one table's rows of the envelope schema into the typed columns the source
    gives when it captures that table alone, plus ``_op``, ``_seq``, ``_ts_ms`` and
    ``_key`` (the envelope's ``row_key``)."""

    def __init__(self, table) -> None:
        from pyspark.sql.pandas.types import to_arrow_type

        from cdc_source.types import spark_type

        self.name = table.name
        self.fields = [
            pa.field(c.name, to_arrow_type(spark_type(c), timezone="UTC"), True)
            for c in table.columns
        ]
        self.read_schema = pa.schema(
            [pa.field(f.name, _json_read_type(f.type), True) for f in self.fields]
        )
        self.schema = pa.schema(
            self.fields
            + [
                pa.field("_op", pa.string(), False),
                pa.field("_seq", pa.string()),
                pa.field("_ts_ms", pa.int64()),
                pa.field(KEY, pa.binary()),
            ]
        )

    def parse(self, images: pa.Array) -> list[pa.Array]:
        """The typed columns of JSON row images (no nulls), read as newline-delimited JSON."""
        count = len(images)
        if not count:
            return [pa.array([], f.type) for f in self.fields]
        images = images.cast(pa.large_string())
        lines = pc.binary_join(
            pa.LargeListArray.from_arrays(pa.array([0, count], pa.int64()), images),
            pa.scalar("\n", pa.large_string()),
        )[0].as_buffer()
        longest = pc.max(pc.binary_length(images)).as_py()
        parsed = pa_json.read_json(
            pa.BufferReader(lines),
            read_options=pa_json.ReadOptions(block_size=max(1 << 20, 2 * longest + 2)),
            parse_options=pa_json.ParseOptions(
                explicit_schema=self.read_schema, unexpected_field_behavior="error"
            ),
        )
        if parsed.num_rows != count:
            raise ValueError(f"{self.name}: {count} images read as {parsed.num_rows} rows")
        return [_typed(parsed.column(f.name).combine_chunks(), f.type) for f in self.fields]

    def changes(self, rows: pa.Table) -> pa.Table:
        """``rows`` (this table's, envelope schema) typed; a reset's columns are null."""
        op = rows.column("op").cast(pa.string()).combine_chunks()
        seq = rows.column("_seq").cast(pa.string()).combine_chunks()
        ts = rows.column("_ts_ms").cast(pa.int64()).combine_chunks()
        key = rows.column(ROW_KEY).cast(pa.binary()).combine_chunks()
        resets = pc.equal(op, RESET_OP)
        data = pc.invert(resets)
        after, before = (
            rows.column(n).cast(pa.string()).combine_chunks() for n in ("after", "before")
        )
        images = pc.coalesce(after, before).filter(data)
        if images.null_count:
            raise ValueError(f"{self.name}: a change of the envelope has no row image")
        own = [op, seq, ts, key]
        columns = self.parse(images) + [c.filter(data) for c in own]
        typed = pa.Table.from_arrays(columns, schema=self.schema)
        reset_count = pc.sum(resets).as_py() or 0
        if reset_count:
            nulls = [pa.nulls(reset_count, f.type) for f in self.fields]
            reset_rows = pa.Table.from_arrays(
                nulls + [c.filter(resets) for c in own],
                schema=self.schema,
            )
            typed = pa.concat_tables([typed, reset_rows])
        return typed
