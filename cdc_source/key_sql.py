"""SQL predicates on a (possibly composite) primary key, compared by the server itself.

Row constructors ``(a, b) > (x, y)`` are not range-optimized by every server version, so
the lexicographic comparison is spelled out; the column sits on the left, so the
server compares with the column's own collation.
"""

from __future__ import annotations

from cdc_source.catalog import TableSchema
from cdc_source.mysql_client import quote_ident


def _compare(columns: list[str], values: tuple, strict_op: str, last_op: str) -> tuple[str, list]:
    """Lexicographic ``key <op> values``: strict_op on leading columns, last_op on the last."""
    column = quote_ident(columns[0])
    if len(columns) == 1:
        return f"{column} {last_op} %s", [values[0]]
    rest_sql, rest_params = _compare(columns[1:], values[1:], strict_op, last_op)
    return (
        f"({column} {strict_op} %s OR ({column} = %s AND {rest_sql}))",
        [values[0], values[0], *rest_params],
    )


def key_greater_than(schema: TableSchema, values: tuple) -> tuple[str, list]:
    return _compare(list(schema.primary_key), tuple(values), ">", ">")


def key_at_most(schema: TableSchema, values: tuple) -> tuple[str, list]:
    return _compare(list(schema.primary_key), tuple(values), "<", "<=")


def key_range(schema: TableSchema, lo: tuple | None, hi: tuple | None) -> tuple[str, list]:
    """``lo < key <= hi`` with open ends for ``None``; ``'1=1'`` when both are open."""
    clauses, params = [], []
    if lo is not None:
        sql, p = key_greater_than(schema, lo)
        clauses.append(sql)
        params.extend(p)
    if hi is not None:
        sql, p = key_at_most(schema, hi)
        clauses.append(sql)
        params.extend(p)
    return (" AND ".join(clauses) or "1=1"), params


def order_by_key(schema: TableSchema) -> str:
    return ", ".join(quote_ident(c) for c in schema.primary_key)
