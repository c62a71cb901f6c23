"""The lake tables of ``cdc_source.delta`` on local Delta tables, slice by slice, without
Spark or a server (an INT key's ``_key`` is its sort key: no collation weights): the
slicing of a batch, the application transactions of slices, and what each mode makes of a
sequence of changes, against the same changes folded in Python."""

from __future__ import annotations

import datetime as dt

import deltalake
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.delta.change_log import ChangeLogTable
from cdc_source.delta.history_table import HistoryTable
from cdc_source.delta.lake_table import SHARED
from cdc_source.delta.mirror_table import MirrorTable
from cdc_source.delta.slices import (
    StagedPart,
    _filesystem,
    cut,
    read_staged,
    remove_batches_before,
    write_part,
)
from cdc_source.delta.transactions import (
    SLICE_LIMIT,
    app_id_of,
    batch_applied,
    slice_applied,
    slice_version,
)
from cdc_source.keys import sort_key

TABLE = TableSchema(
    "db",
    "t",
    (ColumnSpec("id", "int", "int(11)", False), ColumnSpec("v", "int", "int(11)", True)),
    ("id",),
)
FIELDS = [pa.field("id", pa.int32()), pa.field("v", pa.int32())]
SCHEMA = pa.schema(
    FIELDS
    + [pa.field("_op", pa.string()), pa.field("_seq", pa.string()), pa.field("_ts_ms", pa.int64())]
    + [pa.field("_key", pa.binary())]
)


def _changes(rows) -> pa.Table:
    """(op, id, v, seq number, seconds) as a slice of changes."""
    return pa.table(
        {
            "id": pa.array([r[1] for r in rows], pa.int32()),
            "v": pa.array([r[2] for r in rows], pa.int32()),
            "_op": [r[0] for r in rows],
            "_seq": [f"{r[3]:08d}" for r in rows],
            "_ts_ms": pa.array([r[4] * 1000 for r in rows], pa.int64()),
            "_key": [None if r[1] is None else sort_key(TABLE, (r[1],)) for r in rows],
        },
        schema=SCHEMA,
    )


# Two slices of one batch and one of the next: inserts, updates, deletes, a key deleted and
# inserted again, and a reset in the middle of the second slice.
SLICES = [
    [("r", 1, 10, 1, 100), ("r", 2, 20, 2, 100), ("r", 3, 30, 3, 100), ("u", 1, 11, 4, 101)],
    [("d", 2, 20, 5, 102), ("i", 2, 21, 6, 103), ("u", 3, 31, 7, 104), ("t", None, None, 8, 105),
     ("i", 4, 40, 9, 106), ("u", 4, 41, 10, 107)],
    [("d", 4, 41, 11, 108), ("i", 5, 50, 12, 109), ("i", 4, 42, 13, 110)],
]  # fmt: skip
PLAN = [(0, 0, False), (0, 1, True), (1, 0, True)]  # (batch, slice, last)


def _apply(lake, slices=SLICES, plan=PLAN, commits=True) -> None:
    for rows, (batch, index, last) in zip(slices, plan):
        outcome = lake.apply(_changes(rows), batch, index, last)
        assert outcome.committed == commits


def _rows(path, order=("_seq",)) -> list[dict]:
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return table.sort_by([(c, "ascending") for c in order]).to_pylist()


def _time(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


def test_a_batch_is_cut_into_slices_of_the_size_asked_the_last_one_marked():
    tables = [pa.table({"x": list(range(n, n + 4))}) for n in range(0, 12, 4)]
    slices = list(cut(tables, 5))
    assert [(i, t.column("x").to_pylist(), last) for i, t, last in slices] == [
        (0, [0, 1, 2, 3, 4], False),
        (1, [5, 6, 7, 8, 9], False),
        (2, [10, 11], True),
    ]
    assert [(i, t.num_rows, last) for i, t, last in cut(tables, 6)] == [(0, 6, False), (1, 6, True)]
    assert list(cut([], 5)) == []
    with pytest.raises(ValueError):
        list(cut(tables, 0))


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 12), max_size=12), rows=st.integers(1, 9))
def test_a_cut_keeps_every_row_in_order_in_slices_of_the_size_asked(sizes, rows):
    """The slices are the rows in order, ``rows`` each but the last, which alone is marked."""

    def tables():
        first = 0
        for size in sizes:
            yield pa.table({"x": list(range(first, first + size))})
            first += size

    total = sum(sizes)
    seen = []
    for index, part, last in cut(tables(), rows):
        assert index == len(seen)
        assert last == (len(seen) * rows + part.num_rows == total)
        assert part.num_rows == rows or last
        seen.append(part.column("x").to_pylist())
    assert [x for part in seen for x in part] == list(range(total))


def test_a_full_slice_leaves_at_the_first_row_after_it_not_when_the_next_is_full():
    read = []

    def tables():
        for x in range(10):
            read.append(x)
            yield pa.table({"x": [x]})

    slices = cut(tables(), 3)
    index, first, last = next(slices)
    assert (index, first.column("x").to_pylist(), last) == (0, [0, 1, 2], False)
    assert read == [0, 1, 2, 3]  # one row past it read: the next slice is not gathered yet


def test_a_staged_partition_is_read_back_equal_in_partition_order(tmp_path):
    """Each task's batches become one file; the driver reads the parts in the order of
    their partitions, whatever order the tasks finished in, and an empty one leaves none."""
    empty = pa.RecordBatch.from_pylist([], schema=SCHEMA)
    parts = [
        write_part([_changes(rows).to_batches()[0], empty], str(tmp_path), partition, 7)
        for partition, rows in reversed(list(enumerate(SLICES)))
    ]
    nothing = write_part([empty], str(tmp_path), len(SLICES), 7)
    assert nothing.rows == 0 and not nothing.path
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"part-{i:06d}.arrow" for i in range(len(SLICES))
    ]
    ordered = sorted(parts, key=lambda part: part.partition)
    read = list(read_staged(str(tmp_path), ordered))
    assert pa.concat_tables(read).equals(pa.concat_tables([_changes(r) for r in SLICES]))


def test_a_staged_file_that_does_not_hold_its_tasks_rows_is_an_error(tmp_path):
    """Another writer sharing the staging directory replaced the file: never read as ours."""
    part = write_part([_changes(SLICES[0]).to_batches()[0]], str(tmp_path), 0, 1)
    claimed = StagedPart(part.partition, part.path, part.rows + 1)
    with pytest.raises(RuntimeError, match="shares the staging directory"):
        list(read_staged(str(tmp_path), [claimed]))


def test_a_second_attempt_of_a_task_keeps_the_first_attempts_file(tmp_path):
    first = write_part([_changes(SLICES[0]).to_batches()[0]], str(tmp_path), 0, 1)
    again = write_part([_changes(SLICES[0]).to_batches()[0]], str(tmp_path), 0, 2)
    assert first == again
    assert [p.name for p in tmp_path.iterdir()] == ["part-000000.arrow"]


def test_the_batches_spark_committed_leave_the_staging_directory(tmp_path):
    for name in ("batch-3", "batch-4", "batch-5", "batch-12", "other"):
        (tmp_path / name).mkdir()
    remove_batches_before(str(tmp_path), 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-12", "batch-5", "other"]
    remove_batches_before(str(tmp_path / "absent"), 5)  # nothing staged yet: nothing to do


def test_staging_paths_are_read_as_pyarrow_opens_them(tmp_path):
    from pyarrow import fs

    local, path = _filesystem(f"file:{tmp_path}")
    assert isinstance(local, fs.LocalFileSystem) and path == str(tmp_path)
    with pytest.raises(ValueError, match="staging="):
        _filesystem("dbfs:/checkpoints/q")


def test_a_slice_is_applied_once_its_version_or_a_later_one_is_in_the_table():
    assert slice_version(3, 0, False) == 3 * SLICE_LIMIT
    assert slice_version(3, 2, True) == 4 * SLICE_LIMIT - 1
    done = slice_version(3, 1, False)
    assert slice_applied(done, 3, 1) and slice_applied(done, 3, 0) and slice_applied(done, 2, 7)
    assert not slice_applied(done, 3, 2) and not batch_applied(done, 3)
    assert batch_applied(slice_version(3, 2, True), 3) and not batch_applied(None, 0)


def test_the_mirror_holds_the_latest_row_of_each_key_after_the_reset(tmp_path):
    lake = MirrorTable(str(tmp_path / "m"), TABLE, "app", fields=FIELDS)
    _apply(lake)
    rows = _rows(tmp_path / "m", ("id",))
    assert [(r["id"], r["v"], r["_seq"]) for r in rows] == [
        (4, 42, "00000013"),
        (5, 50, "00000012"),
    ]
    # Every slice again (a batch Spark runs again): skipped, the table unchanged.
    version = deltalake.DeltaTable(str(tmp_path / "m")).version()
    for rows_, (batch, index, last) in zip(SLICES, PLAN):
        assert not lake.apply(_changes(rows_), batch, index, last).committed
    assert deltalake.DeltaTable(str(tmp_path / "m")).version() == version


def test_the_change_log_holds_each_change_once_even_written_again_by_another_query(tmp_path):
    path = str(tmp_path / "log")
    _apply(ChangeLogTable(path, TABLE, "first", fields=FIELDS))
    # Another query (app id) writing the same changes adds nothing (and commits nothing).
    _apply(ChangeLogTable(path, TABLE, "second", fields=FIELDS), commits=False)
    rows = _rows(path)
    want = [row for slice_ in SLICES for row in slice_]
    assert [(r["_op"], r["id"], r["v"], int(r["_seq"]), r["_ts_ms"] // 1000) for r in rows] == want
    assert [r["_key"] is None for r in rows] == [op == "t" for op, *_ in want]


def test_the_history_holds_every_version_closed_by_the_next_change_of_its_key(tmp_path):
    path = str(tmp_path / "h")
    _apply(HistoryTable(path, TABLE, "app", fields=FIELDS))
    rows = _rows(path)
    got = [
        (r["id"], r["v"], int(r["_seq"]), r["valid_from"], r["valid_to"], r["is_current"])
        for r in rows
    ]
    assert got == [
        (1, 10, 1, _time(100), _time(101), False),
        (2, 20, 2, _time(100), _time(102), False),  # closed by its delete
        (3, 30, 3, _time(100), _time(104), False),
        (1, 11, 4, _time(101), _time(105), False),  # closed by the reset
        (2, 21, 6, _time(103), _time(105), False),  # closed by the reset
        (3, 31, 7, _time(104), _time(105), False),  # closed by the reset
        (4, 40, 9, _time(106), _time(107), False),
        (4, 41, 10, _time(107), _time(108), False),  # closed by its delete, a slice later
        (5, 50, 12, _time(109), None, True),
        (4, 42, 13, _time(110), None, True),
    ]


def test_the_history_applied_slice_by_slice_equals_it_applied_in_one_slice(tmp_path):
    whole = [[row for slice_ in SLICES for row in slice_]]
    _apply(HistoryTable(str(tmp_path / "one"), TABLE, "app", fields=FIELDS), whole, [(0, 0, True)])
    _apply(HistoryTable(str(tmp_path / "many"), TABLE, "app", fields=FIELDS))
    assert _rows(tmp_path / "one") == _rows(tmp_path / "many")


# The first slice's snapshot reads (op r) in a slice of their own.
READS_FIRST = [SLICES[0][:3], SLICES[0][3:], SLICES[1], SLICES[2]]
READS_PLAN = [(0, 0, False), (0, 1, True), (1, 0, False), (1, 1, True)]


CLAIM = "UPDATE TABLE METADATA"  # a query's first write to a table created empty claims it


def _operations(path) -> list[str]:
    return [entry["operation"] for entry in reversed(deltalake.DeltaTable(str(path)).history())]


@pytest.mark.parametrize("kind", [MirrorTable, HistoryTable])
def test_a_slice_of_snapshot_reads_is_appended_and_the_table_is_the_one_a_merge_makes(
    tmp_path, kind
):
    """In a table the query created, a slice of reads alone is a plain append (the table is
    not read); in a table another query created, the same slices are merged; both tables
    end the same."""
    appended = kind(str(tmp_path / "a"), TABLE, "app", fields=FIELDS)
    _apply(appended, READS_FIRST, READS_PLAN)
    creator = kind(str(tmp_path / "m"), TABLE, "creator", fields=FIELDS)
    assert creator.written_alone(creator.table())  # claimed by its first write
    merged = kind(str(tmp_path / "m"), TABLE, "app", fields=FIELDS)
    _apply(merged, READS_FIRST, READS_PLAN)
    assert _rows(tmp_path / "a") == _rows(tmp_path / "m")
    assert _operations(tmp_path / "a")[1:] == [CLAIM, "WRITE", "MERGE", "MERGE", "MERGE"]
    assert "WRITE" not in _operations(tmp_path / "m")
    assert deltalake.DeltaTable(str(tmp_path / "m")).metadata().description == SHARED


def test_a_table_another_query_wrote_to_is_merged_into_even_by_the_query_that_created_it(
    tmp_path,
):
    """Once a second query has written a table, a read of a key it wrote is merged, not
    appended beside it, whichever query reads it."""
    path = str(tmp_path / "m")
    first = MirrorTable(path, TABLE, "first", fields=FIELDS)
    first.apply(_changes([("r", 1, 10, 1, 100)]), 0)
    MirrorTable(path, TABLE, "second", fields=FIELDS).apply(_changes([("r", 2, 20, 2, 100)]), 0)
    first.apply(_changes([("r", 2, 21, 3, 101)]), 1)
    assert [(r["id"], r["v"]) for r in _rows(path, ("id",))] == [(1, 10), (2, 21)]
    assert _operations(path)[1:3] == [CLAIM, "WRITE"]  # the first query's first slice, alone
    assert _operations(path)[-1] == "MERGE"


def test_a_table_created_empty_is_claimed_by_the_first_write_whatever_was_committed_before(
    tmp_path,
):
    """A property set on the empty table (a commit of its own) leaves it unclaimed."""
    lake = MirrorTable(str(tmp_path / "m"), TABLE, "app", fields=FIELDS)
    lake.table().alter.set_table_properties({"delta.logRetentionDuration": "interval 9 days"})
    lake.apply(_changes([("r", 1, 10, 1, 100)]), 0)
    assert _operations(tmp_path / "m")[-2:] == [CLAIM, "WRITE"]


def test_a_new_query_into_a_table_an_earlier_query_wrote_skips_no_batch(tmp_path):
    """A query on a new checkpoint (a new query id, the same path or not) numbers its
    batches from 0 again: none of them is taken for the earlier query's, and its reads of
    keys already there are merged, not appended beside them."""
    path = str(tmp_path / "m")
    earlier = MirrorTable(path, TABLE, app_id_of("query-1", "mirror", TABLE.name), FIELDS)
    earlier.apply(_changes([("r", 1, 10, 1, 100), ("r", 2, 20, 2, 100)]), 0)
    later = MirrorTable(path, TABLE, app_id_of("query-2", "mirror", TABLE.name), FIELDS)
    outcome = later.apply(_changes([("r", 1, 11, 5, 200), ("r", 3, 30, 6, 200)]), 0)
    assert outcome.committed
    assert [(r["id"], r["v"]) for r in _rows(path, ("id",))] == [(1, 11), (2, 20), (3, 30)]
