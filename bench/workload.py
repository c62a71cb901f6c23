"""The benchmark table: about 200 bytes a row, loaded by INSERT ... SELECT doubling.

Every column value is a pure function of the primary key, so the table is the same in
every run. The load is generic SQL (no MariaDB sequence engine), so it works on MySQL too.
"""

from __future__ import annotations

import time

DATABASE = "bench"
TABLE = "orders"
WARMUP_TABLE = "warmup"
CHANGES_TABLE = "changes"  # the binlog phase's: orders' columns, at most CHANGES_TABLE_ROWS
CHANGES_TABLE_ROWS = 1_000_000

COLUMNS = (
    "id",
    "customer",
    "email",
    "city",
    "note",
    "amount",
    "qty",
    "created_at",
    "updated_at",
)

DDL = """
CREATE TABLE {name} (
    id INT NOT NULL PRIMARY KEY,
    customer VARCHAR(64) NOT NULL,
    email VARCHAR(128) NOT NULL,
    city VARCHAR(32) NOT NULL,
    note VARCHAR(255),
    amount DECIMAL(12, 2) NOT NULL,
    qty INT NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""


def row_expressions(k: str) -> list[str]:
    """SQL expressions of one row's columns, given the SQL expression ``k`` of its key."""
    return [
        f"{k}",
        f"CONCAT('customer-', LPAD({k} MOD 100000, 6, '0'))",
        f"CONCAT(MD5({k}), '@example.com')",
        f"ELT(1 + {k} MOD 5, 'Berlin', 'Lisbon', 'Osaka', 'Toronto', 'Nairobi')",
        f"CONCAT(SHA1({k}), ' ', MD5({k} * 7), ' order note')",
        f"({k} MOD 100000) / 100 + 0.99",
        f"{k} MOD 97",
        f"TIMESTAMP('2024-01-01 00:00:00') + INTERVAL {k} SECOND",
        f"TIMESTAMP('2024-06-01 00:00:00') + INTERVAL {k} SECOND",
    ]


def create_table(cur, name: str) -> None:
    cur.execute(f"DROP TABLE IF EXISTS {name}")
    cur.execute(DDL.format(name=name))


def load(cur, name: str, rows: int, max_rows_per_statement: int = 250_000) -> float:
    """Fill ``name`` with keys 1..rows; returns the seconds it took."""
    began = time.perf_counter()
    columns = ", ".join(COLUMNS)
    cur.execute(f"INSERT INTO {name} ({columns}) SELECT {', '.join(row_expressions('1'))}")
    have = 1
    while have < rows:
        add = min(have, rows - have, max_rows_per_statement)
        source_key = f"(id + {have})"
        cur.execute(
            f"INSERT INTO {name} ({columns}) "
            f"SELECT {', '.join(row_expressions(source_key))} FROM {name} WHERE id <= {add}"
        )
        have += add
    return time.perf_counter() - began


UPDATE_SET = "qty = qty + 1, updated_at = updated_at + INTERVAL 1 SECOND"


def apply_updates(
    cur,
    name: str,
    table_rows: int,
    changes: int,
    rows_per_txn: int,
    set_clause: str = UPDATE_SET,
) -> float:
    """``changes`` row updates, ``rows_per_txn`` rows per transaction (one statement each).

    Keys are taken in order and wrap around when ``changes`` exceeds the table.
    """
    began = time.perf_counter()
    done = 0
    next_key = 1
    while done < changes:
        take = min(rows_per_txn, changes - done, table_rows - next_key + 1)
        cur.execute(
            f"UPDATE {name} SET {set_clause} WHERE id BETWEEN {next_key} AND {next_key + take - 1}"
        )
        done += take
        next_key += take
        if next_key > table_rows:
            next_key = 1
    return time.perf_counter() - began


def restore_updated(cur, name: str, last_key: int) -> None:
    """Give keys 1..``last_key`` back the values :data:`UPDATE_SET` changed, as loaded."""
    expressions = dict(zip(COLUMNS, row_expressions("id")))
    cur.execute(
        f"UPDATE {name} SET qty = {expressions['qty']}, updated_at = {expressions['updated_at']} "
        f"WHERE id BETWEEN 1 AND {last_key}"
    )


def table_stats(cur, name: str) -> dict[str, float]:
    """Row count and the average size of a row's values as text (what the client receives)."""
    cur.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
        "AND TABLE_NAME = %s",
        (name,),
    )
    lengths = " + ".join(f"COALESCE(LENGTH(`{column}`), 0)" for (column,) in cur.fetchall())
    cur.execute(f"SELECT COUNT(*), AVG({lengths}) FROM {name}")
    count, avg_bytes = cur.fetchone()
    return {"rows": int(count), "avg_row_text_bytes": round(float(avg_bytes or 0), 1)}
