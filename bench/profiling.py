"""``--profile``: the source's readers in-process, without Spark, timed and under cProfile.

This uses the source's internal task types (``ChunkTask``, ``BinlogTask``, ``run_task``),
so it shows how much of a Spark run is the reader itself (SQL, normalization, Arrow
conversion) and how much is Spark around it. It is a diagnostic, not a peer.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import workload

PROFILE_CHUNK_ROWS = 200_000
TOP_FUNCTIONS = 18


def _count_rows(batches) -> int:
    return sum(batch.num_rows for batch in batches)


def _timed_and_profiled(label: str, make_batches: Callable[[], Any]) -> dict[str, Any]:
    _count_rows(make_batches())  # warm: imports, the server's caches
    began, cpu_began = time.perf_counter(), time.process_time()
    rows = _count_rows(make_batches())
    seconds = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    print(
        f"\n{label}: {rows:,} rows in {seconds:.2f} s = {rows / seconds:,.0f} rows/s, "
        f"{cpu / rows * 1e6:.3f} CPU s per million rows (this process, no Spark)"
    )
    profiler = cProfile.Profile()
    profiler.enable()
    _count_rows(make_batches())
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(TOP_FUNCTIONS)
    text = out.getvalue()
    start = text.find("   ncalls")
    text = text[start:] if start >= 0 else text
    print(text.rstrip())
    return {
        "rows": rows,
        "seconds": round(seconds, 3),
        "cpu_per_million": round(cpu / rows * 1e6, 3),
        "top_by_tottime": text,
    }


@dataclass(frozen=True)
class InProcessReader:
    """What running the source's task types in the bench process needs: the parsed
    options, the captured tables, the connection and the binlog head to read as of."""

    options: Any
    tables: tuple
    kwargs: dict
    target: Any


def in_process_reader(bench, table: str) -> InProcessReader:
    from cdc_source.mysql_client import connect, read_head
    from cdc_source.offsets import BinlogPosition
    from cdc_source.options import parse_options
    from cdc_source.spark_readers import discover

    options = parse_options(bench.source_options(table))
    tables = tuple(sorted(discover(options), key=lambda t: t.name))
    kwargs = options.connection_kwargs()
    conn = connect(kwargs)
    try:
        file, pos, gtids, ts = read_head(conn)
    finally:
        conn.close()
    return InProcessReader(options, tables, kwargs, BinlogPosition(file, pos, gtids, ts))


def profile_readers(
    bench, server_ids: tuple[int, int], binlog_range: tuple[tuple, tuple] | None
) -> dict[str, Any]:
    from cdc_source.offsets import BinlogPosition
    from cdc_source.partitions import BinlogTask, ChunkSpec, ChunkTask
    from reader.task_runner import run_task

    setup = in_process_reader(bench, workload.TABLE)
    options, tables, kwargs, target = setup.options, setup.tables, setup.kwargs, setup.target
    result: dict[str, Any] = {}

    rows = min(PROFILE_CHUNK_ROWS, bench.results["table"]["rows"])
    chunk = ChunkSpec(tables[0], 0, None, (rows,))
    chunk_task = ChunkTask((chunk,), target, server_ids[0], options.fetch_size)
    result["chunk"] = _timed_and_profiled(
        f"chunk reader, one chunk of {rows:,} keys",
        lambda: run_task(chunk_task, kwargs, tables),
    )
    if binlog_range is not None:
        (start_file, start_pos), (end_file, end_pos) = binlog_range
        changed = in_process_reader(bench, workload.CHANGES_TABLE).tables  # the range's table
        binlog_task = BinlogTask(
            BinlogPosition(start_file, start_pos),
            BinlogPosition(end_file, end_pos),
            changed,
            None,
            server_ids[1],
        )
        result["binlog"] = _timed_and_profiled(
            "binlog reader, the benchmark's update range",
            lambda: run_task(binlog_task, kwargs, changed),
        )
    return result
