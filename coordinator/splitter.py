"""Where the next snapshot chunk ends, asked of the server (or of a fake in tests).

The chunk end is the key of the ``chunk_size``-th row after ``lo`` in the server's own
primary-key order, so chunks hold exactly ``chunk_size`` rows when planned, whatever the
key type, collation or distribution. Rows inserted later into a planned range can only
grow it by what was written meanwhile.

That query walks the clustered index row by row (about 80 ms per million rows here, on
the driver, before the batch's tasks start). A single integer key whose values are dense
(no more than two key values per row, from ``MIN``/``MAX`` and the table's row
estimate) is cut by arithmetic instead, as Flink CDC's even split does: chunks of
``chunk_size`` rows times that density. Chunk ends need not be stable: a batch's rows
are its key range, however it is cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cdc_source.catalog import TableSchema
from cdc_source.key_sql import key_at_most, key_greater_than, order_by_key
from cdc_source.mysql_client import quote_ident
from cdc_source.retry import Reconnecting, RetryPolicy


class BoundarySource(Protocol):
    def chunk_end(
        self, schema: TableSchema, lo: tuple | None, bound: tuple | None, chunk_size: int
    ) -> tuple | None:
        """The last key of the chunk starting after ``lo``, or ``None`` if fewer than
        ``chunk_size`` rows remain up to ``bound`` (inclusive; ``None``: table end)."""


MAX_KEYS_PER_ROW = 2.0
_INTEGER_KEYS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")


@dataclass(frozen=True)
class DenseKeys:
    """A single integer key spanning ``first``..``last`` at ``keys_per_row`` values a row."""

    first: int
    last: int
    keys_per_row: float

    def chunk_end(self, lo: tuple | None, bound: tuple | None, chunk_size: int) -> tuple | None:
        """:meth:`BoundarySource.chunk_end` by arithmetic: ``None`` once the chunk would
        reach ``last`` (the open last chunk takes rows inserted above it later) or
        ``bound``."""
        start = self.first - 1 if lo is None else int(lo[0])
        end = start + max(1, round(chunk_size * self.keys_per_row))
        if end >= self.last or (bound is not None and end >= int(bound[0])):
            return None
        return (end,)


def dense_keys(schema: TableSchema, first, last, chunk_size: int) -> DenseKeys | None:
    """The table's key span when it can be cut by arithmetic, else None."""
    rows = schema.estimated_rows
    if first is None or last is None or rows <= 0:
        return None
    keys_per_row = (int(last) - int(first) + 1) / rows
    if keys_per_row > MAX_KEYS_PER_ROW or rows < 2 * chunk_size:
        return None  # sparse keys, or a table small enough that counting costs nothing
    return DenseKeys(int(first), int(last), max(keys_per_row, 1.0))


class ServerBoundarySource:
    """:class:`BoundarySource` backed by a live connection."""

    def __init__(self, connect: Callable[[], object], policy: RetryPolicy | None = None) -> None:
        self._session = Reconnecting(
            connect, policy or RetryPolicy(max_retries=0), "finding a snapshot chunk's end"
        )
        self._dense: dict[str, DenseKeys | None] = {}

    def _dense_keys(self, schema: TableSchema, chunk_size: int) -> DenseKeys | None:
        if schema.name not in self._dense:
            keys = schema.key_columns
            span = None
            if len(keys) == 1 and keys[0].data_type in _INTEGER_KEYS:
                key = quote_ident(keys[0].name)
                query = f"SELECT MIN({key}), MAX({key}) FROM {schema.quoted}"
                first, last = self._session.run(lambda conn: _fetch_one(conn, query, []))
                span = dense_keys(schema, first, last, chunk_size)
            self._dense[schema.name] = span
        return self._dense[schema.name]

    def chunk_end(
        self, schema: TableSchema, lo: tuple | None, bound: tuple | None, chunk_size: int
    ) -> tuple | None:
        dense = self._dense_keys(schema, chunk_size)
        if dense is not None:
            return dense.chunk_end(lo, bound, chunk_size)
        clauses, params = [], []
        if lo is not None:
            sql, p = key_greater_than(schema, lo)
            clauses.append(sql)
            params += p
        if bound is not None:
            sql, p = key_at_most(schema, bound)
            clauses.append(sql)
            params += p
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        columns = ", ".join(quote_ident(c) for c in schema.primary_key)
        query = (
            f"SELECT {columns} FROM {schema.quoted} {where} ORDER BY {order_by_key(schema)} "
            f"LIMIT 1 OFFSET {int(chunk_size) - 1}"
        )
        row = self._session.run(lambda conn: _fetch_one(conn, query, params))
        return None if row is None else tuple(row)

    def close(self) -> None:
        self._session.close()


def _fetch_one(conn, query: str, params: list) -> tuple | None:
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchone()
