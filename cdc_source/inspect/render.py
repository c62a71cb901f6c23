"""A report as text for people and as JSON for programs. Pure functions of the report
(``binlog_decoder`` looks up which decoder this installation has)."""

from __future__ import annotations

import json
from typing import Any

from cdc_source.inspect.records import BatchRecord, source_ids
from cdc_source.inspect.report import Report
from cdc_source.inspect.server import ServerReport, TableProgressRow
from cdc_source.inspect.summary import Summary
from cdc_source.offsets import BinlogPosition

OFFSET_BYTES_TARGET = 1024  # docs/design.md, 'Offsets': an offset stays under 1 KiB
FRONTIER_WIDTH = 40  # text output shortens longer frontiers; --json has them whole


def frontier_text(after: list | None, width: int = FRONTIER_WIDTH) -> str:
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
    if record.cursor is not None:  # the first snapshot's, or a joining table's
        table, frontier = record.table or "-", frontier_text(record.after)
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
        if offset.added is not None:
            added = offset.added
            done = frontier_text(None if added.after is None else list(added.after))
            how += f"; snapshot of joining table {added.table} after {done}"
        for reread in offset.rereads.queue:  # snapshots on demand, in progress or queued
            how += f"; {reread.describe()}"
        return f"stream ({how}) {where}, {batch}"
    after = frontier_text(None if offset.snapshot.after is None else list(offset.snapshot.after))
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


def binlog_json(position: BinlogPosition | None) -> dict[str, Any] | None:
    return None if position is None else position.to_json_obj()


def _record_json(record: BatchRecord) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "batch": record.batch_id,
        "committed": record.committed,
        "phase": record.phase,
        "table": record.table,
        "after": record.after,
        "binlog": binlog_json(record.binlog),
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
        "binlog": binlog_json(None if offset is None else offset.binlog),
        "snapshot": None if cursor is None else cursor.to_json_obj(),
        "added": None if offset is None or offset.added is None else offset.added.to_json_obj(),
        "rereads": [] if offset is None else [r.to_json_obj() for r in offset.rereads.queue],
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
        "head": binlog_json(server.head),
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
