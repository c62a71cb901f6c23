"""One pass over a batch's binlog range for the driver's planning (docs/design.md,
'Micro-batches'): ``(start, until]`` is read once, and each event is handed to the
listeners that ask for its kind. The listeners are the exact GTID state
(:class:`coordinator.gtid_tracker.GtidListener`), the table statements
(:class:`coordinator.ddl_scan.RangeStatements`), the row count of a bounded batch
(:class:`coordinator.batch_end.RowLimit`) and the XA transactions
(:class:`coordinator.xa_watermark.XaListener`). The follower
(:mod:`coordinator.follower`) feeds the same listeners from its own endless dump, through
the same :class:`Walk`.

The listener protocol
---------------------

A listener is a :class:`Listener`; a pass calls, in this order:

``see(event, reader, where)``
    for each event of the range whose type is in the listener's ``kinds`` (``None``:
    every event), in binlog order. ``where`` is where the event ends (file number,
    position); ``reader`` is the :class:`~cdc_source.binlog.events.EventReader` whose
    ``format`` parses it. A listener whose ``early`` is true also sees the events read
    before the range's start (a pass reads from an earlier ``origin`` for it); no other
    call concerns those.

``full(where, size) -> bool``, then ``boundary(where)``
    at each transaction boundary past the range's first transaction: ``where`` is the
    position before a transaction's first event (GTID event), when the event before it
    is in the same file. First ``full`` asks every listener whether the batch would hold
    more than it may if it took everything before ``where`` (``size``: bytes of binlog
    past the start); only a limit ever says yes. If none does, ``boundary(where)`` tells
    each that the batch takes everything before ``where``: what a listener held pending
    for the transaction that ended there becomes part of its result. If one does, the
    batch ends at the last boundary handed, or at ``where`` when none was (a batch takes
    at least one whole transaction; ``boundary(where)`` is called first), and the pass
    stops before the event.

``finish(end, reached)``
    once, when the pass stops: the batch ends at ``end`` (the last boundary handed, or
    the range's end ``until``); the listener keeps what lies up to ``end`` and drops
    what it holds past it. ``reached`` is where the last event read ends (past ``until``
    when an event crosses it, short of it when the binlog ended early); a listener that
    needs the range read exactly to its end raises here.

A follower, which reads on past every batch's end, calls ``rebase(end)`` instead of
``finish``: ``end`` is the last boundary handed, the next batch's start. The listener's
result is as of ``end``; what it holds pending past ``end`` stays pending.

A pass makes no other call, and calls nothing after ``finish``. Listeners never decode a
row value, and what they hold is a summary (a GTID state, statements, counts, open XA
transactions), never events, except the few events of the one transaction read past
the last boundary.

Plain events
------------

A listener may take some of its ``kinds`` as plain runs (``plain_kinds``): the row count
its table maps and rows events, where it is the only listener of their type, counted
against the registry it keeps (``plain_events()``); the table statements and the XA
transactions a QUERY whose statement is BEGIN, which is nothing to either. Such events are
folded by the C splitter into a :class:`~cdc_source.binlog.plain_events.PlainRun`, and a
listener with ``plain_kinds`` gets ``take_plain(run, reader, where)`` in place of ``see``
for the events a run stands for. An event no listener wants is folded too. Every other call is
as above: a run is never a transaction start, so the boundaries, sizes and ends are those
of the events themselves (:mod:`cdc_source.binlog.plain_events`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import parse_query
from cdc_source.binlog.plain_events import PLAIN_RUN, PlainEvents, new_plain_events, plain_modes
from cdc_source.binlog.transport import DumpSource
from cdc_source.offsets import BinlogPosition
from cdc_source.offsets import file_number as _file_number

TRANSACTION_STARTS = frozenset({c.GTID, c.ANONYMOUS_GTID, c.GTID_TAGGED, c.MARIADB_GTID})

Where = tuple[int, int]  # (file number, position)


class Listener:
    """What a pass hands events to (the protocol is the module's docstring). The defaults
    do nothing: a listener overrides the calls it needs."""

    kinds: frozenset[int] | None = None  # the event types ``see`` is called for
    early = False  # also sees the events from the pass's origin up to its start
    plain_kinds: frozenset[int] = frozenset()  # of ``kinds``: those it takes as plain runs

    def see(self, event, reader, where: Where) -> None:
        pass

    def plain_events(self) -> PlainEvents | None:
        """The registry of the plain events of ``plain_kinds`` (None: none is plain)."""
        return None

    def take_plain(self, run, reader, where: Where) -> None:
        pass

    def full(self, where: Where, size: int) -> bool:
        return False

    def boundary(self, where: Where) -> None:
        pass

    def finish(self, end: Where, reached: Where) -> None:
        pass

    def rebase(self, end: Where) -> None:
        pass


def query_of(event, reader):
    """The parsed QUERY event (its schema and statement), parsed once however many
    listeners ask for it (the statements' and the XA transactions')."""
    cached = _parsed[0]
    if cached is not None and cached[0] is event:
        return cached[1]
    query = parse_query(event, reader.format)
    _parsed[0] = (event, query)
    return query


# The last (event, parsed query): a tuple swapped whole, so the follower's thread and the
# driver's passes never read each other's (the event is compared by identity).
_parsed: list = [None]


class Walk:
    """The events of a range from ``start``, handed to ``listeners`` as the protocol
    says; :meth:`feed` takes one event at a time, so a pass and a follower share it.

    ``best`` is the last boundary handed (file, position, coordinates), ``reached`` where
    the last event fed ends, ``size`` the bytes of binlog past ``start``."""

    def __init__(self, start: tuple[str, int], listeners: Iterable[Listener]) -> None:
        self.listeners = list(listeners)
        self.start_file, self.start_pos = start
        self._start = (_file_number(self.start_file), self.start_pos)
        self.previous = start  # (file, end) of the last event fed past the start
        self.reached: Where = self._start
        self.best: tuple[str, int, Where] | None = None
        self.transactions = 0  # transaction starts past the start (or the last rebase)
        self.size = 0
        self._best_size = 0
        self._file, self._number = "", 0
        self._wants: dict[int, tuple[Callable, ...]] = {}  # event type -> its listeners' see
        self._early = [lst for lst in self.listeners if lst.early]
        self._early_left = bool(self._early)  # events before the start may still come
        self._full = [lst.full for lst in self.listeners if type(lst).full is not Listener.full]
        self._boundary = [
            lst.boundary for lst in self.listeners if type(lst).boundary is not Listener.boundary
        ]
        # a plain run is handed on as an event of its own type is
        self._wants[PLAIN_RUN] = tuple(
            lst.take_plain
            for lst in self.listeners
            if type(lst).take_plain is not Listener.take_plain
        )
        self.plain, self._modes = self._plain_events()
        self._attached = False  # a reader folds this walk's plain events once past the start
        self._until: Where | None = None

    def _plain_events(self) -> tuple[PlainEvents | None, bytes]:
        """The registry of this walk's plain events and the modes of its event types:
        the registry of the one listener that keeps one (the row count), or a new one."""
        registries = [(lst, lst.plain_events()) for lst in self.listeners]
        registries = [(lst, registry) for lst, registry in registries if registry is not None]
        counter, registry = registries[0] if len(registries) == 1 else (None, None)
        registry = registry or new_plain_events()
        if registry is None:
            return None, b""
        wanted = [(lst.kinds, lst.plain_kinds, lst is counter) for lst in self.listeners]
        return registry, plain_modes(wanted)

    def attach(self, reader, origin: tuple[str, int], until: Where | None) -> None:
        """``reader`` reads this walk's events from ``origin`` (the start, or before it
        for an early listener), and nothing past ``until``: it folds the plain ones from
        the walk's start on."""
        if origin == (self.start_file, self.start_pos):
            self._early_left = False  # no event before the start will come
        self._attached, self._until = True, until
        if self.plain is not None and not self._early_left:
            self.plain.use(self._modes, until)
            reader.plain = self.plain

    def where(self, event) -> Where:
        if event.file != self._file:  # a per-event cost: every event of the range is read
            self._file, self._number = event.file, _file_number(event.file)
        return (self._number, event.end_pos)

    def feed(self, event, reader, where: Where) -> tuple[str, int, Where] | None:
        """Hands ``event`` (ending at ``where``) on; returns the batch's end, without
        taking the event, where a listener's limit ends the batch before it. (Every
        event of a range passes here: the common path is kept short.)"""
        kind = event.type
        if self._early_left:
            if where <= self._start:
                for listener in self._early:
                    if listener.kinds is None or kind in listener.kinds:
                        listener.see(event, reader, where)
                return None
            self._early_left = False
            if self._attached:
                self.attach(reader, (self.start_file, self.start_pos), self._until)
        previous = self.previous
        if kind in TRANSACTION_STARTS:
            if self.transactions and previous[0] == event.file:
                here = (previous[0], previous[1], (self._number, previous[1]))
                if self.best is None or here[2] != self.best[2]:  # (a follower's, at a head)
                    if self._is_full(here[2]):
                        if self.best is None:
                            self.take(here)
                        return self.best
                    self.take(here)
            self.transactions += 1
        sees = self._wants.get(kind)
        if sees is None:
            sees = self._wants[kind] = tuple(
                lst.see for lst in self.listeners if lst.kinds is None or kind in lst.kinds
            )
        for see in sees:
            see(event, reader, where)
        file = event.file
        self.size += event.end_pos - (previous[1] if previous[0] == file else 0)
        self.previous = (file, event.end_pos)
        self.reached = where
        return None

    @property
    def reached_file(self) -> str:
        return self.previous[0]

    def _is_full(self, where: Where) -> bool:
        for full in self._full:  # (a loop, not any(): no generator per transaction)
            if full(where, self.size):
                return True
        return False

    def take(self, here: tuple[str, int, Where]) -> None:
        """``boundary`` to every listener: the batch takes everything before ``here``."""
        for boundary in self._boundary:
            boundary(here[2])
        self.best = here
        self._best_size = self.size

    def over_at_end(self) -> bool:
        """At the range's end: whether the batch holds more than it may, when it took
        every event read (then it ends at the last boundary handed, if there is one)."""
        return bool(self.transactions) and self._is_full(self.reached)

    def rebase(self) -> None:
        """The next batch starts at the last boundary handed (a follower): sizes and
        transaction counts are from there on."""
        assert self.best is not None
        for listener in self.listeners:
            listener.rebase(self.best[2])
        self.size -= self._best_size
        self._best_size = 0
        self.transactions = 1 if self.reached > self.best[2] else 0
        self._start = self.best[2]
        self.start_file, self.start_pos = self.best[0], self.best[1]
        self._early_left = False
        self.best = None  # no boundary handed past the new start yet


class RangePass:
    """Reads ``(start, until]`` once for ``listeners`` (from ``origin``, earlier, when an
    ``early`` listener needs the events before the start) and returns where the batch
    ends: ``until``, or the last boundary within a listener's limit."""

    def __init__(self, source: DumpSource) -> None:
        self._source = source
        self.count = 0  # passes run (tests and logs)

    def run(
        self,
        start: tuple[str, int],
        until: BinlogPosition,
        listeners: Iterable[Listener],
        origin: tuple[str, int] | None = None,
    ) -> tuple[str, int] | None:
        """The batch's end: None when it is ``until`` itself, else (file, position) of
        the boundary a limit ended it at. Every listener has been finished."""
        self.count += 1
        walk = Walk(start, listeners)
        end_coordinates = until.coordinates
        first = origin if origin is not None and origin != start else start
        reader, runs, close = self._source.open_runs(first[0], first[1], end_coordinates)
        walk.attach(reader, first, end_coordinates)
        try:
            ended, crossed = _walked(walk, reader, runs, end_coordinates)
        finally:
            close()
        if ended is None and crossed is None and walk.over_at_end():
            ended = walk.best  # the whole range holds more than the limit
        if ended is not None:
            for listener in walk.listeners:
                listener.finish(ended[2], walk.reached)
            return ended[0], ended[1]
        for listener in walk.listeners:
            listener.finish(end_coordinates, crossed or walk.reached)
        return None


def _walked(walk: Walk, reader, runs, until: Where) -> tuple[tuple | None, Where | None]:
    """Feeds ``walk`` the events of ``runs`` up to ``until``: (the batch's end where a
    limit ended it, else None; where the first event past ``until`` ends, if one was
    read)."""
    feed = walk.feed
    file, number = "", 0
    for run in runs:
        for event in run:
            if event.file != file:  # a per-event cost: every event of the range is read
                file, number = event.file, walk.where(event)[0]
            where = (number, event.end_pos)
            if where > until:
                return None, where
            ended = feed(event, reader, where)
            if ended is not None or where == until:
                return ended, None
    return None, None
