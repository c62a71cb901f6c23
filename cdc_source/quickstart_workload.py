"""The quickstart's table and the writes it makes while the capture runs: ``shop.orders``
created with random rows, and a thread of inserts, updates and deletes."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from decimal import Decimal

DATABASE = "shop"
TABLE = "orders"
STATUSES = ("new", "paid", "shipped", "cancelled")

ORDERS_DDL = f"""
CREATE TABLE {DATABASE}.{TABLE} (
  id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  customer    VARCHAR(40) NOT NULL,
  status      ENUM('new','paid','shipped','cancelled') NOT NULL,
  amount      DECIMAL(10,2) NOT NULL,
  quantity    INT NOT NULL,
  gift        TINYINT(1) NOT NULL DEFAULT 0,
  note        VARCHAR(200) NULL,
  created_at  DATETIME(3) NOT NULL,
  updated_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
              ON UPDATE CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""


def _random_order(rng: random.Random, now: dt.datetime) -> tuple:
    return (
        f"customer-{rng.randrange(5000):04d}",
        rng.choice(STATUSES),
        Decimal(rng.randrange(100, 100_000)) / 100,
        rng.randrange(1, 20),
        int(rng.random() < 0.1),
        None if rng.random() < 0.3 else f"note {rng.randrange(10**6)} ✓",
        now - dt.timedelta(milliseconds=rng.randrange(10**10)),
    )


_INSERT = (
    f"INSERT INTO {DATABASE}.{TABLE} "
    "(customer, status, amount, quantity, gift, note, created_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def create_orders(conn, rows: int, seed: int = 7) -> None:
    """``shop.orders`` with ``rows`` random orders."""
    rng = random.Random(seed)
    now = dt.datetime(2026, 1, 1)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(ORDERS_DDL)
        for start in range(0, rows, 5000):
            batch = [_random_order(rng, now) for _ in range(min(5000, rows - start))]
            cur.executemany(_INSERT, batch)


class ChangeWriter(threading.Thread):
    """Small transactions of inserts, updates and deletes, for a bounded time."""

    def __init__(self, connect: Callable[[], object], seconds: float, seed: int = 11) -> None:
        super().__init__(name="orders-writer", daemon=True)
        self.connect = connect
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.statements: Counter = Counter()
        self.transactions = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = self.connect()
            try:
                self._loop(conn)
            finally:
                conn.close()
        except BaseException as err:  # reported by the main thread
            self.error = err

    def _loop(self, conn) -> None:
        rng = self.rng
        deadline = time.monotonic() + self.seconds
        with conn.cursor() as cur:
            cur.execute(f"SELECT MAX(id) FROM {DATABASE}.{TABLE}")
            max_id = cur.fetchone()[0] or 1
            while time.monotonic() < deadline:
                cur.execute("BEGIN")
                for _ in range(rng.choice((1, 1, 1, 2, 5))):
                    max_id = self._statement(cur, rng, max_id)
                cur.execute("COMMIT")
                self.transactions += 1
                time.sleep(0.01)

    def _statement(self, cur, rng: random.Random, max_id: int) -> int:
        roll = rng.random()
        target = rng.randrange(1, max_id + 1)
        if roll < 0.25:
            cur.execute(_INSERT, _random_order(rng, dt.datetime.now()))
            self.statements["insert"] += 1
            return cur.lastrowid or max_id + 1
        if roll < 0.65:
            cur.execute(
                f"UPDATE {DATABASE}.{TABLE} SET status = %s, quantity = quantity + 1, "
                "note = CONCAT(COALESCE(note, ''), '+') WHERE id = %s",
                (rng.choice(STATUSES), target),
            )
            self.statements["update"] += 1
        elif roll < 0.75:
            cur.execute(
                f"UPDATE {DATABASE}.{TABLE} SET amount = amount + 1 WHERE id BETWEEN %s AND %s",
                (target, target + 25),
            )
            self.statements["update (range)"] += 1
        else:
            cur.execute(f"DELETE FROM {DATABASE}.{TABLE} WHERE id = %s", (target,))
            self.statements["delete"] += 1
        return max_id


# -- watching the query -------------------------------------------------------------------
