"""The dump stream's hot walks and which twin runs them: splitting the raw stream into
events (``split_events``) and counting a rows event's rows (``count_rows``) are in C in
the optional extension ``cdc_source.binlog._framing`` where it is built, and in Python
(:mod:`cdc_source.binlog.events`, :mod:`cdc_source.binlog.row_count`) everywhere.

Both give the same events and counts. The driver's passes read every event of a batch's
range, and in Python they cost it more than its tasks spent reading the range (100K
single-row transactions: 5.0 s against 1.4 s; 1M rows in 1,000-row transactions: 9 s
against 4 s). The choice follows ``scan.binlog.decoder``, as the row decoder's does.
"""

from __future__ import annotations

import os
from collections.abc import Callable

try:
    from cdc_source.binlog import _framing
except ImportError:  # built without a compiler
    _framing = None

# Set (to anything), it makes ``auto`` mean Python here and in the row decoder.
FORCE_PYTHON_ENV = "CDC_MYSQL_PURE_PYTHON_DECODER"


def native_available() -> bool:
    return _framing is not None


def runs_native(decoder: str | None = "auto") -> bool:
    """Whether ``decoder`` (``scan.binlog.decoder``: auto, native or python; None is
    auto) runs the C walks: ``python`` never, ``native`` and ``auto`` where the extension
    is built, ``auto`` only while :data:`FORCE_PYTHON_ENV` is not set. A ``native`` that
    cannot be honoured is refused by the row decoder (``reader.row_decoding``), built
    alongside; the walks give the same events either way."""
    if decoder == "python" or _framing is None:
        return False
    return decoder == "native" or not os.environ.get(FORCE_PYTHON_ENV)


def splitter(decoder: str | None = "auto") -> Callable | None:
    """The C packet/event splitter for ``decoder``, or None: the Python one."""
    return _framing.split_events if runs_native(decoder) else None


def row_counter(decoder: str | None = "auto") -> Callable[..., int] | None:
    """The C row counter for ``decoder``, or None: the Python one."""
    return _framing.count_rows if runs_native(decoder) else None
