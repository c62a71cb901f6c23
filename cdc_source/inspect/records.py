"""Per-batch records: what this source's end offset of each logged batch means."""

from __future__ import annotations

import json
from dataclasses import dataclass

from cdc_source.inspect.checkpoint import Checkpoint, CheckpointError, LoggedBatch, SourceEntry
from cdc_source.offsets import BinlogPosition, OffsetError, SourceOffset


@dataclass(frozen=True)
class BatchRecord:
    """One batch as seen by this source: its end offset and what it means."""

    batch_id: int
    committed: bool
    phase: str  # "snapshot", "stream", "none" (no offset logged) or "invalid"
    offset_bytes: int
    timestamp_ms: int | None = None
    offset: SourceOffset | None = None
    error: str | None = None

    @property
    def cursor(self):
        """The snapshot cursor of the batch: the first snapshot's, else a joining table's."""
        if self.offset is None:
            return None
        return self.offset.snapshot or self.offset.added

    @property
    def table(self) -> str | None:
        return None if self.cursor is None else self.cursor.table

    @property
    def after(self) -> list | None:
        if self.cursor is None:
            return None
        after = self.cursor.after
        return None if after is None else list(after)

    @property
    def binlog(self) -> BinlogPosition | None:
        return None if self.offset is None else self.offset.binlog


def _parse_cdc_offset(text: str) -> SourceOffset:
    try:
        return SourceOffset.from_json_obj(json.loads(text))
    except json.JSONDecodeError as err:
        raise OffsetError(f"not JSON: {err}") from None
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, OffsetError):
            raise
        raise OffsetError(f"not a cdc-mysql offset: {err!r}") from None


def _is_cdc_offset(text: str | None) -> bool:
    if text is None:
        return False
    try:
        _parse_cdc_offset(text)
    except OffsetError:
        return False
    return True


def source_ids(checkpoint: Checkpoint) -> list[str]:
    seen: dict[str, None] = {}
    for batch in checkpoint.batches:
        for entry in batch.sources:
            seen.setdefault(entry.source_id, None)
    return list(seen)


def choose_source(checkpoint: Checkpoint, requested: str | None = None) -> str:
    """The source id whose offsets are cdc-mysql's (the first such one unless ``requested``)."""
    ids = source_ids(checkpoint)
    if requested is not None:
        if requested not in ids:
            raise CheckpointError(
                f"the checkpoint has no source '{requested}'; its sources are: "
                + (", ".join(ids) or "none")
            )
        return requested
    for source_id in ids:
        for batch in checkpoint.batches:
            entry = _entry(batch, source_id)
            if entry is not None and _is_cdc_offset(entry.text):
                return source_id
    if not checkpoint.batches:
        return "0"
    raise CheckpointError(
        f"no cdc-mysql offset in {checkpoint.path}: is this the checkpoint of a query that "
        "reads format('cdc-mysql')?"
    )


def _entry(batch: LoggedBatch, source_id: str) -> SourceEntry | None:
    for entry in batch.sources:
        if entry.source_id == source_id:
            return entry
    return None


def batch_record(batch: LoggedBatch, source_id: str) -> BatchRecord:
    entry = _entry(batch, source_id)
    common = {
        "batch_id": batch.batch_id,
        "committed": batch.committed,
        "timestamp_ms": batch.timestamp_ms,
    }
    if entry is None or entry.text is None:
        return BatchRecord(phase="none", offset_bytes=0, **common)
    size = len(entry.text.encode("utf-8"))
    try:
        offset = _parse_cdc_offset(entry.text)
    except OffsetError as err:
        return BatchRecord(phase="invalid", offset_bytes=size, error=str(err), **common)
    phase = "stream" if offset.snapshot is None else "snapshot"
    return BatchRecord(phase=phase, offset_bytes=size, offset=offset, **common)


def batch_records(checkpoint: Checkpoint, source_id: str | None = None) -> list[BatchRecord]:
    chosen = choose_source(checkpoint, source_id)
    return [batch_record(batch, chosen) for batch in checkpoint.batches]
