"""XA transactions in the binlog, and where an XA transaction that is prepared but not yet
resolved at a position begins (docs/design.md, 'What the binlog may hold').

An XA transaction's row events are written at ``XA PREPARE``: on MySQL as GTID, Query
``XA START <xid>``, rows, Query ``XA END``, XA_PREPARE (type 38); on MariaDB 10.5+ as a
GTID event with ``FL_PREPARED_XA`` and the xid, rows, Query ``XA END``, XA_PREPARE. It
happens later, at Query ``XA COMMIT <xid>``, or never, at ``XA ROLLBACK <xid>``
(MySQL: sql/xa.cc, binlog.cc; MariaDB: sql/log.cc). ``XA COMMIT ... ONE PHASE`` is an
XA_PREPARE with its one-phase flag on MySQL and a plain transaction on MariaDB.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import (
    FL_PREPARED_XA,
    Event,
    Format,
    parse_query,
    parse_xa_prepare,
)
from cdc_source.binlog.gtid_events import parse_mariadb_gtid
from cdc_source.offsets import file_number as _file_number

_LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*.*?\*/|(?:--\s|#)[^\n]*(?:\n|$))*", re.S)
_XA_STATEMENT = re.compile(
    r"^XA\s+(START|BEGIN|END|COMMIT|ROLLBACK)\s+(X'[0-9a-fA-F]*',X'[0-9a-fA-F]*',\d+)"
    r"(\s+ONE\s+PHASE)?",
    re.I,
)

Position = tuple[str, int]  # (file, start position of the transaction's first event)


def xa_statement(query: str) -> tuple[str, str, bool] | None:
    """('START'|'END'|'COMMIT'|'ROLLBACK', xid in lower case, one phase) of an XA query."""
    query = query[_LEADING_COMMENTS.match(query).end() :]
    match = _XA_STATEMENT.match(query)
    if not match:
        return None
    verb = match.group(1).upper()
    return ("START" if verb == "BEGIN" else verb), match.group(2).lower(), bool(match.group(3))


@dataclass(frozen=True)
class XaPrepared:
    xid: str
    begin: Position
    one_phase: bool


@dataclass(frozen=True)
class XaResolved:
    xid: str
    committed: bool
    begin: Position | None  # None: prepared before what this tracker has seen


class XaTracker:
    """Follows transaction starts and XA statements through a stream of events."""

    def __init__(self, prepared: dict[str, Position] | None = None) -> None:
        self.txn_start: Position | None = None
        self.in_xa: str | None = None  # the XA transaction whose row events are passing
        self._xa_begin: Position | None = None
        self.prepared: dict[str, Position] = dict(prepared or {})

    def observe(
        self, event: Event, fmt: Format, query: str | None = None
    ) -> XaPrepared | XaResolved | None:
        t = event.type
        if t in (c.GTID, c.ANONYMOUS_GTID, c.GTID_TAGGED):
            self.txn_start = (event.file, event.start_pos)
        elif t == c.MARIADB_GTID:
            self.txn_start = (event.file, event.start_pos)
            if len(event.body) > 12 and event.body[12] & FL_PREPARED_XA:
                gtid = parse_mariadb_gtid(event.body)
                if gtid.xid is not None:
                    self.in_xa, self._xa_begin = str(gtid.xid).lower(), self.txn_start
        elif t in (c.QUERY, c.QUERY_COMPRESSED):
            text = query if query is not None else parse_query(event, fmt).query
            statement = xa_statement(text)
            if statement is None:
                return None
            verb, xid, _ = statement
            if verb == "START":
                begin = self.txn_start or (event.file, event.start_pos)
                self.in_xa, self._xa_begin = xid, begin
            elif verb in ("COMMIT", "ROLLBACK"):
                return XaResolved(xid, verb == "COMMIT", self.prepared.pop(xid, None))
        elif t == c.XA_PREPARE:
            one_phase, xid = parse_xa_prepare(event.body)
            key = str(xid).lower()
            begin = self._xa_begin or self.txn_start or (event.file, event.start_pos)
            self.in_xa = self._xa_begin = None
            if one_phase:
                return XaPrepared(key, begin, True)
            self.prepared[key] = begin
            return XaPrepared(key, begin, False)
        return None

    def oldest_unresolved(self) -> Position | None:
        if not self.prepared:
            return None
        return min(self.prepared.values(), key=lambda p: (_file_number(p[0]), p[1]))


def track(events: Iterable[Event], fmt_of, tracker: XaTracker, until: tuple[int, int]) -> None:
    """Feed ``events`` up to the position ``until`` (file number, end pos) to ``tracker``,
    reading no row image. ``fmt_of()`` gives the current FORMAT_DESCRIPTION."""
    for event in events:
        if (_file_number(event.file), event.end_pos) > until:
            return
        if event.type in _XA_RELEVANT:
            tracker.observe(event, fmt_of())


_XA_RELEVANT = {
    c.GTID,
    c.ANONYMOUS_GTID,
    c.GTID_TAGGED,
    c.MARIADB_GTID,
    c.QUERY,
    c.QUERY_COMPRESSED,
    c.XA_PREPARE,
}
