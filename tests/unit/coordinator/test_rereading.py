"""Re-reads on the driver (coordinator.rereading): their chunks are planned after the main
snapshot and the joining tables', next to the stream, cover the table once, carry their
condition, and are found again from the batch's two offsets alone; requests are taken
once, wait when there is no room, and are cancelled. Pure planning: fake key boundaries
(dense integer keys) and a fake signal table."""

from __future__ import annotations

import json
import logging

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.offsets import BinlogPosition, SnapshotCursor, SourceOffset
from cdc_source.options import parse_options
from cdc_source.rereads import MAX_REREADS, SNAPSHOT, STOP, Request, Rereads, write_request_file
from coordinator.planner import BatchBudget, Planner
from coordinator.rereading import (
    RequestInbox,
    plan_reread,
    reread_chunks,
    rereads_run,
)
from coordinator.table_set import Membership

ROWS = 1000
CHUNK = 100


def _table(name: str) -> TableSchema:
    key = ColumnSpec("id", "bigint", "bigint(20)", False)
    return TableSchema("shop", name, (key,), ("id",), estimated_rows=ROWS)


class DenseKeys:
    """Keys 1..ROWS, answering like the server's boundary query."""

    def chunk_end(self, schema, lo, bound, rows):
        end = (0 if lo is None else lo[0]) + rows
        limit = ROWS if bound is None else min(bound[0], ROWS)
        return (end,) if end <= limit and (bound is None or end < bound[0]) else None


class Captured:
    def __init__(self, *tables: TableSchema) -> None:
        self.tables = {t.name: t for t in tables}

    def schema(self, name: str) -> TableSchema:
        return self.tables[name]


ORDERS, ITEMS = _table("orders"), _table("items")
MEMBERS = Membership(frozenset({ORDERS.name, ITEMS.name}))


def _position(n: int) -> BinlogPosition:
    return BinlogPosition("binlog.000003", 1000 + n, "", 0)


def test_rereads_wait_for_the_main_snapshot_and_the_joining_tables():
    streaming = SourceOffset(_position(0), None, "f")
    assert rereads_run(streaming, None, MEMBERS)
    snapshotting = SourceOffset(_position(0), SnapshotCursor(ORDERS.name, (5,)), "f")
    assert not rereads_run(snapshotting, None, MEMBERS)
    joining = SnapshotCursor("shop.joining", None)
    assert not rereads_run(SourceOffset(_position(0), None, "f", added=joining), None, MEMBERS)
    assert not rereads_run(streaming, joining, MEMBERS)
    waiting = Membership(MEMBERS.owned, pending=("shop.later",))
    assert not rereads_run(streaming, None, waiting)


def test_a_reread_is_planned_batch_by_batch_next_to_the_stream_and_rebuilt_from_offsets():
    captured = Captured(ORDERS, ITEMS)
    planner = Planner([ORDERS, ITEMS], DenseKeys(), CHUNK)
    request = Request(SNAPSHOT, (ORDERS.name, ITEMS.name), ((ORDERS.name, "id % 3 = 0"),))
    rereads = Rereads().taking(request)
    start = SourceOffset(_position(0), None, "f")
    budget = BatchBudget.of_chunks(3)
    read: dict[str, list] = {ORDERS.name: [], ITEMS.name: []}
    for n in range(1, 20):
        planned = plan_reread(planner, captured, rereads, MEMBERS, budget)
        end = SourceOffset(_position(n), None, "f", rereads=planned)  # the binlog moves on
        # A restarted driver finds the same chunks from the two offsets alone.
        fresh = Planner([ORDERS, ITEMS], DenseKeys(), CHUNK)
        chunks = reread_chunks(fresh, captured, start, end)
        assert chunks == reread_chunks(planner, captured, start, end)
        assert len(chunks) <= 3
        for chunk in chunks:
            read[chunk.table.name].append((chunk.lo, chunk.hi, chunk.condition))
            assert chunk.reread == (1 if chunk.table is ORDERS else 2)
        start, rereads = end, planned.without_finished()
        if not rereads.queue:
            break
    for table, condition in ((ORDERS, "id % 3 = 0"), (ITEMS, None)):
        ranges = read[table.name]
        assert ranges[0][0] is None and ranges[-1][1] is None
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), "a gap or an overlap"
        assert {c for _, _, c in ranges} == {condition}
    assert [r.done for r in start.rereads.queue] == [True]  # kept for its last batch only
    assert start.rereads.count == 2


def test_a_reread_of_a_table_not_captured_is_dropped(caplog):
    captured = Captured(ORDERS)
    planner = Planner([ORDERS], DenseKeys(), CHUNK)
    rereads = Rereads().taking(Request(SNAPSHOT, ("shop.gone", ORDERS.name)))
    members = Membership(frozenset({ORDERS.name}))
    with caplog.at_level(logging.WARNING, logger="cdc_mysql"):
        planned = plan_reread(planner, captured, rereads, members, BatchBudget.of_chunks(1))
    assert [r.table for r in planned.queue] == [ORDERS.name]
    assert planned.queue[0].after == (CHUNK,)
    assert "shop.gone" in caplog.text


def _options(tmp_path, **more) -> object:
    return parse_options(
        {
            "hostname": "db",
            "username": "cdc",
            "password": "pw",
            "database-name": "shop",
            "table-name": r"shop\..*",
            "signal.directory": str(tmp_path),
            **more,
        }
    )


def test_request_files_are_taken_once_in_order_and_wait_for_room(tmp_path, caplog):
    inbox = RequestInbox(_options(tmp_path), select=None)
    for i in range(MAX_REREADS + 1):
        write_request_file(str(tmp_path), Request(SNAPSHOT, (f"shop.t{i}",)))
    (tmp_path / "signals" / "00000000000000000001-1.json").write_text("{broken")
    with caplog.at_level(logging.DEBUG, logger="cdc_mysql"):
        taken = inbox.take(Rereads())
    assert [r.table for r in taken.queue] == [f"shop.t{i}" for i in range(MAX_REREADS)]
    assert "is ignored" in caplog.text and "waits" in caplog.text
    assert inbox.take(taken) == taken  # nothing taken twice, the last one still waits
    room = taken.advanced(None)  # the first re-read finished
    after = inbox.take(room)
    assert [r.table for r in after.queue] == [f"shop.t{i}" for i in range(1, MAX_REREADS + 1)]
    inbox.committed(SourceOffset(_position(1), None, "f", rereads=after))
    assert not list((tmp_path / "signals").glob("*.json"))
    write_request_file(str(tmp_path), Request(STOP, ()), after=after.file)
    assert inbox.take(after).queue == ()


def test_signal_rows_are_read_after_a_write_once_each(tmp_path):
    rows = [
        (1, "log", "{}"),
        (2, "execute-snapshot", json.dumps({"data-collections": ["shop.orders"]})),
        (3, "execute-snapshot", "{broken"),
    ]
    selects = []

    def select(sql, params):
        selects.append(params)
        return [r for r in rows if r[0] > params[0]][: params[1]]

    options = _options(tmp_path, **{"signal.data.collection": "shop.cdc_signals"})
    inbox = RequestInbox(options, select)
    taken = inbox.take(Rereads())  # a run looks once when it starts
    assert [r.table for r in taken.queue] == ["shop.orders"] and taken.signal_id == 3
    assert inbox.take(taken) == taken and len(selects) == 1  # no write seen: no look
    rows.append((4, "stop-snapshot", "{}"))
    inbox.signal_table_written()
    stopped = inbox.take(taken)
    assert stopped.queue == () and stopped.signal_id == 4
    looks = len(selects)
    for _ in range(5):
        inbox.take(stopped)
    assert len(selects) - looks <= 2  # a few more looks after a write, then none


def test_a_signal_table_without_integer_ids_is_refused_clearly(tmp_path):
    import pytest

    from cdc_source.rereads import RequestError

    options = _options(tmp_path, **{"signal.data.collection": "shop.cdc_signals"})
    inbox = RequestInbox(options, lambda sql, params: [("ad-hoc-1", "execute-snapshot", "{}")])
    with pytest.raises(RequestError, match="increasing integer id"):
        inbox.take(Rereads())
