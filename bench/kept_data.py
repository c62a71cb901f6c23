"""The bench's tables generated once and reused by later runs on a kept server directory.

A table is loaded only when the marker table ``cdcbench.loaded`` does not say it holds
the rows asked for. The marker row is written after the load's last statement has
committed and deleted before a load starts, so a load that was interrupted is redone,
never taken for complete. A phase that changes rows of a table the snapshot measures
deletes its marker first and writes it back once the rows are as loaded again, so every
run's snapshot reads the same rows.

Loads are not written to the binlog (``sql_log_bin = 0``): no measurement reads them from
there, and a 10,000,000-row load would leave gigabytes of binlog behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cdc_source.mysql_client import read_head

MARKER_DATABASE = "cdcbench"
MARKER = f"{MARKER_DATABASE}.loaded"
MARKER_DDL = (
    f"CREATE TABLE IF NOT EXISTS {MARKER} "
    "(name VARCHAR(64) NOT NULL PRIMARY KEY, loaded_rows BIGINT NOT NULL)"
)


def prepare(cur) -> None:
    """The marker table, in a database of its own (the source never sees it)."""
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {MARKER_DATABASE}")
    cur.execute(MARKER_DDL)


def loaded_rows(cur, database: str, table: str) -> int | None:
    """The rows the marker says ``database.table`` was loaded with; None when there is no
    marker or no such table (dropped since)."""
    cur.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
        "AND TABLE_NAME = %s",
        (database, table),
    )
    if not cur.fetchone()[0]:
        return None
    cur.execute(f"SELECT loaded_rows FROM {MARKER} WHERE name = %s", (f"{database}.{table}",))
    found = cur.fetchone()
    return int(found[0]) if found else None


def forget(cur, database: str, table: str) -> None:
    cur.execute(f"DELETE FROM {MARKER} WHERE name = %s", (f"{database}.{table}",))


def remember(cur, database: str, table: str, rows: int) -> None:
    cur.execute(
        f"REPLACE INTO {MARKER} (name, loaded_rows) VALUES (%s, %s)",
        (f"{database}.{table}", rows),
    )


def ensure(cur, database: str, table: str, rows: int, load: Callable[[], float]) -> float | None:
    """Run ``load`` (which fills ``table`` with ``rows`` rows on ``cur``, autocommit, and
    returns its seconds) unless the marker says the table holds them already. Returns the
    load's seconds, or None when the table was reused."""
    if loaded_rows(cur, database, table) == rows:
        return None
    forget(cur, database, table)
    with unlogged(cur):
        seconds = load()
    remember(cur, database, table, rows)
    return seconds


def restore(cur, database: str, table: str, rows: int, undo: Callable[[], None]) -> None:
    """Run ``undo`` (which gives the rows a phase changed their loaded values back, on
    ``cur``), then mark ``table`` as holding its ``rows`` loaded rows again."""
    with unlogged(cur):
        undo()
    remember(cur, database, table, rows)


@contextmanager
def unlogged(cur) -> Iterator[None]:
    """Statements on ``cur`` inside are not written to the binlog."""
    cur.execute("SET SESSION sql_log_bin = 0")
    try:
        yield
    finally:
        cur.execute("SET SESSION sql_log_bin = 1")


def purge_binary_logs(cur) -> str:
    """Start a new binlog file and remove the older ones: what earlier runs wrote (their
    binlog phases) does not pile up in a kept directory. Returns the file kept."""
    cur.execute("FLUSH BINARY LOGS")
    file = read_head(cur.connection)[0]
    cur.execute(f"PURGE BINARY LOGS TO '{file}'")
    return file
