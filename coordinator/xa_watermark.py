"""The XA watermark of a planned position P: where the oldest XA transaction that is
prepared but unresolved at P begins (``BinlogPosition.xa``).

A batch (P_S, P_E] emits an XA transaction at its commit, and its rows were written at
its prepare, possibly before P_S; chunk normalization undoes (P_E, Q] the same way. So the
offset carries the watermark, and readers read its XA statements from there
(docs/design.md, 'What the binlog may hold'). It is computed by reading the binlog's XA
statements, never row images, from the previous watermark (or P_S) to P_E, and it is a
pure function of P_E and the binlog.

Most servers never run XA. Then the scan is skipped: when, after P_E was read, the
server's XA statement counters (``Com_xa_*``) are all zero and ``XA RECOVER`` lists
nothing, no XA transaction can be prepared and unresolved at P_E. A transaction prepared
in this server run counts ``Com_xa_prepare`` (and ``Com_xa_start``/``Com_xa_end``) when its
statement starts, before its events reach the binlog; one prepared before a restart is
listed by ``XA RECOVER`` until it is resolved, and its resolution counts
``Com_xa_commit``/``Com_xa_rollback`` (status counters: MySQL and MariaDB
``sql_parse.cc``, ``com_stat[lex->sql_command]++`` before execution).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cdc_source.binlog import constants as c
from cdc_source.binlog.transport import DumpSource
from cdc_source.binlog.xa import Position, XaTracker, xa_statement
from cdc_source.mysql_client import binary_logs
from cdc_source.offsets import BinlogPosition
from cdc_source.offsets import file_number as _file_number
from cdc_source.retry import RetryPolicy, is_transient, retrying
from coordinator.range_pass import TRANSACTION_STARTS, Listener, RangePass, Where, query_of

log = logging.getLogger("cdc_mysql")

_COUNTERS = ("com_xa_start", "com_xa_end", "com_xa_prepare", "com_xa_commit", "com_xa_rollback")


class XaWatermarkError(RuntimeError):
    pass


class XaWatermark:
    """The watermark of a planned position. The driver's planning hands a
    :class:`XaListener` to its one pass over a batch's range (:meth:`needed` says
    whether it must); :meth:`at` reads a range of its own, or searches back from a
    position with no earlier one."""

    def __init__(
        self,
        connect: Callable[[], object],
        server_id: int,
        policy: RetryPolicy | None = None,
        source: DumpSource | None = None,
    ) -> None:
        self.policy = policy or RetryPolicy(max_retries=0)
        self._connect = connect
        self._source = source or DumpSource(connect, server_id, policy=self.policy)
        self.scans = 0  # binlog scans done (tests and logs)

    def at(self, start: BinlogPosition | None, end: BinlogPosition) -> Position | None:
        """The watermark of ``end``, given the batch start (None before the first batch)."""
        if not self.needed(start):
            return None
        if start is not None:
            return self._scan(self.origin(start), end).oldest_unresolved()
        return self._search_back(end)

    def needed(self, start: BinlogPosition | None) -> bool:
        """Whether the watermark must be read: an XA transaction was open at ``start``, or
        the server's XA counters say one may have been prepared (read after the end)."""
        return (start is not None and start.xa is not None) or not self._idle()

    @staticmethod
    def origin(start: BinlogPosition) -> Position:
        """Where a pass reads the XA statements of a batch from ``start``: the oldest
        unresolved prepare at ``start``, or ``start``."""
        return start.xa or (start.file, start.pos)

    def _idle(self) -> bool:
        return retrying(self.policy, "reading the XA counters", self._read_idle)

    def _read_idle(self) -> bool:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Com\\_xa\\_%%'")
                counters = {str(k).lower(): int(v) for k, v in cur.fetchall()}
                if any(counters.get(name, 0) for name in _COUNTERS):
                    return False
                try:
                    cur.execute("XA RECOVER")
                    return not cur.fetchall()
                except Exception as err:  # MySQL 8 needs XA_RECOVER_ADMIN: scan instead
                    if is_transient(err):
                        raise  # a lost connection is retried, not taken for "unknown"
                    return False
        finally:
            conn.close()

    def _scan(self, origin: Position, end: BinlogPosition) -> XaTracker:
        self.scans += 1
        listener = XaListener((origin[0], origin[1]))
        RangePass(self._source).run(origin, end, [listener])
        return listener.tracker

    def _search_back(self, end: BinlogPosition) -> Position | None:
        """No earlier position is known (the first batch): find the prepares of the
        transactions ``XA RECOVER`` lists, file by file back from ``end``."""
        files, wanted = retrying(self.policy, "listing prepared XA transactions", self._prepared)
        files = [f for f in files if _file_number(f) <= end.file_number]
        if not files:
            return None
        if wanted is None:  # which transactions are prepared is unknown: read every file once
            tracker = self._scan((files[0], 4), end)
        else:
            for first in range(len(files) - 1, -1, -1):
                tracker = self._scan((files[first], 4), end)
                if wanted <= set(tracker.prepared):
                    break
        if wanted and not wanted <= set(tracker.prepared):
            missing = ", ".join(sorted(wanted - set(tracker.prepared)))
            log.warning(
                "XA transactions %s are prepared but their PREPARE is not in the binlog files "
                "the server keeps; if they commit, the query stops with an error",
                missing,
            )
        return tracker.oldest_unresolved()

    def _prepared(self) -> tuple[list[str], set[str] | None]:
        """The binlog files and the prepared XA transactions (see :func:`_recovered`)."""
        conn = self._connect()
        try:
            files = [name for name, _ in binary_logs(conn)]
            with conn.cursor() as cur:
                return files, _recovered(cur)
        finally:
            conn.close()


def _recovered(cur) -> set[str] | None:
    """The prepared XA transactions, as the binlog spells their ids; None if unknown.

    MySQL: ``XA RECOVER CONVERT XID`` gives the data as hex. MariaDB has no CONVERT XID;
    its plain ``XA RECOVER`` gives the raw bytes (gtrid then bqual)."""
    try:
        cur.execute("XA RECOVER CONVERT XID")
        rows = [(r[0], int(r[1]), int(r[2]), _from_hex(r[3])) for r in cur.fetchall()]
    except Exception as err:
        if is_transient(err):
            raise
        try:
            cur.execute("XA RECOVER")
            rows = [(r[0], int(r[1]), int(r[2]), _raw(r[3])) for r in cur.fetchall()]
        except Exception as again:  # MySQL 8 without XA_RECOVER_ADMIN
            if is_transient(again):
                raise
            return None
    return {
        f"x'{data[:g].hex()}',x'{data[g : g + b].hex()}',{int(format_id)}"
        for format_id, g, b, data in rows
    }


def _from_hex(value) -> bytes:
    text = value.decode() if isinstance(value, bytes) else str(value)
    return bytes.fromhex(text[2:] if text.lower().startswith("0x") else text)


def _raw(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


_XA_EVENTS = frozenset({*TRANSACTION_STARTS, c.QUERY, c.QUERY_COMPRESSED, c.XA_PREPARE})


class XaListener(Listener):
    """The XA transactions prepared and not resolved, from a pass's events (a listener
    of :mod:`coordinator.range_pass`). It reads from the oldest unresolved prepare at the
    batch's start (``early``): those before the start count at once, those in the range
    are pending until the batch takes their transaction. Only GTID events, XA
    statements and XA_PREPARE are looked at; what it holds is the open transactions, and
    the few events of the transaction read past the last boundary."""

    kinds = _XA_EVENTS
    early = True
    plain_kinds = frozenset({c.QUERY})  # BEGIN, folded, is no XA statement

    def __init__(self, start: tuple[str, int], prepared: dict[str, Position] | None = None):
        self.tracker = XaTracker(prepared)
        self._start = (_file_number(start[0]), start[1])
        self.pending: list[tuple] = []  # (event, format, statement) past the last boundary
        self.last: Where | None = None

    def see(self, event, reader, where: Where) -> None:
        text = None
        if event.type in (c.QUERY, c.QUERY_COMPRESSED):
            text = query_of(event, reader).query
            if xa_statement(text) is None:
                return  # BEGIN, COMMIT, DDL: nothing the tracker follows
        if where <= self._start:
            self.tracker.observe(event, reader.format, text)
        else:
            self.pending.append((event, reader.format, text))

    def boundary(self, where: Where) -> None:
        self._take()
        self.last = where

    def finish(self, end: Where, reached: Where) -> None:
        if end == self.last:
            self.pending.clear()
        else:
            self._take()

    def _take(self) -> None:
        for event, fmt, text in self.pending:
            self.tracker.observe(event, fmt, text)
        self.pending.clear()

    def oldest_unresolved(self) -> Position | None:
        return self.tracker.oldest_unresolved()
