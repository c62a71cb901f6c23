"""Which row decoder runs (the C extension, or the pure-Python one where it is not built)
and the decoded rows of one table map as Arrow arrays (:class:`DecodedRows`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

from cdc_source.binlog.framing import FORCE_PYTHON_ENV
from cdc_source.binlog.row_plan import arrow_type
from reader import row_decoder_py

try:
    from reader import _rowdecoder
except ImportError:  # built without a compiler
    _rowdecoder = None

NATIVE_ERRORS: tuple[type[Exception], ...] = (row_decoder_py.RowDecodeError,)
if _rowdecoder is not None:
    NATIVE_ERRORS += (_rowdecoder.RowDecodeError,)
PARTIAL_JSON_ERRORS: tuple[type[Exception], ...] = (row_decoder_py.PartialJsonError,)
if _rowdecoder is not None:
    PARTIAL_JSON_ERRORS += (_rowdecoder.PartialJsonError,)
INVALID_DATE_ERRORS: tuple[type[Exception], ...] = (row_decoder_py.InvalidDateError,)
if _rowdecoder is not None:
    INVALID_DATE_ERRORS += (_rowdecoder.InvalidDateError,)


def native_available() -> bool:
    return _rowdecoder is not None


def decoder_name(requested: str | None = "auto") -> str:
    """'native' or 'python': the decoder a sink uses for ``scan.binlog.decoder``
    (``auto``: the C extension where it is built; the environment variable
    ``CDC_MYSQL_PURE_PYTHON_DECODER`` forces Python for ``auto``)."""
    if requested in ("native", "python"):
        if requested == "native" and _rowdecoder is None:
            raise RuntimeError(
                "scan.binlog.decoder=native, but the C row decoder is not built on this "
                "executor (it needs a C compiler and the Python headers at install time); "
                "use scan.binlog.decoder=auto or python"
            )
        return requested
    if _rowdecoder is None or os.environ.get(FORCE_PYTHON_ENV):
        return "python"
    return "native"


@dataclass(frozen=True)
class DecodedRows:
    """Rows of one table map: per row whether it has a before/after image, and each
    image's columns (all rows, NULL where the image is absent)."""

    rows: int
    has_before: pa.Array
    has_after: pa.Array
    before: list[pa.Array]
    after: list[pa.Array]


class RowSink:
    """Decodes the rows events of one table map; :meth:`take` empties it."""

    def __init__(
        self,
        plan: tuple[tuple[int, int, int], ...],
        json_count: int = 0,
        decoder: str | None = None,
    ) -> None:
        self.plan = plan
        self.types = [arrow_type(entry) for entry in plan]
        self.native = decoder_name(decoder) == "native"
        impl = _rowdecoder.RowSink if self.native else row_decoder_py.PyRowSink
        self._sink = impl(plan, json_count)

    @property
    def rows(self) -> int:
        return self._sink.rows

    @property
    def nbytes(self) -> int:
        return self._sink.nbytes

    def decode(self, data: bytes, pos: int, end: int, kind: int, partial: bool = False) -> int:
        return self._sink.decode(data, pos, end, kind, partial)

    def take(self) -> DecodedRows:
        if not self.native:
            return DecodedRows(*self._sink.take())
        rows, has_before, has_after, before, after = self._sink.take()
        return DecodedRows(
            rows,
            _bitmap_array(has_before, rows),
            _bitmap_array(has_after, rows),
            [_column(c, t, rows) for c, t in zip(before, self.types)],
            [_column(c, t, rows) for c, t in zip(after, self.types)],
        )


def _bitmap_array(bits: bytes, rows: int) -> pa.Array:
    return pa.Array.from_buffers(pa.bool_(), rows, [None, pa.py_buffer(bits)])


def _column(parts: tuple, arrow_type: pa.DataType, rows: int) -> pa.Array:
    validity, offsets, values = parts
    buffers = [pa.py_buffer(validity)]
    if offsets is not None:
        buffers.append(pa.py_buffer(offsets))
    buffers.append(pa.py_buffer(values))
    array = pa.Array.from_buffers(arrow_type, rows, buffers)
    return array
