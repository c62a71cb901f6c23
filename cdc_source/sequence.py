"""``_seq``: one string whose lexicographic order is the order of all changes.

A binlog row change sorts by the end position of its event, then by the event's index
among the events sharing that end position (the inner events of a MySQL
TRANSACTION_PAYLOAD, the row events of an XA transaction emitted at its commit), then
its row index inside the event. A snapshot row ('r') carries the state at the batch's
planned position P and sorts right after every event ending at or before P and before
every later one; among themselves snapshot rows sort by table and key (the
order-preserving key bytes), which makes ``_seq`` a pure function of the row, whatever
chunks a re-run picks.

After a fail-over the positions are another server's, whose file numbers may be lower:
each server change starts a new *epoch* (``BinlogPosition.epoch``), and a ``_seq`` of
epoch n >= 1 starts with ``E`` and n (``E0001.``), which sorts after every ``_seq`` of an
earlier epoch (digits sort before ``E``), so the order of all changes holds across
servers and a ``_seq`` written before fail-overs existed keeps its meaning.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

BINLOG_KIND = "0"
SNAPSHOT_KIND = "1"
REREAD_MARK = "R"  # where a re-read's row has its number; no other _seq holds the letter


def epoch_prefix(epoch: int) -> str:
    """What a ``_seq`` of ``epoch`` starts with ('' for the first server)."""
    if not 0 <= epoch <= 9999:
        raise ValueError(f"epoch {epoch} is out of range")
    return f"E{epoch:04d}." if epoch else ""


def binlog_seq(
    file_number: int, end_pos: int, row_index: int, part: int = 0, sub: int = 0, epoch: int = 0
) -> str:
    """``part`` orders the two halves of a primary-key update: 0 the delete, 1 the insert."""
    position = f"{file_number:06d}.{end_pos:012d}.{BINLOG_KIND}"
    return f"{epoch_prefix(epoch)}{position}.{sub:08d}.{row_index:08d}.{part}"


def _padded(values: pa.Array, width: int) -> pa.Array:
    return pc.utf8_lpad(pc.cast(values, pa.string()), width=width, padding="0")


def binlog_seq_array(
    file_number: pa.Array,
    end_pos: pa.Array,
    sub: pa.Array,
    row_index: pa.Array,
    part: pa.Array,
    epoch: int = 0,
) -> pa.Array:
    """:func:`binlog_seq` over columns."""
    joined = pc.binary_join_element_wise(
        _padded(file_number, 6),
        _padded(end_pos, 12),
        pa.scalar(BINLOG_KIND),
        _padded(sub, 8),
        _padded(row_index, 8),
        pc.cast(part, pa.string()),
        ".",
    )
    if not epoch:
        return joined
    return pc.binary_join_element_wise(pa.scalar(epoch_prefix(epoch)), joined, "")


def snapshot_seq_prefix(file_number: int, pos: int, table_index: int, epoch: int = 0) -> str:
    """The part of a snapshot row's ``_seq`` shared by a whole chunk; the row's own part
    is its order-preserving key bytes in hex (see :func:`snapshot_seq`)."""
    return f"{epoch_prefix(epoch)}{file_number:06d}.{pos:012d}.{SNAPSHOT_KIND}.{table_index:04d}."


def reread_seq_prefix(file_number: int, pos: int, reread: int, epoch: int = 0) -> str:
    """The prefix of the rows of re-read number ``reread`` (a snapshot on demand) as of
    the position: a snapshot row's, with ``R`` and the number where the table's index
    is. ``R`` sorts after the digits, so a key restated at P sorts after the snapshot's
    row of it at the same P, and two re-reads at one P stay apart."""
    position = f"{file_number:06d}.{pos:012d}.{SNAPSHOT_KIND}"
    return f"{epoch_prefix(epoch)}{position}.{REREAD_MARK}{reread:08d}."


def snapshot_seq(
    file_number: int, pos: int, table_index: int, key_bytes: bytes, epoch: int = 0
) -> str:
    return snapshot_seq_prefix(file_number, pos, table_index, epoch) + key_bytes.hex()
