"""Spark offsets of the source: a binlog position and, during the snapshot, a frontier.

The offset is the whole truth of a query's progress (docs/design.md, 'Offsets')::

    {"v": 1, "tables": "16 hex digits", "server": "server_id=N ...",
     "binlog": {"file": "...", "pos": N, "gtids": "...", "ts": MS} | null,
     "snapshot": {"table": "db.t", "after": [key values] | null} | null}

``snapshot.after`` is the last primary key owned by the stream in the frontier table:
keys ``<= after`` (in the server's collation order) are owned, ``null`` means none of
that table is. Tables sorted before ``snapshot.table`` are owned entirely, tables after
it not at all. ``snapshot: null`` means the hand-over is done: everything is owned.

``server`` names the server whose binlog the positions are of (``server_id``, and
``server_uuid`` on MySQL; absent before the first batch), so a restart that reaches
another server behind the same host name stops with a clear error instead of reading
another binlog at the same coordinates. ``binlog.gtids`` is the exact GTID state at the
position (:mod:`coordinator.gtid_tracker`), in the compact form of :mod:`cdc_source.gtid`.

``tables`` fingerprints the set of tables the query owns by its main cursor (every
captured table but one being snapshotted on its own, ``added``, and those waiting for
that): the sum of 64-bit hashes of their names (:func:`table_fingerprint`), so a restart
finds which of the tables matching now the checkpoint had, even after tables were
created, dropped or renamed, or ``table-name`` was widened or narrowed
(:mod:`coordinator.table_set`). Checkpoints written before it hold an 8-digit CRC-32
of the names (:func:`legacy_fingerprint`).

``added`` (version 3, written only while it is there) is the snapshot of one table
that joined a running capture (renamed into ``table-name``'s reach, or matched by a
widened pattern): ``{"table": "db.t", "after": [key values] | null}``, keys ``<= after``
owned by the stream, the other tables streaming on meanwhile.

``rereads`` (written only once a re-read was asked for; version 4 while one is queued) is
the progress of snapshots on demand (:mod:`cdc_source.rereads`): at most a few re-reads,
each with its table, condition and last key read, and which requests were taken.

The initial offset of every mode but ``initial`` and ``snapshot`` is the *sentinel*
``{"v": 1, "tables": ..., "binlog": null, "snapshot": null}``: no position, nothing
owned, so a batch starting there reads nothing. The first batch resolves it to its end:
the head (latest-offset) or the configured start found in the binlog (earliest-offset,
specific-offset, timestamp: :mod:`coordinator.startup`), which Spark logs in
``offsets/0``. It is the same version-1 format as before (latest-offset always wrote
it), so older readers still read every offset.

Spark compares offsets as JSON strings, so the JSON is built with a fixed key order
and no whitespace; its size does not depend on the size of any table.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

from cdc_source.rereads import Rereads

OFFSET_VERSION = 1
# Version 2: an offset whose position is of a later epoch (after a fail-over). Written
# only then, so that a package older than epochs refuses it instead of ordering the new
# server's changes by their file numbers; version 1 offsets are unchanged.
EPOCH_OFFSET_VERSION = 2
# Version 3: an offset with an ``added`` table snapshot, which an older package would
# ignore (it would stream the table's changes without its snapshot).
ADDED_OFFSET_VERSION = 3
# Version 4: an offset with re-reads asked for and not done (``rereads.queue``), which an
# older package would drop without a word.
REREAD_OFFSET_VERSION = 4
READABLE_VERSIONS = (
    OFFSET_VERSION,
    EPOCH_OFFSET_VERSION,
    ADDED_OFFSET_VERSION,
    REREAD_OFFSET_VERSION,
)
_FILE_NUMBER = re.compile(r"\.(\d+)$")


class OffsetError(ValueError):
    """An offset from the checkpoint cannot be understood."""


_FILE_NUMBERS: dict[str, int] = {}


def file_number(name: str) -> int:
    """The sequence number of a binlog file name (``binlog.000042`` -> 42), cached: the
    binlog readers ask it for every event."""
    number = _FILE_NUMBERS.get(name)
    if number is None:
        match = _FILE_NUMBER.search(name)
        if not match:
            raise OffsetError(f"binlog file name '{name}' has no numeric suffix")
        number = _FILE_NUMBERS[name] = int(match.group(1))
    return number


@dataclass(frozen=True, order=True)
class BinlogPosition:
    """A point in the binlog: the end of the last event included.

    ``ts`` is the wall-clock millisecond the driver observed this head; it is
    metadata for ``_ts_ms`` of snapshot rows and takes no part in ordering. ``xa`` is
    where the oldest XA transaction that is prepared but not resolved at this position
    begins (its rows are in the binlog before the position, its commit may come after):
    a function of the position and the binlog, so the offset stays deterministic.
    """

    file: str
    pos: int
    gtids: str = ""
    ts: int = 0
    xa: tuple[str, int] | None = None  # where the oldest XA prepared, unresolved here, begins
    epoch: int = 0  # server changes (fail-overs) before this position: cdc_source.sequence

    @property
    def file_number(self) -> int:
        return file_number(self.file)

    @property
    def coordinates(self) -> tuple[int, int]:
        """A totally ordered key of the position (file number, byte offset)."""
        return (self.file_number, self.pos)

    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "file": self.file,
            "pos": self.pos,
            "gtids": self.gtids,
            "ts": self.ts,
        }
        if self.xa is not None:  # only when an XA transaction is open: offsets stay small
            obj["xa"] = [self.xa[0], self.xa[1]]
        if self.epoch:  # only after a fail-over
            obj["epoch"] = self.epoch
        return obj

    @staticmethod
    def from_json_obj(obj: dict[str, Any]) -> BinlogPosition:
        xa = obj.get("xa")
        return BinlogPosition(
            file=str(obj["file"]),
            pos=int(obj["pos"]),
            gtids=str(obj.get("gtids", "")),
            ts=int(obj.get("ts", 0)),
            xa=None if xa is None else (str(xa[0]), int(xa[1])),
            epoch=int(obj.get("epoch", 0)),
        )

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(frozen=True)
class SnapshotCursor:
    """The snapshot frontier: ``table`` is being read, keys ``<= after`` are done."""

    table: str
    after: tuple | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {"table": self.table, "after": None if self.after is None else list(self.after)}

    @staticmethod
    def from_json_obj(obj: dict[str, Any]) -> SnapshotCursor:
        after = obj.get("after")
        return SnapshotCursor(
            table=str(obj["table"]), after=None if after is None else tuple(after)
        )


FINGERPRINT_MASK = (1 << 64) - 1


def table_hash(name: str) -> int:
    """A table name's 64-bit hash (BLAKE2b): fingerprints add them up."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")


def table_fingerprint(table_names) -> str:
    """The set's fingerprint: the sum of its names' hashes modulo 2**64, 16 hex digits.
    A sum, not a hash of the joined names, so that a restart can tell which few tables
    make the difference between two sets (:mod:`coordinator.table_set`)."""
    return f"{sum(map(table_hash, set(table_names))) & FINGERPRINT_MASK:016x}"


def legacy_fingerprint(table_names) -> str:
    """The fingerprint offsets carried before tables could join a running capture."""
    return f"{zlib.crc32(chr(10).join(sorted(table_names)).encode()):08x}"


@dataclass(frozen=True)
class SourceOffset:
    binlog: BinlogPosition | None
    snapshot: SnapshotCursor | None
    tables: str = ""
    server: str = ""  # whose binlog the positions are of ('' before the first batch)
    added: SnapshotCursor | None = None  # a table joining the capture, snapshotted alone
    rereads: Rereads = Rereads()  # snapshots on demand (cdc_source.rereads)

    @property
    def handed_over(self) -> bool:
        return self.snapshot is None

    def to_json_obj(self) -> dict[str, Any]:
        epoch = self.binlog.epoch if self.binlog is not None else 0
        version = EPOCH_OFFSET_VERSION if epoch else OFFSET_VERSION
        if self.added is not None:
            version = ADDED_OFFSET_VERSION
        if self.rereads.queue:
            version = REREAD_OFFSET_VERSION
        obj: dict[str, Any] = {"v": version, "tables": self.tables}
        if self.server:  # written from the first planned batch on: offsets stay comparable
            obj["server"] = self.server
        obj["binlog"] = None if self.binlog is None else self.binlog.to_json_obj()
        obj["snapshot"] = None if self.snapshot is None else self.snapshot.to_json_obj()
        if self.added is not None:  # only while a joining table is snapshotted
            obj["added"] = self.added.to_json_obj()
        if not self.rereads.empty:  # only once a re-read was asked for
            obj["rereads"] = self.rereads.to_json_obj()
        return obj

    def to_json(self) -> str:
        return json.dumps(self.to_json_obj(), separators=(",", ":"), ensure_ascii=True)

    @staticmethod
    def from_json_obj(obj: dict[str, Any] | str) -> SourceOffset:
        if isinstance(obj, str):
            obj = json.loads(obj)
        if not isinstance(obj, dict) or obj.get("v") not in READABLE_VERSIONS:
            raise OffsetError(
                f"offset {obj!r} is not a cdc-mysql offset of version "
                f"{' or '.join(map(str, READABLE_VERSIONS))}; was the checkpoint written by "
                "another source or a newer version?"
            )
        binlog = obj.get("binlog")
        snapshot = obj.get("snapshot")
        added = obj.get("added")
        return SourceOffset(
            binlog=None if binlog is None else BinlogPosition.from_json_obj(binlog),
            snapshot=None if snapshot is None else SnapshotCursor.from_json_obj(snapshot),
            tables=str(obj.get("tables", "")),
            server=str(obj.get("server", "")),
            added=None if added is None else SnapshotCursor.from_json_obj(added),
            rereads=Rereads.from_json_obj(obj.get("rereads")),
        )

    def describe(self) -> str:
        where = "no binlog position" if self.binlog is None else f"binlog {self.binlog}"
        if self.rereads.queue:
            where += "; " + "; then ".join(r.describe() for r in self.rereads.queue)
        if self.added is not None:
            added = self.added
            done = "start" if added.after is None else f"after {list(added.after)}"
            return f"stream phase, snapshot of joining table {added.table} {done}, {where}"
        if self.snapshot is None:
            return f"stream phase at {where}"
        after = "start" if self.snapshot.after is None else f"after {list(self.snapshot.after)}"
        return f"snapshot of {self.snapshot.table} {after}, {where}"


def owns_any_of(cursor: SnapshotCursor | None, table: str) -> bool:
    """Whether the stream owns any key of ``table`` at an offset with this cursor."""
    if cursor is None or table < cursor.table:
        return True
    return table == cursor.table and cursor.after is not None


def same_progress(a: SourceOffset, b: SourceOffset) -> bool:
    """True when two offsets cover the same data (the observation time ``ts`` aside)."""
    pos_a = None if a.binlog is None else (a.binlog.epoch, a.binlog.file, a.binlog.pos)
    pos_b = None if b.binlog is None else (b.binlog.epoch, b.binlog.file, b.binlog.pos)
    return (
        pos_a == pos_b
        and a.snapshot == b.snapshot
        and a.added == b.added
        and a.tables == b.tables
        and a.rereads == b.rereads
    )
