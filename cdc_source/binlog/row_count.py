"""How many rows a rows event holds, found by walking the images' lengths without
decoding a value: the driver sizes stream batches by row changes.

The walk is per column of every row, so in Python it cost the driver more than the tasks
spent reading the same range (1M rows in 1,000-row transactions: about 6 s). Its C twin
is ``count_rows`` of :mod:`cdc_source.binlog.framing`; :class:`RowCounter` uses either."""

from __future__ import annotations

import struct

from cdc_source.binlog import constants as c
from cdc_source.binlog import framing
from cdc_source.binlog.row_plan import (
    K_BIT,
    K_DATE,
    K_DATETIME,
    K_DATETIME2,
    K_DECIMAL,
    K_DOUBLE,
    K_ENUM,
    K_FLOAT,
    K_SET,
    K_SINT,
    K_TIME,
    K_TIME2,
    K_TIMESTAMP,
    K_TIMESTAMP2,
    K_UINT,
    K_VAR,
    K_YEAR,
    decimal_size,
    json_columns,
    table_plan,
)
from cdc_source.binlog.rows_event import RowsEvent
from cdc_source.binlog.table_map import TableMap
from cdc_source.binlog.wire import Cursor, MalformedEventError

# Per plan entry: (bytes of a fixed-size value, bytes of a length prefix); one is 0.
_FIXED = {K_FLOAT: 4, K_DOUBLE: 8, K_DATE: 3, K_YEAR: 1, K_DATETIME: 8, K_TIMESTAMP: 4, K_TIME: 3}
_FRACTION_BASE = {K_DATETIME2: 5, K_TIMESTAMP2: 4, K_TIME2: 3}


def value_sizes(table_map: TableMap) -> tuple[tuple[int, int], ...]:
    """For each column of the table map: (fixed size, 0) or (0, length-prefix bytes)."""
    sizes = []
    for kind, a, b in table_plan(table_map):
        if kind in (K_SINT, K_UINT, K_ENUM, K_SET, K_BIT):
            sizes.append((a, 0))
        elif kind == K_DECIMAL:
            sizes.append((decimal_size(a, b), 0))
        elif kind in _FRACTION_BASE:
            sizes.append((_FRACTION_BASE[kind] + (a + 1) // 2, 0))
        elif kind == K_VAR:
            sizes.append((0, a))
        else:
            sizes.append((_FIXED[kind], 0))
    return tuple(sizes)


def packed_sizes(sizes: tuple[tuple[int, int], ...]) -> bytes:
    """``sizes`` as the native counter reads them: 4 bytes per column, little-endian, a
    fixed size or ``0x80000000 | length-prefix bytes``."""
    return b"".join(
        struct.pack("<I", 0x80000000 | prefix if prefix else fixed) for fixed, prefix in sizes
    )


class RowCounter:
    """Counts the rows of rows events, in C or in Python as ``decoder``
    (``scan.binlog.decoder``) chooses (:func:`framing.row_counter`); a table map's sizes
    are worked out once."""

    def __init__(self, decoder: str | None = "auto") -> None:
        self.native = framing.row_counter(decoder)
        self._sizes: dict[int, tuple[TableMap, tuple, bytes, int]] = {}  # by id() of a map

    def count(self, rows: RowsEvent, table_map: TableMap) -> int:
        return self.count_data(rows.data, rows.start, rows.kind, rows.partial, table_map)

    def packed(self, table_map: TableMap) -> tuple[bytes, int]:
        """The native counter's sizes of ``table_map`` and its JSON bitmap's bytes."""
        _, _, packed, json_bitmap = self._entry(table_map)
        return packed, json_bitmap

    def _entry(self, table_map: TableMap) -> tuple[TableMap, tuple, bytes, int]:
        entry = self._sizes.get(id(table_map))
        if entry is None or entry[0] is not table_map:
            if len(self._sizes) > 10_000:
                self._sizes.clear()
            sizes = value_sizes(table_map)
            json_bitmap = (json_columns(table_map) + 7) // 8
            entry = (table_map, sizes, packed_sizes(sizes), json_bitmap)
            # kept with the map itself, so its id is not reused while cached
            self._sizes[id(table_map)] = entry
        return entry

    def count_data(
        self, data: bytes, start: int, kind: int, partial: bool, table_map: TableMap
    ) -> int:
        """The rows of a rows event of ``kind`` whose row data is ``data[start:]``."""
        entry = self._entry(table_map)
        _, sizes, packed, json_bitmap = entry
        if self.native is None:
            return count_rows(RowsEvent(0, kind, data, start, partial), table_map, sizes)
        images = 2 if kind == c.UPDATE else 1
        try:
            return self.native(
                data, start, len(data), images, packed, json_bitmap if partial else -1
            )
        except ValueError as err:  # the extension's FramingError
            raise MalformedEventError(str(err)) from None


def count_rows(rows: RowsEvent, table_map: TableMap, sizes: tuple[tuple[int, int], ...]) -> int:
    """The rows of ``rows`` (an update's before- and after-image are one row). Bytes
    that do not end where the event ends raise :class:`MalformedEventError`."""
    data, pos, end = rows.data, rows.start, len(rows.data)
    bitmap_bytes = (len(sizes) + 7) // 8
    images = 2 if rows.kind == c.UPDATE else 1
    json_bitmap = (json_columns(table_map) + 7) // 8 if rows.partial else 0
    count = 0
    if not sizes and pos < end:  # an image of no column would never advance
        raise MalformedEventError("row data for a table of no columns")
    while pos < end:
        for image in range(images):
            if image == 1 and rows.partial:  # value_options, then maybe the JSON bitmap
                cur = Cursor(data, pos)
                options = cur.lenenc()
                pos = cur.pos + (json_bitmap if options & 1 else 0)
            if pos + bitmap_bytes > end:
                raise MalformedEventError(f"a row image starts {end - pos} bytes before the end")
            nulls = data[pos : pos + bitmap_bytes]
            pos += bitmap_bytes
            for i, (fixed, prefix) in enumerate(sizes):
                if nulls[i >> 3] & (1 << (i & 7)):
                    continue
                if prefix:
                    pos += prefix + int.from_bytes(data[pos : pos + prefix], "little")
                else:
                    pos += fixed
        count += 1
    if pos != end:
        raise MalformedEventError(f"row images overrun their event by {pos - end} bytes")
    return count
