"""A two-column table (``id INT``, ``name VARCHAR(40) NULL``) as binlog bytes: the column
list a table map carries and one row's image, for unit tests that need rows in a generated
binlog without caring about their types."""

from __future__ import annotations

import struct

from tests.support import binlog_encoder as enc

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
COLUMNS = [
    ("id", enc.LONG, b"", False, False),
    ("name", enc.VARCHAR, struct.pack("<H", 40), True, False),
]


def row_image(id_: int, name: str | None) -> bytes:
    """One full row image of the two-column table."""
    return enc.row_image(
        [struct.pack("<i", id_), None if name is None else bytes([len(name)]) + name.encode()]
    )
