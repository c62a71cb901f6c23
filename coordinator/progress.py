"""Snapshot progress per table, as the driver sees it while planning."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field


@dataclass
class TableProgress:
    table: str
    estimated_rows: int
    chunk_size: int
    chunks_planned: int = 0
    chunks_committed: int = 0
    finished: bool = False
    started_at: float = field(default_factory=time.monotonic)

    @property
    def estimated_chunks(self) -> int:
        return max(1, math.ceil(self.estimated_rows / self.chunk_size))

    @property
    def rows_committed(self) -> int:
        """Rows below the frontier after the last commit (chunks hold ``chunk_size`` rows
        when planned; the table's last chunk may hold fewer)."""
        return self.chunks_committed * self.chunk_size

    def rows_per_second(self, now: float | None = None) -> float:
        elapsed = (now or time.monotonic()) - self.started_at
        return self.rows_committed / elapsed if elapsed > 0 else 0.0
