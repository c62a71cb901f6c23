"""Where the next snapshot chunk ends, asked of the server (or of a fake in tests).

The chunk end is the key of the ``chunk_size``-th row after ``lo`` in the server's own
primary-key order, so chunks hold exactly ``chunk_size`` rows when planned, whatever the
key type, collation or distribution. Rows inserted later into a planned range can only
grow it by what was written meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
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


class ServerBoundarySource:
    """:class:`BoundarySource` backed by a live connection."""

    def __init__(self, connect: Callable[[], object], policy: RetryPolicy | None = None) -> None:
        self._session = Reconnecting(
            connect, policy or RetryPolicy(max_retries=0), "finding a snapshot chunk's end"
        )

    def chunk_end(
        self, schema: TableSchema, lo: tuple | None, bound: tuple | None, chunk_size: int
    ) -> tuple | None:
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
