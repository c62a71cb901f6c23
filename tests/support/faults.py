"""Faults a production capture meets, made on purpose: a TCP proxy that cuts every
connection through it, a Python worker killed in the middle of a task, and a writer that
keeps writing through a server restart."""

from __future__ import annotations

import os
import select
import signal
import socket
import threading
import time
from pathlib import Path

import pymysql

from tests.support.workload import Writer


class CuttingProxy:
    """Forwards 127.0.0.1:``port`` to ``target`` and resets every open connection each
    ``interval`` seconds (a flaky network, a load balancer dropping sessions)."""

    def __init__(self, target_port: int, interval: float, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.interval = interval
        self.cuts = 0
        self.connections = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))  # a port no one else holds
        self.port = self._listener.getsockname()[1]
        self._threads = [
            threading.Thread(target=self._accept, daemon=True),
            threading.Thread(target=self._cut_periodically, daemon=True),
        ]

    def start(self) -> CuttingProxy:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:  # the server is down: refuse, as the server itself would
                _reset(client)
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        """Both directions; an orderly close of one side is passed on as a half-close, so
        data still in flight (a dump's last packets) arrives before the end."""
        peers = {client: upstream, upstream: client}
        open_sides = set(peers)
        try:
            while open_sides and not self._stop.is_set():
                ready, _, _ = select.select(list(open_sides), [], [], 0.5)
                for sock in ready:
                    data = sock.recv(1 << 16)
                    if data:
                        peers[sock].sendall(data)
                        continue
                    open_sides.discard(sock)
                    try:
                        peers[sock].shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
        except (OSError, ValueError):  # a cut closed the sockets under select()
            pass
        finally:
            for sock in peers:
                try:
                    sock.close()
                except OSError:
                    pass

    def _cut_periodically(self) -> None:
        while not self._stop.wait(self.interval):
            self.cut()

    def cut(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, upstream in pairs:
            _reset(client)
            _reset(upstream)
        if pairs:
            self.cuts += 1


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a dropped connection looks to the peer."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def python_workers() -> list[int]:
    """PIDs of this test process's Spark's Python workers: processes forked by a
    ``pyspark.daemon`` that descends from this process (the suite may run in several
    processes, each with its own Spark, whose workers are not this one's to kill)."""
    parents: dict[int, int] = {}
    daemons: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(entry.name)] = parent
        if b"pyspark.daemon" in cmdline:
            daemons.add(int(entry.name))
    mine = {d for d in daemons if _descends_from(d, os.getpid(), parents)}
    return [pid for pid, parent in parents.items() if parent in mine and pid in daemons]


def _descends_from(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    seen = set()
    while pid not in seen and pid > 1:
        if pid == ancestor:
            return True
        seen.add(pid)
        pid = parents.get(pid, 1)
    return False


def kill_python_workers() -> int:
    """SIGKILL every Python worker; returns how many were killed."""
    killed = 0
    for pid in python_workers():
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    return killed


def source_sessions(server, user: str) -> list[tuple[str, str]]:
    """(command, statement) of ``user``'s sessions on the server."""
    rows = server.query(
        "SELECT COMMAND, COALESCE(INFO, '') FROM information_schema.PROCESSLIST WHERE USER = %s",
        (user,),
    )
    return [(str(command), str(info)) for command, info in rows]


class EnduringWriter(Writer):
    """The workload writer, reconnecting after the server went away (a write whose
    outcome was lost with the connection is simply not counted: the final check reads
    the table itself)."""

    def run(self) -> None:
        self.outages = 0
        while not self.stop_event.is_set():
            try:
                with self.server.admin(self.database) as conn, conn.cursor() as cur:
                    while not self.stop_event.wait(self.interval):
                        self._one(cur)
                        self.operations += 1
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError, OSError):
                self.outages += 1
                time.sleep(0.2)
            except BaseException as err:  # surfaced by stop()
                self.error = err
                return
