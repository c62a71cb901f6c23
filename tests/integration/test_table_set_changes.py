"""Tables joining and leaving a running capture (issue 9 item 4), envelope output.

While a query streams under a writer: a table created that matches is streamed from its
CREATE; a table renamed into the pattern is snapshotted on its own (offset version 3,
``added``) while the others stream; a DROP, a TRUNCATE and a RENAME away are ``t`` rows
at their position. While the query is stopped: a table created, one dropped and the
pattern widened to an existing table; the restart finds which tables its checkpoint
had from the offset's fingerprint. Each time the tables rebuilt from the output
(sorted by ``_seq``, ``t`` dropping the table's rows) equal ``SELECT *``; a table renamed
away has no rows after its reset. Offsets stay under 1 KiB."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest
from pyspark.errors import StreamingQueryException

from tests.integration.streams import (
    StreamRun,
    handover_batch,
    largest_offset_bytes,
    read_output,
    source_offsets,
    wait_caught_up,
    wait_for,
)

ONE_DECODER = True  # the table set is the driver's; decoding is tested elsewhere


def _create(server, database: str, table: str, rows: int, first: int = 1) -> None:
    server.execute(
        f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
        database=database,
    )
    if rows:
        server.execute(
            f"INSERT INTO {table} SELECT seq, seq * 3, CONCAT('{table}-', seq) "
            f"FROM seq_{first}_to_{first + rows - 1}",
            database=database,
        )


class _Writer(threading.Thread):
    """Inserts, updates and deletes on one table until stopped."""

    def __init__(self, server, database: str, table: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.database, self.table = server, database, table
        self.random = random.Random(seed)
        self._stop_event = threading.Event()

    def run(self) -> None:
        with self.server.admin(self.database) as conn, conn.cursor() as cur:
            while not self._stop_event.is_set():
                key = self.random.randint(1, 3000)
                op = self.random.random()
                if op < 0.4:
                    cur.execute(
                        f"INSERT INTO {self.table} VALUES (%s, %s, 'w') "
                        "ON DUPLICATE KEY UPDATE v = v + 1",
                        (key, key),
                    )
                elif op < 0.8:
                    cur.execute(f"UPDATE {self.table} SET v = v + 7 WHERE id = %s", (key,))
                else:
                    cur.execute(f"DELETE FROM {self.table} WHERE id = %s", (key,))
                conn.commit()
                time.sleep(0.003)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _rebuilt(rows: list[dict]) -> dict[str, dict[int, dict]]:
    """Each table as a sink rebuilds it: by ``_seq``, the latest image per key; ``t``
    drops every earlier row of its table."""
    tables: dict[str, dict[int, dict]] = {}
    for row in sorted(rows, key=lambda r: r["_seq"]):
        table = tables.setdefault(row["table"], {})
        if row["op"] == "t":
            table.clear()
            continue
        key = json.loads(row["key"])["id"]
        if row["op"] == "d":
            table.pop(key, None)
        else:
            table[key] = json.loads(row["after"])
    return tables


def _server_tables(server, database: str, names: list[str]) -> dict[str, dict[int, dict]]:
    result = {}
    for name in names:
        rows = server.query(f"SELECT id, v, s FROM {name}", database=database)
        result[name] = {r[0]: {"id": r[0], "v": r[1], "s": r[2]} for r in rows}
    return result


def _check(spark, server, run: StreamRun, database: str, present: list[str], gone: list[str]):
    rebuilt = _rebuilt(read_output(spark, run.out))
    expected = _server_tables(server, database, present)
    for name in present:
        assert rebuilt.get(name, {}) == expected[name], name
    for name in gone:
        assert rebuilt.get(name, {}) == {}, name
    assert largest_offset_bytes(run.checkpoint) < 1024


def test_tables_join_and_leave_a_running_capture(server, spark, tmp_path):
    database = server.fresh_database("table_set_db")
    _create(server, database, "t_a", 2000)
    _create(server, database, "t_b", 500)
    _create(server, database, "t_gone", 300)
    _create(server, database, "t_away", 100)  # renamed out of the pattern's reach
    _create(server, database, "other", 1500, first=5)  # renamed into the pattern later
    _create(server, database, "u_wide", 700)  # matched by a widened pattern later
    options = server.source_options(
        database,
        rf"{database}\.t_.*",
        **{
            "scan.incremental.snapshot.chunk.size": "400",
            "scan.snapshot.chunks-per-batch": "2",
            "scan.binlog.max-rows-per-batch": "2000",
        },
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    writer = _Writer(server, database, "t_a", seed=3)
    writer.start()
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 300, "the hand-over", query)
        server.execute(
            "CREATE TABLE t_new (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
            "INSERT INTO t_new SELECT seq, seq, 'new' FROM seq_1_to_200",
            "UPDATE t_new SET v = -v WHERE id % 10 = 0",
            "DELETE FROM t_new WHERE id % 25 = 0",
            "UPDATE t_b SET v = v + 1 WHERE id <= 50",
            "TRUNCATE TABLE t_b",
            "INSERT INTO t_b SELECT seq, seq, 'again' FROM seq_1_to_30",
            "UPDATE t_gone SET v = 0 WHERE id <= 10",
            "DROP TABLE t_gone",
            "RENAME TABLE other TO t_other, t_away TO away",
            "UPDATE away SET v = 0",
            "UPDATE t_other SET v = v + 100 WHERE id % 3 = 0",
            database=database,
        )
        time.sleep(3)
        server.execute("DELETE FROM t_other WHERE id % 7 = 0", database=database)
        wait_caught_up(server, run.checkpoint, query, 180)
    finally:
        writer.stop()
        query.stop()
    run.run_to_end()

    offsets = source_offsets(run.checkpoint)
    assert any(o.get("added", {}).get("table") == f"{database}.t_other" for o in offsets.values())
    assert any(o["v"] == 3 for o in offsets.values())
    rows = read_output(spark, run.out)
    resets = sorted(r["table"] for r in rows if r["op"] == "t")
    assert resets == ["t_away", "t_b", "t_gone"]
    # The joining table's snapshot rows are as of one position, after its RENAME.
    assert any(r["table"] == "t_other" and r["op"] == "r" for r in rows)
    assert not any(r["table"] == "t_new" and r["op"] == "r" for r in rows)
    present = ["t_a", "t_b", "t_new", "t_other"]
    _check(spark, server, run, database, present, ["t_gone", "t_away", "other", "away"])

    # While the query is stopped: a table created, one dropped, and the pattern widened
    # to a table that existed all along (snapshotted while the others stream).
    server.execute("UPDATE u_wide SET v = -1 WHERE id <= 5", database=database)
    server.execute(
        "UPDATE t_new SET v = 1 WHERE id = 1",
        "DROP TABLE t_new",
        database=database,
    )
    _create(server, database, "t_later", 50)
    run.options = {**options, "table-name": rf"{database}\.(t_.*|u_wide)"}
    writer = _Writer(server, database, "t_a", seed=4)
    writer.start()
    try:
        run.run_to_end()
    finally:
        writer.stop()
    run.run_to_end()
    rows = read_output(spark, run.out)
    resets = sorted(r["table"] for r in rows if r["op"] == "t")
    assert resets == ["t_away", "t_b", "t_gone", "t_new"]
    assert any(r["table"] == "u_wide" and r["op"] == "r" for r in rows)
    present = ["t_a", "t_b", "t_other", "t_later", "u_wide"]
    _check(spark, server, run, database, present, ["t_gone", "t_new"])

    # Narrowed: a table no longer matched stops being captured, the rest goes on.
    run.options = {**options, "table-name": rf"{database}\.(t_a|t_b|t_other|t_later)"}
    server.execute(
        "UPDATE u_wide SET v = 5", "UPDATE t_a SET v = 5 WHERE id < 9", database=database
    )
    run.run_to_end()
    rows = read_output(spark, run.out)
    latest_u = max(r["_seq"] for r in rows if r["table"] == "u_wide")
    assert not any(
        r["table"] == "u_wide" and r["_seq"] == latest_u and json.loads(r["after"])["v"] == 5
        for r in rows
    )
    _check(spark, server, run, database, ["t_a", "t_b", "t_other", "t_later"], [])


def test_a_typed_query_stops_when_a_second_table_matches(server, spark, tmp_path):
    database = server.fresh_database("table_set_typed_db")
    _create(server, database, "t_one", 100)
    options = server.source_options(database, rf"{database}\.t_.*")
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    query = run.start()
    try:
        wait_for(lambda: handover_batch(run.checkpoint) is not None, 120, "the hand-over", query)
        _create(server, database, "t_two", 10)
        with pytest.raises(StreamingQueryException) as err:
            query.awaitTermination(120)
    finally:
        query.stop()
    assert "typed output is the columns of" in str(err.value)
