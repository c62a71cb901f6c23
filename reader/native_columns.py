"""Snapshot columns built by C where ``reader._textvalues`` is built: temporal values
(TIME, DATE, DATETIME, TIMESTAMP) and decimals (DECIMAL, BIGINT UNSIGNED) from the
server's text, the sort keys of integer key columns, and ``_seq`` from the chunk's prefix
and the key bytes.

Each is one loop over the Arrow buffers instead of one or more Arrow kernels (for TIME a
regular expression and five kernels; for an integer key a cast and five NumPy steps; for
``_seq`` a NumPy gather and a join). The Arrow paths they replace (the casts of
``reader.text_columns``, its ``_time_micros``, ``reader.key_columns``' NumPy key bytes
and its ``hex_column``) are their pure-Python twins: a task runs the C where
its row decoder is the native one (``scan.binlog.decoder``), so the test matrix runs both,
and a differential test holds them equal. A column with a value the C does not take
(another shape, a zero date, more digits than the type holds) is left to the twin: each
function here returns None for it.
"""

from __future__ import annotations

import pyarrow as pa

from reader.row_decoding import decoder_name

try:
    from reader import _textvalues
except ImportError:  # no compiler at install time: the Arrow paths
    _textvalues = None


def native_available() -> bool:
    return _textvalues is not None


def native_wanted(decoder: str) -> bool:
    """Whether a task whose ``scan.binlog.decoder`` is ``decoder`` builds these columns
    in C."""
    return _textvalues is not None and decoder_name(decoder) == "native"


def _binary_buffers(array: pa.Array) -> tuple:
    if array.type != pa.binary() and array.type != pa.string():
        array = array.cast(pa.binary())
    validity, offsets, data = array.buffers()
    return validity, offsets, data, array.offset, len(array)


def _parsed(entry: str, text: pa.Array, arrow_type: pa.DataType, *extra: int) -> pa.Array | None:
    """``text`` as ``arrow_type`` by the C parser ``entry`` of :mod:`reader._textvalues`,
    or None where the parser declines a value."""
    validity, offsets, data, offset, length = _binary_buffers(text)
    if offsets is None:  # an empty array
        return pa.array([], arrow_type)
    bits = validity if text.null_count else None
    built = getattr(_textvalues, entry)(bits, offsets, data, offset, length, *extra)
    if built is None:
        return None
    bits, values = built
    buffers = [pa.py_buffer(bits) if bits is not None else None, pa.py_buffer(values)]
    return pa.Array.from_buffers(arrow_type, length, buffers, null_count=text.null_count)


def time_micros(text: pa.Array) -> pa.Array | None:
    """TIME text (binary or string, ``[-]H:MM:SS[.ffffff]``) as int64 microseconds, or
    None when a value has another shape."""
    return _parsed("time_micros", text, pa.int64())


def date_days(text: pa.Array) -> pa.Array | None:
    """DATE text (``YYYY-MM-DD``) as Arrow's date32, or None."""
    return _parsed("date_days", text, pa.date32())


def datetime_micros(text: pa.Array, arrow_type: pa.DataType) -> pa.Array | None:
    """DATETIME or TIMESTAMP text (``YYYY-MM-DD HH:MM:SS[.ffffff]``) as ``arrow_type``, a
    microsecond timestamp, or None."""
    return _parsed("datetime_micros", text, arrow_type)


def decimals(text: pa.Array, arrow_type: pa.Decimal128Type) -> pa.Array | None:
    """DECIMAL or BIGINT UNSIGNED text as ``arrow_type`` (decimal128), or None."""
    return _parsed("decimal128", text, arrow_type, arrow_type.precision, arrow_type.scale)


def integer_sort_keys(text: pa.Array, unsigned: bool) -> pa.Array | None:
    """The sort keys (:func:`cdc_source.keys.sort_key`, 9 bytes each) of an integer key
    column's text, or None when a value is NULL or not an integer of 64 bits (unsigned
    64 bits for ``unsigned``)."""
    validity, offsets, data, offset, length = _binary_buffers(text)
    if offsets is None:
        return pa.array([], pa.binary())
    bits = validity if text.null_count else None
    built = _textvalues.integer_sort_keys(bits, offsets, data, offset, length, unsigned)
    if built is None:
        return None
    ends, keys = built
    return pa.Array.from_buffers(
        pa.binary(), length, [None, pa.py_buffer(ends), pa.py_buffer(keys)]
    )


def seq_column(prefix: str, keys: pa.Array) -> pa.Array:
    """``prefix + key.hex()`` per key (keys are never null)."""
    _, offsets, data, offset, length = _binary_buffers(keys)
    if offsets is None:
        return pa.array([], pa.string())
    ends, text = _textvalues.hex_seq(prefix.encode(), offsets, data, offset, length)
    buffers = [None, pa.py_buffer(ends), pa.py_buffer(text)]
    return pa.Array.from_buffers(pa.string(), length, buffers)
