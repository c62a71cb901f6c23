"""Where a stream without snapshot starts (``scan.startup.mode`` earliest-offset,
specific-offset, timestamp): a binlog position at a transaction boundary, with its exact
GTID state, found by reading the binlog (never a live head).

The first batch of such a query goes from the options' sentinel offset (no position,
nothing owned: :mod:`cdc_source.offsets`) to the position found here, and emits no row;
Spark logs that end in ``offsets/0``, so the position is resolved once per checkpoint
and every later batch (and a restart) starts from the logged value. Each resolution is a
function of the server's binlog, not of the moment it runs:

- earliest-offset: the start of the oldest file ``SHOW BINARY LOGS`` lists. A purge
  between two resolutions (a restart before ``offsets/0`` was written) moves it to the
  next file; nothing was emitted yet, so the query starts from what the server keeps
  when it really starts. A purge after ``offsets/0`` was written is caught by the next
  batch's availability check (:func:`cdc_source.preflight.check_binlog_available`): the
  clear "purged" error, never a silent gap.
- specific-offset (file + pos): that position, verified to be where an event ends
  between two transactions by reading its file from the start; a position inside the
  file's header events (4, the usual "start of the file") is the header's end.
- specific-offset (GTID set): where exactly those transactions precede, found as a
  fail-over finds a checkpoint's position (:func:`cdc_source.binlog.gtid_scan.locate`).
- timestamp: the first transaction whose event time is at or after the given
  millisecond. Event header times are whole seconds (the statement's start), compared
  as ``seconds * 1000 >= millis`` (Flink CDC's and SeaTunnel's ``searchBinlogName`` do
  the same binary search over the files' first event times). The files' first event
  times are binary-searched (:func:`last_file_before`, one short dump per probe), then
  the one file found is read on to the first such transaction.

A position in the middle of a file gets its exact GTID state: the file's starting state
(MySQL ``PREVIOUS_GTIDS``, MariaDB ``GTID_LIST``) plus its GTID events up to the
position, the same rule :mod:`coordinator.gtid_tracker` follows, so the next batch's
state is built on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import FL_PREPARED_XA, Event, Format, parse_query
from cdc_source.binlog.gtid_scan import GtidLocateError, add_event, locate, new_state
from cdc_source.gtid import GtidError, GtidSet, compact, parse_state
from cdc_source.offsets import BinlogPosition, file_number
from cdc_source.options import (
    STARTUP_GTID_SET,
    STARTUP_OFFSET_FILE,
    STARTUP_OFFSET_POS,
    STARTUP_TIMESTAMP,
    StartupPoint,
    gtid_flavor,
)

FL_STANDALONE = 1  # MariaDB Gtid_log_event flags2: a DDL, no COMMIT follows (log_event.h)

# Events a binlog file starts with, before its first transaction: their positions are
# not transaction boundaries with a GTID state of their own (the state is known only
# after PREVIOUS_GTIDS / GTID_LIST), so a start inside them is moved to their end.
HEADER_EVENTS = frozenset(
    {c.PREVIOUS_GTIDS, c.MARIADB_GTID_LIST, c.BINLOG_CHECKPOINT, c.START_ENCRYPTION}
)
_GTID_EVENTS = frozenset({c.GTID, c.ANONYMOUS_GTID, c.GTID_TAGGED})
_END_STATEMENT = re.compile(r"^\s*(COMMIT|ROLLBACK)\s*$", re.I)
_BEGIN_STATEMENT = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION|XA\s+(START|BEGIN))\b", re.I)

OUT, AFTER_GTID, IN = "out", "after-gtid", "in"

OpenDump = Callable[[str, int], tuple[object, Iterator[Event], Callable[[], None]]]


class StartupPositionError(RuntimeError):
    """The configured start position does not exist on the server, or is not a place a
    stream can start. Not transient: the options must change."""

    transient = False


@dataclass(frozen=True)
class Boundary:
    """A transaction boundary: ``pos`` in ``file``, the GTID state there (text) and the
    time (ms) of the event that ends there (0 at a file's start)."""

    file: str
    pos: int
    gtids: str
    ts_ms: int


class TransactionWalk:
    """Follows a binlog's events, in order from a file's position 4, and tells whether
    the position before each event is a transaction boundary, with the GTID state there.

    A transaction starts at a GTID event (MySQL GTID/anonymous GTID; MariaDB GTID, which
    stands for BEGIN unless flagged standalone) or a ``BEGIN`` query, and ends at an XID
    event, a ``COMMIT``/``ROLLBACK`` query, an XA_PREPARE event (the prepared part of an
    XA transaction), or after the single statement of a standalone GTID (DDL,
    ``XA COMMIT``). MySQL: sql/binlog.cc writes ``GTID, BEGIN, ..., XID`` and ``GTID,
    DDL``; MariaDB: sql/log.cc writes ``GTID, ..., XID|COMMIT`` and ``GTID(standalone),
    DDL``."""

    def __init__(self, flavor: str, format_of: Callable[[], Format]) -> None:
        self.state = new_state(flavor)
        self.phase = OUT
        self.file: str | None = None
        self.in_header = True
        self.last_ts_ms = 0
        self._format_of = format_of

    def boundary_before(self, event: Event) -> bool:
        """Whether ``event.start_pos`` is a transaction boundary (call before :meth:`feed`)."""
        header = (event.file != self.file or self.in_header) and event.type in HEADER_EVENTS
        return self.phase == OUT and not header

    def here(self, event: Event) -> Boundary:
        """The boundary before ``event`` (valid where :meth:`boundary_before` is true)."""
        return Boundary(event.file, event.start_pos, compact(self.state), self.last_ts_ms)

    def feed(self, event: Event) -> None:
        if event.file != self.file:
            if self.phase != OUT:
                raise StartupPositionError(
                    f"the binlog file before {event.file} ends inside a transaction; the "
                    "binlog is damaged"
                )
            self.file, self.in_header = event.file, True
        if event.type not in HEADER_EVENTS:
            self.in_header = False
        self.phase = self._next_phase(event)
        add_event(self.state, event)
        self.last_ts_ms = event.timestamp * 1000

    def _next_phase(self, event: Event) -> str:
        t, phase = event.type, self.phase
        if t in _GTID_EVENTS:
            return AFTER_GTID
        if t == c.MARIADB_GTID:
            flags = event.body[12] if len(event.body) > 12 else 0
            standalone = flags & FL_STANDALONE and not flags & FL_PREPARED_XA
            return AFTER_GTID if standalone else IN
        if t in (c.XID, c.XA_PREPARE):
            return OUT
        if t in (c.QUERY, c.QUERY_COMPRESSED):
            text = parse_query(event, self._format_of()).query
            if _BEGIN_STATEMENT.match(text):
                return IN
            if phase == IN:
                return OUT if _END_STATEMENT.match(text) else IN
            return OUT  # the single statement of a GTID (DDL, XA COMMIT) or of no GTID
        if t == c.TABLE_MAP or t in c.ROW_EVENTS:
            return IN
        return phase


def _walk(
    open_dump: OpenDump, file: str, flavor: str
) -> Iterator[tuple[Event | None, bool, Boundary]]:
    """(event, whether the position before it is a boundary, that boundary) for each event
    of ``file`` read from its start; last (None, whether the file's end is a boundary,
    the file's end as read now)."""
    reader, events, close = open_dump(file, 4)
    walk = TransactionWalk(flavor, lambda: reader.format)
    end: int | None = None
    try:
        for event in events:
            if event.file != file:
                break
            at = walk.boundary_before(event)
            yield event, at, walk.here(event)
            walk.feed(event)
            end = event.end_pos
    finally:
        close()
    if end is not None:
        yield None, walk.phase == OUT, Boundary(file, end, compact(walk.state), walk.last_ts_ms)


def _position(boundary: Boundary, gtids: bool) -> BinlogPosition:
    return BinlogPosition(
        boundary.file, boundary.pos, boundary.gtids if gtids else "", boundary.ts_ms
    )


def _kept(files: list[tuple[str, int]]) -> str:
    if not files:
        return "the server lists no binlog file"
    return f"the server keeps {files[0][0]} to {files[-1][0]}:{files[-1][1]} (SHOW BINARY LOGS)"


def earliest(open_dump: OpenDump, files: list[tuple[str, int]], flavor: str, gtids: bool):
    """The first transaction boundary of the oldest binlog file kept."""
    if not files:
        raise StartupPositionError("scan.startup.mode=earliest-offset: " + _kept(files))
    for _event, at, boundary in _walk(open_dump, files[0][0], flavor):
        if at:
            return _position(boundary, gtids)
    raise StartupPositionError(
        f"scan.startup.mode=earliest-offset: the oldest binlog file {files[0][0]} has no "
        f"position between transactions; {_kept(files)}"
    )


def at_file_position(
    open_dump: OpenDump,
    files: list[tuple[str, int]],
    flavor: str,
    gtids: bool,
    file: str,
    pos: int,
) -> BinlogPosition:
    """``file``:``pos``, verified to be a transaction boundary (read from the file's start)."""
    where = f"{STARTUP_OFFSET_FILE}={file}, {STARTUP_OFFSET_POS}={pos}"
    sizes = dict(files)
    if file not in sizes:
        numbers = [file_number(name) for name, _ in files]
        try:
            wanted = file_number(file)
        except ValueError:
            wanted = -1
        if numbers and 0 <= wanted < numbers[0]:
            reason = "was purged: the changes from there on are lost"
        elif numbers and wanted > numbers[-1]:
            reason = "is in the future: the server has not written it yet"
        else:
            reason = "is not a binlog file of this server"
        raise StartupPositionError(f"{where}: the file {reason}; {_kept(files)}")
    if pos > sizes[file]:
        raise StartupPositionError(
            f"{where}: the position is in the future, past the end of {file} "
            f"({sizes[file]} bytes); {_kept(files)}"
        )
    ends = {4}  # where events end (a start inside the header events is moved to its end)
    header_end: int | None = None
    for event, at, boundary in _walk(open_dump, file, flavor):
        ends.add(boundary.pos)
        if at and header_end is None:
            header_end = boundary.pos
            if pos in ends and pos <= header_end:
                return _position(boundary, gtids)
        if header_end is None:
            continue  # in the header: a start there is moved to its end
        if boundary.pos > pos:
            break
        if boundary.pos == pos:
            if at:
                return _position(boundary, gtids)
            raise StartupPositionError(
                f"{where}: an event ends there, but inside a transaction (the next event is "
                f"{c.event_name(event.type) if event else 'none'}); start at a position "
                "between two transactions, e.g. an End_log_pos of an XID or COMMIT event "
                "(SHOW BINLOG EVENTS), or use scan.startup.specific-offset.gtid-set"
            )
    raise StartupPositionError(
        f"{where}: no event of {file} ends there, so it is not a position a stream can "
        "start from; take one from SHOW BINARY LOG STATUS / SHOW MASTER STATUS or an "
        f"End_log_pos of SHOW BINLOG EVENTS IN '{file}'"
    )


def at_gtid_set(
    open_dump: OpenDump,
    files: list[tuple[str, int]],
    flavor: str,
    gtids: bool,
    gtid_set: str,
    before: str = "",
) -> BinlogPosition:
    """Where the server's binlog holds exactly the transactions of ``gtid_set`` before it
    (``before``: what the server executed before its oldest binlog file)."""
    where = f"{STARTUP_GTID_SET}={gtid_set}"
    if not gtids:
        raise StartupPositionError(
            f"{where}: the server does not use GTIDs (gtid_mode=OFF); start from "
            f"{STARTUP_OFFSET_FILE} + {STARTUP_OFFSET_POS} instead"
        )
    syntax = gtid_flavor(gtid_set)
    if syntax != flavor:
        raise StartupPositionError(
            f"{where}: this is {'a MariaDB' if syntax == 'mariadb' else 'a MySQL'} GTID "
            f"{'position' if syntax == 'mariadb' else 'set'}, but the server is "
            f"{'MariaDB' if flavor == 'mariadb' else 'MySQL'}: give its "
            f"{'gtid_binlog_pos' if flavor == 'mariadb' else 'gtid_executed'} syntax"
        )
    names = [name for name, _ in files]
    try:
        file, pos = locate(open_dump, names, gtid_set, flavor, before)
    except (GtidLocateError, GtidError) as err:
        text = str(err)
        if "purged" in text:
            kind = "purged: the binlog before it is gone"
        elif getattr(err, "at_end", False):
            kind = "in the future: the server has not executed all of these transactions"
            text = f"the server lacks {err.lacks}"  # locate's own words are for a fail-over
        else:
            kind = "not a state of this server's binlog"
        raise StartupPositionError(
            f"{where}: the position is {kind} ({text}); {_kept(files)}"
        ) from None
    return at_file_position(open_dump, files, flavor, gtids, file, pos)


def last_file_before(count: int, first_ms: Callable[[int], int | None], target_ms: int) -> int:
    """The index of the last of ``count`` binlog files whose first event time (ms, None
    for a file with no event yet: after any time) is before ``target_ms``, by binary
    search (``first_ms`` is called about log2(count) times); -1 when even the oldest
    file starts at or after it. File times grow with the file numbers: a file's first
    events are written when it is opened."""
    first = first_ms(0) if count else None
    if first is None or first >= target_ms:
        return -1
    found, low, high = 0, 1, count - 1
    while low <= high:
        middle = (low + high) // 2
        value = first_ms(middle)
        if value is not None and value < target_ms:
            found, low = middle, middle + 1
        else:
            high = middle - 1
    return found


def file_first_ms(open_dump: OpenDump, file: str) -> int | None:
    """The time (ms) of ``file``'s first event after its FORMAT_DESCRIPTION (the GTID
    list / previous GTIDs event written when the file was opened): one short dump."""
    reader, events, close = open_dump(file, 4)
    try:
        for event in events:
            return event.timestamp * 1000 if event.file == file else None
    finally:
        close()
    return None


def at_timestamp(
    open_dump: OpenDump,
    files: list[tuple[str, int]],
    flavor: str,
    gtids: bool,
    target_ms: int,
    now_ms: int,
) -> BinlogPosition:
    """The boundary before the first transaction whose event time is at or after
    ``target_ms`` (the end of the binlog when none is yet)."""
    where = f"{STARTUP_TIMESTAMP}={target_ms}"
    if target_ms > now_ms:
        raise StartupPositionError(
            f"{where}: the time is in the future (the server's clock says {now_ms}); {_kept(files)}"
        )
    cache: dict[int, int | None] = {}

    def first_ms(index: int) -> int | None:
        if index not in cache:
            cache[index] = file_first_ms(open_dump, files[index][0])
        return cache[index]

    index = last_file_before(len(files), first_ms, target_ms)
    if index < 0:
        oldest = first_ms(0) if files else None
        raise StartupPositionError(
            f"{where}: the oldest binlog file kept, {files[0][0] if files else 'none'}, "
            f"starts at {oldest} ms, not before that time, so changes at or after it may have "
            f"been in files the server purged; {_kept(files)}. Start with "
            "scan.startup.mode=earliest-offset to read from the oldest kept"
        )
    found = scan_to_time(_walk(open_dump, files[index][0], flavor), target_ms, gtids)
    if found is not None:
        return found
    raise StartupPositionError(f"{where}: the binlog ends inside a transaction")


def scan_to_time(
    walked: Iterable[tuple[Event | None, bool, Boundary]], target_ms: int, gtids: bool
) -> BinlogPosition | None:
    """The first boundary of one file's walk before a transaction whose event time is at
    or after ``target_ms``; else the file's end (where the next file's transactions
    begin, or the binlog's end: a later transaction is written after it); None if the
    file ends inside a transaction."""
    end: Boundary | None = None
    for event, at, boundary in walked:
        if event is None:
            end = boundary if at else None
            break
        if at and event.type not in HEADER_EVENTS and event.timestamp * 1000 >= target_ms:
            return _position(boundary, gtids)
    return None if end is None else _position(end, gtids)


def resolve(
    mode: str,
    point: StartupPoint | None,
    open_dump: OpenDump,
    files: list[tuple[str, int]],
    flavor: str,
    gtids: bool,
    now_ms: int,
    before: str = "",
) -> BinlogPosition:
    """The start position of ``mode`` (earliest-offset, specific-offset, timestamp).
    ``before``: the GTIDs the server executed before its oldest binlog file
    (:func:`cdc_source.binlog.gtid_scan.executed_before_binlog`), part of every
    position's GTID state."""
    position = _resolve(mode, point, open_dump, files, flavor, gtids, now_ms, before)
    if not (before and gtids):
        return position
    state = parse_state(position.gtids, flavor)
    if isinstance(state, GtidSet):
        state.update(GtidSet.parse(before))
    return replace(position, gtids=compact(state))


def _resolve(mode, point, open_dump, files, flavor, gtids, now_ms, before) -> BinlogPosition:
    if mode == "earliest-offset":
        return earliest(open_dump, files, flavor, gtids)
    if mode == "timestamp" and point is not None and point.timestamp_ms is not None:
        return at_timestamp(open_dump, files, flavor, gtids, point.timestamp_ms, now_ms)
    if mode == "specific-offset" and point is not None:
        if point.gtid_set is not None:
            return at_gtid_set(open_dump, files, flavor, gtids, point.gtid_set, before)
        if point.file is not None and point.pos is not None:
            return at_file_position(open_dump, files, flavor, gtids, point.file, point.pos)
    raise StartupPositionError(f"scan.startup.mode={mode} has no start position to resolve")
