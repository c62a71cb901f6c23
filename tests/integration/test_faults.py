"""The query keeps running by itself through the faults a long capture meets, and its
output stays exact: the server killed and restarted (snapshot and stream), every
connection cut every few seconds, a Python worker killed in a snapshot task and in a
binlog task. Each runs under a concurrent writer; at the end the same query (never
restarted by the test) has caught up with the server's head, and the output replays to
``SELECT *`` with unique ``_seq``, one ``r`` per key and ordered per-key histories.

Connection handling does not depend on the row decoder, so these run once
(``ONE_DECODER``), with the default one."""

from __future__ import annotations

import time

from tests.support.faults import (
    CuttingProxy,
    EnduringWriter,
    kill_python_workers,
)
from tests.support.server import TEST_USER, TestServer
from tests.support.streams import (
    StreamRun,
    batches_committed,
    handover_batch,
    largest_offset_bytes,
    read_output,
    wait_caught_up,
    wait_for,
)
from tests.support.workload import AUTO_INCREMENT, COMPOSITE, check_exactly_once, load

ONE_DECODER = True
ROWS = 40_000
OPTIONS = {
    "scan.incremental.snapshot.chunk.size": "2000",
    "scan.snapshot.chunks-per-batch": "4",
    "scan.snapshot.fetch.size": "500",
}


def _finish(server, run: StreamRun, query, writer: EnduringWriter, database: str, kind) -> list:
    """Stop the writer, let the running query catch up with the head, check the output."""
    writer.stop()
    wait_caught_up(server, run.checkpoint, query, 180)
    assert query.isActive, "the query must still be running, never restarted by the test"
    query.stop()
    output = read_output(run.spark, run.out)
    check_exactly_once(server, database, kind, output)
    assert largest_offset_bytes(run.checkpoint) < 1024
    return output


def _wait_batches(run: StreamRun, more: int, query, what: str, timeout: float = 240) -> None:
    target = batches_committed(run.checkpoint) + more
    wait_for(lambda: batches_committed(run.checkpoint) >= target, timeout, what, query)


def _crash(server: TestServer, down_seconds: float) -> None:
    server.embedded.kill()
    time.sleep(down_seconds)
    server.embedded.restart()


def test_server_killed_and_restarted_during_snapshot_and_during_stream(
    killable_server, spark, tmp_path
):
    database = killable_server.fresh_database("fault_kill")
    load(killable_server, database, AUTO_INCREMENT, ROWS)
    options = killable_server.source_options(database, rf"{database}\.orders", **OPTIONS)
    run = StreamRun(spark, options, tmp_path / "checkpoint", tmp_path / "out")
    writer = EnduringWriter(killable_server, database, AUTO_INCREMENT, ROWS, seed=3)
    writer.start()
    query = run.start()
    try:
        _wait_batches(run, 2, query, "two snapshot batches")
        assert handover_batch(run.checkpoint) is None, "the first crash must hit the snapshot"
        _crash(killable_server, 5)
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 300, "hand-over", query)
        _wait_batches(run, 2, query, "stream batches")
        _crash(killable_server, 5)
        _wait_batches(run, 3, query, "stream batches after the second crash")
        output = _finish(killable_server, run, query, writer, database, AUTO_INCREMENT)
    finally:
        writer.stop()
        query.stop()
    assert writer.outages >= 2
    print(f"\nserver killed twice: {len(output)} rows, {writer.operations} writes")


def test_every_connection_cut_every_few_seconds(server, spark, tmp_path):
    database = server.fresh_database("fault_cut")
    load(server, database, COMPOSITE, ROWS)
    proxy = CuttingProxy(server.info.port, interval=4.0, target_host=server.info.host).start()
    # PyMySQL for the snapshot here (the other fault tests take mysqlclient): a lost
    # connection must surface as the transient error it is from either client.
    options = server.source_options(
        database,
        rf"{database}\.{COMPOSITE.name}",
        **{**OPTIONS, "scan.snapshot.client": "pymysql"},
    )
    options["port"] = str(proxy.port)
    run = StreamRun(spark, options, tmp_path / "checkpoint", tmp_path / "out")
    writer = EnduringWriter(server, database, COMPOSITE, ROWS, seed=5)
    writer.start()
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 300, "hand-over", query)
        wait_for(lambda: proxy.cuts >= 6, 120, "six rounds of cuts", query)
        _wait_batches(run, 2, query, "stream batches")
        output = _finish(server, run, query, writer, database, COMPOSITE)
    finally:
        writer.stop()
        query.stop()
        proxy.stop()
    assert proxy.cuts >= 6
    print(f"\n{proxy.cuts} cuts of {proxy.connections} connections: {len(output)} rows")


def _next_stage_id(spark) -> int:
    """The id Spark gives its next stage: one past the highest stage of the jobs it keeps."""
    tracker = spark.sparkContext.statusTracker()
    stages = [
        stage
        for job in tracker.getJobIdsForGroup(None)
        if (info := tracker.getJobInfo(job)) is not None
        for stage in info.stageIds
    ]
    return max(stages, default=-1) + 1


def _failed_tasks_since(spark, first_stage: int) -> int:
    """Failed tasks of the stages from ``first_stage`` on (stage ids are given in order; the
    scan ends after a run of ids Spark does not know)."""
    tracker = spark.sparkContext.statusTracker()
    total, stage, unknown = 0, first_stage, 0
    while unknown < 20:
        info = tracker.getStageInfo(stage)
        if info is None:
            unknown += 1
        else:
            unknown = 0
            total += info.numFailedTasks
        stage += 1
    return total


def _kill_worker_in_a_task(spark, server, seen, query, what: str) -> int:
    """Kill the Python workers as soon as the source's sessions show ``seen`` (polled on
    one connection, about every millisecond: a task lasts a fraction of a second), again
    until Spark reports a failed task. A kill can miss (the session seen was the driver's,
    or it outlived its task by a moment), and Spark reports a failure only once it has
    noticed the lost worker, so the count is read after every kill and twice a second.
    Returns the failed tasks seen."""
    first_stage = _next_stage_id(spark)
    deadline = time.monotonic() + 240
    checked = time.monotonic()
    with server.admin() as conn, conn.cursor() as cur:
        while time.monotonic() < deadline:
            if not query.isActive:
                raise AssertionError(f"query ended while waiting for {what}: {query.exception()}")
            cur.execute(
                "SELECT COMMAND, COALESCE(INFO, '') FROM information_schema.PROCESSLIST "
                "WHERE USER = %s",
                (TEST_USER,),
            )
            killed = any(seen(str(command), str(info)) for command, info in cur.fetchall()) and (
                kill_python_workers() > 0
            )
            if killed:
                time.sleep(0.5)
            if killed or time.monotonic() - checked > 0.5:
                checked = time.monotonic()
                if failed := _failed_tasks_since(spark, first_stage):
                    return failed
            time.sleep(0.001)
    raise AssertionError(f"no {what} seen to kill a worker in")


def test_python_worker_killed_during_a_snapshot_task_and_a_binlog_task(server, spark, tmp_path):
    # Five snapshot batches of two tasks, each task reading 10,000 rows: long enough to
    # be seen on the server and killed.
    rows = 100_000
    database = server.fresh_database("fault_worker")
    load(server, database, AUTO_INCREMENT, rows)
    options = server.source_options(
        database,
        rf"{database}\.orders",
        **{
            **OPTIONS,
            "scan.incremental.snapshot.chunk.size": "10000",
            "scan.snapshot.chunks-per-batch": "2",
        },
    )
    run = StreamRun(spark, options, tmp_path / "checkpoint", tmp_path / "out")
    writer = EnduringWriter(server, database, AUTO_INCREMENT, rows, seed=9, ops_per_second=600)
    writer.start()
    query = run.start()
    try:
        failed_in_snapshot = _kill_worker_in_a_task(
            spark,
            server,
            lambda command, info: (
                f"FROM `{database}`.`orders` WHERE" in info and "LIMIT 1 OFFSET" not in info
            ),  # a chunk's SELECT, not the driver's boundary
            query,
            "snapshot task",
        )
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 300, "hand-over", query)
        failed_in_stream = _kill_worker_in_a_task(
            spark, server, lambda command, info: command == "Binlog Dump", query, "binlog task"
        )
        _wait_batches(run, 2, query, "stream batches after the kill")
        output = _finish(server, run, query, writer, database, AUTO_INCREMENT)
    finally:
        writer.stop()
        query.stop()
    print(f"\nworkers killed: failed tasks {failed_in_snapshot} + {failed_in_stream}")
    assert failed_in_snapshot >= 1 and failed_in_stream >= 1, "Spark must have retried tasks"
    assert len(output) > rows
