"""Two snapshot columns built by C where ``reader._textvalues`` is built: TIME values from
the server's text, and ``_seq`` from the chunk's prefix and the key bytes.

Each is one loop over the Arrow buffers instead of several Arrow kernels (a regular
expression and five kernels for TIME; a NumPy gather and a join for ``_seq``). The Arrow
paths they replace, ``reader.text_columns._time_micros`` and
``reader.key_columns.hex_column``, are their pure-Python twins: a task runs the C where
its row decoder is the native one (``scan.binlog.decoder``), so the test matrix runs both,
and a differential test holds them equal. A TIME value the C does not take (another
shape, more than nine digits of hours) leaves the whole column to the twin.
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


def time_micros(text: pa.Array) -> pa.Array | None:
    """TIME text (binary or string, ``[-]H:MM:SS[.ffffff]``) as int64 microseconds, or
    None when a value has another shape."""
    validity, offsets, data, offset, length = _binary_buffers(text)
    if offsets is None:  # an empty array
        return pa.array([], pa.int64())
    built = _textvalues.time_micros(
        validity if text.null_count else None, offsets, data, offset, length
    )
    if built is None:
        return None
    bits, values = built
    buffers = [pa.py_buffer(bits) if bits is not None else None, pa.py_buffer(values)]
    return pa.Array.from_buffers(pa.int64(), length, buffers, null_count=text.null_count)


def seq_column(prefix: str, keys: pa.Array) -> pa.Array:
    """``prefix + key.hex()`` per key (keys are never null)."""
    _, offsets, data, offset, length = _binary_buffers(keys)
    if offsets is None:
        return pa.array([], pa.string())
    ends, text = _textvalues.hex_seq(prefix.encode(), offsets, data, offset, length)
    buffers = [None, pa.py_buffer(ends), pa.py_buffer(text)]
    return pa.Array.from_buffers(pa.string(), length, buffers)
