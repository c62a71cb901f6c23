"""Bounded catch-up: a query restarted after 200,000 changes were written while it was
stopped reads them in batches of at most ``scan.binlog.max-rows-per-batch`` row changes,
each ending at a transaction boundary; ``trigger(availableNow=True)`` still stops at the
head it saw when it started; the table rebuilt from the output equals ``SELECT *``. The
Python workers' peak memory is printed."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from tests.support.streams import StreamRun, largest_offset_bytes, read_output, source_offsets

ONE_DECODER = True  # the batch ends are the driver's; decoding is tested elsewhere

LIMIT = 30_000
TRANSACTION_ROWS = 1_000


class WorkerMemory(threading.Thread):
    """Samples the resident memory of Spark's Python workers (``pyspark.daemon`` and the
    workers it forks) until stopped; ``peak`` is the largest one seen, in bytes."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.1):
            for status in Path("/proc").glob("[0-9]*/status"):
                try:
                    pid = status.parent.name
                    cmdline = (Path("/proc") / pid / "cmdline").read_bytes()
                    program, *args = cmdline.split(b"\0")
                    # python -m pyspark.daemon (and the workers it forks), not the JVM
                    if b"python" not in program or b"pyspark.daemon" not in args:
                        continue
                    for line in status.read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            self.peak = max(self.peak, int(line.split()[1]) * 1024)
                except OSError:
                    continue

    def stop(self) -> None:
        self._done.set()
        self.join()


def test_a_restarted_query_catches_up_in_bounded_batches(server, spark, tmp_path):
    database = server.fresh_database("catch_up_db")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT, pad VARCHAR(100))",
        f"INSERT INTO t SELECT seq, 0, REPEAT('x', 80) FROM {server.seq(1, 1000)} ORDER BY seq",
        database=database,
    )
    options = server.source_options(
        database, rf"{database}\.t", **{"scan.binlog.max-rows-per-batch": str(LIMIT)}
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()  # snapshot and hand-over
    before = max(source_offsets(run.checkpoint))

    # 200,000 changes in 1,000-row transactions while the query is stopped.
    statements = []
    for first in range(1001, 101_001, TRANSACTION_ROWS):
        last = first + TRANSACTION_ROWS - 1
        statements.append(
            f"INSERT INTO t SELECT seq, 1, REPEAT('y', 80) FROM {server.seq(first, last)} "
            "ORDER BY seq"
        )
    for first in range(1, 100_001, TRANSACTION_ROWS):
        statements.append(
            f"UPDATE t SET v = v + 1 WHERE id BETWEEN {first} AND {first + TRANSACTION_ROWS - 1}"
        )
    server.execute(*statements, database=database)

    late = []

    def write_after_the_start(batch_id: int) -> bool:
        # Written while the availableNow run catches up: past the head it started with.
        if batch_id == before + 1 and not late:
            server.execute("INSERT INTO t VALUES (200001, 7, 'late')", database=database)
            late.append(batch_id)
        return False

    run.fail_when = write_after_the_start
    memory = WorkerMemory()
    memory.start()
    try:
        run.run_to_end()
    finally:
        memory.stop()
    rows = read_output(spark, run.out)
    per_batch = Counter(r["_batch"] for r in rows if r["_batch"] > before)
    assert late, "the run had no batch to write in"
    assert sum(per_batch.values()) == 200_000  # the late row is past the frozen head
    assert all(count <= LIMIT for count in per_batch.values()), per_batch
    assert len(per_batch) >= 200_000 // LIMIT
    print(
        f"\ncatch-up of 200,000 changes: {len(per_batch)} batches of at most "
        f"{max(per_batch.values()):,} rows (limit {LIMIT:,}); peak Python worker RSS "
        f"{memory.peak / 2**20:.0f} MiB; largest offset {largest_offset_bytes(run.checkpoint)} B"
    )

    run.fail_when = lambda batch_id: False
    run.run_to_end()  # now the late row too
    latest: dict = {}
    for row in sorted(read_output(spark, run.out), key=lambda r: r["_seq"]):
        latest[row["id"]] = row
    expected = {row[0]: row for row in server.query("SELECT id, v, pad FROM t", database=database)}
    assert {k: (r["id"], r["v"], r["pad"]) for k, r in latest.items() if r["_op"] != "d"} == {
        k: tuple(v) for k, v in expected.items()
    }
    assert largest_offset_bytes(run.checkpoint) < 1024
