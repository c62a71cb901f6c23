"""``_seq``: one string whose lexicographic order is the order of all changes.

A binlog row change sorts by the end position of its event, then by the event's index
among the events sharing that end position (the inner events of a MySQL
TRANSACTION_PAYLOAD, the row events of an XA transaction emitted at its commit), then
its row index inside the event. A snapshot row ('r') carries the state at the batch's
planned position P and sorts right after every event ending at or before P and before
every later one; among themselves snapshot rows sort by table and key (the
order-preserving key bytes), which makes ``_seq`` a pure function of the row, whatever
chunks a re-run picks.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

BINLOG_KIND = "0"
SNAPSHOT_KIND = "1"


def binlog_seq(file_number: int, end_pos: int, row_index: int, part: int = 0, sub: int = 0) -> str:
    """``part`` orders the two halves of a primary-key update: 0 the delete, 1 the insert."""
    return f"{file_number:06d}.{end_pos:012d}.{BINLOG_KIND}.{sub:08d}.{row_index:08d}.{part}"


def _padded(values: pa.Array, width: int) -> pa.Array:
    return pc.utf8_lpad(pc.cast(values, pa.string()), width=width, padding="0")


def binlog_seq_array(
    file_number: pa.Array, end_pos: pa.Array, sub: pa.Array, row_index: pa.Array, part: pa.Array
) -> pa.Array:
    """:func:`binlog_seq` over columns."""
    return pc.binary_join_element_wise(
        _padded(file_number, 6),
        _padded(end_pos, 12),
        pa.scalar(BINLOG_KIND),
        _padded(sub, 8),
        _padded(row_index, 8),
        pc.cast(part, pa.string()),
        ".",
    )


def snapshot_seq_prefix(file_number: int, pos: int, table_index: int) -> str:
    """The part of a snapshot row's ``_seq`` shared by a whole chunk; the row's own part
    is its order-preserving key bytes in hex (see :func:`snapshot_seq`)."""
    return f"{file_number:06d}.{pos:012d}.{SNAPSHOT_KIND}.{table_index:04d}."


def snapshot_seq(file_number: int, pos: int, table_index: int, key_bytes: bytes) -> str:
    return snapshot_seq_prefix(file_number, pos, table_index) + key_bytes.hex()
