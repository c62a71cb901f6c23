"""How many rows a rows event holds, found by walking the images' lengths without
decoding a value: the driver sizes stream batches by row changes (issue 9 item 2)."""

from __future__ import annotations

from cdc_source.binlog import constants as c
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


def count_rows(rows: RowsEvent, table_map: TableMap, sizes: tuple[tuple[int, int], ...]) -> int:
    """The rows of ``rows`` (an update's before- and after-image are one row). Bytes
    that do not end where the event ends raise :class:`MalformedEventError`."""
    data, pos, end = rows.data, rows.start, len(rows.data)
    bitmap_bytes = (len(sizes) + 7) // 8
    images = 2 if rows.kind == c.UPDATE else 1
    json_bitmap = (json_columns(table_map) + 7) // 8 if rows.partial else 0
    count = 0
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
