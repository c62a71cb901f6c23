"""The coordinator's split metadata stays bounded and is released at the hand-over
(docs/design.md, 'Hand-over and split metadata'), driven through a simulated snapshot of
up to 300,000 chunks with a fake key-boundary source and a fake binlog head: no server,
structure not timing."""

from __future__ import annotations

import gc
import logging
import tracemalloc
from dataclasses import dataclass, replace

import pymysql
import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.offsets import BinlogPosition, SnapshotCursor, SourceOffset, table_fingerprint
from coordinator.planner import BatchBudget, Planner, chunk_rows
from coordinator.registry import SplitRegistry

CHUNK_SIZE = 8096
CHUNKS_PER_BATCH = 64


def _table(name: str, rows: int) -> TableSchema:
    key = ColumnSpec("id", "bigint", "bigint(20)", False)
    payload = ColumnSpec(
        "payload",
        "varchar",
        "varchar(100)",
        True,
        char_length=100,
        charset="utf8mb4",
        collation="utf8mb4_general_ci",
    )
    return TableSchema("shop", name, (key, payload), ("id",), estimated_rows=rows)


@dataclass
class FakeBoundaries:
    """Dense integer keys 1..rows per table, answering like the server's OFFSET query."""

    rows: dict[str, int]
    calls: int = 0

    def chunk_end(self, schema, lo, bound, chunk_size):
        self.calls += 1
        start = 0 if lo is None else lo[0]
        end = start + chunk_size
        limit = self.rows[schema.table] if bound is None else min(bound[0], self.rows[schema.table])
        return (end,) if end <= limit and (bound is None or end < bound[0]) else None


class FakeHead:
    def __init__(self) -> None:
        self.pos = 4

    def __call__(self) -> BinlogPosition:
        self.pos += 12_345
        return BinlogPosition("binlog.000042", self.pos, f"0-1-{self.pos}", 1_700_000_000_000)


def _offset_bytes(offset: SourceOffset) -> int:
    return len(offset.to_json().encode())


def simulate(total_chunks: int) -> dict:
    """Plan the whole snapshot batch by batch, committing lazily as Spark does (batch N is
    committed when N+1 is planned), then commit the hand-over batch."""
    tables = [_table("orders", total_chunks * CHUNK_SIZE - 1), _table("users", CHUNK_SIZE * 3)]
    boundaries = FakeBoundaries({t.table: t.estimated_rows for t in tables})
    head = FakeHead()
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    registry = SplitRegistry()
    planner = Planner(tables, boundaries, CHUNK_SIZE, registry)
    start = SourceOffset(
        None, planner.initial_cursor(), table_fingerprint([t.name for t in tables])
    )
    previous_end = None
    first_bytes = last_snapshot_bytes = largest_bytes = 0
    chunks = 0
    peak_in_flight = 0
    while start.snapshot is not None:
        batch = planner.plan(start, head(), CHUNKS_PER_BATCH)
        chunks += len(batch.chunks)
        size = _offset_bytes(batch.end)  # running figures only: the harness must not grow
        first_bytes = first_bytes or size
        largest_bytes = max(largest_bytes, size)
        if batch.end.snapshot is not None:
            last_snapshot_bytes = size
        peak_in_flight = max(peak_in_flight, registry.in_flight_chunks())
        if previous_end is not None:
            registry.commit(previous_end)
        previous_end, start = batch.end, batch.end
    held_before_release = registry.snapshot_metadata_entries()
    report = registry.commit(previous_end)  # the covering commit of the hand-over batch
    gc.collect()
    after_release = tracemalloc.get_traced_memory()[0] - baseline
    peak = tracemalloc.get_traced_memory()[1] - baseline
    tracemalloc.stop()
    return {
        "chunks": chunks,
        "peak_bytes": peak,
        "after_release_bytes": after_release,
        "held_before_release": held_before_release,
        "held_after_release": registry.snapshot_metadata_entries(),
        "release": report,
        "first_offset_bytes": first_bytes,
        "last_snapshot_offset_bytes": last_snapshot_bytes,
        "largest_offset_bytes": largest_bytes,
        "peak_in_flight_chunks": peak_in_flight,
        "planner": planner,
    }


@pytest.fixture(scope="module")
def runs():
    return {n: simulate(n) for n in (3_000, 300_000)}


def test_300k_chunk_snapshot_keeps_coordinator_memory_bounded_and_releases_it(runs, capsys):
    small, large = runs[3_000], runs[300_000]
    with capsys.disabled():
        for run in (small, large):
            print(
                f"\n{run['chunks']:>7} chunks: peak {run['peak_bytes'] / 1024:.0f} KiB, "
                f"after release {run['after_release_bytes'] / 1024:.1f} KiB, "
                f"in-flight chunks at most {run['peak_in_flight_chunks']}, "
                f"released {run['release']}, offsets {run['first_offset_bytes']} B (first) "
                f"{run['last_snapshot_offset_bytes']} B (last snapshot) "
                f"{run['largest_offset_bytes']} B (largest)"
            )
    assert large["chunks"] >= 300_000 and small["chunks"] >= 3_000
    # In flight: at most two batches (planned N+1, N not yet committed), whatever the size.
    assert large["peak_in_flight_chunks"] == small["peak_in_flight_chunks"] <= 2 * CHUNKS_PER_BATCH
    # Released completely at the covering commit; nothing that grows with the chunk count.
    assert large["held_after_release"] == small["held_after_release"] == 0
    # What the release frees is the in-flight plans and per-table progress: bounded by the
    # batches in flight, not by the chunks the snapshot had.
    bound = 2 * (CHUNKS_PER_BATCH + 1) + 2
    assert 0 < large["release"].entries <= bound and 0 < small["release"].entries <= bound
    assert large["after_release_bytes"] < 64 * 1024
    assert abs(large["after_release_bytes"] - small["after_release_bytes"]) < 16 * 1024
    # The peak does not grow with the number of chunks (100x more chunks, same peak order).
    assert large["peak_bytes"] < 2 * small["peak_bytes"] + 256 * 1024
    # Offsets: constant size, under 1 KiB, at chunk 1 as at chunk 300,000.
    assert large["largest_offset_bytes"] < 1024
    assert abs(large["last_snapshot_offset_bytes"] - small["first_offset_bytes"]) < 16


def test_release_waits_for_the_commit_past_the_handover(caplog):
    tables = [_table("orders", CHUNK_SIZE * 10)]
    registry = SplitRegistry()
    planner = Planner(tables, FakeBoundaries({"orders": CHUNK_SIZE * 10}), CHUNK_SIZE, registry)
    head = FakeHead()
    start = SourceOffset(None, planner.initial_cursor())
    first = planner.plan(start, head(), 4)
    handover = planner.plan(first.end, head(), 100)
    assert handover.end.snapshot is None
    registry.commit(first.end)
    # The hand-over batch is planned but not committed: a re-run must find its chunks.
    assert planner.chunks_between(handover.start, handover.end) == handover.chunks
    assert registry.released is None and registry.snapshot_metadata_entries() > 0
    with caplog.at_level(logging.INFO, logger="cdc_mysql.coordinator"):
        report = registry.commit(handover.end)
    assert report is not None and report.entries > 0 and report.bytes > 0
    assert registry.snapshot_metadata_entries() == 0
    assert any("released snapshot metadata" in r.getMessage() for r in caplog.records)
    assert registry.commit(handover.end) is None  # released once


def test_restarted_coordinator_rebuilds_a_batch_from_its_offsets_alone():
    tables = [_table("orders", CHUNK_SIZE * 1000), _table("users", CHUNK_SIZE * 5)]
    rows = {t.table: t.estimated_rows for t in tables}
    original = Planner(tables, FakeBoundaries(rows), CHUNK_SIZE)
    head = FakeHead()
    start = SourceOffset(None, original.initial_cursor())
    for _ in range(40):  # deep into the snapshot
        start = original.plan(start, head(), 16).end
    batch = original.plan(start, head(), 16)

    boundaries = FakeBoundaries(rows)
    restarted = Planner(tables, boundaries, CHUNK_SIZE)  # empty registry, as after a restart
    assert restarted.chunks_between(batch.start, batch.end) == batch.chunks
    # Only the batch's own boundaries were asked for: no scan over the 40 earlier batches.
    assert boundaries.calls <= len(batch.chunks) + 1


def test_restarted_coordinator_crossing_tables_matches_the_plan():
    tables = [_table("a", CHUNK_SIZE * 3 - 5), _table("b", 10), _table("c", CHUNK_SIZE * 2)]
    rows = {t.table: t.estimated_rows for t in tables}
    original = Planner(tables, FakeBoundaries(rows), CHUNK_SIZE)
    start = SourceOffset(None, original.initial_cursor())
    head = FakeHead()
    while start.snapshot is not None:
        batch = original.plan(start, head(), 2)
        rebuilt = Planner(tables, FakeBoundaries(rows), CHUNK_SIZE)
        assert [
            (c.table.name, c.lo, c.hi) for c in rebuilt.chunks_between(batch.start, batch.end)
        ] == [(c.table.name, c.lo, c.hi) for c in batch.chunks]
        start = batch.end


@dataclass
class DroppedBoundaries(FakeBoundaries):
    """The server after ``dropped`` was dropped: asking for its boundaries is error 1146."""

    dropped: str = ""

    def chunk_end(self, schema, lo, bound, chunk_size):
        if schema.table == self.dropped:
            raise pymysql.err.ProgrammingError(1146, f"Table 'shop.{schema.table}' doesn't exist")
        return super().chunk_end(schema, lo, bound, chunk_size)


def test_a_restarted_coordinator_walks_a_batch_whose_table_was_dropped_since():
    """Each dropped table's part of the batch is one chunk (read as no rows; the stream's
    reset follows): the batch keeps its key ranges and can run again."""
    tables = [_table("a", CHUNK_SIZE * 3 - 5), _table("b", CHUNK_SIZE * 4), _table("c", 10)]
    rows = {t.table: t.estimated_rows for t in tables}
    start = SourceOffset(None, SnapshotCursor("shop.a", (CHUNK_SIZE,)))
    batch = Planner(tables, FakeBoundaries(rows), CHUNK_SIZE).plan(start, FakeHead()(), 6)
    assert [c.table.table for c in batch.chunks] == ["a", "a", "b", "b", "b", "b"]
    rebuilt = Planner(tables, DroppedBoundaries(rows, dropped="b"), CHUNK_SIZE)
    walked = [(c.table.table, c.lo, c.hi) for c in rebuilt.chunks_between(start, batch.end)]
    expected = [
        ("a", (CHUNK_SIZE,), (2 * CHUNK_SIZE,)),
        ("a", (2 * CHUNK_SIZE,), None),
        ("b", None, tuple(batch.end.snapshot.after)),
    ]
    assert walked == expected
    # A driver restarted after the DROP never read the table's schema: the same walk.
    unread = TableSchema("shop", "b", (), ())
    rebuilt = Planner([tables[0], unread, tables[2]], FakeBoundaries(rows), CHUNK_SIZE)
    walked = [(c.table.table, c.lo, c.hi) for c in rebuilt.chunks_between(start, batch.end)]
    assert [w[0] for w in walked] == ["a", "a", "b"] and walked[:2] == expected[:2]
    # Planning a batch that reaches a table dropped since the head was read: its rest is
    # one chunk and the batch goes on to the next table.
    dropped = Planner(tables, DroppedBoundaries(rows, dropped="b"), CHUNK_SIZE)
    batch = dropped.plan(start, FakeHead()(), 4)
    assert [c.table.table for c in batch.chunks] == ["a", "a", "b", "c"]


def test_after_the_handover_a_restarted_coordinator_holds_no_snapshot_metadata():
    tables = [_table("orders", CHUNK_SIZE)]
    planner = Planner(tables, FakeBoundaries({"orders": CHUNK_SIZE}), CHUNK_SIZE)
    stream_start = SourceOffset(BinlogPosition("binlog.000001", 100), None)
    stream_end = SourceOffset(BinlogPosition("binlog.000001", 900), None)
    assert planner.chunks_between(stream_start, stream_end) == ()
    planner.registry.commit(stream_end)
    assert planner.registry.snapshot_metadata_entries() == 0


def test_first_offset_of_initial_mode_needs_no_binlog_position():
    planner = Planner([_table("orders", 10)], FakeBoundaries({"orders": 10}), CHUNK_SIZE)
    assert planner.initial_cursor() == SnapshotCursor("shop.orders", None)


def _plan_chunks(budget, tables, chunk_size=1000) -> list[int]:
    """Chunks per batch when planning the whole snapshot of ``tables`` with ``budget``."""
    planner = Planner(
        tables, FakeBoundaries({t.table: t.estimated_rows for t in tables}), chunk_size
    )
    head = FakeHead()
    start = SourceOffset(
        None, planner.initial_cursor(), table_fingerprint([t.name for t in tables])
    )
    sizes = []
    while start.snapshot is not None:
        batch = planner.plan(start, head(), budget)
        sizes.append(len(batch.chunks))
        start = batch.end
    return sizes


def test_batches_are_sized_by_rows_and_by_bytes_whichever_comes_first():
    narrow = replace(_table("narrow", 20_000), avg_row_bytes=100)
    wide = replace(_table("wide", 20_000), avg_row_bytes=100_000)
    budget = BatchBudget(rows=5_000, bytes=50_000_000)
    # narrow: 5 chunks of 1,000 rows (rows first); wide: 1,000 rows are 100 MB, over the
    # byte budget, yet a batch always takes one chunk.
    assert _plan_chunks(budget, [narrow]) == [5, 5, 5, 5, 1]  # the last chunk is (20000, end]
    assert _plan_chunks(budget, [wide]) == [1] * 21
    # Spark's ReadMaxRows / ReadMaxBytes narrow a budget; an explicit chunk count wins.
    assert _plan_chunks(BatchBudget(chunks=3, rows=None, bytes=None), [wide]) == [3] * 7
    assert _plan_chunks(BatchBudget(chunks=3, rows=2_000), [narrow])[0] == 2


def test_a_batch_may_span_tables_within_its_budget():
    first = replace(_table("a", 2_500), avg_row_bytes=10)
    second = replace(_table("b", 2_500), avg_row_bytes=10)
    assert _plan_chunks(BatchBudget(rows=4_000), [first, second]) == [4, 2]


def test_chunks_hold_about_16_mib_of_rows_unless_the_size_is_set():
    table = _table("t", 1_000_000)
    assert chunk_rows(replace(table, avg_row_bytes=200), None) == 65_536  # capped
    assert chunk_rows(replace(table, avg_row_bytes=1_000), None) == (16 << 20) // 1_000
    assert chunk_rows(replace(table, avg_row_bytes=100_000), None) == 1_024  # floor
    assert chunk_rows(replace(table, avg_row_bytes=0), None) == 65_536  # no statistics
    assert chunk_rows(replace(table, avg_row_bytes=100_000), 8096) == 8096


def test_the_driver_budget_is_the_options_within_sparks_read_limits():
    from types import SimpleNamespace

    from coordinator.planner import batch_budget

    def budget(max_rows=None, max_bytes=None, **options):
        values = {"chunks_per_batch": None, "rows_per_batch": 2_000_000, "bytes_per_batch": 1 << 30}
        values.update(options)
        return batch_budget(SimpleNamespace(**values), max_rows, max_bytes)

    assert budget() == BatchBudget(None, 2_000_000, 1 << 30)
    assert budget(max_rows=500, max_bytes=10_000) == BatchBudget(None, 500, 10_000)
    assert budget(max_rows=5_000_000) == BatchBudget(None, 2_000_000, 1 << 30)
    # An explicit chunk count replaces the budgets; Spark's limits still narrow it.
    assert budget(chunks_per_batch=8) == BatchBudget(8, None, None)
    assert budget(max_bytes=1_000, chunks_per_batch=8) == BatchBudget(8, None, 1_000)
