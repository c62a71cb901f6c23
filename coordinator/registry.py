"""The coordinator's split metadata, and its release (docs/design.md, 'Hand-over and
split metadata').

What is held, and for how long:

- the chunks of every planned, not yet committed batch: dropped by ``commit(end)`` of
  that batch or a later one;
- per-table splitter state and progress of the snapshot: released, all at once, by the
  first commit of an offset past the hand-over (``snapshot`` null). Not earlier, because
  until that commit Spark may re-run the hand-over batch.

None of it is written to Spark's offset log; after a driver restart the registry starts
empty and the planner rebuilds what it needs from the offset alone.
"""

from __future__ import annotations

import logging
import pickle
from collections import deque
from dataclasses import dataclass

from cdc_source.offsets import SourceOffset, same_progress
from cdc_source.partitions import ChunkSpec
from coordinator.progress import TableProgress

log = logging.getLogger("cdc_mysql.coordinator")


@dataclass(frozen=True)
class PlannedBatch:
    start: SourceOffset
    end: SourceOffset
    chunks: tuple[ChunkSpec, ...]


@dataclass(frozen=True)
class ReleaseReport:
    entries: int
    bytes: int


class SplitRegistry:
    def __init__(self) -> None:
        self._in_flight: deque[PlannedBatch] = deque()
        self._progress: dict[str, TableProgress] = {}
        self.released: ReleaseReport | None = None

    # -- in-flight batches -------------------------------------------------------------
    def record(self, batch: PlannedBatch) -> None:
        self._in_flight.append(batch)

    def planned(self, start: SourceOffset, end: SourceOffset) -> PlannedBatch | None:
        for batch in self._in_flight:
            if same_progress(batch.start, start) and same_progress(batch.end, end):
                return batch
        return None

    def in_flight_chunks(self) -> int:
        return sum(len(batch.chunks) for batch in self._in_flight)

    # -- progress ------------------------------------------------------------------------
    def progress(self, table: str, estimated_rows: int, chunk_size: int) -> TableProgress:
        entry = self._progress.get(table)
        if entry is None:
            entry = self._progress[table] = TableProgress(table, estimated_rows, chunk_size)
        return entry

    def progress_snapshot(self) -> list[TableProgress]:
        return list(self._progress.values())

    # -- commit and release --------------------------------------------------------------
    def commit(self, end: SourceOffset) -> ReleaseReport | None:
        """Everything up to ``end`` is durable: drop the chunks of those batches, and at the
        first durable offset past the hand-over release all snapshot-phase metadata."""
        releasing = end.handed_over and self.released is None
        held = self._held() if releasing else None
        self._drop_committed(end)
        if releasing:
            return self._release_snapshot_metadata(held)
        return None

    def _held(self) -> ReleaseReport:
        """What the snapshot phase holds right now: entries and their pickled size."""
        held = {"in_flight": list(self._in_flight), "progress": self._progress}
        return ReleaseReport(
            entries=len(self._in_flight) + self.in_flight_chunks() + len(self._progress),
            bytes=len(pickle.dumps(held)),
        )

    def _drop_committed(self, end: SourceOffset) -> None:
        position = [i for i, b in enumerate(self._in_flight) if same_progress(b.end, end)]
        if position:
            committed = [self._in_flight.popleft() for _ in range(position[-1] + 1)]
        else:
            committed = []
            if end.binlog is not None:
                while self._in_flight and self._earlier(self._in_flight[0].end, end):
                    committed.append(self._in_flight.popleft())
        for batch in committed:
            for chunk in batch.chunks:
                entry = self._progress.get(chunk.table.name)
                if entry is not None:
                    entry.chunks_committed += 1

    @staticmethod
    def _earlier(a: SourceOffset, b: SourceOffset) -> bool:
        return a.binlog is not None and a.binlog.coordinates < b.binlog.coordinates

    def _release_snapshot_metadata(self, report: ReleaseReport) -> ReleaseReport:
        summary = ", ".join(
            f"{p.table}: {p.chunks_committed} chunks" for p in self._progress.values()
        )
        self._in_flight.clear()
        self._progress = {}
        self.released = report
        log.info(
            "hand-over committed: released snapshot metadata, %d entries, %d bytes (%s)",
            report.entries,
            report.bytes,
            summary or "no tables snapshotted in this run",
        )
        return report

    def snapshot_metadata_entries(self) -> int:
        """Test hook: how many snapshot-phase entries are held right now."""
        return len(self._in_flight) + self.in_flight_chunks() + len(self._progress)
