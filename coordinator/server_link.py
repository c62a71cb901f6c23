"""The driver's link to the server (docs/design.md, 'Epochs across servers'): every
connection of the driver, the identity of the server its offsets' positions belong to,
what that server is and offers, and how a change of server (a fail-over) is followed.

The order of calls a planning step makes:

1. :meth:`ServerLink.following` runs the step; a server change met anywhere inside it
   (any connection of the driver reaching another server) raises
   :class:`~cdc_source.mysql_client.ServerChangeFollowed`, and the step runs again from
   its offsets, now against the new server.
2. Inside the step, :meth:`ServerLink.on_this_server` turns each offset into one whose
   position is in the binlog of the server reached now: itself on the same server, found
   by its GTID state on another one (one epoch later).
3. :meth:`ServerLink.ensure_available` checks a batch's start exists there before data
   moves; :meth:`ServerLink.head` reads the head.

Whoever owns state of the old server (statement scans, GTID trackers, a resolved start)
registers ``on_change``, called when a change is followed, before the step starts again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from cdc_source.binlog.transport import DumpSource
from cdc_source.failover import relocate, server_binlog
from cdc_source.gtid import expand, parse_state
from cdc_source.mysql_client import (
    SameServer,
    ServerChangedError,
    ServerChangeFollowed,
    binary_logs,
    connect,
    read_head,
    variables,
)
from cdc_source.offsets import BinlogPosition, SourceOffset
from cdc_source.options import SourceOptions
from cdc_source.preflight import check_binlog_available
from cdc_source.retry import Reconnecting
from cdc_source.visibility import ServerTraits, describe, read_traits

log = logging.getLogger("cdc_mysql")

# Server changes one planning step follows before it gives up (each starts it again).
FOLLOWED_CHANGES = 4


class SourceStateError(RuntimeError):
    """The checkpoint and the current options or server disagree."""


class ServerLink:
    """The driver's connections and the server they must reach.

    ``session`` is one connection for head reads and checks, re-opened after a fault (a
    restarted server or a cut connection leaves a dead one that PyMySQL cannot tell from a
    live one until it is used). ``dump`` opens binlog dumps for the driver's passes over
    the binlog, with the range's last server id, one at a time. Every connection is checked
    against :attr:`server`: the identity the offsets' positions belong to."""

    def __init__(self, options: SourceOptions, on_change: Callable[[], None]) -> None:
        self.options = options
        self._on_change = on_change
        policy = options.retry_policy()
        self.server = SameServer("the driver's connection", on_change=self._server_changed)
        self.session = Reconnecting(self.open_session, policy, "the driver's head read or check")
        self.dump = DumpSource(
            self.open_session, options.server_ids.last, options.binlog_decoder, policy=policy
        )
        self._traits: ServerTraits | None = None
        self._checked = False  # the server's GTIDs include the offsets' (once a run)
        self._available: BinlogPosition | None = None  # the last start found on the server
        self._relocated: dict[BinlogPosition, BinlogPosition] = {}

    def open_session(self):
        """A new connection, checked to reach the offsets' server."""
        return self.server.checked(connect(self.options.connection_kwargs()))

    def traits(self) -> ServerTraits:
        """What the server is and offers, read once per server: its flavor, whether it has
        GTIDs (then offsets carry the exact GTID state) and the visibility proof of
        snapshot tasks (:mod:`cdc_source.visibility`)."""
        if self._traits is None:
            self._traits = self.session.run(
                lambda conn: read_traits(conn, self.options.snapshot_visibility)
            )
            log.info(
                "server: %s, GTIDs %s; snapshot visibility: %s",
                self._traits.flavor,
                "tracked in offsets" if self._traits.gtids else "off",
                describe(self._traits.visibility),
            )
        return self._traits

    def identity(self) -> str:
        """The server the offsets' positions belong to (connecting once if need be)."""
        if self.server.identity is None:
            self.session.run(lambda conn: None)
        return self.server.identity or ""

    def head(self) -> BinlogPosition:
        """The binlog head, without its GTID state."""
        file, pos, _, ts = self.session.run(read_head)
        return BinlogPosition(file, pos, "", ts)

    def files_and_clock(self) -> tuple[list[tuple[str, int]], int]:
        """``SHOW BINARY LOGS`` and the server's clock (ms), for resolving a start."""
        return self.session.run(_files_and_clock)

    def ensure_available(self, position: BinlogPosition | None) -> None:
        """The start of every batch exists on the server (one ``SHOW BINARY LOGS``): a
        purge, a fail-over or a crash that lost events is an error before data moves."""
        if position is None or position == self._available:
            return  # latest() and tasks() of one batch share its start: checked once
        self.session.run(lambda conn: check_binlog_available(conn, position))
        self._available = position

    def following(self, step, *args):
        """``step(*args)``, done again from the start while a server change met during it
        is followed (:meth:`_server_changed`): every pass over the binlog then starts from
        positions found on the server reached, never from another server's file."""
        for _ in range(FOLLOWED_CHANGES - 1):
            try:
                return step(*args)
            except ServerChangeFollowed as change:
                log.warning("fail-over during the step: %s; done again there", change)
        return step(*args)

    def on_this_server(self, offset: SourceOffset) -> SourceOffset:
        """``offset`` with its position in the binlog of the server reached now: itself on
        the same server; found by its GTID state on another one (:mod:`cdc_source.failover`),
        one epoch later. Checked against the server's GTIDs once per query run.

        One round trip first: a connection cut by a fail-over is only found dead when used,
        and the identity it reopens with decides what the offset means."""
        self.session.run(_ping)
        identity = self.identity()
        position = offset.binlog
        if offset.server and offset.server != identity and position is not None:
            return replace(offset, binlog=self._relocate(offset, identity), server=identity)
        if not self._checked:
            if position is not None and position.gtids and self.traits().gtids:
                traits = self.traits()
                self.session.run(lambda conn: check_gtid_history(conn, position, traits))
            self._checked = True
        return offset

    def _relocate(self, offset: SourceOffset, identity: str) -> BinlogPosition:
        position = offset.binlog
        if not (self.traits().gtids and position.gtids):
            raise ServerChangedError(
                f"the checkpoint's binlog positions are of another server "
                f"({offset.server}) than the one reached now ({identity}), and carry no "
                "GTID state to find them there (gtid_mode=OFF). Start a new query with a "
                "new checkpoint location"
            )
        moved = self._relocated.get(position)
        if moved is None:
            traits = self.traits()
            files, before = self.session.run(lambda conn: server_binlog(conn, traits.flavor))
            moved = relocate(position, self.dump.open, files, traits.flavor, before)
            self._relocated[position] = moved
            log.warning(
                "fail-over: the checkpoint's position %s on %s is %s on %s (GTIDs %s), epoch %d",
                position,
                offset.server,
                moved,
                identity,
                expand(position.gtids),
                moved.epoch,
            )
        return moved

    def _server_changed(self, before: str, after: str) -> None:
        """A connection of the driver reached another server than before (a fail-over):
        followed where positions can be found there by their GTID state, else an error."""
        if self._traits is not None and not self._traits.gtids:
            raise ServerChangedError(
                f"the driver's connection reached another server ({after}; the query's binlog "
                f"positions are those of {before}), and without GTIDs (gtid_mode=OFF) they "
                "cannot be found there. Start a new query with a new checkpoint location"
            )
        log.warning(
            "fail-over: the driver now reaches %s (was %s); the next batch starts at the "
            "checkpoint's position found there by its GTID state",
            after,
            before,
        )
        self._checked = False
        self._available = None
        self._traits = None
        self._on_change()
        # The step that met the new server holds positions of the old one (a batch start
        # relocated before the change, a file name): it starts again from its offsets.
        raise ServerChangeFollowed(f"the driver's connection reached {after} (was {before})")

    def close(self) -> None:
        self.session.close()


def _files_and_clock(conn) -> tuple[list[tuple[str, int]], int]:
    files = binary_logs(conn)
    with conn.cursor() as cur:
        cur.execute("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")
        (now_ms,) = cur.fetchone()
    return files, int(now_ms)


def _ping(conn) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchall()


def check_gtid_history(conn, position: BinlogPosition, traits: ServerTraits) -> None:
    """The server's GTID state contains the one at ``position``: else its binlog was reset
    (``RESET BINARY LOGS AND GTIDS``, ``RESET MASTER``) or it is another server, and the
    same file and offset would name other events."""
    name = "gtid_binlog_pos" if traits.flavor == "mariadb" else "gtid_executed"
    now = parse_state(variables(conn, [name]).get(name, ""), traits.flavor)
    then = parse_state(position.gtids, traits.flavor)
    if not now.contains(then):
        raise SourceStateError(
            f"the server's GTIDs ({name}={now.text() or 'empty'}) do not include those of the "
            f"checkpoint's position {position} ({then.text()}): the server's binlog was reset "
            "or this is another server, so the checkpoint's positions name other events. "
            "Start a new query with a new checkpoint location"
        )
