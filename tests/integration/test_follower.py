"""The driver's follower (coordinator/follower.py) on a real server: while a stream runs
under concurrent writes, its batches are planned from what the follower reached (the
driver opens no binlog dump of its own for them), and the changes they carry are exact."""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from cdc_source.offsets import SourceOffset, table_fingerprint
from cdc_source.options import parse_options
from cdc_source.spark_readers import discover
from coordinator.driver import QueryDriver
from reader.task_runner import run_task

WRITES = 400


def _writer(server, database: str, done: threading.Event, errors: list) -> None:
    """Inserts, updates and deletes in single- and multi-row transactions, with a
    statement on another table and a pause midway."""
    try:
        for i in range(WRITES):
            if i % 10 == 0:
                server.execute(
                    f"INSERT INTO t VALUES ({10_000 + i}, 0), ({20_000 + i}, 0)", database=database
                )
            server.execute(f"INSERT INTO t VALUES ({i}, 0)", database=database)
            if i % 3 == 0:
                server.execute(f"UPDATE t SET v = v + 1 WHERE id = {i // 2}", database=database)
            if i % 7 == 0 and i:
                server.execute(f"DELETE FROM t WHERE id = {i - 7}", database=database)
            if i == WRITES // 2:
                server.execute("CREATE TABLE other (id INT PRIMARY KEY)", database=database)
                time.sleep(2.5)  # idle: the follower's dump lives on its heartbeats
            time.sleep(0.002)
    except BaseException as err:  # noqa: BLE001 - reported by the test
        errors.append(err)
    finally:
        done.set()


def test_a_running_streams_batches_are_planned_from_the_follower_and_stay_exact(server):
    database = server.fresh_database("follower_db")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database=database)
    raw = server.source_options(database, rf"{database}\.t")
    options = parse_options(
        {
            **raw,
            "scan.startup.mode": "latest-offset",
            "scan.binlog.max-rows-per-batch": "40",  # some batches end at the limit
        }
    )
    tables = discover(options)
    driver = QueryDriver(options, tables)
    opened: list[tuple] = []
    dump_open = driver.link.dump.open_runs

    def counted(*args, **kwargs):
        opened.append(args[:2])
        return dump_open(*args, **kwargs)

    driver.link.dump.open_runs = counted
    state: dict[int, int] = {}
    batches = planned_before = 0
    done, errors = threading.Event(), []
    try:
        start = driver.latest(SourceOffset(None, None, table_fingerprint([t.name for t in tables])))
        writer = threading.Thread(target=_writer, args=(server, database, done, errors))
        writer.start()
        idle_since = None
        while True:
            end = driver.latest(start)
            if end == start:
                if done.is_set():
                    head = driver.head()
                    if head.coordinates == start.binlog.coordinates:
                        break
                idle_since = idle_since or time.monotonic()
                assert time.monotonic() - idle_since < 60, "the stream does not reach the head"
                time.sleep(0.02)
                continue
            idle_since = None
            for task in driver.tasks(start, end):
                for batch in run_task(task, options.connection_kwargs(), tuple(tables)):
                    rows = pa.Table.from_batches([batch]).to_pylist()
                    for row in sorted(rows, key=lambda r: r["_seq"]):
                        if row["_op"] == "d":
                            state.pop(row["id"], None)
                        else:
                            state[row["id"]] = row["v"]
            driver.commit(end)
            start = end
            batches += 1
            if batches == 2:  # the first batches are read by the driver's own passes
                planned_before = len(opened)
        writer.join()
        answers = driver.ends.follower.answers
        assert driver.ends.follower._run.ended is None  # its dump is still open
    finally:
        driver.close()
    assert not errors
    assert batches > 10
    assert len(opened) == planned_before, f"the driver read the binlog itself: {opened}"
    assert answers >= batches - 2
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, v FROM t")
        expected = {row[0]: row[1] for row in cur.fetchall()}
    assert state == expected
