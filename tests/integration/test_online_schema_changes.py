"""Online schema-change tools' migrations while a capture runs
(``scan.parse.online.schema.changes.enabled``; docs/design.md, 'Tables joining and
leaving').

Each test runs a tool's statement sequence from Python, under a concurrent writer on the
table, as the tool itself would:

- gh-ost: ``_t_gho`` (the altered copy: a column ``c INT DEFAULT 7`` added) and
  ``_t_ghc`` (its changelog); rows copied in chunks of 1,000 with ``INSERT IGNORE ...
  SELECT ... LOCK IN SHARE MODE`` (MySQL: ``FOR SHARE``); each change of the writer is
  applied to ``_t_gho`` too. gh-ost applies them from the binlog; here the writer writes
  the same change to ``_t_gho`` right after its change of ``t``, in the same transaction,
  which keeps the tool's invariant (``_t_gho`` holds ``t``'s rows wherever it has them)
  with the shadow's writes logged after ``t``'s, as gh-ost's are. The cut-over holds the
  writer's lock (gh-ost's ``LOCK TABLES``: no write of ``t`` between the last applied
  change and the swap), renames ``t TO _t_del, _t_gho TO t`` in one statement, then lets
  the writer go on with the new ``t``; ``_t_del`` and ``_t_ghc`` are dropped.
- pt-online-schema-change: ``_t_new`` (altered), AFTER INSERT/UPDATE/DELETE triggers on
  ``t`` writing ``REPLACE INTO`` / ``DELETE IGNORE FROM _t_new``, chunks copied with
  ``INSERT LOW_PRIORITY IGNORE ... SELECT ... LOCK IN SHARE MODE`` while the writer
  runs, ``RENAME TABLE t TO _t_old, _t_new TO t`` with the writer still running, then
  ``_t_old`` and the triggers dropped.

With the option the table-name pattern matches every table of the database, the tools'
tables included, and none of theirs may reach the output; without it only ``t`` and the
test's own tables are matched (the tools' tables would be ordinary tables joining and
leaving, which is not what is measured).
Each test rebuilds the table from the change log (latest ``_seq`` per key, deletes and
resets dropping rows) and compares it with ``SELECT *``, and counts the snapshot (``r``)
rows: with the option, only the first snapshot's; without it, the whole table again.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass

import pymysql
import pytest
from pyspark.errors import StreamingQueryException

from tests.support.streams import StreamRun, largest_offset_bytes, wait_caught_up

ONE_DECODER = True  # what is tested is the table set; decoding is tested elsewhere
OPTION = "scan.parse.online.schema.changes.enabled"
RETRIED = (1213, 1205)  # deadlock, lock wait timeout: the transaction is run again
TOOL_TABLES = ("_t_gho", "_t_ghc", "_t_del", "_t_new", "_t_old")


def _create(server, database: str, rows: int) -> None:
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
        f"INSERT INTO t SELECT seq, seq * 3, CONCAT('s-', seq) FROM {server.seq(1, rows)} "
        "ORDER BY seq",
        database=database,
    )


class _Writer(threading.Thread):
    """Inserts, updates and deletes rows of ``t``, one transaction each, until stopped;
    while ``mirror`` names a table, each change is written to it too, in the same
    transaction (gh-ost's applier). ``lock`` is held around each transaction: holding it
    stands for a lock on ``t``."""

    def __init__(self, server, database: str, keys: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.database, self.keys = server, database, keys
        self.random = random.Random(seed)
        self.mirror: str | None = None
        self.lock = threading.Lock()
        self.done = 0
        self.at_swap = 0  # transactions committed before the swap
        self._stop_event = threading.Event()

    def run(self) -> None:
        with self.server.admin(self.database) as conn, conn.cursor() as cur:
            while not self._stop_event.is_set():
                with self.lock:
                    try:
                        self._one(cur)
                        conn.commit()
                        self.done += 1
                    except pymysql.err.OperationalError as err:
                        conn.rollback()
                        if err.args[0] not in RETRIED:
                            raise
                time.sleep(0.002)

    def _one(self, cur) -> None:
        key = self.random.randint(1, self.keys)
        op = self.random.random()
        if op < 0.4:
            cur.execute(
                "INSERT INTO t (id, v, s) VALUES (%s, %s, 'w') ON DUPLICATE KEY UPDATE v = v + 1",
                (key, key),
            )
        elif op < 0.8:
            cur.execute("UPDATE t SET v = v + 7 WHERE id = %s", (key,))
        else:
            cur.execute("DELETE FROM t WHERE id = %s", (key,))
        if self.mirror is not None:  # gh-ost's applier: the row as it is now, or its delete
            if cur.execute("SELECT id FROM t WHERE id = %s", (key,)):
                cur.execute(
                    f"REPLACE INTO {self.mirror} (id, v, s) SELECT id, v, s FROM t WHERE id = %s",
                    (key,),
                )
            else:
                cur.execute(f"DELETE FROM {self.mirror} WHERE id = %s", (key,))

    def wait_for_writes(self, count: int) -> None:
        """Until ``count`` more transactions committed."""
        target = self.done + count
        while self.done < target and self.is_alive():
            time.sleep(0.01)
        assert self.is_alive(), "the writer stopped"

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _copy_in_chunks(server, database: str, verb: str, shadow: str, chunk: int = 1000) -> None:
    """The tools' row copy: key ranges of ``chunk`` up to the largest key at the start,
    each read under shared locks (gh-ost and pt-online-schema-change alike)."""
    share = "LOCK IN SHARE MODE" if server.is_mariadb else "FOR SHARE"
    (last,) = server.query("SELECT COALESCE(MAX(id), 0) FROM t", database=database)[0]
    with server.admin(database) as conn, conn.cursor() as cur:
        for low in range(1, last + 1, chunk):
            while True:
                try:
                    cur.execute(
                        f"{verb} INTO {shadow} (id, v, s) SELECT id, v, s FROM t "
                        f"WHERE id BETWEEN %s AND %s {share}",
                        (low, low + chunk - 1),
                    )
                    conn.commit()
                    break
                except pymysql.err.OperationalError as err:
                    conn.rollback()
                    if err.args[0] not in RETRIED:
                        raise


def gh_ost(server, database: str, writer: _Writer) -> None:
    """gh-ost's migration of ``t``, adding ``c INT DEFAULT 7``, with ``writer`` running."""
    server.execute(
        "CREATE TABLE _t_gho LIKE t",
        "ALTER TABLE _t_gho ADD COLUMN c INT DEFAULT 7",
        "CREATE TABLE _t_ghc (id BIGINT AUTO_INCREMENT PRIMARY KEY, hint VARCHAR(64), "
        "value TEXT, UNIQUE KEY hint_uidx (hint))",
        "INSERT INTO _t_ghc (hint, value) VALUES ('state', 'GhostTableMigrated')",
        database=database,
    )
    with writer.lock:  # from here on every change of t is applied to _t_gho
        writer.mirror = "_t_gho"
    _copy_in_chunks(server, database, "INSERT IGNORE", "_t_gho")
    server.execute(
        "INSERT INTO _t_ghc (hint, value) VALUES ('state', 'AllEventsUpToLockProcessed') "
        "ON DUPLICATE KEY UPDATE value = VALUES(value)",
        database=database,
    )
    with writer.lock:  # the cut-over lock: nothing writes t between the last change and the swap
        server.execute("RENAME TABLE t TO _t_del, _t_gho TO t", database=database)
        writer.mirror = None
        writer.at_swap = writer.done
    writer.wait_for_writes(30)  # the new t's changes
    server.execute("DROP TABLE IF EXISTS _t_del", "DROP TABLE IF EXISTS _t_ghc", database=database)


def pt_online_schema_change(server, database: str, writer: _Writer) -> None:
    """pt-online-schema-change's migration of ``t``, adding ``c INT DEFAULT 7``, with
    ``writer`` running (its triggers keep ``_t_new`` equal to ``t``)."""
    server.execute(
        "CREATE TABLE _t_new LIKE t",
        "ALTER TABLE _t_new ADD COLUMN c INT DEFAULT 7",
        "CREATE TRIGGER pt_osc_t_del AFTER DELETE ON t FOR EACH ROW "
        "DELETE IGNORE FROM _t_new WHERE _t_new.id <=> OLD.id",
        "CREATE TRIGGER pt_osc_t_upd AFTER UPDATE ON t FOR EACH ROW BEGIN "
        "DELETE IGNORE FROM _t_new WHERE !(OLD.id <=> NEW.id) AND _t_new.id <=> OLD.id; "
        "REPLACE INTO _t_new (id, v, s) VALUES (NEW.id, NEW.v, NEW.s); END",
        "CREATE TRIGGER pt_osc_t_ins AFTER INSERT ON t FOR EACH ROW "
        "REPLACE INTO _t_new (id, v, s) VALUES (NEW.id, NEW.v, NEW.s)",
        database=database,
    )
    writer.wait_for_writes(20)
    _copy_in_chunks(server, database, "INSERT LOW_PRIORITY IGNORE", "_t_new")
    writer.wait_for_writes(20)
    with writer.lock:  # only to count the writes after it: the RENAME needs no lock
        server.execute("RENAME TABLE t TO _t_old, _t_new TO t", database=database)
        writer.at_swap = writer.done
    writer.wait_for_writes(30)  # the new t's changes
    server.execute(
        "DROP TABLE IF EXISTS _t_old",
        "DROP TRIGGER IF EXISTS pt_osc_t_del",
        "DROP TRIGGER IF EXISTS pt_osc_t_upd",
        "DROP TRIGGER IF EXISTS pt_osc_t_ins",
        database=database,
    )


TOOLS = {"gh-ost": gh_ost, "pt-online-schema-change": pt_online_schema_change}


def _batches(spark, run: StreamRun) -> list[dict]:
    """Every batch's rows, each batch read with its own schema (the typed output's
    schema grows a column)."""
    rows: list[dict] = []
    for batch in sorted(run.out.iterdir()) if run.out.exists() else ():
        rows.extend(row.asDict() for row in spark.read.parquet(str(batch)).collect())
    return rows


def _run_to_end(run: StreamRun) -> int:
    """Runs ``run`` to the head, restarting it (same checkpoint) each time it stops at a
    schema change, as the error says; returns the restarts."""
    for restarts in range(4):
        try:
            run.run_to_end()
            return restarts
        except StreamingQueryException as err:
            assert "restart the query (same checkpoint)" in str(err).lower(), str(err)[:2000]
    raise AssertionError("the query kept stopping at schema changes")


def _rows(rows: list[dict], typed: bool) -> list[tuple[str, str, dict]]:
    """(op, table, image) of every output row, in ``_seq`` order, for both outputs."""
    result = []
    for row in sorted(rows, key=lambda r: r["_seq"]):
        if typed:
            image = {k: v for k, v in row.items() if not k.startswith("_")}
            result.append((row["_op"], "t", image))
        else:
            image = json.loads(row["after"] or row["before"] or "{}")
            result.append((row["op"], row["table"], image))
    return result


def _rebuilt(rows: list[tuple[str, str, dict]]) -> dict[int, dict]:
    """``t`` rebuilt from its change log: the latest image per key, a delete removing it,
    a reset (``t``) every earlier row."""
    table: dict[int, dict] = {}
    for op, name, image in rows:
        if name != "t":
            continue
        if op == "t":
            table.clear()
        elif op == "d":
            table.pop(image["id"], None)
        else:
            table[image["id"]] = image
    return table


def _check_rebuilt(server, database: str, rebuilt: dict[int, dict]) -> None:
    """The rebuilt table is ``SELECT *``: every key, and every column; the added ``c`` is
    7 in a row the output shows with it, and missing (NULL) only in a row whose latest
    change was emitted before the swap, with the columns it had then."""
    expected = {
        r[0]: {"id": r[0], "v": r[1], "s": r[2], "c": r[3]}
        for r in server.query("SELECT id, v, s, c FROM t", database=database)
    }
    assert set(rebuilt) == set(expected)
    for key, row in expected.items():
        got = rebuilt[key]
        assert (got["id"], got["v"], got["s"]) == (row["id"], row["v"], row["s"]), (key, got)
        assert got.get("c") in (None, row["c"]), (key, got)


def _migrate(server, spark, tmp_path, tool: str, option: bool, typed: bool, rows: int):
    """The capture of ``t`` through a migration by ``tool`` while the query runs, then
    restarted to the head as often as it stops at a schema change; the counts."""
    database = server.fresh_database(f"osc_{tool[:2]}_{int(option)}_{int(typed)}".replace("-", "_"))
    _create(server, database, rows)
    # Without the option the tools' tables would be tables like any other, each joining
    # and leaving: only t, and the tables the test makes, are captured then.
    pattern = (
        rf"{database}\.t"
        if typed
        else rf"{database}\..*"
        if option
        else rf"{database}\.(t|other|marker)"
    )
    extra = {OPTION: "true"} if option else {}
    if not typed:  # two tables: the envelope (which tables may join)
        server.execute("CREATE TABLE other (id INT PRIMARY KEY)", database=database)
    run = StreamRun(
        spark, server.source_options(database, pattern, **extra), tmp_path / "ck", tmp_path / "out"
    )
    run.run_to_end()
    first = [op for op, name, _ in _rows(_batches(spark, run), typed) if op == "r" and name == "t"]
    assert len(first) == rows

    # The query runs through the migration: it has read t's schema and caught up before.
    server.execute("CREATE TABLE marker (id INT AUTO_INCREMENT PRIMARY KEY)", database=database)
    server.execute("INSERT INTO marker VALUES ()", database=database)
    query = run.start()
    stopped = None
    writer = _Writer(server, database, keys=rows + rows // 10, seed=rows)
    try:
        wait_caught_up(server, run.checkpoint, query, 120)
        writer.start()
        try:
            TOOLS[tool](server, database, writer)
        finally:
            writer.stop()
        if typed:  # the new t's rows are of another shape: the query stops, as for an ALTER
            with pytest.raises(StreamingQueryException) as err:
                query.awaitTermination(300)
                raise AssertionError("the query did not stop at the swap")
            stopped = str(err.value)
        else:
            wait_caught_up(server, run.checkpoint, query, 300)
    finally:
        query.stop()
    _run_to_end(run)

    output = _rows(_batches(spark, run), typed)
    leaked = {name for _, name, _ in output if name in TOOL_TABLES}
    assert not leaked, leaked
    _check_rebuilt(server, database, _rebuilt(output))
    assert largest_offset_bytes(run.checkpoint) < 1024
    snapshot_rows = sum(1 for op, name, _ in output if op == "r" and name == "t")
    (now,) = server.query("SELECT COUNT(*) FROM t", database=database)[0]
    return _Counts(
        len(first), snapshot_rows - len(first), now, writer.done - writer.at_swap, stopped
    )


@dataclass(frozen=True)
class _Counts:
    first: int  # snapshot rows of the query's first snapshot
    again: int  # snapshot rows the migration caused
    now: int  # the table's rows at the end
    after_swap: int  # the writer's transactions after the swap
    stopped: str | None  # the error a typed query stopped with

    def read_again_in_full(self) -> bool:
        """Whether the rows the migration caused are the whole new table: its size when
        it was read, which each write after the swap moves by at most one row."""
        return abs(self.again - self.now) <= self.after_swap


def test_each_tools_migration_of_a_20000_row_table_is_read_again_only_without_the_option(
    server, spark, tmp_path
):
    """Envelope output, a 20,000-row table: with the option the swap re-emits no row;
    without it the new table is read in full."""
    for tool in TOOLS:
        for option in (True, False):
            counts = _migrate(
                server, spark, tmp_path / f"{tool}-{option}", tool, option, False, 20_000
            )
            print(
                f"{tool}, option {'on' if option else 'off'}: first snapshot {counts.first} "
                f"rows, re-emitted by the migration {counts.again} rows (table at the end "
                f"{counts.now} rows, {counts.after_swap} writes after the swap)"
            )
            assert counts.first == 20_000
            if option:
                assert counts.again == 0
            else:
                assert counts.read_again_in_full(), counts


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("option", [True, False], ids=["option-on", "option-off"])
def test_typed_output_stops_at_a_tools_swap_and_goes_on_after_a_restart(
    server, spark, tmp_path, tool, option
):
    """Typed output: the swap is a schema change (the query stops with 'restart the
    query'); after the restart it goes on, with the option without reading ``t`` again."""
    counts = _migrate(server, spark, tmp_path, tool, option, True, 1500)
    assert "restart the query (same checkpoint)" in counts.stopped.lower(), counts.stopped[:2000]
    assert counts.again == 0 if option else counts.read_again_in_full(), counts


def test_a_swap_in_two_renames_is_a_table_leaving_and_joining_again(server, spark, tmp_path):
    """With the option, a shadow table renamed in by a statement of its own is no swap:
    the table is read again in full."""
    database = server.fresh_database("osc_two_renames")
    _create(server, database, 300)
    server.execute("CREATE TABLE other (id INT PRIMARY KEY)", database=database)
    options = server.source_options(database, rf"{database}\..*", **{OPTION: "true"})
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    server.execute(
        "CREATE TABLE _t_gho LIKE t",
        "ALTER TABLE _t_gho ADD COLUMN c INT DEFAULT 7",
        "INSERT INTO _t_gho (id, v, s) SELECT id, v, s FROM t",
        "RENAME TABLE t TO _t_del",
        "RENAME TABLE _t_gho TO t",
        "DROP TABLE _t_del",
        database=database,
    )
    _run_to_end(run)
    output = _rows(_batches(spark, run), False)
    assert sum(1 for op, name, _ in output if op == "r" and name == "t") == 600
    assert [op for op, name, _ in output if op == "t"] == ["t"]
    _check_rebuilt(server, database, _rebuilt(output))
