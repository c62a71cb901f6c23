"""GTID states read from the binlog: the state at a position (the driver's
:mod:`coordinator.gtid_tracker`), and the position of a state on another server
(:func:`locate`, for following a fail-over).

A position's state is the file's starting state (MySQL ``PREVIOUS_GTIDS``: every
transaction of earlier files; MariaDB ``GTID_LIST``: the last GTID of each domain) plus
the GTID events of the file up to it. Row images are never decoded.
"""

from __future__ import annotations

from collections.abc import Iterable

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import Event
from cdc_source.binlog.gtid_events import (
    mariadb_gtid_key,
    parse_mariadb_gtid_list,
    parse_mysql_gtid,
    parse_previous_gtids,
)
from cdc_source.gtid import GtidSet, GtidState, MariaGtidPos, missing, parse_state
from cdc_source.offsets import file_number as _file_number


class GtidLocateError(RuntimeError):
    """A GTID state has no exact binlog position on the server reached. ``lacks``: the
    transactions of the state the server's binlog lacks, where that is the reason (as
    the server spells them); ``at_end``: the binlog ended before it had them all."""

    transient = False

    def __init__(self, message: str, lacks: str = "", at_end: bool = False) -> None:
        super().__init__(message)
        self.lacks = lacks
        self.at_end = at_end


def new_state(flavor: str) -> GtidState:
    return MariaGtidPos() if flavor == "mariadb" else GtidSet()


def apply_gtid_events(
    state: GtidState, events: Iterable[Event], until: tuple[int, int]
) -> tuple[int, int]:
    """Add to ``state`` the GTIDs of ``events`` that end at or before ``until`` (file
    number, end position); returns the position reached: ``until`` itself, the end of
    the stream before it, or the end of the event that crosses it. A file's starting
    state event is added too: it is the state before the file, so adding it to a state
    read from an earlier file changes nothing."""
    reached = (0, 0)
    file, number = "", 0
    for event in events:
        if event.file != file:  # a per-event cost: the driver reads every event of a range
            file, number = event.file, _file_number(event.file)
        where = (number, event.end_pos)
        if where > until:
            return reached if reached == until else where
        reached = where
        if event.type in _STATE_EVENTS:
            add_event(state, event)
        if where == until:
            return until
    return reached


# The events add_event looks at: a transaction's GTID, a file's starting state.
_STATE_EVENTS = frozenset(
    {c.MARIADB_GTID, c.GTID, c.GTID_TAGGED, c.MARIADB_GTID_LIST, c.PREVIOUS_GTIDS}
)


def add_event(state: GtidState, event: Event) -> None:
    gtid = event_gtid(state, event)
    if gtid is not None:
        add_gtid(state, gtid)
    elif event.type == c.MARIADB_GTID_LIST and isinstance(state, MariaGtidPos):
        for domain, server, seq in parse_mariadb_gtid_list(event.body):
            state.add(domain, server, seq)
    elif event.type == c.PREVIOUS_GTIDS and isinstance(state, GtidSet):
        state.update(parse_previous_gtids(event.body))


def event_gtid(state: GtidState, event: Event) -> tuple | None:
    """The GTID a transaction's first event names, in ``state``'s flavor, else None:
    MariaDB (domain, server id, seq no); MySQL (uuid, tag, number)."""
    if isinstance(state, MariaGtidPos):
        if event.type != c.MARIADB_GTID:
            return None
        return mariadb_gtid_key(event.body, event.server_id)
    if event.type in (c.GTID, c.GTID_TAGGED):
        return parse_mysql_gtid(event)
    return None


def gtid_text(event: Event) -> str | None:
    """The GTID a transaction's GTID event names, in its server's syntax (MariaDB
    'domain-server-seq', MySQL 'uuid:n' or 'uuid:tag:n'); None for an anonymous one."""
    if event.type == c.MARIADB_GTID:
        return _text(mariadb_gtid_key(event.body, event.server_id))
    if event.type in (c.GTID, c.GTID_TAGGED):
        return _text(parse_mysql_gtid(event))
    return None


def add_gtid(state: GtidState, gtid: tuple) -> None:
    if isinstance(state, MariaGtidPos):
        state.add(*gtid)
    else:
        uuid, tag, gno = gtid
        state.add(uuid, gno, tag)


def _has(state: GtidState, gtid: tuple) -> bool:
    if isinstance(state, MariaGtidPos):
        domain, _, seq = gtid
        return domain in state.domains and state.domains[domain][1] >= seq
    uuid, tag, gno = gtid
    return any(a <= gno <= b for a, b in state.intervals.get((uuid, tag), []))


def file_start_state(events: Iterable[Event], flavor: str) -> GtidState:
    """The GTID state a binlog file starts with, from a dump of it read from position 4
    (its first events), without reading on past the first transaction."""
    state = new_state(flavor)
    for event in events:
        if event.type in (c.PREVIOUS_GTIDS, c.MARIADB_GTID_LIST):
            add_event(state, event)
            break
        if event_gtid(state, event) is not None or event.type in c.ROW_EVENTS:
            break
    return state


def locate(
    open_dump, files: list[str], stored: str, flavor: str, before: str = ""
) -> tuple[str, int]:
    """Where, in the binlog of the server reached, the GTID state ``stored`` holds
    exactly: after the last transaction it includes and before the first it does not.

    ``open_dump(file, pos)`` gives ``(reader, events, close)``; ``files`` are the
    server's binlog files, oldest first; ``before`` is what the server executed before
    its oldest file and no file's starting state names (:func:`executed_before_binlog`),
    part of every position's state. The file to read is the newest whose starting state
    is within ``stored``; it and the files after it are read for their GTID events until
    the first transaction not in ``stored``. Every transaction before that one must be in
    ``stored`` and the state there must equal it: a server whose binlog lacks some of
    them, or holds them in another order, has no such position, and the error names the
    transactions it lacks."""
    target = parse_state(stored, flavor)
    earlier = parse_state(before, flavor) if before else new_state(flavor)
    first, start = None, new_state(flavor)
    for index in range(len(files) - 1, -1, -1):
        reader, events, close = open_dump(files[index], 4)
        try:
            start = file_start_state(events, flavor)
        finally:
            close()
        _include(start, earlier)
        if target.contains(start):
            first = index
            break
    if first is None:
        raise GtidLocateError(
            f"none of this server's binlog files ({files[0]} to {files[-1]}) starts at or "
            f"before the GTID state {target.text()} (the oldest starts at "
            f"{start.text() or 'nothing'}): the binlog it needs was purged, or this server "
            "was built from a copy taken after it. Start a new query with a new checkpoint "
            "location"
        )
    state = new_state(flavor)
    _include(state, earlier)
    reader, events, close = open_dump(files[first], 4)
    last_end: tuple[str, int] | None = None
    try:
        for event in events:
            gtid = event_gtid(state, event)
            if gtid is not None and not _has(target, gtid):
                if state.text() != target.text() and not _before_binlog(
                    state, target, earlier, gtid, events
                ):
                    where = (
                        f"before its transaction {_text(gtid)} at {event.file}:{event.start_pos}"
                    )
                    raise _lacking(state, target, where)
                return event.file, event.start_pos
            add_event(state, event)
            last_end = (event.file, event.end_pos)
    finally:
        close()
    if last_end is not None and (
        state.text() == target.text() or _before_binlog(state, target, earlier, None, ())
    ):
        return last_end
    raise _lacking(state, target, "up to the end of its binlog", at_end=True)


def _before_binlog(
    state: GtidState, target: GtidState, earlier: GtidState, current: tuple | None, rest
) -> bool:
    """MariaDB: whether the state the binlog gives at a point (``state``, before the
    transaction ``current``, ``rest`` the events after it) is ``target`` once what the
    server executed before its binlog is counted. A replica built from a dump logs its
    first transaction of a domain after the dump's, so a domain its binlog has not named
    yet is at ``target``'s GTID exactly when its first logged transaction is the next
    one in strict order (seq + 1), or, where it logs none, when ``earlier``
    (``gtid_slave_pos``) is at it."""
    if not isinstance(target, MariaGtidPos) or not isinstance(earlier, MariaGtidPos):
        return False
    lacking = {
        domain: seq
        for domain, (server, seq) in target.domains.items()
        if state.domains.get(domain) != (server, seq)
    }
    if any(domain in state.domains for domain in lacking) or set(state.domains) - set(
        target.domains
    ):
        return False  # a domain the binlog names at another GTID: not the same history
    first: dict[int, int] = {}  # the first GTID the binlog logs from here, by domain
    if current is not None:
        first[current[0]] = current[2]
    for event in rest:
        if lacking.keys() <= first.keys():
            break
        gtid = event_gtid(state, event)
        if gtid is not None:
            first.setdefault(gtid[0], gtid[2])
    return all(
        first[domain] == seq + 1
        if domain in first
        else earlier.domains.get(domain, (0, -1))[1] == seq
        for domain, seq in lacking.items()
    )


def _include(state: GtidState, earlier: GtidState) -> None:
    """``earlier`` (MySQL: the GTIDs executed before the oldest binlog file) added to
    ``state``. MariaDB's ``earlier`` moves on with replication: it is weighed per domain
    where the binlog's own state falls short (:func:`_before_binlog`)."""
    if isinstance(state, GtidSet) and isinstance(earlier, GtidSet):
        state.update(earlier)


def _lacking(
    state: GtidState, target: GtidState, where: str, at_end: bool = False
) -> GtidLocateError:
    """The refusal of a server whose binlog does not reach the state ``target``: which
    transactions the query has read that it lacks, and what the operator can do."""
    lacks = missing(state, target).text()
    what = "transactions" if isinstance(target, GtidSet) else "the transactions up to"
    return GtidLocateError(
        f"this server lacks transactions the query has read: {what} {lacks} "
        f"(its binlog holds {state.text() or 'nothing'} {where}; the query's position is "
        f"after {target.text()}). They were not replicated before the fail-over (or this "
        "server holds them later, in another order). Apply them to this server from the "
        "old primary's binlog if it is still there and restart the query, or start a new "
        "query with a new checkpoint location",
        lacks,
        at_end,
    )


def executed_before_binlog(conn, flavor: str) -> str:
    """What the server executed that none of its binlog files' starting states names.

    MySQL: ``@@gtid_purged``, the transactions executed before its oldest binlog file:
    those of purged files (which the oldest file's PREVIOUS_GTIDS names too) and those
    of a server built from a dump or a clone, set by ``SET GLOBAL gtid_purged``, which
    MySQL writes into no file's PREVIOUS_GTIDS. Part of every position's state.

    MariaDB: ``@@gtid_slave_pos``, the last GTID of each domain the server applied as a
    replica. It moves on with every transaction replicated since, so it is not the state
    before the binlog; it tells only, for a domain the binlog never names, how far the
    server got before it (a replica built from a dump, ``SET GLOBAL gtid_slave_pos``)."""
    variable = "gtid_slave_pos" if flavor == "mariadb" else "gtid_purged"
    with conn.cursor() as cur:
        cur.execute(f"SELECT @@global.{variable}")
        (value,) = cur.fetchone()
    text = value.decode() if isinstance(value, (bytes, bytearray)) else str(value or "")
    return "".join(text.split())


def _text(gtid: tuple) -> str:
    if len(gtid) == 3 and isinstance(gtid[0], int):
        return "-".join(str(part) for part in gtid)
    uuid, tag, gno = gtid
    return f"{uuid}:{tag + ':' if tag else ''}{gno}"
