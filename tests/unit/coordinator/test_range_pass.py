"""The driver's one pass over a batch range (coordinator.range_pass) and the follower
(coordinator.follower), over binlog bytes from tests/support/binlog_encoder.py.

The pass with all its listeners (GTID state, table statements, row limit, XA
transactions) agrees with plain references computed apart on generated event streams:
the batch end by the limit's rule over each transaction's rows, the GTID state by
``apply_gtid_events``, the statements by parsing every QUERY event, the XA watermark by
``cdc_source.binlog.xa.track``. The follower, fed as the binlog grows, answers what the
pass finds over the same range, and holds a summary of one batch at most."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog import constants as c
from cdc_source.binlog import framing
from cdc_source.binlog.ddl import logged_table_changes
from cdc_source.binlog.events import parse_query
from cdc_source.binlog.gtid_scan import apply_gtid_events
from cdc_source.binlog.plain_events import PLAIN_RUN
from cdc_source.binlog.xa import XaTracker, track
from cdc_source.gtid import compact, parse_state
from cdc_source.offsets import BinlogPosition
from coordinator.batch_end import BatchEnds, StreamLimit, bounded
from coordinator.ddl_scan import DdlScan, DdlScanError
from coordinator.follower import Follower
from coordinator.gtid_tracker import GtidListener, GtidTracker, GtidTrackingError
from coordinator.range_pass import Listener, RangePass
from coordinator.xa_watermark import XaListener, XaWatermark
from tests.support import binlog_encoder as enc
from tests.support.small_rows import COLUMNS, UUID, row_image

# -- generated binlogs --------------------------------------------------------------------

_STATEMENTS = [
    "CREATE TABLE shop.t (id INT)",
    "DROP TABLE shop.t",
    "RENAME TABLE shop.a TO shop.orders",
]
_ITEM = st.one_of(
    st.tuples(st.just("rows"), st.integers(1, 6)),
    st.tuples(st.just("other"), st.integers(1, 6)),
    st.tuples(st.just("ddl"), st.sampled_from(_STATEMENTS)),
    st.tuples(st.just("xa_prepare"), st.integers(0, 3)),
    st.tuples(st.just("xa_commit"), st.integers(0, 3)),
    st.tuples(st.just("list"), st.just(0)),
)
_ITEMS = st.lists(_ITEM, min_size=1, max_size=16)


class Writer:
    """Writes generated transactions into a binlog, in MySQL's or MariaDB's shapes."""

    def __init__(self, binlog: enc.BinlogFile, flavor: str) -> None:
        self.binlog, self.flavor = binlog, flavor
        self.number = 50
        self.prepared: set[int] = set()
        if flavor == "mysql":
            binlog.add(c.PREVIOUS_GTIDS, enc.previous_gtids_body({(UUID, ""): [(1, 50)]}))
        else:
            binlog.add(c.MARIADB_GTID_LIST, enc.mariadb_gtid_list_body([(0, 1, 50)]))

    def _gtid(self, standalone: bool = False) -> None:
        self.number += 1
        if self.flavor == "mysql":
            self.binlog.add(c.GTID, enc.mysql_gtid_body(UUID, self.number))
        else:
            flags = 1 if standalone else 0
            self.binlog.add(c.MARIADB_GTID, enc.mariadb_gtid_body(self.number, flags=flags))

    def _rows(self, table: str, table_id: int, rows: int) -> None:
        self.binlog.add(c.TABLE_MAP, enc.table_map_body(table_id, "shop", table, COLUMNS))
        images = b"".join(row_image(self.number * 100 + i, "x") for i in range(rows))
        self.binlog.add(30, enc.rows_body(table_id, len(COLUMNS), images, False, True))

    def write(self, kind: str, value) -> tuple[int, int, int] | None:
        """One transaction; returns (its start, its end, the captured rows it holds), or
        None when it wrote none."""
        begin = self.binlog.pos
        written = self._write(kind, value)
        return None if written is None else (begin, *written)

    def _write(self, kind: str, value) -> tuple[int, int] | None:
        b = self.binlog
        if kind == "list":  # a starting-state event inside the range: no change
            if self.flavor == "mariadb":
                b.add(c.MARIADB_GTID_LIST, enc.mariadb_gtid_list_body([(0, 1, 50)]))
            return None
        if kind == "ddl":
            self._gtid(standalone=True)
            return b.add(c.QUERY, enc.query_body("shop", value)), 0
        xid = f"X'{bytes([0x61 + value]).hex()}',X'',1"
        if kind == "xa_prepare":
            if value in self.prepared:
                return None
            self.prepared.add(value)
            self._gtid()
            b.add(c.QUERY, enc.query_body("shop", f"XA START {xid}"))
            self._rows("orders", 5, 2)
            b.add(c.QUERY, enc.query_body("shop", f"XA END {xid}"))
            return b.add(c.XA_PREPARE, enc.xa_prepare_body(bytes([0x61 + value]))), 2
        if kind == "xa_commit":
            if value not in self.prepared:
                return None
            self.prepared.discard(value)
            self._gtid(standalone=True)
            return b.add(c.QUERY, enc.query_body("shop", f"XA COMMIT {xid}")), 0
        table, table_id = ("orders", 5) if kind == "rows" else ("audit", 6)
        self._gtid()
        self._rows(table, table_id, value)
        return b.add(c.XID, enc.xid_body(self.number)), value if kind == "rows" else 0


def _binlog(items, flavor: str):
    binlog = enc.BinlogFile()
    writer = Writer(binlog, flavor)
    transactions = [t for t in (writer.write(*item) for item in items) if t is not None]
    return binlog, transactions


# -- the references, computed apart -------------------------------------------------------


def _reference_end(start: int, head: int, transactions, limit: StreamLimit) -> int:
    """Where the batch from ``start`` ends by the limit's rule: a boundary is where a
    transaction past the first one begins; the batch ends at the last boundary whose
    rows and bytes before it are within ``limit`` (the first one when none is: a batch
    takes at least one transaction), or at ``head`` when the whole range is within."""
    after = [(begin, rows) for begin, _, rows in transactions if begin >= start]
    best, total = None, 0
    for index, (begin, rows) in enumerate(after):
        if index:
            if not limit.within(total, begin - start):
                return best or begin
            best = begin
        total += rows
    if after and not limit.within(total, head - start):
        return best or head
    return head


def _events(binlog, origin: int, end: int):
    reader, events, _ = enc.FakeDumpSource(binlog).open(binlog.name, origin)
    return reader, [e for e in events if e.end_pos <= end]


def _reference_statements(binlog, start: int, end: int):
    reader, events = _events(binlog, start, end)
    found = []
    for event in events:
        if event.type == c.QUERY:
            query = parse_query(event, reader.format)
            changes = logged_table_changes(query.query, query.schema or "", False, event.where)
            found += [((1, event.end_pos), change) for change in changes]
    return found


def _reference_xa(binlog, origin: int, end: int):
    reader, events = _events(binlog, origin, end)
    tracker = XaTracker()
    track(events, lambda: reader.format, tracker, (1, end))
    return tracker.oldest_unresolved()


def _state_at(binlog, position: int, flavor: str) -> str:
    tracker = GtidTracker(lambda: None, 1, flavor, source=enc.FakeDumpSource(binlog))
    return tracker.state_from_file(BinlogPosition(binlog.name, position))


class FoldingSource(enc.FakeDumpSource):
    """A fake dump with the C splitter, which folds the plain events of the walks that
    read it; counts the plain runs it hands."""

    def __init__(self, binlog, chunk: int = 97) -> None:
        super().__init__(binlog, framing.splitter("native"), chunk)
        self.plain_runs = 0

    def open_runs(self, file, pos, until=None):
        reader, runs, close = super().open_runs(file, pos, until)

        def counted():
            for run in runs:
                run = list(run)
                self.plain_runs += sum(1 for event in run if event.type == PLAIN_RUN)
                yield run

        return reader, counted(), close


def _one_pass(binlog, start: BinlogPosition, head: BinlogPosition, limit, flavor, source=None):
    """The driver's one pass: (end, GTID state, statements, XA watermark)."""
    return _one_pass_counted(binlog, start, head, limit, flavor, source)[:4]


def _one_pass_counted(binlog, start, head, limit, flavor, source=None):
    """:func:`_one_pass`, and the rows the batch takes."""
    source = source or enc.FakeDumpSource(binlog)
    state = parse_state(start.gtids, flavor)
    gtids = GtidListener(state, head)
    scan = DdlScan(lambda: None, 1, source=source)
    statements = scan.listener(start, head)
    rows = BatchEnds(None, 1, {"shop.orders"}, source=source).listener(limit)
    xa = XaListener((start.file, start.pos))
    origin = XaWatermark.origin(start)
    ended = RangePass(source).run(
        (start.file, start.pos), head, [gtids, statements, rows, xa], origin
    )
    end = bounded(head, limit, ended, rows)
    assert len(source.opened) == 1 and source.opened[0] == origin
    taken = rows.taken if ended is not None else rows.rows
    return end, compact(state), scan.changes(start, end), xa.oldest_unresolved(), taken


# A generated range: its transactions, how many to skip before the start, the limit's
# rows and bytes, the flavour.
_RANGES = (
    _ITEMS,
    st.integers(0, 6),
    st.one_of(st.none(), st.integers(1, 12)),
    st.one_of(st.none(), st.integers(60, 3000)),
    st.sampled_from(["mysql", "mariadb"]),
)


@settings(max_examples=100, deadline=None)
@given(*_RANGES)
def test_one_pass_equals_the_references_computed_apart(items, skip, max_rows, max_bytes, flavor):
    binlog, transactions = _binlog(items, flavor)
    if len(transactions) < 2:
        return
    first = transactions[min(skip, len(transactions) - 2)][1]
    origin = (binlog.name, first)
    xa = _reference_xa(binlog, 4, first)  # the watermark at the start, as a batch left it
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, flavor), xa=xa)
    head = BinlogPosition(binlog.name, binlog.pos)
    limit = StreamLimit(max_rows, max_bytes)

    end, gtids, statements, watermark = _one_pass(binlog, start, head, limit, flavor)

    assert end.pos == _reference_end(first, head.pos, transactions, limit)
    assert gtids == _state_at(binlog, end.pos, flavor)
    state = parse_state(start.gtids, flavor)
    _, events = _events(binlog, first, end.pos)
    apply_gtid_events(state, events, (1, end.pos))
    assert gtids == compact(state)
    assert [(p.where, p.change) for p in statements] == _reference_statements(
        binlog, first, end.pos
    )
    origin = xa[1] if xa else origin[1]
    assert watermark == _reference_xa(binlog, origin, end.pos)
    assert watermark == _reference_xa(binlog, 4, end.pos)


NATIVE = pytest.mark.skipif(
    not framing.native_available(), reason="the C splitter that folds plain events is not built"
)


@NATIVE
@settings(max_examples=100, deadline=None)
@given(*_RANGES, st.sampled_from([97, 4096, 1 << 20]))
def test_a_pass_folding_plain_events_finds_what_a_pass_over_every_event_finds(
    items, skip, max_rows, max_bytes, flavor, chunk
):
    binlog, transactions = _binlog(items, flavor)
    if len(transactions) < 2:
        return
    first = transactions[min(skip, len(transactions) - 2)][1]
    xa = _reference_xa(binlog, 4, first)
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, flavor), xa=xa)
    head = BinlogPosition(binlog.name, binlog.pos)
    limit = StreamLimit(max_rows, max_bytes)

    every_event = _one_pass_counted(binlog, start, head, limit, flavor)
    folded = _one_pass_counted(binlog, start, head, limit, flavor, FoldingSource(binlog, chunk))

    assert folded == every_event


@NATIVE
@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_a_pass_folds_the_rows_of_repeated_transactions_and_counts_them(flavor):
    """Past the first transaction of each table, a transaction's table map, rows event and
    XID are one plain run, whose rows the limit counts: the batch ends where it would."""
    items = [("rows", 2), ("other", 3)] * 20
    binlog, transactions = _binlog(items, flavor)
    first = transactions[0][1]
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, flavor))
    head = BinlogPosition(binlog.name, binlog.pos)
    for limit in (StreamLimit(), StreamLimit(15), StreamLimit(None, 2000)):
        source = FoldingSource(binlog, 1 << 20)
        folded = _one_pass_counted(binlog, start, head, limit, flavor, source)
        assert folded == _one_pass_counted(binlog, start, head, limit, flavor)
        assert source.plain_runs >= 30
    assert folded[0].pos == _reference_end(first, head.pos, transactions, StreamLimit(None, 2000))


@NATIVE
def test_nothing_past_the_passs_end_is_folded_into_a_run_before_it():
    """The pass stops at its end exactly, between two transactions a run would span."""
    binlog, transactions = _binlog([("rows", 1)] * 12, "mariadb")
    first = transactions[0][1]
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, "mariadb"))
    for _, end, _ in transactions[3:]:
        head = BinlogPosition(binlog.name, end)
        folded = _one_pass_counted(
            binlog, start, head, StreamLimit(), "mariadb", FoldingSource(binlog, 1 << 20)
        )
        assert folded[0].pos == end
        assert folded == _one_pass_counted(binlog, start, head, StreamLimit(), "mariadb")


def test_the_pass_refuses_an_end_inside_an_event_or_past_the_binlog():
    binlog, transactions = _binlog([("rows", 2), ("ddl", _STATEMENTS[0])], "mysql")
    first = transactions[0][1]
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, "mysql"))
    for end, error in ((transactions[1][1] - 3, "not where"), (binlog.pos + 50, "ended at")):
        until = BinlogPosition(binlog.name, end)
        with pytest.raises(GtidTrackingError, match=error):
            RangePass(enc.FakeDumpSource(binlog)).run(
                (start.file, start.pos), until, [GtidListener(parse_state("", "mysql"), until)]
            )
        scan = DdlScan(lambda: None, 1, source=enc.FakeDumpSource(binlog))
        with pytest.raises(DdlScanError, match=error):
            scan.changes(start, until)


def test_the_listeners_are_called_in_the_protocols_order():
    """see for the kinds asked, full then boundary at each boundary past the first
    transaction, finish once; a limit that is full ends the batch at the last boundary."""
    binlog, transactions = _binlog([("rows", 1), ("rows", 1), ("rows", 1), ("rows", 1)], "mysql")
    calls = []

    class Recorder(Listener):
        kinds = frozenset({c.XID})

        def see(self, event, reader, where):
            calls.append(("see", where[1]))

        def full(self, where, size):
            calls.append(("full", where[1]))
            return where[1] >= transactions[2][1]

        def boundary(self, where):
            calls.append(("boundary", where[1]))

        def finish(self, end, reached):
            calls.append(("finish", end[1]))

    ends = [end for _, end, _ in transactions]
    start, head = (binlog.name, ends[0]), BinlogPosition(binlog.name, binlog.pos)
    ended = RangePass(enc.FakeDumpSource(binlog)).run(start, head, [Recorder()])
    assert ended == (binlog.name, ends[1])
    assert calls == [
        ("see", ends[1]),
        ("full", ends[1]),
        ("boundary", ends[1]),
        ("see", ends[2]),
        ("full", ends[2]),
        ("finish", ends[1]),
    ]


# -- the follower -------------------------------------------------------------------------


class GrowingDump:
    """A blocking dump over a binlog that grows while it is read: each event as it is
    written; a cut connection ends it."""

    def __init__(self, binlog: enc.BinlogFile, splitter=None) -> None:
        self.binlog = binlog
        self.splitter = splitter  # the C one folds the plain events the follower's walk sets
        self.plain_runs = 0
        self.cond = threading.Condition()
        self.opened: list[tuple[str, int]] = []
        self.hold: int | None = None  # no event ending past this is served while set

    def release(self) -> None:
        with self.cond:
            self.hold = None
            self.cond.notify_all()

    def write(self, write) -> None:
        with self.cond:
            write()
            self.cond.notify_all()

    def open_runs(self, file, pos, until=None, blocking=False, connected=None):
        assert blocking and until is None
        self.opened.append((file, pos))
        cut = threading.Event()
        proxy = SimpleNamespace(format=None, plain=None)
        if connected is not None:
            connected(SimpleNamespace(_sock=SimpleNamespace(shutdown=lambda how: cut.set())))

        def runs():
            after = pos
            while not cut.is_set():
                with self.cond:
                    while self._served() <= after and not cut.is_set():
                        self.cond.wait(0.02)
                    source = enc.FakeDumpSource(self.binlog, self.splitter, chunk=4096)
                    reader, runs, _ = source.open_runs(file, after)
                    reader.plain = proxy.plain
                    served = self._served()
                    batch = [event for run in runs for event in run if event.end_pos <= served]
                    self.plain_runs += sum(1 for event in batch if event.type == PLAIN_RUN)
                proxy.format = reader.format
                if batch:
                    yield batch
                    after = batch[-1].end_pos

        return proxy, runs(), cut.set

    def _served(self) -> int:
        return self.binlog.pos if self.hold is None else min(self.binlog.pos, self.hold)


def _follower(binlog, flavor, catch_up_s=None, grace_s=0.05, splitter=None):
    """A follower over a growing binlog; by default one that always waits for the head,
    so that its answers are those of passes to the head however slow the machine."""
    dump = GrowingDump(binlog, splitter)
    scan = DdlScan(lambda: None, 1)
    follower = Follower(dump, scan, catch_up_s=catch_up_s, grace_s=grace_s)
    return follower, dump


@settings(max_examples=40, deadline=None)
@given(
    st.lists(_ITEMS, min_size=1, max_size=5),
    st.one_of(st.none(), st.integers(1, 10)),
    st.sampled_from(["mysql", "mariadb"]),
    st.sampled_from([None, *([framing.splitter("native")] if framing.native_available() else [])]),
)
def test_the_follower_answers_what_one_pass_finds(chunks, max_rows, flavor, splitter):
    """Writes arrive in chunks; after each, the batch from the last end is planned from
    what the follower reached, and equals the pass over the same range (with the C
    splitter, the follower's plain events folded)."""
    binlog = enc.BinlogFile()
    writer = Writer(binlog, flavor)
    _, first, _ = writer.write("rows", 1)
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, flavor))
    limit = StreamLimit(max_rows)
    tables = frozenset({"shop.orders"})
    follower, dump = _follower(binlog, flavor, splitter=splitter)
    follower.follow(start, tables, limit, flavor, "")
    try:
        for chunk in chunks:
            dump.write(lambda chunk=chunk: [writer.write(*item) for item in chunk])
            head = BinlogPosition(binlog.name, binlog.pos)
            while start.coordinates < head.coordinates:
                reached = follower.answer(start, head, limit, tables)
                assert reached is not None
                end, gtids, statements, xa = _one_pass(binlog, start, head, limit, flavor)
                assert (reached.file, reached.pos) == (end.file, end.pos)
                assert reached.gtids == gtids and reached.xa == xa
                assert reached.statements == statements
                start = BinlogPosition(end.file, end.pos, gtids, xa=xa)
                follower.follow(start, tables, limit, flavor, "")  # where it is already
        assert len(dump.opened) == 1  # never started again
    finally:
        follower.close()


@NATIVE
@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_a_follower_folding_plain_events_answers_what_the_pass_finds(flavor):
    binlog = enc.BinlogFile()
    writer = Writer(binlog, flavor)
    _, first, _ = writer.write("rows", 1)
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, flavor))
    limit, tables = StreamLimit(25), frozenset({"shop.orders"})
    follower, dump = _follower(binlog, flavor, splitter=framing.splitter("native"))
    follower.follow(start, tables, limit, flavor, "")
    try:
        dump.write(lambda: [writer.write(*item) for item in [("rows", 2), ("other", 1)] * 30])
        head = BinlogPosition(binlog.name, binlog.pos)
        while start.coordinates < head.coordinates:
            reached = follower.answer(start, head, limit, tables)
            end, gtids, statements, xa = _one_pass(binlog, start, head, limit, flavor)
            assert (reached.file, reached.pos, reached.gtids, reached.xa) == (
                end.file,
                end.pos,
                gtids,
                xa,
            )
            start = BinlogPosition(end.file, end.pos, gtids, xa=xa)
            follower.follow(start, tables, limit, flavor, "")
        assert dump.plain_runs >= 40
    finally:
        follower.close()


def test_the_follower_holds_one_batch_and_stops_reading_at_the_limit():
    """Far behind the head (a backlog of many transactions), the follower reads up to the
    first boundary past the row limit and waits there: its counts are two numbers, its
    pending GTIDs one transaction's, whatever the backlog."""
    binlog = enc.BinlogFile()
    writer = Writer(binlog, "mysql")
    _, first, _ = writer.write("rows", 1)
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, "mysql"))
    for _ in range(300):
        writer.write("rows", 3)
    limit, tables = StreamLimit(rows=10), frozenset({"shop.orders"})
    follower, dump = _follower(binlog, "mysql")
    follower.follow(start, tables, limit, "mysql", "")
    try:
        run = follower._run
        deadline = time.monotonic() + 10
        while run.frozen is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert run.frozen is not None
        stopped_at = run.walk.reached
        time.sleep(0.2)
        assert run.walk.reached == stopped_at  # waits for the driver
        assert stopped_at[1] < binlog.pos // 10
        assert len(run.gtids.pending) <= 1 and len(run.xa.pending) <= 1  # one transaction
        assert (run.rows.rows, run.rows.taken) == (12, 9)
        head = BinlogPosition(binlog.name, binlog.pos)
        answered = 0
        while start.coordinates < head.coordinates:
            reached = follower.answer(start, head, limit, tables)
            end, gtids, _, _ = _one_pass(binlog, start, head, limit, "mysql")
            assert (reached.pos, reached.gtids) == (end.pos, gtids)
            assert run.rows.rows <= 12 and len(run.gtids.pending) <= 1
            start = BinlogPosition(end.file, end.pos, gtids)
            answered += 1
        assert answered == 100 and follower.answers == 100
    finally:
        follower.close()
    assert run.thread is not None and not run.thread.is_alive()


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_a_follower_far_behind_the_head_answers_with_what_it_has_read(flavor):
    """Catching up, the follower answers with the last boundary it handed instead of
    waiting for the head, and reads on while that batch runs: each answer is what a pass
    to its end finds, and the answers reach the head."""
    binlog = enc.BinlogFile()
    writer = Writer(binlog, flavor)
    _, first, _ = writer.write("rows", 1)
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, flavor))
    begins = [
        writer.write(kind, value)[0] for kind, value in [("rows", 2), ("ddl", _STATEMENTS[0])] * 10
    ]
    held = binlog.pos
    for _ in range(10):
        writer.write("rows", 2)
    head = BinlogPosition(binlog.name, binlog.pos)
    limit, tables = StreamLimit(rows=1_000), frozenset({"shop.orders"})
    follower, dump = _follower(binlog, flavor, catch_up_s=0.0, grace_s=0.0)
    dump.hold = held  # the dump has sent everything up to here, not yet the rest
    follower.follow(start, tables, limit, flavor, "")
    try:
        deadline = time.monotonic() + 10
        while follower._run.walk.reached[1] < held and time.monotonic() < deadline:
            time.sleep(0.01)
        reached = follower.answer(start, head, limit, tables)
        # the last boundary handed: before the last transaction sent (its end is not a
        # boundary until the next transaction's first event is read)
        assert reached is not None and reached.pos == begins[-1] and not reached.bounded
        end, gtids, statements, xa = _one_pass(
            binlog, start, BinlogPosition(binlog.name, reached.pos), limit, flavor
        )
        assert (reached.gtids, reached.statements, reached.xa) == (gtids, statements, xa)
        assert len(statements) == 9
        start = BinlogPosition(end.file, end.pos, gtids, xa=xa)
        dump.release()
        while start.coordinates < head.coordinates:
            reached = follower.answer(start, head, limit, tables)
            end, gtids, statements, xa = _one_pass(
                binlog, start, BinlogPosition(binlog.name, reached.pos), limit, flavor
            )
            assert (reached.gtids, reached.statements, reached.xa) == (gtids, statements, xa)
            start = BinlogPosition(end.file, end.pos, gtids, xa=xa)
        assert len(dump.opened) == 1
    finally:
        follower.close()


def test_the_follower_does_not_answer_for_another_start_limit_or_table_set():
    binlog = enc.BinlogFile()
    writer = Writer(binlog, "mariadb")
    _, first, _ = writer.write("rows", 1)
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, "mariadb"))
    writer.write("rows", 2)
    head = BinlogPosition(binlog.name, binlog.pos)
    limit, tables = StreamLimit(rows=100), frozenset({"shop.orders"})
    follower, dump = _follower(binlog, "mariadb")
    follower.follow(start, tables, limit, "mariadb", "")
    try:
        earlier = BinlogPosition(binlog.name, 4, start.gtids)
        assert follower.answer(earlier, head, limit, tables) is None
        assert follower.answer(start, head, StreamLimit(rows=5), tables) is None
        assert follower.answer(start, head, limit, frozenset({"shop.audit"})) is None
        assert follower.answer(start, head, limit, tables).pos == head.pos
    finally:
        follower.close()


def test_under_a_ceiling_the_follower_reads_nothing_past_it():
    """availableNow's frozen head: the follower answers batches up to it, as passes to
    that head would, and reads none of what is written after it."""
    binlog = enc.BinlogFile()
    writer = Writer(binlog, "mysql")
    _, first, _ = writer.write("rows", 1)
    start = BinlogPosition(binlog.name, first, _state_at(binlog, first, "mysql"))
    for _ in range(20):
        writer.write("rows", 3)
    target = BinlogPosition(binlog.name, binlog.pos)
    for _ in range(20):
        writer.write("rows", 3)
    limit, tables = StreamLimit(rows=10), frozenset({"shop.orders"})
    follower, dump = _follower(binlog, "mysql")
    ceiling = target.coordinates
    follower.follow(start, tables, limit, "mysql", "", ceiling)
    try:
        while start.coordinates < target.coordinates:
            reached = follower.answer(start, target, limit, tables, ceiling)
            end, gtids, _, _ = _one_pass(binlog, start, target, limit, "mysql")
            assert (reached.pos, reached.gtids) == (end.pos, gtids)
            start = BinlogPosition(end.file, end.pos, gtids)
            follower.follow(start, tables, limit, "mysql", "", ceiling)
        run = follower._run
        deadline = time.monotonic() + 5
        while not run.parked and time.monotonic() < deadline:
            time.sleep(0.01)
        assert run.parked and run.walk.reached == ceiling
        assert follower.answer(start, target, limit, tables) is None  # another ceiling
    finally:
        follower.close()
