"""Reading Spark's streaming checkpoint: which batches are logged and which committed.

Spark keeps one offset per micro-batch in the checkpoint::

    <checkpoint>/metadata      {"id": "<query id>"}
    <checkpoint>/offsets/<N>   "v1", the batch metadata JSON, then one line per source:
                               the source's end offset of batch N, or "-" for none
                               ("v2" logs write "<source id>:<offset>" lines)
    <checkpoint>/commits/<N>   present once batch N has committed

Files that are not a plain batch number (``.N.crc``, ``.N.<uuid>.tmp``) are Spark's
checksums and half-written files and are ignored. ``parse_offset_file`` is pure;
``read_checkpoint`` reads the files.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

_BATCH_FILE = re.compile(r"\d+")
_VOID_OFFSET = "-"


class CheckpointError(ValueError):
    """The directory is not a readable Spark streaming checkpoint of this source."""


@dataclass(frozen=True)
class SourceEntry:
    """One source's line of an offset file; ``text`` is None for Spark's '-' (no offset)."""

    source_id: str
    text: str | None


@dataclass(frozen=True)
class LoggedBatch:
    batch_id: int
    committed: bool
    timestamp_ms: int | None
    sources: tuple[SourceEntry, ...]


@dataclass(frozen=True)
class Checkpoint:
    path: str
    query_id: str | None
    batches: tuple[LoggedBatch, ...]


def _local_path(location: str) -> str:
    if location.startswith("file://"):
        return location[len("file://") :]
    if location.startswith("file:"):
        return location[len("file:") :]
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]+://", location):
        raise CheckpointError(
            f"{location} is not on the local file system; copy the checkpoint's metadata, "
            "offsets/ and commits/ to a local directory and inspect that"
        )
    return location


def _batch_ids(directory: str) -> list[int]:
    """Batch numbers of a Spark metadata log directory, ignoring .crc and temp files."""
    if not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory) if _BATCH_FILE.fullmatch(name))


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def parse_offset_file(text: str, batch_id: int) -> tuple[int | None, tuple[SourceEntry, ...]]:
    """(batch timestamp, source entries) of one ``offsets/<N>`` file."""
    lines = text.splitlines()
    if len(lines) < 2 or not re.fullmatch(r"v\d+", lines[0].strip()):
        raise CheckpointError(
            f"offsets/{batch_id} is not a Spark offset log entry (expected 'v1' or 'v2', "
            "a metadata line and one line per source)"
        )
    version = int(lines[0].strip()[1:])
    timestamp = None
    try:
        metadata = json.loads(lines[1]) if lines[1].strip() else {}
        timestamp = metadata.get("batchTimestampMs")
    except (json.JSONDecodeError, AttributeError):
        pass
    entries = []
    for index, raw in enumerate(lines[2:]):
        line = raw.strip()
        source_id = str(index)
        if version >= 2 and ":" in line:
            source_id, line = line.split(":", 1)
        entries.append(SourceEntry(source_id, None if line == _VOID_OFFSET else line))
    return (int(timestamp) if timestamp is not None else None), tuple(entries)


def read_checkpoint(location: str) -> Checkpoint:
    """Every batch in ``offsets/``, with its committed flag from ``commits/``."""
    path = _local_path(location)
    if not os.path.exists(path):
        raise CheckpointError(f"no checkpoint at {path}: the directory does not exist")
    if not os.path.isdir(path):
        raise CheckpointError(f"{path} is a file, not a checkpoint directory")
    if not os.path.isdir(os.path.join(path, "offsets")) and not os.path.isfile(
        os.path.join(path, "metadata")
    ):
        raise CheckpointError(
            f"{path} is not a Spark streaming checkpoint: it has neither 'metadata' nor "
            "'offsets/'; pass the query's checkpointLocation"
        )
    query_id = None
    metadata_path = os.path.join(path, "metadata")
    if os.path.isfile(metadata_path):
        try:
            query_id = json.loads(_read_text(metadata_path).splitlines()[0]).get("id")
        except (json.JSONDecodeError, IndexError, AttributeError):
            query_id = None
    committed = set(_batch_ids(os.path.join(path, "commits")))
    batches = []
    for batch_id in _batch_ids(os.path.join(path, "offsets")):
        text = _read_text(os.path.join(path, "offsets", str(batch_id)))
        timestamp, entries = parse_offset_file(text, batch_id)
        batches.append(LoggedBatch(batch_id, batch_id in committed, timestamp, entries))
    return Checkpoint(path, query_id, tuple(batches))
