"""Order-preserving key bytes and ``_seq`` of a whole fetch, computed on columns.

The bytes are exactly :func:`cdc_source.keys.sort_key`'s (a differential test holds them
together), built from the server's text with Arrow casts and NumPy instead of a Python
call per row:

- integers, DATE, DATETIME, TIMESTAMP and DECIMAL (up to 38 digits) are fixed-width
  two's-complement numbers: sign-extended or truncated to the key's width, big-endian,
  with the sign bit flipped (which is adding the ``2**(8w-1)`` of ``_signed``);
- byte strings (BINARY, VARBINARY, binary-collated CHAR/VARCHAR, and the server's
  ``WEIGHT_STRING`` of collated ones) are escaped with Arrow's string kernels.

A key column of another type (TIME, DECIMAL beyond 38 digits), or a value Arrow cannot
parse (a zero date), takes :func:`cdc_source.keys.encode_component` row by row for that
fetch: the same bytes, at Python's speed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.keys import encode_component, needs_weight
from reader import native_columns
from reader.text_columns import is_stored_number, text_to_python

_INTEGERS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_EPOCH_ORDINAL = 719_163  # date(1970, 1, 1).toordinal()
_EPOCH_MICROS = (_EPOCH_ORDINAL - 1) * 86_400_000_000  # 0001-01-01 to 1970-01-01
_HEX_DIGITS = np.frombuffer(
    b"".join(f"{i:02x}".encode() for i in range(256)), dtype=np.uint8
).reshape(256, 2)
_LITTLE_ENDIAN = sys.byteorder == "little"


class NotColumnar(Exception):
    """This fetch's key cannot be encoded on columns: encode it row by row."""


def _offset_big_endian(little: np.ndarray, signed: bool, width: int) -> np.ndarray:
    """``value + 2**(8*width-1)`` as ``width`` big-endian bytes per row, from the rows of
    ``little`` (little-endian two's complement, or unsigned)."""
    rows, have = little.shape
    big = little[:, ::-1]
    out = np.empty((rows, width), dtype=np.uint8)
    if width >= have:
        pad = width - have
        if signed:
            out[:, :pad] = np.where(big[:, :1] >= 0x80, 0xFF, 0x00)
        else:
            out[:, :pad] = 0
        out[:, pad:] = big
    else:  # the values fit in ``width`` bytes: keep the low ones
        out[:] = big[:, have - width :]
    out[:, 0] ^= 0x80
    return out


def _fixed_binary(matrix: np.ndarray) -> pa.Array:
    rows, width = matrix.shape
    offsets = np.arange(0, (rows + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(matrix.tobytes())]
    )


def _numbers(
    values: pa.Array, numpy_type: type, signed: bool, width: int, add: int = 0
) -> pa.Array:
    if values.null_count:
        raise NotColumnar
    array = values.to_numpy(zero_copy_only=False).astype(numpy_type, copy=False)
    if add:
        array = array + numpy_type(add)
    little = np.ascontiguousarray(array).view(np.uint8).reshape(len(values), -1)
    return _fixed_binary(_offset_big_endian(little, signed, width))


def _decimals(values: pa.Array, precision: int, scale: int) -> pa.Array:
    typed = values.cast(pa.decimal128(precision, scale))
    if typed.null_count:
        raise NotColumnar
    # decimal128's buffer holds the unscaled value, the key's "units", as int128.
    raw = np.frombuffer(typed.buffers()[1], dtype=np.uint8)
    start = typed.offset * 16
    little = raw[start : start + 16 * len(typed)].reshape(len(typed), 16)
    return _fixed_binary(_offset_big_endian(little, True, 30))


def _escaped(values: pa.Array) -> pa.Array:
    """:func:`cdc_source.keys._escaped` on a binary column."""
    if values.null_count:
        raise NotColumnar
    doubled = pc.replace_substring(values, pattern=b"\x00", replacement=b"\x00\xff")
    return pc.binary_join_element_wise(doubled, pa.scalar(b"\x00\x00", pa.binary()), b"")


def _component(
    column: ColumnSpec, text: pa.Array, weight: pa.Array | None, native: bool = False
) -> pa.Array:
    """One key column's bytes for a fetch, from its text (and weight) column; ``native``:
    an integer's by :mod:`reader.native_columns` where it takes the column."""
    t = column.data_type
    try:
        if weight is not None:
            return _escaped(weight)
        if t in _INTEGERS and native and not is_stored_number(text):  # the C parses text
            built = native_columns.integer_sort_keys(text, t == "bigint" and column.unsigned)
            if built is not None:
                return built
        if t in _INTEGERS:
            if t == "bigint" and column.unsigned:
                return _numbers(text.cast(pa.uint64()), np.uint64, False, 9)
            return _numbers(text.cast(pa.int64()), np.int64, True, 9)
        if t == "year":
            years = text.cast(pa.int64())
            years = pc.if_else(pc.equal(years, 1900), 0, years)  # as encode_component
            return _numbers(years, np.int64, True, 9)
        if t == "decimal" and (column.precision or 10) <= 38:
            return _decimals(text, column.precision or 10, column.scale or 0)
        if t == "date":
            days = text.cast(pa.string()).cast(pa.date32()).cast(pa.int32())
            return _numbers(days, np.int64, True, 4, _EPOCH_ORDINAL)
        if t in ("datetime", "timestamp"):
            micros = text.cast(pa.string()).cast(pa.timestamp("us")).cast(pa.int64())
            return _numbers(micros, np.int64, True, 9, _EPOCH_MICROS)
        if t == "varbinary":
            return _escaped(text)
        if t == "binary":
            if (
                column.octet_length
                and pc.any(pc.not_equal(pc.binary_length(text), column.octet_length)).as_py()
            ):
                raise NotColumnar  # not padded as stored: let encode_component pad it
            return _escaped(text)
        if t in ("char", "varchar"):
            if column.pad_space:
                text = pc.utf8_rtrim(text.cast(pa.string()), characters=" ").cast(pa.binary())
            return _escaped(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise NotColumnar from None
    raise NotColumnar


def _row_by_row(
    key_columns: Sequence[ColumnSpec], texts: list[pa.Array], weights: list[pa.Array | None]
) -> pa.Array:
    values = [array.to_pylist() for array in texts]
    weight_values = [array.to_pylist() if array is not None else None for array in weights]
    keys = []
    for row in range(len(texts[0]) if texts else 0):
        keys.append(
            b"".join(
                encode_component(
                    column,
                    text_to_python(column, values[i][row]),
                    bytes(weight_values[i][row]) if weight_values[i] is not None else None,
                )
                for i, column in enumerate(key_columns)
            )
        )
    return pa.array(keys, pa.binary())


def _as_binary(text: pa.Array) -> pa.Array:
    """A fetched column as binary (a text column may come as string: its bytes)."""
    return text.cast(pa.binary()) if pa.types.is_string(text.type) else text


def sort_key_reader(
    schema: TableSchema, selected: tuple[str, ...] | None = None, native: bool = False
) -> Callable[[Sequence[pa.Array]], pa.Array]:
    """A function from a fetch's columns (the table's columns, or those named
    ``selected`` when the output leaves some out, then one collation weight per collated
    key column, as ``chunk_reader.select_sql`` selects them) to the binary column of each
    row's sort key; ``native``: integer keys' bytes built by
    :mod:`reader.native_columns`."""
    names = schema.column_names if selected is None else selected
    positions = [names.index(name) for name in schema.primary_key]
    weight_positions: list[int | None] = []
    next_weight = len(names)
    for column in schema.key_columns:
        if needs_weight(column):
            weight_positions.append(next_weight)
            next_weight += 1
        else:
            weight_positions.append(None)
    key_columns = schema.key_columns

    def read(columns: Sequence[pa.Array]) -> pa.Array:
        texts = [_as_binary(columns[p]) for p in positions]
        weights = [columns[p] if p is not None else None for p in weight_positions]
        if _LITTLE_ENDIAN:
            try:
                parts = [
                    _component(c, t, w, native) for c, t, w in zip(key_columns, texts, weights)
                ]
            except NotColumnar:
                pass
            else:
                if len(parts) == 1:
                    return parts[0]
                return pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.binary()))
        return _row_by_row(key_columns, texts, weights)

    return read


def hex_column(keys: pa.Array) -> pa.Array:
    """Each binary value as lower-case hex text (``bytes.hex()`` on a column)."""
    keys = keys.cast(pa.binary())
    rows = len(keys)
    offsets = np.frombuffer(
        keys.buffers()[1], dtype=np.int32, count=rows + 1, offset=keys.offset * 4
    )
    data = keys.buffers()[2]
    first, last = int(offsets[0]), int(offsets[-1])
    payload = (
        np.frombuffer(data, dtype=np.uint8, count=last - first, offset=first) if data else None
    )
    digits = _HEX_DIGITS[payload].tobytes() if payload is not None else b""
    return pa.Array.from_buffers(
        pa.string(),
        rows,
        [None, pa.py_buffer(((offsets - first) * 2).astype(np.int32)), pa.py_buffer(digits)],
    )


def snapshot_seq_column(prefix: str, keys: pa.Array, native: bool = False) -> pa.Array:
    """``prefix + key.hex()`` per row: the ``_seq`` of a chunk's snapshot rows (built by
    :mod:`reader.native_columns` when ``native``)."""
    if native:
        return native_columns.seq_column(prefix, keys)
    return pc.binary_join_element_wise(pa.scalar(prefix), hex_column(keys), "")
