"""A purged binlog is not the end (docs/design.md, 'Epochs across servers'): with
``scan.on-binlog-purged=resnapshot`` a query whose checkpoint's binlog file was purged
emits one ``t`` row per captured table (a consumer drops the table's earlier rows), then
snapshots the tables again at the current head and streams on, exactly once from there,
under a concurrent writer. Without the option the restart stops with the error that says
so (test_preflight.py) and now names the option."""

from __future__ import annotations

import time

import pytest
from pyspark.errors import StreamingQueryException

from tests.support.streams import StreamRun, largest_offset_bytes, read_output
from tests.support.workload import (
    AUTO_INCREMENT,
    COMPOSITE,
    Writer,
    load,
    server_key,
    table_rows,
)

ONE_DECODER = True  # the reset is the driver's and the writer's; decoding is tested elsewhere


def _purge_all_but_a_new_file(server) -> str:
    """A new binlog file, every older one purged (MariaDB keeps a file until its binlog
    checkpoint passed it, so retry for a bounded while)."""
    server.execute("FLUSH BINARY LOGS")
    current = server.binlog_head()[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        server.execute(f"PURGE BINARY LOGS TO '{current}'")
        if str(server.query("SHOW BINARY LOGS")[0][0]) == current:
            return current
        time.sleep(0.5)
    raise AssertionError(f"the server kept files before {current}")


def test_a_purged_binlog_resets_the_tables_and_snapshots_them_again(server, spark, tmp_path):
    database = server.fresh_database("purged_resnapshot_db")
    load(server, database, AUTO_INCREMENT, 3000)
    options = server.source_options(
        database,
        rf"{database}\.orders",
        **{"scan.incremental.snapshot.chunk.size": "500", "scan.snapshot.chunks-per-batch": "2"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    before = len(read_output(spark, run.out))
    assert before == 3000

    # While the query is stopped: changes, then every file it could resume in is purged.
    writer = Writer(server, database, AUTO_INCREMENT, 3000, seed=11, ops_per_second=400)
    writer.start()
    time.sleep(2)
    writer.stop()
    _purge_all_but_a_new_file(server)

    with pytest.raises(StreamingQueryException) as err:
        run.run_to_end()
    assert "scan.on-binlog-purged=resnapshot" in str(err.value)

    # With the option, under a concurrent writer: reset, snapshot again, stream on.
    run.options = {**options, "scan.on-binlog-purged": "resnapshot"}
    writer = Writer(server, database, AUTO_INCREMENT, 3000, seed=12, ops_per_second=300)
    writer.start()
    try:
        run.run_to_end()
    finally:
        writer.stop()
    run.run_to_end()  # what the writer did after the reset run's head

    output = read_output(spark, run.out)
    resets = [row for row in output if row["_op"] == "t"]
    assert len(resets) == 1
    (reset,) = resets
    assert all(reset[c] is None for c in AUTO_INCREMENT.columns)
    assert reset["_seq"].startswith("E0001.")
    # Every row before the reset sorts before it, every row of the new snapshot after it.
    earlier = [row for row in output if row["_batch"] < reset["_batch"]]
    assert earlier and all(row["_seq"] < reset["_seq"] for row in earlier)
    snapshot = [r for r in output if r["_op"] == "r" and r["_batch"] >= reset["_batch"]]
    assert snapshot and all(row["_seq"] > reset["_seq"] for row in snapshot)

    # Rebuild as a lake sink does: sort by _seq; 't' drops the table's rows.
    latest: dict[tuple, dict] = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        if row["_op"] == "t":
            latest.clear()
            continue
        latest[server_key(AUTO_INCREMENT, row)] = row
    rebuilt = {
        key: tuple(row[c] for c in AUTO_INCREMENT.columns)
        for key, row in latest.items()
        if row["_op"] != "d"
    }
    assert rebuilt == table_rows(server, database, AUTO_INCREMENT)
    assert largest_offset_bytes(run.checkpoint) < 1024


def test_envelope_resets_each_table(server, spark, tmp_path):
    database = server.fresh_database("purged_envelope_db")
    load(server, database, AUTO_INCREMENT, 500)
    load(server, database, COMPOSITE, 500)
    options = server.source_options(
        database, rf"{database}\.(orders|readings)", **{"scan.on-binlog-purged": "resnapshot"}
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    server.execute("DELETE FROM orders WHERE id <= 10", database=database)
    _purge_all_but_a_new_file(server)
    run.run_to_end()
    output = read_output(spark, run.out)
    resets = sorted(
        (r["table"], r["key"], r["before"], r["after"]) for r in output if r["op"] == "t"
    )
    assert resets == [("orders", "{}", None, None), ("readings", "{}", None, None)]
    after_reset = [r for r in output if r["op"] == "r" and r["_seq"].startswith("E0001.")]
    assert len(after_reset) == 990
