"""Reading the row changes of captured tables in a binlog range ``(start, end]``.

Positions are event *end* positions, as ``SHOW MASTER STATUS`` reports them, so ``end``
always falls on a transaction boundary. The dump is read in large chunks; row images of
captured tables are decoded column by column (:mod:`reader.row_decoding`) into
:class:`ChangeBlock`s, one table map at a time, bounded in rows and bytes.

Every event is decoded or refused (docs/design.md, 'What the binlog may hold'):
compressed events are inflated, XA transactions are emitted at their commit, incomplete
row images and unknown events stop the read with an error that names the event and its
position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from cdc_source.binlog import constants as c
from cdc_source.binlog.ddl import TableChange, logged_table_changes
from cdc_source.binlog.events import (
    Event,
    Format,
    parse_query,
)
from cdc_source.binlog.gtid_scan import gtid_text
from cdc_source.binlog.row_plan import json_columns, table_plan
from cdc_source.binlog.rows_event import (
    PartialRowImageError,
    RowsEventHeaders,
    UndecodableEventError,
)
from cdc_source.binlog.table_map import TableMap, table_id_of
from cdc_source.binlog.table_map import TableMaps as BinlogTableMaps
from cdc_source.binlog.transport import DumpSource
from cdc_source.binlog.wire import MalformedEventError
from cdc_source.binlog.xa import XaPrepared, XaResolved, XaTracker, track
from cdc_source.chunk_key import OPTION, key_breaking_target
from cdc_source.offsets import BinlogPosition
from cdc_source.offsets import file_number as _file_number
from cdc_source.online_schema_change import swap_changes
from cdc_source.refusals import invalid_date_refusal
from reader.change_blocks import Accumulator, ChangeBlock, TableReset
from reader.row_decoding import (
    INVALID_DATE_ERRORS,
    NATIVE_ERRORS,
    PARTIAL_JSON_ERRORS,
    RowSink,
)
from reader.schema_drift import SchemaChangedError
from reader.table_follow import TableFollow, UnloggedRowChangeError

LOG_EVENT_IGNORABLE_F = 0x80


class BinlogRangeError(RuntimeError):
    pass


class XaTransactionError(UndecodableEventError):
    """An XA COMMIT whose prepared rows are not in the range read."""


class TableMaps(BinlogTableMaps):
    """A stream's table maps (:class:`cdc_source.binlog.table_map.TableMaps`), and the row
    sinks their rows are decoded into."""

    def __init__(self, decoder: str | None = None) -> None:
        super().__init__()
        self.decoder = decoder

    def add(self, event: Event, fmt: Format) -> TableMap:
        return super().add(event.body, fmt.post_header_len(c.TABLE_MAP, 8), fmt.mariadb)

    def get(self, table_id: int, event: Event) -> TableMap:
        table_map = self.by_id.get(table_id)
        if table_map is None:
            raise MalformedEventError(f"{event.where}: no TABLE_MAP for table id {table_id}")
        return table_map

    def new_accumulator(self, table_map: TableMap) -> Accumulator:
        plan = table_plan(table_map)
        return Accumulator(table_map, RowSink(plan, json_columns(table_map), self.decoder))


Connect = Callable[[], object]


class RangeReader:
    """One pass over ``(start, end]`` yielding :class:`ChangeBlock`s of ``tables``.

    Blocks of one table come in binlog order, except that the rows of XA transactions
    committed in the range come last (they are read again after the pass); every row
    carries its position, which orders them all (``_seq``).

    ``stride``/``slot``: decode only the units (row events, whole XA transactions) whose
    ordinal among the units of ``tables`` is ``slot`` modulo ``stride``; reading past a
    unit costs almost nothing next to decoding it, so ``stride`` readers of one range
    split the decoding work."""

    def __init__(
        self,
        source: DumpSource,
        start: BinlogPosition,
        end: BinlogPosition,
        tables: set[str],
        watched: set[str] | None = None,
        stride: int = 1,
        slot: int = 0,
        decoder: str | None = None,
        origins: bool = False,
        keyed_by_column: dict[str, tuple[str, tuple[str, ...]]] | None = None,
        follow: TableFollow | None = None,
        lower_case_names: bool = False,
        online_schema_changes: bool = False,
    ) -> None:
        self.source = source
        # A tool's swap is one "swap" change (scan.parse.online.schema.changes.enabled).
        self.online_schema_changes = online_schema_changes
        # A binlog task follows its tables through statements (resets, tables created);
        # without it (a snapshot task's window) such a statement is an error.
        self.follow = follow
        # lower_case_table_names=1: statements name tables in any case; they are read in
        # lowercase, as the table maps spell them (cdc_source.binlog.ddl.table_changes).
        self.lower_case_names = lower_case_names
        # Tables keyed by their chunk key column (cdc_source.chunk_key): the column and
        # its unique indexes.
        self.keyed_by_column = keyed_by_column or {}
        self.start = start
        self.end = end
        self.tables = tables
        self.watched = tables if watched is None else watched
        self.stride = stride
        self.slot = slot
        self.decoder = decoder
        self.accumulators: dict[int, Accumulator] = {}  # by id() of the table map
        self.ordinal = -1
        # Each row's file, GTID and server id, kept only for metadata.list (``origins``);
        # the GTID of the transaction being read.
        self.origins = origins
        self.gtid: str | None = None
        self.headers = RowsEventHeaders()

    def blocks(self) -> Iterator[ChangeBlock]:
        end = self.end.coordinates
        if self.start.coordinates >= end:
            return
        tracker = XaTracker(self._prepared_before_start())
        # XA commits this task emits, with the GTID of the commit's transaction
        commits: list[tuple[str, tuple[str, int], Event, str | None]] = []
        reader, events, close = self.source.open(
            self.start.file, self.start.pos, self.end.coordinates
        )
        reached = self.start.coordinates
        try:
            maps = TableMaps(self.decoder)
            last: tuple[int, int] = (-1, -1)
            sub = 0
            file, number = "", 0
            for event in events:
                if event.file != file:  # (a per-event cost: every event of the range)
                    file, number = event.file, _file_number(event.file)
                where = (number, event.end_pos)
                if where > end:
                    reached = where
                    break
                reached = where
                sub = sub + 1 if where == last else 0  # a payload's events share an end
                last = where
                t = event.type
                if t in c.ROW_EVENTS:
                    if tracker.in_xa is not None:
                        continue  # emitted at its XA COMMIT, read again from its start
                    block = self._rows(event, reader.format, maps, sub, where)
                    if block is not None:
                        yield block
                elif t == c.TABLE_MAP:
                    maps.add(event, reader.format)
                elif t in (c.QUERY, c.QUERY_COMPRESSED):
                    query = parse_query(event, reader.format)
                    if self.follow is not None:
                        yield from self._follow(query.schema, query.query, event, where, sub)
                    else:
                        self._check_statement(query.schema, query.query, event)
                    self._xa(tracker.observe(event, reader.format, query.query), event, commits)
                elif t in _XA_EVENTS:
                    if self.origins and t in _GTID_EVENTS:
                        self.gtid = gtid_text(event)
                    self._xa(tracker.observe(event, reader.format), event, commits)
                else:
                    _check_skippable(event)
            yield from self._flush_all()
        finally:
            close()
        if reached < end:
            raise BinlogRangeError(
                f"the binlog ended at {reached} before the planned position {self.end}; the "
                "server lost binlog events it had reported (crash with sync_binlog=0?)"
            )
        # Read again only now: a second dump with this task's server id while the first
        # is open would make the server kill the first (kill_zombie_dump_threads).
        for xid, begin, commit, gtid in commits:
            yield from self._xa_commit(xid, begin, commit, gtid)

    def _follow(
        self, schema: str, query: str, event: Event, where: tuple[int, int], sub: int
    ) -> Iterator[ChangeBlock | TableReset]:
        """A statement, for a task that follows its tables: the rows decoded so far of
        each table it resets come first, then the reset."""
        changes = self._statement_changes(schema, query, event)
        if not changes:
            return
        resets = self.follow.statement(changes, where)
        if not resets:
            return
        for accumulator in list(self.accumulators.values()):
            if accumulator.table_map.name in resets and accumulator.sink.rows:
                yield accumulator.take()
        if self.slot != 0:
            return  # one reset per batch: the first of the range's tasks emits it
        for table in resets:
            yield TableReset(
                table, where, sub, event.timestamp, event.file, self.gtid, event.server_id
            )

    def _decodes(self, name: str, position: tuple[int, int] | None) -> bool:
        if self.follow is None:
            return name in self.tables
        if position is not None:  # an XA transaction's rows, judged at its commit
            return self.follow.state_at(name, position) != "none"
        return self.follow.decodes(name)

    def _prepared_before_start(self) -> dict[str, tuple[str, int]]:
        """XA transactions prepared before ``start`` and unresolved at it: the offset
        carries where the oldest of them begins (``start.xa``); the events from there to
        ``start`` are read for their XA statements only."""
        if self.start.xa is None:
            return {}
        xa_file, xa_pos = self.start.xa
        tracker = XaTracker()
        reader, events, close = self.source.open(xa_file, xa_pos)
        try:
            track(events, lambda: reader.format, tracker, self.start.coordinates)
        finally:
            close()
        return tracker.prepared

    def _xa(self, action, event: Event, commits: list) -> None:
        """Note an XA commit (its rows are read after this pass, see :meth:`blocks`)."""
        if isinstance(action, XaPrepared) and action.one_phase:
            begin = action.begin
        elif isinstance(action, XaResolved) and action.committed:
            if action.begin is None:
                raise XaTransactionError(
                    f"{event.where}: XA COMMIT {action.xid} of a transaction prepared before "
                    f"this range's start {self.start}, which the offset does not say where to "
                    "find; its rows would be lost. Restart the query"
                )
            begin = action.begin
        else:
            return
        if self._next_unit():
            commits.append((action.xid, begin, event, self.gtid))

    def _next_unit(self) -> bool:
        self.ordinal += 1
        return self.ordinal % self.stride == self.slot

    def _rows(
        self,
        event: Event,
        fmt: Format,
        maps: TableMaps,
        sub: int,
        position: tuple[int, int],
        *,
        timestamp: int | None = None,
        origin: tuple[str, str | None, int] | None = None,
        at_commit: bool = False,
    ) -> ChangeBlock | None:
        """Decodes a rows event's rows into its table's accumulator, emitted at
        ``position`` (file number, end): where the event ends, or ``at_commit``, where the
        XA transaction it belongs to commits. Returns the accumulator's block when that
        is full."""
        table_id = table_id_of(event.body, fmt.post_header_len(event.type, 8))
        table_map = maps.get(table_id, event)
        if not self._decodes(table_map.name, position if at_commit else None):
            return None
        if not at_commit and not self._next_unit():
            return None
        rows_event = self.headers.parse(event, fmt, len(table_map.columns))
        accumulator = self.accumulators.get(id(table_map))
        if accumulator is None:
            accumulator = self.accumulators[id(table_map)] = maps.new_accumulator(table_map)
            if self.origins:
                accumulator.origins = []
        try:
            count = accumulator.sink.decode(
                rows_event.data,
                rows_event.start,
                len(rows_event.data),
                rows_event.kind,
                rows_event.partial,
            )
        except PARTIAL_JSON_ERRORS as err:
            raise PartialRowImageError(
                f"{event.where} of {table_map.name}: {err}. Set binlog_row_value_options='' "
                "for sessions that write captured tables, then start a new query (new "
                "checkpoint location) to snapshot again"
            ) from None
        except INVALID_DATE_ERRORS as err:
            index, value = err.args
            raise invalid_date_refusal(table_map.columns[index].name, value).in_table(
                table_map.name, event.where
            ) from None
        except NATIVE_ERRORS as err:
            raise UndecodableEventError(
                f"{event.where} of {table_map.name} cannot be decoded: {err}"
            ) from None
        accumulator.counts.append(count)
        when = event.timestamp if timestamp is None else timestamp
        accumulator.events.append((position[0], position[1], sub, when))
        if accumulator.origins is not None:
            accumulator.origins.append(origin or (event.file, self.gtid, event.server_id))
        return accumulator.take() if accumulator.full() else None

    def _flush_all(self) -> Iterator[ChangeBlock]:
        for accumulator in self.accumulators.values():
            if accumulator.sink.rows:
                yield accumulator.take()
        self.accumulators.clear()

    def _xa_commit(
        self, xid: str, begin: tuple[str, int], commit: Event, gtid: str | None
    ) -> Iterator[ChangeBlock]:
        """An XA transaction happens at its commit: its rows, written at XA PREPARE, are
        read again from the transaction's start and emitted at the commit's position,
        time, GTID and server id."""
        reader, events, close = self.source.open(begin[0], begin[1])
        try:
            maps = TableMaps(self.decoder)
            position = (_file_number(commit.file), commit.end_pos)
            origin = (commit.file, gtid, commit.server_id)
            sub = 0
            for event in events:
                if event.type == c.TABLE_MAP:
                    maps.add(event, reader.format)
                elif event.type in c.ROW_EVENTS:
                    block = self._rows(
                        event,
                        reader.format,
                        maps,
                        sub,
                        position,
                        timestamp=commit.timestamp,
                        origin=origin,
                        at_commit=True,
                    )
                    if block is not None:
                        yield block
                    sub += 1
                elif event.type == c.XA_PREPARE:
                    break
            else:
                raise XaTransactionError(f"the XA PREPARE of {xid} was not found from {begin}")
            yield from self._flush_all()
        finally:
            close()

    def _statement_changes(self, schema: str, query: str, event: Event):
        """The table changes of a statement, after the chunk-key guard has seen it."""
        if self.keyed_by_column:
            _check_chunk_key(
                self.keyed_by_column, schema or "", query, event, self.lower_case_names
            )
        changes = logged_table_changes(query, schema or "", self.lower_case_names, event.where)
        return swap_changes(changes) if self.online_schema_changes else changes

    def _check_statement(self, schema: str, query: str, event: Event) -> None:
        changes = self._statement_changes(schema, query, event)
        hit = [t for change in changes for t in removed_rows_of(change, self.watched)]
        if hit:
            raise UnloggedRowChangeError(
                f"{event.where}: a statement removed the rows of captured table "
                f"{', '.join(hit)} without row events ({' '.join(query.split())[:200]}) "
                "inside a snapshot task's roll-forward window; Spark retries the task, and "
                "if it recurs, start a new query (new checkpoint location)"
            )


def removed_rows_of(change: TableChange, tables: set[str]) -> list[str]:
    """The tables of ``tables`` whose rows ``change`` removes without row events (a
    TRUNCATE, DROP, RENAME away, partition drop or truncate, DROP DATABASE), or replaces
    by another table's (a tool's swap: a task without a table follow does not judge
    whether it keeps the table, so it is what its renames are)."""
    if change.kind == "drop_database":
        return sorted(t for t in tables if t.split(".", 1)[0] == change.table)
    kinds = ("drop", "truncate", "rename", "partition", "swap")
    if change.kind in kinds and change.table in tables:
        return [change.table]
    return []


def _check_chunk_key(
    keyed: dict[str, tuple[str, tuple[str, ...]]],
    schema: str,
    query: str,
    event: Event,
    lower_case_names: bool = False,
) -> None:
    """A table without a primary key is keyed by a column whose uniqueness only its
    UNIQUE index guarantees: a statement that drops that index or changes the column
    stops the stream before rows that could share a value are read. For good: a restart
    would read the same statement again, and whether values stayed unique after it
    cannot be proven (an index dropped, a duplicate written and deleted, the index added
    back: the delete would take the original row's key)."""
    target = key_breaking_target(query, schema, keyed, lower_case_names)
    if target is None:
        return
    column, _ = keyed[target]
    raise SchemaChangedError(
        f"{target} has no primary key and is keyed by its chunk key column {column} "
        f"('{OPTION}'); the statement at {event.file}:{event.end_pos} drops or changes that "
        f"column or its UNIQUE index: {' '.join(query.split())[:200]}. Whether its values "
        "stayed unique after it cannot be proven, so this checkpoint cannot go on: start a "
        "new query (new checkpoint location) once the column is NOT NULL with a UNIQUE "
        "index of its own again, or add a primary key"
    )


_HANDLED_QUIETLY = {c.XID, c.ROTATE, c.FORMAT_DESCRIPTION}
_GTID_EVENTS = {c.GTID, c.ANONYMOUS_GTID, c.GTID_TAGGED, c.MARIADB_GTID}
_XA_EVENTS = _GTID_EVENTS | {c.XA_PREPARE}


def _check_skippable(event: Event) -> None:
    if event.type in _HANDLED_QUIETLY or event.type in c.IGNORABLE_EVENTS:
        return
    if event.type == c.INCIDENT:
        raise UndecodableEventError(
            f"{event.where}: the server wrote an INCIDENT event, so changes may be missing "
            "from the binlog after it; start a new query to snapshot again"
        )
    if event.flags & LOG_EVENT_IGNORABLE_F:
        return  # the server marks it safe to ignore for a reader that does not know it
    raise UndecodableEventError(
        f"{event.where}: cdc-mysql cannot decode this event and it is not known to be "
        "ignorable, so the read stops rather than skip it"
    )
