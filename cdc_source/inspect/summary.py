"""The state of a query at its latest batch: phase, frontier, tables done and pending,
offset sizes. Pure functions of the batch records (and the server's table list)."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_source.inspect.records import BatchRecord
from cdc_source.offsets import SourceOffset


@dataclass(frozen=True)
class Summary:
    batches: int
    first_batch: int | None
    latest_batch: int | None
    last_committed: int | None
    uncommitted: tuple[int, ...]
    phase: str  # "not started", "snapshot" or "stream"
    offset_batch: int | None  # the batch whose offset the phase and tables come from
    offset: SourceOffset | None
    tables_done: tuple[str, ...]
    tables_pending: tuple[str, ...]
    tables_from: str  # "offsets" (only tables named in offsets are known) or "server"
    snapshot_seen: bool  # some offset in the log has a snapshot cursor
    largest_offset_bytes: int
    largest_offset_batch: int | None
    total_offset_bytes: int


def split_tables(
    offset: SourceOffset | None, tables: list[str] | tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(done, pending) among ``tables`` at ``offset``.

    Tables are snapshotted in sorted ``db.table`` order, so the ones sorting before the
    frontier table are done and the frontier table and those after it are pending;
    after the hand-over every table is done. Before the first batch nothing is done.
    """
    ordered = sorted(set(tables))
    if offset is None:
        return (), tuple(ordered)
    if offset.snapshot is None:
        return tuple(ordered), ()
    frontier = offset.snapshot.table
    if frontier not in ordered:
        ordered = sorted([*ordered, frontier])
    return (
        tuple(t for t in ordered if t < frontier),
        tuple(t for t in ordered if t >= frontier),
    )


def table_status(table: str, offset: SourceOffset | None) -> str:
    if offset is None:
        return "pending"
    if offset.snapshot is None or table < offset.snapshot.table:
        return "done"
    if table == offset.snapshot.table and offset.snapshot.after is not None:
        return "in progress"
    return "pending"


def current_record(records: list[BatchRecord]) -> BatchRecord | None:
    """The latest batch that has a readable offset of this source."""
    for record in reversed(records):
        if record.offset is not None:
            return record
    return None


def summarize(records: list[BatchRecord], captured: list[str] | None = None) -> Summary:
    """The state of the query at its latest batch (committed or not).

    ``captured``: the captured tables as listed by the server; without it, only the
    tables named in the offsets are known.
    """
    current = current_record(records)
    offset = None if current is None else current.offset
    named = {r.table for r in records if r.table is not None}
    done, pending = split_tables(offset, list(captured) if captured is not None else named)
    committed = [r.batch_id for r in records if r.committed]
    sized = [r for r in records if r.offset_bytes > 0]
    largest = max(sized, key=lambda r: r.offset_bytes, default=None)
    if offset is None:
        phase = "not started"
    else:
        phase = "stream" if offset.snapshot is None else "snapshot"
    return Summary(
        batches=len(records),
        first_batch=records[0].batch_id if records else None,
        latest_batch=records[-1].batch_id if records else None,
        last_committed=max(committed, default=None),
        uncommitted=tuple(r.batch_id for r in records if not r.committed),
        phase=phase,
        offset_batch=None if current is None else current.batch_id,
        offset=offset,
        tables_done=done,
        tables_pending=pending,
        tables_from="offsets" if captured is None else "server",
        snapshot_seen=bool(named),
        largest_offset_bytes=0 if largest is None else largest.offset_bytes,
        largest_offset_batch=None if largest is None else largest.batch_id,
        total_offset_bytes=sum(r.offset_bytes for r in records),
    )
