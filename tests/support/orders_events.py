"""Hand-built events of one table, ``shop.orders`` (id, name, price, at, doc), from
:mod:`tests.support.binlog_encoder`: its table map, row images and rows events."""

from __future__ import annotations

import struct
from decimal import Decimal

from cdc_source.binlog.table_map import parse_table_map
from tests.support import binlog_encoder as enc

TABLE_ID = 77
COLUMNS = [
    ("id", enc.LONG, b"", False, False),
    ("name", enc.VARCHAR, struct.pack("<H", 40), True, False),
    ("price", enc.NEWDECIMAL, bytes([10, 2]), True, False),
    ("at", enc.DATETIME2, bytes([3]), True, False),
    ("doc", enc.JSON, bytes([4]), True, False),
]


def image(id_, name, price, at, doc=None):
    return enc.row_image(
        [
            struct.pack("<i", id_),
            None if name is None else bytes([len(name)]) + name.encode(),
            None if price is None else enc.decimal_bin(Decimal(price), 10, 2),
            None if at is None else enc.datetime2(at, 3),
            None if doc is None else struct.pack("<I", len(doc)) + doc,
        ]
    )


def table_map(binlog: enc.BinlogFile) -> int:
    return binlog.add(19, enc.table_map_body(TABLE_ID, "shop", "orders", COLUMNS))


def rows(binlog, event_type, rows: bytes, update=False, present=None, v2=True):
    body = enc.rows_body(TABLE_ID, len(COLUMNS), rows, update, v2, present)
    return binlog.add(event_type, body)


# (name, type, meta, nullable, unsigned) as the encoder takes them, with the collation the
# optional metadata gives text columns (COLUMN_CHARSET is not written: DEFAULT_CHARSET
# absence leaves it None, which the comparison accepts as "not reported").
ENC_ID = ("id", enc.LONG, b"", False, False)
ENC_NAME = ("name", enc.VARCHAR, struct.pack("<H", 160), True, False)
ENC_QTY_INT = ("qty", enc.LONG, b"", True, False)
ENC_QTY = ("qty", enc.LONGLONG, b"", True, False)
ENC_NOTE = ("note", enc.VARCHAR, struct.pack("<H", 80), True, False)
ENC_PRICE4 = ("price", enc.NEWDECIMAL, bytes([10, 4]), True, False)


def parsed_table_map(columns, table_id: int = 91, **kw):
    """A table map of ``shop.orders`` with ``columns`` (encoder tuples), parsed."""
    body = enc.table_map_body(table_id, "shop", "orders", columns, **kw)
    return parse_table_map(body, 8)
