"""The typed snapshot table: 25 columns of the types users capture (BIGINT UNSIGNED,
DECIMAL(20,6), DATETIME(6), TIMESTAMP, VARCHAR(255), JSON, BLOB, DOUBLE, ...), every
value a pure function of the key, loaded by INSERT ... SELECT doubling.
It is read by the source and by Spark's JDBC reader in the same run; a small copy of it,
read by both first, has the JVM compile its 25 columns' paths before either is measured."""

from __future__ import annotations

import time

TYPED_TABLE = "typed"
TYPED_WARMUP_TABLE = "typed_warmup"
TYPED_WARMUP_ROWS = 100_000

TYPED_DDL = """
CREATE TABLE {table} (
    id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    tiny TINYINT NOT NULL, small SMALLINT UNSIGNED NOT NULL, medium MEDIUMINT NOT NULL,
    num INT NOT NULL, big BIGINT NOT NULL, flag TINYINT(1) NOT NULL,
    price DECIMAL(20, 6) NOT NULL, ratio DECIMAL(9, 4), score DOUBLE NOT NULL, weight FLOAT,
    code CHAR(8) NOT NULL, title VARCHAR(255) NOT NULL, body TEXT, payload JSON,
    blob_value BLOB, digest VARBINARY(32) NOT NULL,
    day DATE NOT NULL, created DATETIME(6) NOT NULL, changed TIMESTAMP NOT NULL,
    duration TIME(3), year_value YEAR, state ENUM('new', 'paid', 'shipped') NOT NULL,
    tags SET('a', 'b', 'c'), note VARCHAR(64)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""


def _row(k: str) -> str:
    return ", ".join(
        [
            k,
            f"{k} % 128",
            f"{k} % 65536",
            f"CAST({k} % 8000000 AS SIGNED) - 4000000",
            f"{k} * 7 % 2000000000",
            f"{k} * 1000003",
            f"{k} % 2",
            f"{k} * 1.000001",
            f"({k} % 10000) / 7",
            f"{k} / 3",
            f"{k} % 1000 / 8",
            f"LPAD({k} % 100000000, 8, '0')",
            f"CONCAT('title of row ', {k}, ' ', MD5({k}))",
            f"REPEAT(CONCAT('body ', {k} % 97, ' '), 4)",
            f"JSON_OBJECT('k', {k}, 'tags', JSON_ARRAY('x', {k} % 5), 'ok', TRUE)",
            f"UNHEX(SHA1({k}))",
            f"UNHEX(MD5({k}))",
            f"DATE('2000-01-01') + INTERVAL {k} % 9000 DAY",
            f"TIMESTAMP('2020-01-01 00:00:00.123456') + INTERVAL {k} SECOND",
            f"TIMESTAMP('2021-01-01 00:00:00') + INTERVAL {k} SECOND",
            f"SEC_TO_TIME({k} % 86400) + INTERVAL 0.25 SECOND",
            f"1901 + {k} % 200",
            f"ELT(1 + {k} % 3, 'new', 'paid', 'shipped')",
            f"ELT(1 + {k} % 3, 'a', 'a,b', 'a,c')",
            f"IF({k} % 10 = 0, NULL, CONCAT('n', {k}))",
        ]
    )


def load_typed(
    cur, rows: int, table: str = TYPED_TABLE, max_rows_per_statement: int = 100_000
) -> float:
    """Fill ``table`` (the typed table's columns) with keys 1..rows; returns the seconds
    it took."""
    began = time.perf_counter()
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(TYPED_DDL.format(table=table))
    cur.execute(f"INSERT INTO {table} SELECT {_row('1')}")
    have = 1
    while have < rows:
        add = min(have, rows - have, max_rows_per_statement)
        cur.execute(
            f"INSERT INTO {table} SELECT {_row(f'(id + {have})')} FROM {table} WHERE id <= {add}"
        )
        have += add
    return time.perf_counter() - began
