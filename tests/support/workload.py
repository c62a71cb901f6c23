"""Tables, a concurrent writer, and the exactly-once checks of the integration tests."""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

import pymysql

from tests.support.server import TestServer

REGIONS = ["north", "SOUTH", "east ", "West", "mid  ", "Ab", "cC ", "zZ"]


@dataclass(frozen=True)
class TableKind:
    name: str
    ddl: str
    key: tuple[str, ...]
    columns: tuple[str, ...]


AUTO_INCREMENT = TableKind(
    "orders",
    "CREATE TABLE orders (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
    "customer VARCHAR(40) NOT NULL, amount DECIMAL(12,2), note VARCHAR(100), "
    "updated DATETIME(6) NOT NULL) ENGINE=InnoDB",
    ("id",),
    ("id", "customer", "amount", "note", "updated"),
)

COMPOSITE = TableKind(
    "readings",
    "CREATE TABLE readings (region VARCHAR(12) NOT NULL, seq INT NOT NULL, "
    "value DOUBLE, label VARCHAR(30), PRIMARY KEY (region, seq)) "
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
    ("region", "seq"),
    ("region", "seq", "value", "label"),
)


def load(server: TestServer, database: str, kind: TableKind, rows: int) -> None:
    server.execute(kind.ddl, database=database)
    batch = 5000
    with server.admin(database) as conn, conn.cursor() as cur:
        for start in range(0, rows, batch):
            count = min(batch, rows - start)
            if kind is AUTO_INCREMENT:
                cur.executemany(
                    "INSERT INTO orders (customer, amount, note, updated) VALUES (%s,%s,%s,%s)",
                    [
                        (
                            f"c{i % 977}",
                            Decimal(i % 10000) / 100,
                            f"note {i}",
                            f"2024-01-01 00:00:{i % 60:02d}.{i % 1000000:06d}",
                        )
                        for i in range(start, start + count)
                    ],
                )
            else:
                cur.executemany(
                    "INSERT INTO readings (region, seq, value, label) VALUES (%s,%s,%s,%s)",
                    [
                        (REGIONS[i % len(REGIONS)], i // len(REGIONS), i * 0.25, f"l{i}")
                        for i in range(start, start + count)
                    ],
                )


class Writer(threading.Thread):
    """Inserts, updates, deletes and primary-key updates at random keys, all the time."""

    def __init__(
        self,
        server: TestServer,
        database: str,
        kind: TableKind,
        rows: int,
        seed: int = 7,
        ops_per_second: float = 300.0,
    ) -> None:
        super().__init__(daemon=True)
        self.server, self.database, self.kind, self.rows = server, database, kind, rows
        self.random = random.Random(seed)
        self.stop_event = threading.Event()
        self.operations = 0
        self.error: BaseException | None = None
        self.next_unique = 10_000_000
        self.interval = 1.0 / ops_per_second

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)
        if self.error:
            raise self.error

    def run(self) -> None:
        try:
            with self.server.admin(self.database) as conn, conn.cursor() as cur:
                while not self.stop_event.wait(self.interval):
                    self._one(cur)
                    self.operations += 1
        except BaseException as err:  # surfaced by stop()
            self.error = err

    def _unique(self) -> int:
        self.next_unique += 1
        return self.next_unique

    def _one(self, cur) -> None:
        r = self.random.random()
        try:
            if self.kind is AUTO_INCREMENT:
                self._orders(cur, r)
            else:
                self._readings(cur, r)
        except pymysql.err.IntegrityError:
            pass  # a random key collided; the next operation goes on

    def _orders(self, cur, r: float) -> None:
        key = self.random.randint(1, self.rows)
        if r < 0.25:
            cur.execute(
                "INSERT INTO orders (customer, amount, note, updated) VALUES (%s, %s, %s, NOW(6))",
                (f"new{self.operations}", Decimal(self.random.randint(0, 99999)) / 100, "ins"),
            )
        elif r < 0.6:
            cur.execute(
                "UPDATE orders SET amount = amount + 1, note = %s, updated = NOW(6) WHERE id = %s",
                (f"upd{self.operations}", key),
            )
        elif r < 0.8:
            cur.execute("DELETE FROM orders WHERE id = %s", (key,))
        elif r < 0.95:
            cur.execute("UPDATE orders SET id = %s WHERE id = %s", (self._unique(), key))
        else:  # a multi-row transaction across the table
            cur.execute("BEGIN")
            cur.execute(
                "UPDATE orders SET note = 'multi' WHERE id BETWEEN %s AND %s", (key, key + 20)
            )
            cur.execute("DELETE FROM orders WHERE id = %s", (key + 21,))
            cur.execute("COMMIT")

    def _readings(self, cur, r: float) -> None:
        region = self.random.choice(REGIONS)
        seq = self.random.randint(0, self.rows // len(REGIONS))
        if r < 0.25:
            cur.execute(
                "INSERT INTO readings (region, seq, value, label) VALUES (%s, %s, %s, 'ins')",
                (region, self._unique(), self.random.random()),
            )
        elif r < 0.55:
            cur.execute(
                "UPDATE readings SET value = value + 1, label = %s WHERE region = %s AND seq = %s",
                (f"upd{self.operations}", region, seq),
            )
        elif r < 0.75:
            cur.execute("DELETE FROM readings WHERE region = %s AND seq = %s", (region, seq))
        elif r < 0.9:
            cur.execute(
                "UPDATE readings SET seq = %s WHERE region = %s AND seq = %s",
                (self._unique(), region, seq),
            )
        else:  # same key under the collation, new spelling: 'north' -> 'NORTH'
            cur.execute(
                "UPDATE readings SET region = UPPER(region) WHERE region = %s AND seq = %s",
                (region, seq),
            )


def server_key(kind: TableKind, row: dict) -> tuple:
    """The key as the server compares it (general_ci: case and trailing spaces ignored)."""
    return tuple(
        row[c].casefold().rstrip(" ") if isinstance(row[c], str) else row[c] for c in kind.key
    )


def table_rows(server: TestServer, database: str, kind: TableKind) -> dict[tuple, tuple]:
    rows = server.query(f"SELECT {', '.join(kind.columns)} FROM {kind.name}", database=database)
    result = {}
    for values in rows:
        row = dict(zip(kind.columns, values))
        if kind is AUTO_INCREMENT:
            row["amount"] = None if row["amount"] is None else Decimal(row["amount"])
        result[server_key(kind, row)] = tuple(row[c] for c in kind.columns)
    return result


def replay(kind: TableKind, output: list[dict]) -> dict[tuple, tuple]:
    """Per key the row with the highest _seq; deletes dropped."""
    latest: dict[tuple, dict] = {}
    for row in output:
        key = server_key(kind, row)
        if key not in latest or row["_seq"] > latest[key]["_seq"]:
            latest[key] = row
    return {
        key: tuple(row[c] for c in kind.columns) for key, row in latest.items() if row["_op"] != "d"
    }


def check_exactly_once(server, database: str, kind: TableKind, output: list[dict]) -> None:
    """(a) the replay equals SELECT *; (b) no duplicate _seq, one 'r' per key at most,
    and per key _seq grows with the batch order."""
    expected = table_rows(server, database, kind)
    got = replay(kind, output)
    missing = sorted(set(expected) - set(got))[:5]
    extra = sorted(set(got) - set(expected))[:5]
    different = [k for k in expected if k in got and expected[k] != got[k]][:5]
    assert not missing and not extra and not different, (
        f"replay differs from the table: missing {missing}, extra {extra}, "
        f"different {[(k, expected[k], got[k]) for k in different]}"
    )
    seqs = [row["_seq"] for row in output]
    assert len(seqs) == len(set(seqs)), "a _seq appears twice"
    reads = defaultdict(int)
    per_key = defaultdict(list)
    for row in output:
        key = server_key(kind, row)
        if row["_op"] == "r":
            reads[key] += 1
        per_key[key].append((row["_batch"], row["_seq"]))
    doubles = [k for k, n in reads.items() if n > 1]
    assert not doubles, f"keys read twice by the snapshot: {doubles[:5]}"
    for key, events in per_key.items():
        ordered = sorted(events)
        assert [s for _, s in ordered] == sorted(s for _, s in ordered), (
            f"_seq of key {key} does not grow with the batch order: {ordered}"
        )
