"""Cutting a dense integer key by arithmetic (coordinator/splitter.py): the chunks cover
the key space from its first value on without gap or overlap, hold ``chunk_size`` rows
at the table's density, end below ``last`` (the open last chunk takes later inserts) and
respect a bound; sparse keys and small tables keep the server's counting query."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.catalog import ColumnSpec, TableSchema
from coordinator.splitter import DenseKeys, dense_keys


def _table(rows: int, data_type: str = "bigint") -> TableSchema:
    key = ColumnSpec("id", data_type, data_type, False)
    return TableSchema("db", "t", (key,), ("id",), estimated_rows=rows)


@settings(deadline=None)  # no timing in tests; sizes keep it to at most ~20,000 chunks
@given(
    first=st.integers(-(2**40), 2**40),
    span=st.integers(1, 10**6),
    density=st.floats(1.0, 2.0),
    chunk_size=st.integers(50, 5000),
    bound_at=st.none() | st.integers(0, 10**6),
)
def test_arithmetic_chunks_cover_the_keys_without_gap_or_overlap(
    first, span, density, chunk_size, bound_at
):
    keys = DenseKeys(first, first + span - 1, density)
    bound = None if bound_at is None else (first + bound_at,)
    step = max(1, round(chunk_size * density))
    chunks, lo = [], None
    while True:
        hi = keys.chunk_end(lo, bound, chunk_size)
        chunks.append((lo, hi if hi is not None else bound))
        if hi is None:
            break
        assert hi[0] - (first - 1 if lo is None else lo[0]) == step
        assert hi[0] < keys.last and (bound is None or hi[0] < bound[0])
        lo = hi
        assert len(chunks) <= span // step + 2
    assert chunks[0][0] is None
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))  # contiguous


def test_only_dense_single_integer_keys_of_big_tables_are_cut_by_arithmetic():
    assert dense_keys(_table(1_000_000), 1, 1_000_000, 65536) == DenseKeys(1, 1_000_000, 1.0)
    assert dense_keys(_table(1_000_000), 1, 1_800_000, 100).keys_per_row == 1.8
    assert dense_keys(_table(1_000_000), 1, 3_000_000, 100) is None  # sparse: count rows
    assert dense_keys(_table(1_000), 1, 1_000, 65536) is None  # small: counting is cheap
    assert dense_keys(_table(0), 1, 1_000_000, 100) is None  # no estimate
    assert dense_keys(_table(10_000), None, None, 100) is None  # empty table
    # The statistics may overestimate the rows: never fewer keys than rows per chunk.
    assert dense_keys(_table(2_000_000), 1, 1_000_000, 100).keys_per_row == 1.0
