"""examples/mysql_to_delta.py mirrors a table into Delta exactly: under a concurrent
writer, with one crash between the Delta commit of a batch and Spark's commit of it (the
batch runs again and is recognised as applied), the Delta table equals ``SELECT *``.
The example runs as a user runs it: ``python examples/mysql_to_delta.py`` in a child
process, with the password in the environment."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path

import deltalake  # in the dev extra: a missing package is an error, not a skip
import pymysql

ONE_DECODER = True  # the example runs with the source's default decoder
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mysql_to_delta.py"
ROWS = 3000


def _run(server, database, checkpoint, table_path, *extra, env=None):
    info = server.info
    return subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--hostname", info.host,
            "--port", str(info.port),
            "--username", info.user,
            "--database-name", database,
            "--table-name", rf"{database}\.t",
            "--checkpoint", str(checkpoint),
            "--table-path", str(table_path),
            "--option", "scan.incremental.snapshot.chunk.size=500",
            "--option", "scan.snapshot.chunks-per-batch=2",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CDC_MYSQL_PASSWORD": info.password, **(env or {})},
    )  # fmt: skip


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
        conn = pymysql.connect(
            host=server.info.host,
            port=server.info.port,
            user=server.info.admin_user,
            password=server.info.admin_password,
            database=database,
            autocommit=True,
        )
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
    try:
        crashed = _run(
            server,
            database,
            checkpoint,
            table_path,
            "--available-now",
            env={"CDC_MYSQL_EXAMPLE_CRASH_AFTER_BATCH": "1"},
        )
    finally:
        stop.set()
        writer.join()
    assert crashed.returncode == 3, crashed.stdout[-2000:] + crashed.stderr[-3000:]
    assert "batch 1:" in crashed.stdout and "crashing before Spark commits" in crashed.stdout

    resumed = _run(server, database, checkpoint, table_path, "--available-now")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "batch 1: already applied" in resumed.stdout  # re-run by Spark, not re-applied

    mirror = deltalake.DeltaTable(str(table_path)).to_pyarrow_table().to_pylist()
    got = {r["id"]: (r["qty"], r["price"], r["note"], r["at"].replace(tzinfo=None)) for r in mirror}
    rows = server.query("SELECT id, qty, price, note, at FROM t", database=database)
    expected = {r[0]: tuple(r[1:]) for r in rows}
    assert len(mirror) == len(got), "a key appears twice in the Delta table"
    assert got == expected
