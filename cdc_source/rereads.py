"""Snapshots on demand while the stream runs (Debezium's ``execute-snapshot`` signal):
the requests, their validation, and their progress as the offset carries it
(docs/design.md, 'Re-reads').

A request names a captured table and optionally a ``WHERE`` condition. Its re-read emits
``r`` rows for chunks of the table, each read as of its batch's position P exactly as
the snapshot's chunks are; the table stays owned by the stream all along. Requests reach
a running query two ways:

- a file in ``<signal.directory>/signals/`` (``cdc-mysql signal``): names sort by the
  time they were written, and the offset remembers the last one taken, so a file is
  taken once and deleted once the batch that took it is committed;
- a row of the signal table (``signal.data.collection``, Debezium's columns ``id``,
  ``type``, ``data``): the offset remembers the highest ``id`` taken.

The offset holds at most :data:`MAX_REREADS` requests (one in progress, the others
queued), each condition at most :data:`MAX_CONDITION` characters: a request that finds
no room waits (its file stays, its row is read again), so offsets stay small.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, replace
from typing import Any

MAX_REREADS = 4  # requests in the offset: one in progress, the others queued
MAX_CONDITION = 512  # characters of a WHERE condition
SIGNALS_FOLDER = "signals"
SNAPSHOT = "execute-snapshot"
STOP = "stop-snapshot"
_TABLE_NAME = re.compile(r"^[^.\s`]+\.[^.\s`]+$")
_FILE_NAME = re.compile(r"^\d{20}-\d+\.json$")


class RequestError(ValueError):
    """A request for a re-read that cannot be accepted (the message says why)."""


def check_condition(condition: str | None) -> str | None:
    """A ``WHERE`` condition as a re-read's SELECT adds it (``AND (condition)``): one
    expression, no statement separator, no comment that could swallow the parenthesis,
    at most :data:`MAX_CONDITION` characters. Blank means no condition."""
    if condition is None or not condition.strip():
        return None
    condition = condition.strip()
    if len(condition) > MAX_CONDITION:
        raise RequestError(
            f"a re-read condition has at most {MAX_CONDITION} characters "
            f"(this one has {len(condition)})"
        )
    for forbidden, what in ((";", "';'"), ("--", "'--'"), ("#", "'#'"), ("/*", "'/*'")):
        if forbidden in condition:
            raise RequestError(f"a re-read condition is one SQL expression and may not hold {what}")
    if condition.count("(") != condition.count(")"):
        raise RequestError("a re-read condition's parentheses do not balance")
    return condition


def check_table(name: str) -> str:
    """A ``db.table`` name as requests spell it (the server's case is kept)."""
    name = str(name).strip()
    if not _TABLE_NAME.match(name):
        raise RequestError(f"'{name}' is not a table name of the form db.table")
    return name


@dataclass(frozen=True)
class Request:
    """One asked-for action: ``execute-snapshot`` of ``tables`` (each with its
    condition), or ``stop-snapshot`` of ``tables`` (none: every re-read)."""

    kind: str
    tables: tuple[str, ...]
    conditions: tuple[tuple[str, str], ...] = ()  # (table, condition)

    def condition(self, table: str) -> str | None:
        return dict(self.conditions).get(table)


def parse_signal(kind: str, data: str | dict | None) -> Request:
    """A request from Debezium's signal: ``type`` (``execute-snapshot`` or
    ``stop-snapshot``) and ``data``, the JSON ``{"data-collections": ["db.t"],
    "additional-conditions": [{"data-collection": "db.t", "filter": "id > 10"}]}``
    (``type``, when given inside it, must be ``incremental``)."""
    kind = str(kind or "").strip().lower()
    if kind not in (SNAPSHOT, STOP):
        raise RequestError(f"signal type '{kind}' is not {SNAPSHOT} or {STOP}")
    if data is None or data == "":
        data = {}
    if isinstance(data, (bytes, bytearray)):
        data = data.decode()
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as err:
            raise RequestError(f"a signal's data is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise RequestError("a signal's data is not a JSON object")
    snapshot_type = str(data.get("type", "incremental")).lower()
    if snapshot_type != "incremental":
        raise RequestError(f"only incremental snapshots are offered, not '{snapshot_type}'")
    tables = data.get("data-collections") or []
    if not isinstance(tables, list):
        raise RequestError("'data-collections' is not a list of table names")
    tables = tuple(dict.fromkeys(check_table(t) for t in tables))
    if kind == SNAPSHOT and not tables:
        raise RequestError("an execute-snapshot signal names no table ('data-collections')")
    conditions = []
    for entry in data.get("additional-conditions") or []:
        if not isinstance(entry, dict):
            raise RequestError("'additional-conditions' holds something else than objects")
        table = check_table(entry.get("data-collection", ""))
        if table not in tables:
            raise RequestError(f"a condition is given for {table}, which is not requested")
        condition = check_condition(entry.get("filter"))
        if condition is not None:
            conditions.append((table, condition))
    if len(dict(conditions)) != len(conditions):
        raise RequestError("two conditions are given for one table")
    return Request(kind, tables, tuple(conditions))


# -- progress in the offset ---------------------------------------------------------------
@dataclass(frozen=True)
class Reread:
    """One re-read: ``table`` where ``condition``, keys ``<= after`` done (``None``:
    none yet); ``done`` when the batch ending at this offset read its last chunk (it
    stays in the offset for that batch only, so the batch's chunks are known from its
    two offsets). ``n`` numbers the query's re-reads, so that two re-reads of a table
    in a row are told apart."""

    n: int
    table: str
    condition: str | None = None
    after: tuple | None = None
    done: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"n": self.n, "table": self.table}
        if self.condition is not None:
            obj["where"] = self.condition
        obj["after"] = None if self.after is None else list(self.after)
        if self.done:
            obj["done"] = True
        return obj

    @staticmethod
    def from_json_obj(obj: dict[str, Any]) -> Reread:
        after = obj.get("after")
        return Reread(
            n=int(obj["n"]),
            table=str(obj["table"]),
            condition=obj.get("where"),
            after=None if after is None else tuple(after),
            done=bool(obj.get("done", False)),
        )

    def describe(self) -> str:
        where = f" where {self.condition}" if self.condition else ""
        if self.done:
            done = "finished"
        elif self.after is None:
            done = "not begun"
        else:
            done = f"read to key {list(self.after)}"
        return f"re-read #{self.n} of {self.table}{where}: {done}"


@dataclass(frozen=True)
class Rereads:
    """The offset's ``rereads``: the re-reads in the offset (the first in progress, the
    rest queued), the last request file taken and the highest signal row id taken,
    and how many re-reads the query was asked for (numbering the next)."""

    queue: tuple[Reread, ...] = ()
    file: str = ""
    signal_id: int = 0
    count: int = 0

    @property
    def current(self) -> Reread | None:
        """The re-read in progress (the first not finished)."""
        return next((r for r in self.queue if not r.done), None)

    def without_finished(self) -> Rereads:
        return replace(self, queue=tuple(r for r in self.queue if not r.done))

    @property
    def room(self) -> int:
        return MAX_REREADS - len(self.queue)

    @property
    def empty(self) -> bool:
        return self == Rereads()

    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"n": self.count}
        if self.queue:
            obj["queue"] = [r.to_json_obj() for r in self.queue]
        if self.file:
            obj["file"] = self.file
        if self.signal_id:
            obj["id"] = self.signal_id
        return obj

    @staticmethod
    def from_json_obj(obj: dict[str, Any] | None) -> Rereads:
        if not obj:
            return Rereads()
        return Rereads(
            queue=tuple(Reread.from_json_obj(r) for r in obj.get("queue", ())),
            file=str(obj.get("file", "")),
            signal_id=int(obj.get("id", 0)),
            count=int(obj.get("n", 0)),
        )

    def taking(self, request: Request) -> Rereads:
        """With ``request`` applied: a snapshot queues one re-read per table (the caller
        checked there is room), a stop drops the re-reads of its tables (every one when
        it names none)."""
        if request.kind == STOP:
            keep = tuple(r for r in self.queue if request.tables and r.table not in request.tables)
            return replace(self, queue=keep)
        queue, count = list(self.queue), self.count
        for table in request.tables:
            count += 1
            queue.append(Reread(count, table, request.condition(table)))
        return replace(self, queue=tuple(queue), count=count)

    def fits(self, request: Request) -> bool:
        return request.kind == STOP or len(request.tables) <= self.room

    def advanced(self, after: tuple | None) -> Rereads:
        """The current re-read read to key ``after``, or to its table's end (``None``:
        marked ``done``)."""
        current = self.current
        moved = replace(current, after=after, done=after is None)
        return replace(self, queue=tuple(moved if r is current else r for r in self.queue))

    def dropped(self, n: int) -> Rereads:
        return replace(self, queue=tuple(r for r in self.queue if r.n != n))


def read_between(start: Rereads, end: Rereads) -> tuple[Reread, tuple | None] | None:
    """The re-read whose chunks the batch from ``start`` to ``end`` reads, and the key
    they start after: the first re-read of ``end`` that moved since ``start`` (one not
    in ``start`` was taken in the batch, from no key). None: the batch reads none."""
    before = {r.n: r for r in start.queue}
    for reread in end.queue:
        was = before.get(reread.n, Reread(reread.n, reread.table, reread.condition))
        if (reread.after, reread.done) != (was.after, was.done):
            return reread, was.after
    return None


# -- request files (cdc-mysql signal) -------------------------------------------------------
def signals_folder(directory: str) -> str:
    """Where request files of a query live: ``signals`` in its ``signal.directory``
    (the checkpoint location, as ``cdc-mysql signal`` is given it)."""
    if directory.startswith("file:"):
        directory = directory[len("file:") :]
        while directory.startswith("//"):
            directory = directory[1:]
    return os.path.join(directory, SIGNALS_FOLDER)


def request_to_json(request: Request) -> str:
    data: dict[str, Any] = {"data-collections": list(request.tables)}
    if request.conditions:
        data["additional-conditions"] = [
            {"data-collection": t, "filter": c} for t, c in request.conditions
        ]
    return json.dumps({"type": request.kind, "data": data}, sort_keys=True)


def request_from_json(text: str) -> Request:
    try:
        obj = json.loads(text)
    except ValueError as err:
        raise RequestError(f"a request file is not JSON: {err}") from None
    if not isinstance(obj, dict):
        raise RequestError("a request file does not hold a JSON object")
    return parse_signal(obj.get("type"), obj.get("data"))


def request_files(directory: str, after: str = "") -> list[str]:
    """The names of the request files after ``after``, oldest first."""
    folder = signals_folder(directory)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if _FILE_NAME.match(n) and n > after)


def read_request_file(directory: str, name: str) -> Request:
    with open(os.path.join(signals_folder(directory), name), encoding="utf-8") as f:
        return request_from_json(f.read())


def write_request_file(directory: str, request: Request, after: str = "") -> str:
    """Leaves ``request`` in the folder (written whole, then renamed into place) under a
    name that sorts after every file there and after ``after`` (the last one the query
    took), so the query takes it once. Returns the name."""
    folder = signals_folder(directory)
    os.makedirs(folder, exist_ok=True)
    latest = max([after, *request_files(directory)])
    stamp = time.time_ns()
    if latest:
        stamp = max(stamp, int(latest.split("-")[0]) + 1)
    name = f"{stamp:020d}-{os.getpid()}.json"
    temporary = os.path.join(folder, f".{name}.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(request_to_json(request))
    os.replace(temporary, os.path.join(folder, name))
    return name


def delete_request_files(directory: str, upto: str) -> None:
    """Deletes the request files taken up to ``upto`` (a batch with them is committed);
    a file already gone is fine."""
    if not upto:
        return
    folder = signals_folder(directory)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if _FILE_NAME.match(name) and name <= upto:
            try:
                os.remove(os.path.join(folder, name))
            except FileNotFoundError:
                pass
