"""What the driver tells about its planning: a log line per planned batch, and the
coordinator's holdings as a small JSON file for tests and operators."""

from __future__ import annotations

import json
import logging
import os

from cdc_source.offsets import BinlogPosition, SourceOffset
from cdc_source.source_logging import STATE_DIR_ENV
from coordinator.registry import SplitRegistry

log = logging.getLogger("cdc_mysql")


def log_plan(
    registry: SplitRegistry,
    start: SourceOffset,
    end: SourceOffset,
    chunks: int,
    head: BinlogPosition,
) -> None:
    """One line per planned batch: its phase, range and the binlog lag; in the snapshot,
    each table's chunks planned and rate."""
    lag = "unknown"
    if start.binlog is not None and start.binlog.file == head.file:
        lag = f"{max(0, head.pos - start.binlog.pos)} bytes"
    if end.snapshot is None and start.snapshot is None:
        log.info(
            "planned batch: phase=stream %s -> %s, binlog lag %s", start.binlog, end.binlog, lag
        )
        return
    current = end.snapshot.table if end.snapshot else "hand-over"
    parts = [
        f"{p.table} {p.chunks_planned}/{p.estimated_chunks} chunks {p.rows_per_second():.0f} rows/s"
        for p in registry.progress_snapshot()
    ]
    log.info(
        "planned batch: phase=snapshot table=%s chunks=%d (%s), binlog lag %s",
        current,
        chunks,
        "; ".join(parts),
        lag,
    )


def write_state(registry: SplitRegistry) -> None:
    """The coordinator's holdings (split metadata entries, what was released), written to
    :data:`STATE_DIR_ENV`'s directory when it is set."""
    directory = os.environ.get(STATE_DIR_ENV)
    if not directory:
        return
    state = {
        "pid": os.getpid(),
        "snapshot_metadata_entries": registry.snapshot_metadata_entries(),
        "released": None if registry.released is None else registry.released.__dict__,
    }
    path = os.path.join(directory, f"coordinator-{os.getpid()}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(state, handle)
    os.replace(path + ".tmp", path)
