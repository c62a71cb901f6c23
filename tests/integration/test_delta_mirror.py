"""``cdc_source.delta`` mirrors one table into Delta exactly: under a concurrent writer,
with a crash between the Delta commit of a batch and Spark's commit of it (the batch runs
again and is recognised as applied) and a crash between two slices of a batch's MERGE (the
re-run skips the slice committed and applies the rest), the Delta table equals ``SELECT
*``; a new query at a reused checkpoint path skips none of its batches. The query runs as
a user's does (:mod:`tests.support.delta_runs`)."""

from __future__ import annotations

import re
import shutil
import threading
from decimal import Decimal

import deltalake  # in the dev extra: a missing package is an error, not a skip

from tests.support.delta_runs import (
    APPLIED,
    SINK_ONLY,
    admin_connection,
    applied_slices,
    run_delta_query,
)

ONE_DECODER = True  # the query runs with the source's default decoder
ROWS = 3000
REUSE_ROWS = 1000  # one snapshot batch per run: batch 0 is what an old id would skip


@SINK_ONLY
def test_the_delta_mirror_is_exact_after_a_crash_between_the_delta_and_spark_commits(
    server, tmp_path
):
    database = server.fresh_database("delta_mirror")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, qty INT NOT NULL, price DECIMAL(10,2), "
        "note VARCHAR(40), at DATETIME(6))",
        database=database,
    )
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s, %s, NOW(6))",
            [(i, i % 7, Decimal(i) / 4, f"row {i}") for i in range(ROWS)],
        )
    stop = threading.Event()

    def write() -> None:
        conn = admin_connection(server, database)
        n = 0
        with conn.cursor() as cur:
            while not stop.is_set():
                n += 1
                cur.execute(
                    "UPDATE t SET qty = qty + 1, at = NOW(6) WHERE id = %s", (n * 7 % ROWS,)
                )
                cur.execute("DELETE FROM t WHERE id = %s", (n * 13 % ROWS,))
                cur.execute("INSERT INTO t VALUES (%s, 1, 2.50, 'new', NOW(6))", (ROWS + n,))
                cur.execute("UPDATE t SET id = id + 10000000 WHERE id = %s", (ROWS + n - 1,))
                stop.wait(0.01)
        conn.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    checkpoint, table_path = tmp_path / "checkpoint", tmp_path / "delta"
    name = f"{database}.t"
    slices = ("--slice-rows", "700")  # a snapshot batch (1000 rows) is two slices
    try:
        crashed = run_delta_query(
            server, database, checkpoint, table_path, "--available-now", *slices,
            env={"CDC_MYSQL_LAKE_CRASH_AFTER_BATCH": "1"},
        )  # fmt: skip
        assert crashed.returncode == 3, crashed.stdout[-2000:] + crashed.stderr[-3000:]
        assert "batch 1: crashing before Spark commits" in crashed.stdout
        between = run_delta_query(
            server, database, checkpoint, table_path, "--available-now", *slices,
            env={"CDC_MYSQL_LAKE_CRASH_BETWEEN_SLICES": "1"},
        )  # fmt: skip
    finally:
        stop.set()
        writer.join()
    assert between.returncode == 3, between.stdout[-2000:] + between.stderr[-3000:]
    assert f"batch 1: {name}: already applied" in between.stdout  # re-run, not re-applied
    crash = re.search(rf"batch (\d+): crashing after slice 0 of {re.escape(name)}", between.stdout)
    assert crash, between.stdout[-2000:]
    batch = int(crash.group(1))

    resumed = run_delta_query(server, database, checkpoint, table_path, "--available-now", *slices)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert f"batch {batch}: {name}: already applied (slice 0)" in resumed.stdout
    assert re.search(rf"batch {batch}: {re.escape(name)}: {APPLIED} \(slice 1\)", resumed.stdout)
    applied = applied_slices(table_path)
    assert applied == sorted(set(applied)), "a slice applied twice"

    mirror = deltalake.DeltaTable(str(table_path)).to_pyarrow_table().to_pylist()
    got = {r["id"]: (r["qty"], r["price"], r["note"], r["at"].replace(tzinfo=None)) for r in mirror}
    rows = server.query("SELECT id, qty, price, note, at FROM t", database=database)
    expected = {r[0]: tuple(r[1:]) for r in rows}
    assert len(mirror) == len(got), "a key appears twice in the Delta table"
    assert got == expected


@SINK_ONLY
def test_a_new_query_at_a_reused_checkpoint_path_skips_no_batch_and_appends_no_duplicate(
    server, tmp_path
):
    """A user who deletes a query's checkpoint and starts again at the same path, into
    the same Delta table, starts a new query (Spark gives it a new id): its batches, from
    0 again, are not taken for the old query's, and its snapshot's reads of keys already
    in the table are merged, not appended beside them."""
    database = server.fresh_database("delta_reuse")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", database=database)
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(REUSE_ROWS)])
    checkpoint, table_path = tmp_path / "checkpoint", tmp_path / "delta"
    first = run_delta_query(server, database, checkpoint, table_path, "--available-now")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute("UPDATE t SET v = v + 1000 WHERE id % 3 = 0")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(REUSE_ROWS + i, i) for i in range(50)])
    shutil.rmtree(checkpoint)
    again = run_delta_query(server, database, checkpoint, table_path, "--available-now")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert "already applied" not in again.stdout
    mirror = deltalake.DeltaTable(str(table_path)).to_pyarrow_table(columns=["id", "v"])
    got = mirror.to_pylist()
    assert len(got) == len({r["id"] for r in got}), "a key appears twice in the Delta table"
    rows = server.query("SELECT id, v FROM t", database=database)
    assert {r["id"]: r["v"] for r in got} == {r[0]: r[1] for r in rows}
