"""``spark.read.format("cdc-mysql")``: one consistent snapshot of the captured tables in
one Spark job, equal to ``SELECT *`` when nothing writes, and a consistent cut (one
binlog position for every chunk and task) while a writer commits transactions that
touch the first and the last chunk together."""

from __future__ import annotations

import threading

import pymysql

ONE_DECODER = True  # normalization reads the binlog with either decoder alike
ROWS = 6_000
OPTIONS = {
    "scan.incremental.snapshot.chunk.size": "500",
    "scan.snapshot.parallelism": "3",
    "scan.snapshot.fetch.size": "700",
}


def _load(server, database: str) -> None:
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR(40))",
        database=database,
    )
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s)", [(i, i * 3, f"row {i}") for i in range(ROWS)]
        )


def _read(spark, options: dict) -> list:
    reader = spark.read.format("cdc-mysql")
    for key, value in {**options, **OPTIONS}.items():
        reader = reader.option(key, value)
    return reader.load().collect()


def test_a_batch_read_equals_select_star(server, spark):
    database = server.fresh_database("batch_read")
    _load(server, database)
    rows = _read(spark, server.source_options(database, rf"{database}\.t"))
    table = server.query("SELECT id, v, note FROM t", database=database)
    assert sorted((r["id"], r["v"], r["note"]) for r in rows) == sorted(table)
    assert {r["_op"] for r in rows} == {"r"}
    assert len({r["_seq"] for r in rows}) == len(rows)
    assert len({r["_seq"][:21] for r in rows}) == 1  # one position for every row


def test_a_batch_read_under_writes_is_one_consistent_cut(server, spark):
    """Each writer transaction inserts key ROWS+n and sets row 0's ``v`` to n: in a
    consistent cut, row 0 says exactly how many inserted rows are present."""
    database = server.fresh_database("batch_read_cut")
    _load(server, database)
    server.execute("UPDATE t SET v = 0 WHERE id = 0", database=database)
    stop = threading.Event()
    committed = threading.Semaphore(0)

    def write() -> None:
        conn = pymysql.connect(
            host=server.info.host,
            port=server.info.port,
            user=server.info.admin_user,
            password=server.info.admin_password,
            database=database,
        )
        n = 0
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    n += 1
                    cur.execute("INSERT INTO t VALUES (%s, %s, 'new')", (ROWS + n, n))
                    cur.execute("UPDATE t SET v = %s WHERE id = 0", (n,))
                    conn.commit()
                    committed.release()
        finally:
            conn.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        for _ in range(20):  # some transactions before the read is planned, more during it
            assert committed.acquire(timeout=30), "the writer is stuck"
        rows = _read(spark, server.source_options(database, rf"{database}\.t"))
    finally:
        stop.set()
        writer.join()
    by_id = {r["id"]: r for r in rows}
    inserted = sorted(i - ROWS for i in by_id if i >= ROWS)
    assert inserted, "the writer committed before the read was planned"
    assert inserted == list(range(1, len(inserted) + 1)), "inserts are a prefix of the writes"
    assert by_id[0]["v"] == len(inserted), "row 0 and the last chunk are from one position"
    assert all(by_id[i]["v"] == i * 3 for i in range(1, ROWS))
    assert len(rows) == ROWS + len(inserted)
