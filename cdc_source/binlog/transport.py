"""The replication connection: ``COM_BINLOG_DUMP`` over a PyMySQL session, read in large
chunks and split into events by the event reader (:mod:`cdc_source.binlog.framing`,
:meth:`~cdc_source.binlog.events.EventReader.event_runs`; no per-packet round
through the client library).

A dump is non-blocking unless asked otherwise: the server sends everything up to the end
of its last binlog and then an EOF packet, so a reader that stops at a planned position
never waits. The driver's follower (:mod:`coordinator.follower`) holds a blocking one: the
server sends each event as it writes it, and a heartbeat while it writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cdc_source.binlog import framing
from cdc_source.binlog.events import MAX_DUMP_POSITION, EventReader, UnsupportedEventError
from cdc_source.binlog.framing import PacketStream
from cdc_source.mysql_client import SameServer, as_text, binary_logs, selected_with_identity
from cdc_source.offsets import file_number
from cdc_source.retry import RetryPolicy, resumed

COM_BINLOG_DUMP = 0x12
BINLOG_DUMP_NON_BLOCK = 0x01
# A blocking dump's heartbeat while the server writes nothing: far under any read timeout,
# so an idle dump is never taken for a lost connection.
HEARTBEAT_PERIOD_NS = 1_000_000_000


@dataclass(frozen=True)
class DumpSession:
    """What a connection about to dump learned of its server: its identity
    (:func:`cdc_source.mysql_client.server_identity`) and whether events carry a CRC32,
    which the first event of the dump (a ROTATE sent before any FORMAT_DESCRIPTION) needs
    to be read."""

    identity: str
    checksum: bool


def prepare_dump_session(conn, heartbeat: bool = False) -> DumpSession:
    """Tell the server what this reader understands: checksums as the server writes them
    (MySQL's dump thread refuses a replica that does not announce them), MariaDB's GTID
    events (capability 4, ``MARIA_SLAVE_CAPABILITY_GTID``) instead of fake BEGINs, and
    with ``heartbeat`` a heartbeat event while the server writes nothing (MySQL 8.0.26+
    reads the ``source_`` names, MariaDB and older MySQL the ``master_`` ones).

    Two round trips, whatever the server: every binlog task opens a dump, so each one
    saved is saved on every batch."""
    (checksum,), identity = selected_with_identity(conn, ("@@global.binlog_checksum",))
    assignments = [
        "@master_binlog_checksum = @@global.binlog_checksum",
        "@source_binlog_checksum = @@global.binlog_checksum",
        "@mariadb_slave_capability = 4",
    ]
    if heartbeat:
        assignments += [
            f"@master_heartbeat_period = {HEARTBEAT_PERIOD_NS}",
            f"@source_heartbeat_period = {HEARTBEAT_PERIOD_NS}",
        ]
    with conn.cursor() as cur:
        cur.execute("SET " + ", ".join(assignments))
    return DumpSession(identity, as_text(checksum).upper() == "CRC32")


def start_dump(
    conn, server_id: int, file: str, pos: int, blocking: bool = False
) -> Callable[[int], bytes]:
    """Sends the dump command; returns a reader of the raw stream (MySQL packets).

    The command's position is 4 bytes on both servers, so a position past 4 GiB (in a
    file grown past ``max_binlog_size``) is refused here, by name, before any byte is
    sent."""
    if pos > MAX_DUMP_POSITION:
        raise UnsupportedEventError(
            f"cannot start a binlog dump at {file}:{pos}: the dump command's position is "
            "4 bytes, so a binlog file cannot be read past 4 GiB; keep binlog files under "
            "4 GiB (max_binlog_size, and no transaction of that size)"
        )
    flags = 0 if blocking else BINLOG_DUMP_NON_BLOCK
    payload = (
        pos.to_bytes(4, "little")
        + flags.to_bytes(2, "little")
        + server_id.to_bytes(4, "little")
        + file.encode()
    )
    conn._execute_command(COM_BINLOG_DUMP, payload)
    return conn._rfile.read1


def probe_dump(conn, server_id: int, file: str, pos: int) -> None:
    """Open a non-blocking dump at ``file:pos`` and read it to its end, as a binlog task
    does: proves the account may read the binlog (REPLICATION SLAVE), whatever grants
    or roles give it. Raises :class:`BinlogServerError` when the server refuses."""
    prepare_dump_session(conn)
    for _ in PacketStream(start_dump(conn, server_id, file, pos)).payloads():
        pass


Connect = Callable[[], object]


class DumpSource:
    """Opens binlog dumps: each :meth:`open` is one replication stream reading from
    ``file:pos``. ``decoder`` (``scan.binlog.decoder``) chooses whether the stream is
    split into events in C or in Python (:mod:`cdc_source.binlog.framing`).

    With a ``policy`` a stream survives a lost connection or a server restart: a new dump
    starts where the last event handed to the caller ends (the event reader knows that
    position, and drops what the server sends again before it), so the caller sees one
    unbroken sequence of events (:func:`cdc_source.retry.resumed`)."""

    def __init__(
        self,
        connect: Connect,
        server_id: int,
        decoder: str | None = "auto",
        policy: RetryPolicy | None = None,
        server: str = "",
    ) -> None:
        self.connect = connect
        self.server_id = server_id
        self.splitter = framing.splitter(decoder)
        self.policy = policy or RetryPolicy(max_retries=0)
        self.server = server  # the identity the positions belong to ('' : the first seen)

    def open(
        self,
        file: str,
        pos: int,
        until: tuple[int, int] | None = None,
        blocking: bool = False,
        connected: Callable[[object], None] | None = None,
    ) -> tuple[EventReader, Iterator, Callable[[], None]]:
        """(the event reader of the dump, its events one by one, a close for the stream);
        the arguments as :meth:`open_runs`'s."""
        reader, runs, close = self.open_runs(file, pos, until, blocking, connected)
        return reader, (event for run in runs for event in run), close

    def open_runs(
        self,
        file: str,
        pos: int,
        until: tuple[int, int] | None = None,
        blocking: bool = False,
        connected: Callable[[object], None] | None = None,
    ) -> tuple[EventReader, Iterator, Callable[[], None]]:
        """(the event reader of the dump, its events in runs, a close for the stream): a
        run is an iterable of events (:meth:`~cdc_source.binlog.events.EventReader.event_runs`).

        ``until`` (file number, position): where the caller will stop. A dump that ends
        before it, while the server has written that far, is read on after a pause
        (:func:`dump_until`); where the server has not, the stream just ends and the
        caller reports the gap. ``blocking``: the stream never ends by itself; it waits
        for the server's next event. ``connected`` is handed each connection the stream
        opens (to cut it from another thread)."""
        reader = EventReader(file, pos)
        server = SameServer(f"binlog dump from {file}:{pos}", self.server)

        def one_dump() -> Iterator:
            conn = self.connect()
            try:
                if connected is not None:
                    connected(conn)
                session = prepare_dump_session(conn, heartbeat=blocking)
                # a resumed dump must read the same server's binlog
                server.check_identity(session.identity)
                reader.expect_checksum(session.checksum)
                read = start_dump(conn, self.server_id, reader.file, reader.next_start, blocking)
                yield from reader.event_runs(read, self.splitter)
            finally:
                _close(conn)

        def written(position: tuple[int, int]) -> bool:
            conn = self.connect()
            try:
                return server_has_written(conn, position)
            finally:
                _close(conn)

        def attempt() -> Iterator:
            if until is None:
                return one_dump()
            return dump_until(one_dump, lambda: reader.position, written, until)

        what = f"binlog dump (server id {self.server_id}) from {file}:{pos}"
        events = resumed(attempt, self.policy, what)
        return reader, events, events.close


EARLY_END_WAIT_S = 30.0


def dump_until(
    one_dump: Callable[[], Iterator],
    reached: Callable[[], tuple[int, int]],
    written: Callable[[tuple[int, int]], bool],
    until: tuple[int, int],
    budget_s: float = EARLY_END_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator:
    """The events of dumps from where the last one ended, until ``until`` is reached.

    MySQL's dump thread sends events only up to the binlog's synced end (with
    ``sync_binlog=1``, ``Binlog_sender`` stops at ``get_binlog_end_pos``), while
    ``SHOW BINARY LOG STATUS`` reports the flushed end, so a range read right after it
    was planned can end early. A dump that ends before ``until`` while the server's files
    show ``until`` written is read on after a pause (10 ms doubling to 0.5 s, at most
    ``budget_s`` in all); a position the server has not written is a real gap: the stream
    ends and the caller says so."""
    waited = 0.0
    pause = 0.01
    while True:
        yield from one_dump()
        if reached() >= until or waited >= budget_s or not written(until):
            return
        sleep(pause)
        waited += pause
        pause = min(pause * 2, 0.5)


def server_has_written(conn, position: tuple[int, int]) -> bool:
    """Whether the server's binlog files reach ``position`` (file number, offset)."""
    number, offset = position
    return any(
        file_number(name) > number or (file_number(name) == number and size >= offset)
        for name, size in binary_logs(conn)
    )


def _close(conn) -> None:
    try:
        conn._force_close() if hasattr(conn, "_force_close") else conn.close()
    except Exception:  # the connection may already be gone
        pass
