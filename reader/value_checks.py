"""Column-at-a-time conversions where the output holds fewer values than the server stores.

Both roads a value takes (the snapshot's text, the binlog's row images) reach a column
of the output through here where a type holds fewer values than the server stores, so
that the same stored value is refused the same way on both (``cdc_source.types``
refuses the per-value road the same way)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.catalog import ColumnSpec
from cdc_source.charsets import is_utf8, text_decoder
from cdc_source.refusals import boolean_refusal


def boolean_column(spec: ColumnSpec, integers: pa.Array) -> pa.Array:
    """A TINYINT(1) column read as BOOLEAN: its integers, each of which must be 0 or 1."""
    outside = pc.and_(pc.not_equal(integers, 0), pc.not_equal(integers, 1))
    if pc.any(outside).as_py():
        first = integers.filter(pc.fill_null(outside, False))[0].as_py()
        raise boolean_refusal(spec.name, first)
    return pc.not_equal(integers, 0)


def decoded_text(spec: ColumnSpec, stored: pa.Array) -> pa.Array:
    """A text column's stored bytes as strings: UTF-8 checked by Arrow, any other
    character set decoded as the server decodes it (:mod:`cdc_source.charsets`)."""
    if is_utf8(spec.charset):
        return stored.cast(pa.string())
    decode = text_decoder(spec.name, spec.charset or "", spec.byte_table)
    return pa.array([None if v is None else decode(v) for v in stored.to_pylist()], pa.string())
