"""``cdc_source.delta``'s three modes written by one query under a writer: the change log,
the mirror and the history agree with ``SELECT *`` and with each other at every committed
batch. The query runs as a user's does (:mod:`tests.support.delta_runs`)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import deltalake  # in the dev extra: a missing package is an error, not a skip

from cdc_source.delta.transactions import SLICE_LIMIT
from tests.support.delta_runs import (
    admin_connection,
    run_delta_query,
)

ONE_DECODER = True  # the query runs with the source's default decoder


MODE_ROWS = 2000
MODE_DDL = """CREATE TABLE t (
  k VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY,
  n INT NOT NULL, note VARCHAR(40))"""
MODE_COLUMNS = ("k", "n", "note")


def _write_modes(cur, n: int, truncate: bool = False) -> None:
    """One round on ``t``: an update, re-spellings of keys ('k0007' to 'K0007 ' and back),
    a delete, an insert and a key move; or, with ``truncate``, the table truncated and
    rows inserted anew."""
    if truncate:
        cur.execute("TRUNCATE TABLE t")
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, 'after the truncate')",
            [(f"k{i:04d}", i) for i in range(0, MODE_ROWS, 7)],
        )
        return
    cur.execute(
        "UPDATE t SET n = n + 1, note = %s WHERE k = %s", (f"r{n}", f"k{n * 7 % MODE_ROWS:04d}")
    )
    cur.execute(
        "UPDATE t SET k = CONCAT(UPPER(k), ' ') WHERE k = %s", (f"k{n * 3 % MODE_ROWS:04d}",)
    )
    cur.execute(
        "UPDATE t SET k = LOWER(TRIM(TRAILING ' ' FROM k)), n = n + 2 WHERE k = %s",
        (f"k{(n - 2) * 3 % MODE_ROWS:04d}",),
    )
    cur.execute("DELETE FROM t WHERE k = %s", (f"k{n * 11 % MODE_ROWS:04d}",))
    cur.execute("INSERT INTO t VALUES (%s, %s, 'new')", (f"n{n:05d}", n))
    cur.execute("UPDATE t SET k = CONCAT('m', k) WHERE k = %s", (f"n{n - 1:05d}",))


def _delta_rows(path: Path, version: int | None = None) -> list[dict]:
    table = deltalake.DeltaTable(str(path), version=version).to_pyarrow_table()
    return table.sort_by([("_seq", "ascending")]).to_pylist()


def _batch_versions(path: Path) -> dict[int, int]:
    """The Delta version at which each batch's last slice was committed, by batch id."""
    versions = {}
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                batch, index = divmod(action["txn"]["version"], SLICE_LIMIT)
                if index == SLICE_LIMIT - 1:
                    versions[batch] = int(commit.stem)
    return versions


def _fold(log: list[dict]) -> dict[bytes, tuple]:
    """The table a change log (in ``_seq`` order) leaves: by key bytes, the row's values."""
    state: dict[bytes, tuple] = {}
    for change in log:
        if change["_op"] == "t":
            state.clear()
        elif change["_op"] == "d":
            state.pop(change["_key"], None)
        else:
            state[change["_key"]] = tuple(change[c] for c in MODE_COLUMNS)
    return state


def _history_of(log: list[dict]) -> list[tuple]:
    """The SCD type 2 versions a change log (in ``_seq`` order) makes, in ``_seq`` order:
    (values, _seq, _key, valid_from, valid_to, is_current)."""
    versions: list[list] = []
    open_: dict[bytes, list] = {}
    for change in log:
        at = dt.datetime.fromtimestamp(change["_ts_ms"] / 1000, dt.timezone.utc)
        if change["_op"] == "t":
            for version in open_.values():
                version[4], version[5] = at, False
            open_.clear()
            continue
        previous = open_.pop(change["_key"], None)
        if previous is not None:
            previous[4], previous[5] = at, False
        if change["_op"] != "d":
            values = tuple(change[c] for c in MODE_COLUMNS)
            version = [values, change["_seq"], change["_key"], at, None, True]
            versions.append(version)
            open_[change["_key"]] = version
    return [tuple(v) for v in versions]


def _history_rows(rows: list[dict]) -> list[tuple]:
    return [
        (
            tuple(r[c] for c in MODE_COLUMNS),
            r["_seq"],
            r["_key"],
            r["valid_from"],
            r["valid_to"],
            r["is_current"],
        )
        for r in rows
    ]


def test_mirror_history_and_change_log_are_exact_at_every_committed_batch(server, tmp_path):
    """One query writes each batch into the three modes (``foreachBatch`` composed of three
    writers) under a writer that updates, re-spells (utf8mb4_general_ci), deletes, inserts,
    moves keys and truncates the table (between two runs), through a crash between two
    slices of a batch and a crash before Spark's commit. Then: the change log holds each
    ``_seq`` once and folds to ``SELECT *``; the mirror equals ``SELECT *``; the history is
    exactly the versions the change log makes (``valid_from``/``valid_to`` from each
    change's time, deletes and the truncate closing versions); and at every batch
    committed, the history's current versions and the folded change log as of that batch's
    Delta version equal the mirror as of its own."""
    database = server.fresh_database("delta_modes")
    server.execute(MODE_DDL, database=database)
    with admin_connection(server, database) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s)",
            [(f"k{i:04d}", i, f"row {i}") for i in range(MODE_ROWS)],
        )
    stop, truncate = threading.Event(), threading.Event()
    rounds, errors, truncated = [], [], []

    def write() -> None:
        n = 0
        try:
            with admin_connection(server, database) as conn, conn.cursor() as cur:
                while not stop.is_set():
                    n += 1
                    if truncate.is_set() and not truncated:
                        _write_modes(cur, n, truncate=True)
                        truncated.append(n)
                    else:
                        _write_modes(cur, n)
                    rounds.append(n)
                    stop.wait(0.02)
        except Exception as error:  # the test fails on it below
            errors.append(error)

    paths = {mode: tmp_path / mode for mode in ("mirror", "history", "append")}
    lakes = [f"{mode}={path}" for mode, path in paths.items()]
    checkpoint = tmp_path / "checkpoint"
    slices = ("--slice-rows", "600", "--trigger-seconds", "0.5")
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        between = run_delta_query(
            server, database, checkpoint, lakes, *slices,
            env={"CDC_MYSQL_LAKE_CRASH_BETWEEN_SLICES": "1"},
        )  # fmt: skip
        assert between.returncode == 3, between.stdout[-2000:] + between.stderr[-3000:]
        assert "crashing after slice 0" in between.stdout
        truncate.set()  # in the stream, after the snapshot's start
        while not truncated and not errors:
            stop.wait(0.2)
        after = run_delta_query(
            server, database, checkpoint, lakes, *slices,
            env={"CDC_MYSQL_LAKE_CRASH_AFTER_BATCH": "4"},
        )  # fmt: skip
        assert after.returncode == 3, after.stdout[-2000:] + after.stderr[-3000:]
    finally:
        stop.set()
        writer.join()
    assert not errors and truncated, errors
    done = run_delta_query(server, database, checkpoint, lakes, "--available-now", *slices)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "batch 4: " in done.stdout and "already applied" in done.stdout

    with admin_connection(server, database) as conn, conn.cursor() as cur:
        cur.execute("SELECT k, n, note FROM t")
        server_rows = {row[0]: row for row in cur.fetchall()}
    log = _delta_rows(paths["append"])
    assert len({r["_seq"] for r in log}) == len(log), "a change appears twice in the log"
    assert any(r["_op"] == "t" for r in log)
    assert {v[0]: v for v in _fold(log).values()} == server_rows
    mirror = _delta_rows(paths["mirror"])
    assert {r["k"]: tuple(r[c] for c in MODE_COLUMNS) for r in mirror} == server_rows
    assert len(mirror) == len(server_rows)
    history = _delta_rows(paths["history"])
    assert _history_rows(history) == _history_of(log)

    mirror_at, history_at, log_at = (_batch_versions(paths[m]) for m in paths)
    assert mirror_at.keys() == history_at.keys() == log_at.keys() and len(mirror_at) > 3
    for batch, version in mirror_at.items():
        want = {
            r["_key"]: tuple(r[c] for c in MODE_COLUMNS)
            for r in _delta_rows(paths["mirror"], version)
        }
        current = [r for r in _delta_rows(paths["history"], history_at[batch]) if r["is_current"]]
        assert {r["_key"]: tuple(r[c] for c in MODE_COLUMNS) for r in current} == want, batch
        assert _fold(_delta_rows(paths["append"], log_at[batch])) == want, batch
