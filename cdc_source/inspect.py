"""``cdc-mysql inspect <checkpointLocation>``: where a query is, read from Spark's checkpoint.

The offset of this source is the whole truth of a query's progress (DESIGN section 2),
and Spark keeps one per micro-batch in the checkpoint, so the progress of a running or
stopped query can be read without Spark::

    <checkpoint>/metadata      {"id": "<query id>"}
    <checkpoint>/offsets/<N>   "v1", the batch metadata JSON, then one line per source:
                               the source's end offset of batch N, or "-" for none
                               ("v2" logs write "<source id>:<offset>" lines)
    <checkpoint>/commits/<N>   present once batch N has committed

Files that are not a plain batch number (``.N.crc``, ``.N.<uuid>.tmp``) are Spark's
checksums and half-written files and are ignored. With connection options the command
also asks the server how far the snapshot is through each table and how many binlog
bytes the query is behind the head.

The reading, summarizing and rendering functions are pure; ``main`` does the I/O.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc_source.offsets import BinlogPosition, OffsetError, SourceOffset

if TYPE_CHECKING:  # the server side is imported lazily: reading a checkpoint needs none of it
    from cdc_source.catalog import TableSchema

PASSWORD_ENV = "CDC_MYSQL_PASSWORD"
OFFSET_BYTES_TARGET = 1024  # DESIGN section 3: an offset stays under 1 KiB
FRONTIER_WIDTH = 40  # text output shortens longer frontiers; --json has them whole
_BATCH_FILE = re.compile(r"\d+")
_VOID_OFFSET = "-"


class CheckpointError(ValueError):
    """The directory is not a readable Spark streaming checkpoint of this source."""


# -- reading the checkpoint -------------------------------------------------------------


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


# -- per-batch records ------------------------------------------------------------------


@dataclass(frozen=True)
class BatchRecord:
    """One batch as seen by this source: its end offset and what it means."""

    batch_id: int
    committed: bool
    phase: str  # "snapshot", "stream", "none" (no offset logged) or "invalid"
    offset_bytes: int
    timestamp_ms: int | None = None
    offset: SourceOffset | None = None
    error: str | None = None

    @property
    def table(self) -> str | None:
        if self.offset is None or self.offset.snapshot is None:
            return None
        return self.offset.snapshot.table

    @property
    def after(self) -> list | None:
        if self.offset is None or self.offset.snapshot is None:
            return None
        after = self.offset.snapshot.after
        return None if after is None else list(after)

    @property
    def binlog(self) -> BinlogPosition | None:
        return None if self.offset is None else self.offset.binlog


def _parse_cdc_offset(text: str) -> SourceOffset:
    try:
        return SourceOffset.from_json_obj(json.loads(text))
    except json.JSONDecodeError as err:
        raise OffsetError(f"not JSON: {err}") from None
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, OffsetError):
            raise
        raise OffsetError(f"not a cdc-mysql offset: {err!r}") from None


def _is_cdc_offset(text: str | None) -> bool:
    if text is None:
        return False
    try:
        _parse_cdc_offset(text)
    except OffsetError:
        return False
    return True


def source_ids(checkpoint: Checkpoint) -> list[str]:
    seen: dict[str, None] = {}
    for batch in checkpoint.batches:
        for entry in batch.sources:
            seen.setdefault(entry.source_id, None)
    return list(seen)


def choose_source(checkpoint: Checkpoint, requested: str | None = None) -> str:
    """The source id whose offsets are cdc-mysql's (the first such one unless ``requested``)."""
    ids = source_ids(checkpoint)
    if requested is not None:
        if requested not in ids:
            raise CheckpointError(
                f"the checkpoint has no source '{requested}'; its sources are: "
                + (", ".join(ids) or "none")
            )
        return requested
    for source_id in ids:
        for batch in checkpoint.batches:
            entry = _entry(batch, source_id)
            if entry is not None and _is_cdc_offset(entry.text):
                return source_id
    if not checkpoint.batches:
        return "0"
    raise CheckpointError(
        f"no cdc-mysql offset in {checkpoint.path}: is this the checkpoint of a query that "
        "reads format('cdc-mysql')?"
    )


def _entry(batch: LoggedBatch, source_id: str) -> SourceEntry | None:
    for entry in batch.sources:
        if entry.source_id == source_id:
            return entry
    return None


def batch_record(batch: LoggedBatch, source_id: str) -> BatchRecord:
    entry = _entry(batch, source_id)
    common = {
        "batch_id": batch.batch_id,
        "committed": batch.committed,
        "timestamp_ms": batch.timestamp_ms,
    }
    if entry is None or entry.text is None:
        return BatchRecord(phase="none", offset_bytes=0, **common)
    size = len(entry.text.encode("utf-8"))
    try:
        offset = _parse_cdc_offset(entry.text)
    except OffsetError as err:
        return BatchRecord(phase="invalid", offset_bytes=size, error=str(err), **common)
    phase = "stream" if offset.snapshot is None else "snapshot"
    return BatchRecord(phase=phase, offset_bytes=size, offset=offset, **common)


def batch_records(checkpoint: Checkpoint, source_id: str | None = None) -> list[BatchRecord]:
    chosen = choose_source(checkpoint, source_id)
    return [batch_record(batch, chosen) for batch in checkpoint.batches]


# -- summary ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    batches: int
    first_batch: int | None
    latest_batch: int | None
    last_committed: int | None
    uncommitted: tuple[int, ...]
    phase: str  # "not started", "snapshot" or "stream"
    offset_batch: int | None  # the batch whose offset the phase and tables come from
    offset: SourceOffset | None
    tables_done: tuple[str, ...]
    tables_pending: tuple[str, ...]
    tables_from: str  # "offsets" (only tables named in offsets are known) or "server"
    snapshot_seen: bool  # some offset in the log has a snapshot cursor
    largest_offset_bytes: int
    largest_offset_batch: int | None
    total_offset_bytes: int


def split_tables(
    offset: SourceOffset | None, tables: list[str] | tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(done, pending) among ``tables`` at ``offset``.

    Tables are snapshotted in sorted ``db.table`` order, so the ones sorting before the
    frontier table are done and the frontier table and those after it are pending;
    after the hand-over every table is done. Before the first batch nothing is done.
    """
    ordered = sorted(set(tables))
    if offset is None:
        return (), tuple(ordered)
    if offset.snapshot is None:
        return tuple(ordered), ()
    frontier = offset.snapshot.table
    if frontier not in ordered:
        ordered = sorted([*ordered, frontier])
    return (
        tuple(t for t in ordered if t < frontier),
        tuple(t for t in ordered if t >= frontier),
    )


def table_status(table: str, offset: SourceOffset | None) -> str:
    if offset is None:
        return "pending"
    if offset.snapshot is None or table < offset.snapshot.table:
        return "done"
    if table == offset.snapshot.table and offset.snapshot.after is not None:
        return "in progress"
    return "pending"


def current_record(records: list[BatchRecord]) -> BatchRecord | None:
    """The latest batch that has a readable offset of this source."""
    for record in reversed(records):
        if record.offset is not None:
            return record
    return None


def summarize(records: list[BatchRecord], captured: list[str] | None = None) -> Summary:
    """The state of the query at its latest batch (committed or not).

    ``captured``: the captured tables as listed by the server; without it, only the
    tables named in the offsets are known.
    """
    current = current_record(records)
    offset = None if current is None else current.offset
    named = {r.table for r in records if r.table is not None}
    done, pending = split_tables(offset, list(captured) if captured is not None else named)
    committed = [r.batch_id for r in records if r.committed]
    sized = [r for r in records if r.offset_bytes > 0]
    largest = max(sized, key=lambda r: r.offset_bytes, default=None)
    if offset is None:
        phase = "not started"
    else:
        phase = "stream" if offset.snapshot is None else "snapshot"
    return Summary(
        batches=len(records),
        first_batch=records[0].batch_id if records else None,
        latest_batch=records[-1].batch_id if records else None,
        last_committed=max(committed, default=None),
        uncommitted=tuple(r.batch_id for r in records if not r.committed),
        phase=phase,
        offset_batch=None if current is None else current.batch_id,
        offset=offset,
        tables_done=done,
        tables_pending=pending,
        tables_from="offsets" if captured is None else "server",
        snapshot_seen=bool(named),
        largest_offset_bytes=0 if largest is None else largest.offset_bytes,
        largest_offset_batch=None if largest is None else largest.batch_id,
        total_offset_bytes=sum(r.offset_bytes for r in records),
    )


# -- the server's side: snapshot progress and binlog lag --------------------------------


@dataclass(frozen=True)
class TableProgressRow:
    table: str
    status: str  # "done", "in progress", "pending" or "missing" (not on the server)
    rows_below_frontier: int | None
    estimated_rows: int | None


@dataclass(frozen=True)
class ServerReport:
    address: str  # user@host:port, never the password
    head: BinlogPosition | None = None
    lag_bytes: int | None = None
    lag_note: str | None = None
    tables: tuple[TableProgressRow, ...] = ()
    tables_listed: bool = False  # the captured set came from --database-name/--table-name
    error: str | None = None
    captured: tuple[str, ...] | None = field(default=None, repr=False)


def binlog_lag(
    position: BinlogPosition, head: BinlogPosition, logs: list[tuple[str, int]]
) -> int | None:
    """Bytes from ``position`` to ``head``; ``logs`` is SHOW BINARY LOGS as (file, size).

    None when the position's file is no longer on the server (purged).
    """
    if position.file == head.file:
        return max(0, head.pos - position.pos)
    names = [name for name, _ in logs]
    if position.file not in names or head.file not in names:
        return None
    first, last = names.index(position.file), names.index(head.file)
    if first > last:
        return 0
    sizes = [size for _, size in logs]
    return max(0, sizes[first] - position.pos) + sum(sizes[first + 1 : last]) + head.pos


def _binary_logs(conn) -> list[tuple[str, int]]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(str(row[0]), int(row[1])) for row in cur.fetchall()]


def _rows_at_most(conn, schema: TableSchema, after: list) -> int:
    from cdc_source.key_sql import key_at_most
    from cdc_source.keys import key_from_json

    where, params = key_at_most(schema, key_from_json(schema, after))
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {schema.quoted} WHERE {where}", params)
        return int(cur.fetchone()[0])


def table_progress(
    conn, schemas: list[TableSchema], offset: SourceOffset | None, names: list[str]
) -> list[TableProgressRow]:
    """Per-table rows below the frontier: counted for the frontier table only (a range
    scan of its primary key); done tables count as whole, pending ones as empty."""
    by_name = {schema.name: schema for schema in schemas}
    rows = []
    for name in sorted(set(names) | set(by_name)):
        schema = by_name.get(name)
        status = table_status(name, offset)
        if schema is None:
            rows.append(TableProgressRow(name, "missing", None, None))
            continue
        below: int | None = 0
        if status == "done":
            below = None
        elif status == "in progress" and offset is not None and offset.snapshot is not None:
            below = _rows_at_most(conn, schema, list(offset.snapshot.after or ()))
        rows.append(TableProgressRow(name, status, below, schema.estimated_rows))
    return rows


def server_report(
    raw_options: dict[str, str], offset: SourceOffset | None, named_tables: list[str]
) -> ServerReport:
    """Ask the server for the binlog head, the lag and the captured tables' progress.

    Without ``database-name``/``table-name`` the captured set is unknown, so only the
    tables named in the offsets are looked up.
    """
    from cdc_source.catalog import discover_tables
    from cdc_source.mysql_client import connect, read_head
    from cdc_source.options import parse_options

    options = dict(raw_options)
    listed = bool(options.get("database-name") or options.get("table-name"))
    # parse_options wants both patterns; unnamed ones match everything (when neither is
    # given, only the tables named in the offsets are looked up, see below)
    options.setdefault("database-name", ".*")
    options.setdefault("table-name", ".*")
    parsed = parse_options(options)
    address = f"{parsed.username}@{parsed.hostname}:{parsed.port}"
    conn = connect(parsed.connection_kwargs())
    try:
        file, pos, gtids, ts = read_head(conn)
        head = BinlogPosition(file, pos, gtids, ts)
        lag, note = None, None
        if offset is not None and offset.binlog is not None:
            lag = binlog_lag(offset.binlog, head, _binary_logs(conn))
            if lag is None:
                note = f"{offset.binlog.file} is no longer on the server (purged?)"
        if listed:
            schemas = discover_tables(conn, parsed.matches)
        else:
            wanted = set(named_tables)
            schemas = discover_tables(conn, lambda db, t: f"{db}.{t}" in wanted)
        names = [s.name for s in schemas] if listed else list(named_tables)
        progress = table_progress(conn, schemas, offset, names)
    finally:
        conn.close()
    return ServerReport(
        address=address,
        head=head,
        lag_bytes=lag,
        lag_note=note,
        tables=tuple(progress),
        tables_listed=listed,
        captured=tuple(s.name for s in schemas) if listed else None,
    )


# -- rendering --------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    checkpoint: Checkpoint
    source_id: str
    records: tuple[BatchRecord, ...]
    summary: Summary
    server: ServerReport | None = None


def build_report(
    checkpoint: Checkpoint,
    source_id: str | None = None,
    server: ServerReport | None = None,
) -> Report:
    chosen = choose_source(checkpoint, source_id)
    records = [batch_record(batch, chosen) for batch in checkpoint.batches]
    captured = None if server is None or server.captured is None else list(server.captured)
    return Report(checkpoint, chosen, tuple(records), summarize(records, captured), server)


def _frontier_text(after: list | None, width: int = FRONTIER_WIDTH) -> str:
    if after is None:
        return "(start)"
    text = json.dumps(after, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells: list[str]) -> str:
        parts = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return "  ".join(parts).rstrip()

    return [line(headers), *(line(row) for row in rows)]


def _batch_row(record: BatchRecord) -> list[str]:
    table, frontier = "-", "-"
    if record.phase == "snapshot":
        table, frontier = record.table or "-", _frontier_text(record.after)
    elif record.phase == "invalid":
        frontier = record.error or ""
    binlog = "-" if record.binlog is None else str(record.binlog)
    return [
        str(record.batch_id),
        "yes" if record.committed else "no",
        record.phase,
        table,
        frontier,
        binlog,
        str(record.offset_bytes),
    ]


def _phase_text(summary: Summary) -> str:
    offset = summary.offset
    if offset is None:
        return "not started (no batch has an offset yet)"
    where = "with no binlog position" if offset.binlog is None else f"at {offset.binlog}"
    batch = f"batch {summary.offset_batch}"
    if summary.offset_batch is not None and summary.offset_batch != summary.last_committed:
        if summary.last_committed is None or summary.offset_batch > summary.last_committed:
            batch += " (not committed)"
    if offset.snapshot is None:
        how = "hand-over done" if summary.snapshot_seen else "no snapshot in the log"
        return f"stream ({how}) {where}, {batch}"
    after = _frontier_text(None if offset.snapshot.after is None else list(offset.snapshot.after))
    return f"snapshot of {offset.snapshot.table} after {after} {where}, {batch}"


def _tables_text(tables: tuple[str, ...], summary: Summary, done: bool) -> str:
    if tables:
        return ", ".join(tables)
    if summary.tables_from == "offsets" and done and summary.phase == "stream":
        return "all captured tables (none named in the offsets)"
    return "none"


def binlog_decoder() -> str:
    """Which binlog row decoder this installation runs (``scan.binlog.decoder=auto``),
    found without importing the executor-side package."""
    import importlib.util

    if importlib.util.find_spec("reader._rowdecoder") is not None:
        return "native (the C extension reader._rowdecoder)"
    return "python (the C extension is not built: no compiler at install time)"


def _summary_lines(summary: Summary) -> list[str]:
    if summary.batches == 0:
        return [
            "  batches         none yet (the query has not planned a batch)",
            f"  binlog decoder  {binlog_decoder()}",
        ]
    uncommitted = ", ".join(str(b) for b in summary.uncommitted) or "none"
    committed = "none" if summary.last_committed is None else str(summary.last_committed)
    largest = f"largest {summary.largest_offset_bytes}"
    if summary.largest_offset_batch is not None:
        largest += f" (batch {summary.largest_offset_batch})"
    lines = [
        f"  batches         {summary.first_batch}..{summary.latest_batch} "
        f"({summary.batches} in the log), last committed {committed}, "
        f"uncommitted {uncommitted}",
        f"  current phase   {_phase_text(summary)}",
        f"  tables done     {_tables_text(summary.tables_done, summary, True)}",
        f"  tables pending  {_tables_text(summary.tables_pending, summary, False)}",
        f"  offset bytes    {largest}, total {summary.total_offset_bytes}",
        f"  binlog decoder  {binlog_decoder()}",
    ]
    offset = summary.offset
    if offset is not None and offset.binlog is not None and offset.binlog.xa is not None:
        file, pos = offset.binlog.xa
        lines.append(
            f"  open XA         a transaction prepared at {file}:{pos} is not resolved at the "
            "offset; batches read its XA statements from there"
        )
    if summary.tables_from == "offsets":
        lines.insert(
            4,
            "  tables known    only those named in the offsets "
            "(connect to list every captured table)",
        )
    if summary.largest_offset_bytes > OFFSET_BYTES_TARGET:
        lines.append(
            f"  warning         an offset is over {OFFSET_BYTES_TARGET} bytes: long primary "
            "key values make every offset file larger"
        )
    return lines


def _progress_cells(row: TableProgressRow) -> list[str]:
    estimated = "-" if row.estimated_rows is None else f"~{row.estimated_rows}"
    if row.status == "missing":
        return [row.table, "missing", "-", "-", "-"]
    if row.status == "done":
        return [row.table, row.status, "all", estimated, "100%"]
    below = row.rows_below_frontier or 0
    percent = "-"
    if row.estimated_rows:
        percent = f"{min(100.0, 100.0 * below / row.estimated_rows):.0f}%"
    return [row.table, row.status, str(below), estimated, percent]


def _server_lines(server: ServerReport) -> list[str]:
    lines = ["", f"server {server.address}"]
    if server.error:
        return [*lines, f"  error: {server.error}"]
    if server.tables:
        lines += [
            "  " + line
            for line in _table(
                ["table", "status", "rows below frontier", "estimated rows", "progress"],
                [_progress_cells(row) for row in server.tables],
                right={2, 3, 4},
            )
        ]
    elif server.tables_listed:
        lines.append("  no table matches --database-name and --table-name")
    if not server.tables_listed:
        lines.append(
            "  (pass --database-name and --table-name as in the query to list every captured table)"
        )
    head = "-" if server.head is None else str(server.head)
    if server.lag_bytes is not None:
        lag = f"{server.lag_bytes} bytes behind the head"
    else:
        lag = server.lag_note or "unknown (no binlog position in the offsets yet)"
    lines += [f"  binlog head     {head}", f"  binlog lag      {lag}"]
    return lines


def render_text(report: Report, last: int | None = None) -> str:
    """The human-readable report; ``last`` limits the batch table to the newest batches."""
    checkpoint = report.checkpoint
    query = checkpoint.query_id or "unknown"
    lines = [f"checkpoint {checkpoint.path} (query {query})"]
    if len(source_ids(checkpoint)) > 1:
        lines.append(f"source {report.source_id} of {', '.join(source_ids(checkpoint))}")
    records = list(report.records)
    if last is not None and len(records) > last:
        lines.append(f"(showing the last {last} of {len(records)} batches)")
        records = records[-last:] if last > 0 else []
    if records:
        lines += _table(
            ["batch", "committed", "phase", "table", "frontier", "binlog", "offset bytes"],
            [_batch_row(record) for record in records],
            right={0, 6},
        )
    lines += ["", "summary", *_summary_lines(report.summary)]
    if report.server is not None:
        lines += _server_lines(report.server)
    return "\n".join(lines) + "\n"


def _binlog_json(position: BinlogPosition | None) -> dict[str, Any] | None:
    return None if position is None else position.to_json_obj()


def _record_json(record: BatchRecord) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "batch": record.batch_id,
        "committed": record.committed,
        "phase": record.phase,
        "table": record.table,
        "after": record.after,
        "binlog": _binlog_json(record.binlog),
        "offset_bytes": record.offset_bytes,
        "timestamp_ms": record.timestamp_ms,
    }
    if record.error is not None:
        obj["error"] = record.error
    return obj


def _summary_json(summary: Summary) -> dict[str, Any]:
    offset = summary.offset
    cursor = None if offset is None or offset.snapshot is None else offset.snapshot
    return {
        "batches": summary.batches,
        "first_batch": summary.first_batch,
        "latest_batch": summary.latest_batch,
        "last_committed": summary.last_committed,
        "uncommitted": list(summary.uncommitted),
        "phase": summary.phase,
        "offset_batch": summary.offset_batch,
        "binlog": _binlog_json(None if offset is None else offset.binlog),
        "snapshot": None if cursor is None else cursor.to_json_obj(),
        "tables_done": list(summary.tables_done),
        "tables_pending": list(summary.tables_pending),
        "tables_from": summary.tables_from,
        "offset_bytes": {
            "largest": summary.largest_offset_bytes,
            "largest_batch": summary.largest_offset_batch,
            "total": summary.total_offset_bytes,
        },
        "binlog_decoder": binlog_decoder().split(" ", 1)[0],
    }


def _server_json(server: ServerReport) -> dict[str, Any]:
    if server.error:
        return {"address": server.address, "error": server.error}
    return {
        "address": server.address,
        "head": _binlog_json(server.head),
        "lag_bytes": server.lag_bytes,
        "lag_note": server.lag_note,
        "tables_listed": server.tables_listed,
        "tables": [
            {
                "table": row.table,
                "status": row.status,
                "rows_below_frontier": row.rows_below_frontier,
                "estimated_rows": row.estimated_rows,
            }
            for row in server.tables
        ],
    }


def report_json(report: Report) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "checkpoint": report.checkpoint.path,
        "query_id": report.checkpoint.query_id,
        "source": report.source_id,
        "batches": [_record_json(record) for record in report.records],
        "summary": _summary_json(report.summary),
    }
    if report.server is not None:
        obj["server"] = _server_json(report.server)
    return obj


def render_json(report: Report) -> str:
    return json.dumps(report_json(report), indent=2, ensure_ascii=False) + "\n"


# -- command line -----------------------------------------------------------------------

_CONNECTION_FLAGS = {
    "hostname": "hostname",
    "port": "port",
    "username": "username",
    "database_name": "database-name",
    "table_name": "table-name",
    "connect_timeout": "connect.timeout",
}


class _Parser(argparse.ArgumentParser):
    """Keeps a mistyped password flag's value out of the usage error."""

    def __init__(self, *args: Any, secrets: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.secrets = secrets or []

    def error(self, message: str) -> None:  # type: ignore[override]
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):  # a misspelled --password would show its value
            words = message[len(prefix) :].split(" ")
            message = prefix + " ".join(w if w.startswith("-") else "***" for w in words)
        for secret in self.secrets:
            message = message.replace(secret, "***")
        super().error(message)


def _possible_secrets(argv: list[str]) -> list[str]:
    secrets = []
    for i, arg in enumerate(argv):
        if arg.startswith("-") and "pass" in arg.lower():
            if "=" in arg:
                secrets.append(arg.split("=", 1)[1])
            elif i + 1 < len(argv):
                secrets.append(argv[i + 1])
    return [s for s in secrets if s]


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cdc-mysql inspect",
        description=(
            "Show the progress of a cdc-mysql query from its Spark checkpoint: per batch the "
            "phase, frontier, binlog position and offset size, then a summary. With "
            "connection options, also per-table snapshot progress and binlog lag."
        ),
        secrets=_possible_secrets(argv),
    )
    parser.add_argument("checkpoint", help="the query's checkpointLocation (a local directory)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--last", type=int, metavar="N", help="list only the newest N batches (text)"
    )
    parser.add_argument(
        "--source",
        metavar="ID",
        help="source id when the query has several (default: the first with cdc-mysql offsets)",
    )
    server = parser.add_argument_group(
        "server (optional)", f"password from --password or the {PASSWORD_ENV} variable"
    )
    server.add_argument("--hostname")
    server.add_argument("--port")
    server.add_argument("--username")
    server.add_argument("--password", help=f"better: set {PASSWORD_ENV}")
    server.add_argument("--database-name", help="as in the query, to list the captured tables")
    server.add_argument("--table-name", help="as in the query, to list the captured tables")
    server.add_argument("--connect-timeout", metavar="SECONDS")
    return parser


def connection_options(args: argparse.Namespace, env: dict[str, str]) -> dict[str, str] | None:
    """Source options from the flags, or None when no server was named."""
    if not args.hostname:
        return None
    options = {
        name: str(getattr(args, attr))
        for attr, name in _CONNECTION_FLAGS.items()
        if getattr(args, attr) is not None
    }
    password = args.password if args.password is not None else env.get(PASSWORD_ENV)
    if password:
        options["password"] = password
    return options


def _server_or_error(options: dict[str, str], summary: Summary, named: list[str]) -> ServerReport:
    from cdc_source.mysql_client import SourceConnectionError
    from cdc_source.options import OptionError

    address = f"{options.get('username', '?')}@{options['hostname']}:{options.get('port', 3306)}"
    try:
        return server_report(options, summary.offset, named)
    except (OptionError, SourceConnectionError) as err:
        return ServerReport(address=address, error=str(err))
    except Exception as err:  # a server error must not hide the checkpoint's report
        return ServerReport(address=address, error=f"{type(err).__name__}: {err}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        checkpoint = read_checkpoint(args.checkpoint)
        report = build_report(checkpoint, args.source)
    except (CheckpointError, OSError, UnicodeDecodeError) as err:
        print(f"cdc-mysql inspect: {err}", file=sys.stderr)
        return 2
    options = connection_options(args, dict(os.environ))
    if options is not None:
        named = sorted({r.table for r in report.records if r.table is not None})
        server = _server_or_error(options, report.summary, named)
        report = build_report(checkpoint, report.source_id, server)
    sys.stdout.write(render_json(report) if args.json else render_text(report, args.last))
    if report.server is not None and report.server.error:
        print(f"cdc-mysql inspect: {report.server.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
