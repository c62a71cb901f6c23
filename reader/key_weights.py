"""The server's collation weights for string key values, fetched in bulk and cached.

Python cannot reproduce every MySQL collation, so the server is asked: one query per
batch of unseen values. Only collated string key columns need this; numeric, temporal
and binary keys compare the same in Python as on the server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.keys import needs_weight, sort_key, weight_sql
from cdc_source.retry import Reconnecting, RetryPolicy

MAX_VALUES_PER_QUERY = 500
MAX_CACHED = 200_000


class WeightResolver:
    def __init__(self, connect: Callable[[], object], policy: RetryPolicy | None = None) -> None:
        self._session = Reconnecting(
            connect, policy or RetryPolicy(max_retries=0), "reading collation weights"
        )
        self._cache: dict[tuple[str, str, int, str], bytes] = {}

    @staticmethod
    def _cache_key(column: ColumnSpec, value: str) -> tuple[str, str, int, str]:
        return (column.collation or "", column.charset or "", column.char_length or 0, value)

    def prefetch(self, pairs: Iterable[tuple[ColumnSpec, str]]) -> None:
        missing: dict[tuple, tuple[ColumnSpec, str]] = {}
        for column, value in pairs:
            key = self._cache_key(column, value)
            if key not in self._cache:
                missing[key] = (column, value)
        if not missing:
            return
        if len(self._cache) + len(missing) > MAX_CACHED:
            self._cache.clear()
        items = list(missing.items())
        for start in range(0, len(items), MAX_VALUES_PER_QUERY):
            batch = items[start : start + MAX_VALUES_PER_QUERY]
            select = ", ".join(weight_sql(column, "%s") for _, (column, _) in batch)
            params = [value for _, (_, value) in batch]
            row = self._session.run(lambda conn, q=f"SELECT {select}", p=params: _one(conn, q, p))
            for (key, _), weight in zip(batch, row):
                self._cache[key] = bytes(weight)

    def weight(self, column: ColumnSpec, value: str) -> bytes:
        key = self._cache_key(column, value)
        if key not in self._cache:
            self.prefetch([(column, value)])
        return self._cache[key]

    def sort_keys(self, schema: TableSchema, keys: list[tuple]) -> list[bytes]:
        """Sort keys of many keys of one table, with one round trip for unseen strings."""
        weighted = [(i, c) for i, c in enumerate(schema.key_columns) if needs_weight(c)]
        if weighted:
            self.prefetch((c, key[i]) for key in keys for i, c in weighted)
        return [sort_key(schema, key, self.weight) for key in keys]

    def optional_sort_keys(self, schema: TableSchema, keys: list[tuple | None]) -> list:
        """Like :meth:`sort_keys`, with ``None`` kept in place (an absent image or bound)."""
        encoded = iter(self.sort_keys(schema, [k for k in keys if k is not None]))
        return [None if k is None else next(encoded) for k in keys]

    def image_sort_keys(
        self, schema: TableSchema, images: list[tuple[dict | None, dict | None]]
    ) -> list[tuple[bytes | None, bytes | None]]:
        """(before, after) sort keys of many row changes of one table, in one round trip."""
        flat = self.optional_sort_keys(
            schema, [key_of(schema, image) for pair in images for image in pair]
        )
        return list(zip(flat[0::2], flat[1::2]))

    def close(self) -> None:
        self._session.close()


def _one(conn, query: str, params: list) -> tuple:
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchone()


def key_of(schema: TableSchema, image: dict | None) -> tuple | None:
    if image is None:
        return None
    return tuple(image.get(name) for name in schema.primary_key)
