"""What a binlog range read yields (:mod:`reader.binlog_range`): blocks of one table's row
changes as columns, bounded in rows and bytes, and the table resets that statements
without row events cause."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdc_source.binlog.table_map import TableMap
from reader.row_decoding import DecodedRows, RowSink

# A block is decoded whole before any of its rows go to Spark, which takes them in while
# the next block is decoded: a block of a few output slices (reader.arrow_output's
# ROWS_PER_BATCH) keeps the JVM and the decoding both busy, where a larger one leaves the
# JVM waiting through each block's decoding (figures in bench/README.md).
ROWS_PER_BLOCK = 16384
BYTES_PER_BLOCK = 32 << 20


@dataclass(frozen=True)
class TableReset:
    """A statement at ``where`` (file number, end position) that removed every row of
    ``table`` without row events (DROP, TRUNCATE, RENAME away...): a ``t`` row there.
    ``file``, ``gtid``, ``server_id`` and ``timestamp`` are the event's."""

    table: str
    where: tuple[int, int]
    sub: int
    timestamp: int
    file: str
    gtid: str | None
    server_id: int


@dataclass(frozen=True)
class ChangeBlock:
    """Row changes of one table (one table map), in binlog order, as columns.

    ``rows.before``/``rows.after`` follow ``table_map.columns``; per row, ``file_number``,
    ``end_pos``, ``sub`` (index of the event among those ending at ``end_pos``),
    ``row_index`` (inside its event) and ``timestamp`` (event time, seconds); for the
    ``metadata.list`` columns, when the reader keeps them (``origins``), ``file`` (the
    event's file name), ``gtid`` (its transaction's GTID text, or None) and
    ``server_id`` (the event header's)."""

    table: str
    table_map: TableMap
    rows: DecodedRows
    file_number: np.ndarray
    end_pos: np.ndarray
    sub: np.ndarray
    row_index: np.ndarray
    timestamp: np.ndarray
    file: np.ndarray | None = None  # object arrays, one value per row
    gtid: np.ndarray | None = None
    server_id: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        return self.rows.rows


@dataclass
class Accumulator:
    """Decoded rows of one table map plus the per-event numbers their rows repeat."""

    table_map: TableMap
    sink: RowSink
    counts: list[int] = field(default_factory=list)
    events: list[tuple[int, int, int, int]] = field(default_factory=list)
    # Per event (file, GTID, server id), kept only for metadata.list (RangeReader origins)
    origins: list[tuple[str, str | None, int]] | None = None

    def full(self) -> bool:
        return self.sink.rows >= ROWS_PER_BLOCK or self.sink.nbytes >= BYTES_PER_BLOCK

    def take(self) -> ChangeBlock:
        counts = np.asarray(self.counts, dtype=np.int64)
        per_event = np.asarray(self.events, dtype=np.int64).reshape(-1, 4)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        rows = self.sink.take()
        origins = None
        if self.origins is not None:
            files, gtids, server_ids = zip(*self.origins) if self.origins else ((), (), ())
            origins = (
                np.repeat(np.array(files, dtype=object), counts),
                np.repeat(np.array(gtids, dtype=object), counts),
                np.repeat(np.array(server_ids, dtype=np.int64), counts),
            )
        block = ChangeBlock(
            self.table_map.name,
            self.table_map,
            rows,
            np.repeat(per_event[:, 0], counts),
            np.repeat(per_event[:, 1], counts),
            np.repeat(per_event[:, 2], counts),
            np.arange(rows.rows, dtype=np.int64) - starts,
            np.repeat(per_event[:, 3], counts),
            *(origins or ()),
        )
        self.counts, self.events = [], []
        if self.origins is not None:
            self.origins = []
        return block
