"""``cdc-mysql inspect CHECKPOINT --watch [SECONDS]``: a live view of a running query.

Every refresh reads the checkpoint again (and asks the server, when connection options
are given) and draws one frame. What each figure is of:

- *in flight*: batches logged in ``offsets/`` after the last committed one, with no
  ``commits/`` file yet (a stopped query's last batch stays in this state until the
  query is restarted).
- *batches/s*: batches committed per second between two refreshes (``commits/``).
- *snapshot rows/s*: how many more rows of the frontier table are at or below the
  frontier, per second between two refreshes, counted on the server (the count the
  report shows); only while the frontier stays in one table, and only with a server.
- *lag bytes*: binlog bytes from the end position of the latest planned batch to the
  server's head.
- *lag seconds*: this machine's clock minus the offset's ``ts``, the wall-clock
  millisecond at which the driver read the head that the latest planned batch ends at.
  While writes arrive it is how old the newest planned position is; when nothing is
  written no batch is planned and it keeps growing although nothing is behind (the lag
  in bytes stays 0). The two clocks must agree for it to mean anything.

``make_frame`` and the rendering functions are pure; ``run`` does the refreshing,
sleeping and writing through the callables it is given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc_source.inspect.checkpoint import CheckpointError
from cdc_source.inspect.records import BatchRecord
from cdc_source.inspect.render import OFFSET_BYTES_TARGET, binlog_json, frontier_text
from cdc_source.inspect.report import Report
from cdc_source.inspect.server import TableProgressRow
from cdc_source.offsets import BinlogPosition

DEFAULT_INTERVAL = 2.0
CLEAR_SCREEN = "\x1b[H\x1b[2J"  # ANSI: cursor home, erase the screen
FRAME_SEPARATOR = "-" * 72  # between frames when the output is not a terminal
READ_ERRORS = (CheckpointError, OSError, UnicodeDecodeError)
LAG_SECONDS_MEANING = (
    "now minus the ts of the latest planned batch's end position (when the driver read "
    "that head); grows while nothing is written"
)


@dataclass(frozen=True)
class Rates:
    """Per-second figures between the previous frame and this one."""

    seconds: float | None  # between the two frames; None on the first
    batches_per_s: float | None  # committed batches
    rows_per_s: float | None  # snapshot rows of ``rows_table`` at or below the frontier
    rows_table: str | None
    rows_note: str | None  # why rows_per_s is None


@dataclass(frozen=True)
class Frame:
    number: int  # 1 for the first refresh
    now_ms: int  # this machine's wall clock when the frame was read
    interval: float
    report: Report
    in_flight: tuple[int, ...]
    frontier_rows: int | None  # server count of the frontier table's rows <= the frontier
    lag_seconds: float | None
    rates: Rates


# -- the pure parts ---------------------------------------------------------------------


def in_flight(records: list[BatchRecord] | tuple[BatchRecord, ...]) -> tuple[int, ...]:
    """Batches logged after the last committed one that have no commit yet.

    Batches before the last commit without a ``commits/`` file are holes left by
    Spark's purge of old log files, not batches in flight.
    """
    last = max((r.batch_id for r in records if r.committed), default=None)
    return tuple(
        r.batch_id for r in records if not r.committed and (last is None or r.batch_id > last)
    )


def lag_seconds(position: BinlogPosition | None, now_ms: int) -> float | None:
    """Seconds from the position's ``ts`` to ``now_ms``; None without a recorded ts.

    Never negative: a driver clock ahead of this machine's would make it so.
    """
    if position is None or position.ts <= 0:
        return None
    return max(0.0, (now_ms - position.ts) / 1000.0)


def per_second(before: int | None, after: int | None, seconds: float | None) -> float | None:
    if before is None or after is None or not seconds or seconds <= 0:
        return None
    return (after - before) / seconds


def frontier_table(report: Report) -> str | None:
    offset = report.summary.offset
    return None if offset is None or offset.snapshot is None else offset.snapshot.table


def frontier_progress(report: Report) -> TableProgressRow | None:
    """The server's progress row of the frontier table, if the server was asked."""
    table = frontier_table(report)
    server = report.server
    if table is None or server is None or server.error:
        return None
    return next((row for row in server.tables if row.table == table), None)


def frontier_rows(report: Report) -> int | None:
    """Rows of the frontier table at or below the frontier, as the server counted them."""
    row = frontier_progress(report)
    if row is None:
        return None
    if row.status == "in progress":
        return row.rows_below_frontier
    return 0 if row.status == "pending" else None


def rates(previous: Frame | None, report: Report, now_ms: int, rows: int | None) -> Rates:
    """Batches committed and snapshot rows progressed per second since ``previous``."""
    table = frontier_table(report)
    if previous is None:
        return Rates(None, None, None, table, "from the second refresh on")
    seconds = (now_ms - previous.now_ms) / 1000.0
    batches = per_second(
        previous.report.summary.last_committed, report.summary.last_committed, seconds
    )
    before = frontier_table(previous.report)
    note = None
    if table is None:
        note = "no snapshot in progress"
    elif report.server is None:
        note = "needs the server (connection options)"
    elif rows is None or previous.frontier_rows is None:
        note = "no row count from the server"
    elif before != table:
        note = f"the frontier moved from {before or 'nothing'} to {table}"
    rows_per_s = None if note else per_second(previous.frontier_rows, rows, seconds)
    return Rates(seconds, batches, rows_per_s, table, note)


def make_frame(
    report: Report, now_ms: int, number: int, interval: float, previous: Frame | None
) -> Frame:
    rows = frontier_rows(report)
    offset = report.summary.offset
    return Frame(
        number=number,
        now_ms=now_ms,
        interval=interval,
        report=report,
        in_flight=in_flight(report.records),
        frontier_rows=rows,
        lag_seconds=lag_seconds(None if offset is None else offset.binlog, now_ms),
        rates=rates(previous, report, now_ms, rows),
    )


def _clock_text(now_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now_ms / 1000))


def _rate_text(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _frontier_line(frame: Frame) -> str:
    summary = frame.report.summary
    offset = summary.offset
    if offset is None:
        return "none yet (no batch has an offset)"
    if offset.snapshot is None:
        if summary.snapshot_seen:
            return "none: the hand-over is done, the stream owns every table"
        return "none: no snapshot in the log"
    after = None if offset.snapshot.after is None else list(offset.snapshot.after)
    text = f"{offset.snapshot.table} after {frontier_text(after)}"
    if frame.frontier_rows is not None:
        text += f", {frame.frontier_rows:,} rows at or below it"
        row = frontier_progress(frame.report)
        if row is not None and row.estimated_rows:
            text += f" of ~{row.estimated_rows:,}"
        text += " (server count)"
    return text


def _tables_line(frame: Frame) -> str:
    summary = frame.report.summary
    done, pending = len(summary.tables_done), len(summary.tables_pending)
    if summary.phase == "stream" and not done:
        text = "all done (none named in the offsets)"
    else:
        text = f"{done} done, {pending} pending"
    if summary.tables_from == "offsets":
        text += " - only tables named in the offsets are known (connect to list them all)"
    return text


def _batches_line(frame: Frame) -> str:
    summary = frame.report.summary
    if summary.batches == 0:
        return "none yet (the query has not planned a batch)"
    committed = "none" if summary.last_committed is None else str(summary.last_committed)
    flying = ", ".join(str(b) for b in frame.in_flight) or "none"
    return (
        f"latest {summary.latest_batch}, last committed {committed}, in flight {flying} "
        "(in offsets/, no commits/ file)"
    )


def _rates_lines(frame: Frame) -> list[str]:
    r = frame.rates
    if r.seconds is None:
        over = "(rates from the second refresh on)"
        return [f"  batches/s       - {over}", f"  snapshot rows/s - {over}"]
    over = f"over the last {r.seconds:.1f} s"
    rows = f"  snapshot rows/s {_rate_text(r.rows_per_s)} "
    if r.rows_per_s is not None:
        rows += f"rows of {r.rows_table} at or below the frontier, {over} (server count)"
    else:
        rows += f"({r.rows_note})"
    return [
        f"  batches/s       {_rate_text(r.batches_per_s)} batches committed per second {over} "
        "(checkpoint commits/)",
        rows,
    ]


def _lag_lines(frame: Frame) -> list[str]:
    server = frame.report.server
    if server is None:
        lag_bytes = "unknown without the server (pass --hostname, --username ...)"
    elif server.error:
        lag_bytes = f"unknown: {server.error}"
    elif server.lag_bytes is not None:
        lag_bytes = f"{server.lag_bytes:,} bytes behind the head {server.head}"
    else:
        lag_bytes = server.lag_note or "unknown (no binlog position in the offsets yet)"
    summary = frame.report.summary
    if frame.lag_seconds is None:
        lag_s = "unknown (no binlog position with a ts in the offsets yet)"
    else:
        lag_s = (
            f"{frame.lag_seconds:,.1f} s since the driver read the head that batch "
            f"{summary.offset_batch} ends at (offset ts; grows while nothing is written)"
        )
        if server is not None and server.lag_bytes == 0:
            lag_s += "; nothing is behind: 0 bytes to read"
    return [f"  binlog lag      {lag_bytes}", f"  lag seconds     {lag_s}"]


def _offset_line(frame: Frame) -> str:
    records = frame.report.records
    summary = frame.report.summary
    latest = records[-1].offset_bytes if records else 0
    text = f"latest {latest}, largest {summary.largest_offset_bytes}"
    if summary.largest_offset_batch is not None:
        text += f" (batch {summary.largest_offset_batch})"
    over = summary.largest_offset_bytes > OFFSET_BYTES_TARGET
    return text + f", target under {OFFSET_BYTES_TARGET}" + (" - OVER THE TARGET" if over else "")


def frame_text(frame: Frame) -> str:
    """One refresh as text: a header, then one figure a line."""
    report = frame.report
    summary = report.summary
    query = report.checkpoint.query_id or "unknown"
    lines = [
        f"cdc-mysql inspect {report.checkpoint.path} (query {query})",
        f"refresh {frame.number} at {_clock_text(frame.now_ms)}, every {frame.interval:g} s",
        f"  phase           {summary.phase}",
        f"  frontier        {_frontier_line(frame)}",
        f"  tables          {_tables_line(frame)}",
        f"  batches         {_batches_line(frame)}",
        *_rates_lines(frame),
        *_lag_lines(frame),
        f"  offset bytes    {_offset_line(frame)}",
    ]
    if report.server is not None:
        where = report.server.address
        lines.append(f"  server          {where}" + (" (error)" if report.server.error else ""))
    return "\n".join(lines) + "\n"


def frame_json(frame: Frame) -> dict[str, Any]:
    """One refresh as one JSON object (``--watch --json`` prints one a line)."""
    report = frame.report
    summary = report.summary
    offset = summary.offset
    cursor = None if offset is None or offset.snapshot is None else offset.snapshot
    records = report.records
    server = report.server
    obj: dict[str, Any] = {
        "refresh": frame.number,
        "time_ms": frame.now_ms,
        "interval_s": frame.interval,
        "checkpoint": report.checkpoint.path,
        "query_id": report.checkpoint.query_id,
        "source": report.source_id,
        "phase": summary.phase,
        "frontier": None if cursor is None else cursor.to_json_obj(),
        "frontier_rows": frame.frontier_rows,
        "tables_done": list(summary.tables_done),
        "tables_pending": list(summary.tables_pending),
        "latest_batch": summary.latest_batch,
        "last_committed": summary.last_committed,
        "in_flight": list(frame.in_flight),
        "rates": {
            "seconds": frame.rates.seconds,
            "batches_committed_per_s": frame.rates.batches_per_s,
            "snapshot_rows_per_s": frame.rates.rows_per_s,
            "snapshot_rows_of": frame.rates.rows_table,
            "snapshot_rows_note": frame.rates.rows_note,
        },
        "lag": {
            "bytes": None if server is None else server.lag_bytes,
            "head": None if server is None else binlog_json(server.head),
            "note": None if server is None else server.lag_note,
            "seconds": frame.lag_seconds,
            "seconds_batch": summary.offset_batch,
            "seconds_is": LAG_SECONDS_MEANING,
        },
        "offset_bytes": {
            "latest": records[-1].offset_bytes if records else 0,
            "largest": summary.largest_offset_bytes,
            "largest_batch": summary.largest_offset_batch,
            "target": OFFSET_BYTES_TARGET,
        },
    }
    if server is not None:
        obj["server"] = {"address": server.address, "error": server.error}
    return obj


def error_text(number: int, now_ms: int, error: str) -> str:
    return f"refresh {number} at {_clock_text(now_ms)}: cdc-mysql inspect: {error}\n"


def error_json(number: int, now_ms: int, error: str) -> dict[str, Any]:
    return {"refresh": number, "time_ms": now_ms, "error": error}


def framed(text: str, number: int, terminal: bool) -> str:
    """A frame as written: the screen cleared first on a terminal, else a separator line
    between frames."""
    if terminal:
        return CLEAR_SCREEN + text
    return text if number == 1 else FRAME_SEPARATOR + "\n" + text


# -- the loop ---------------------------------------------------------------------------


def run(
    read: Callable[[], Report],
    write: Callable[[str], None],
    *,
    interval: float = DEFAULT_INTERVAL,
    count: int | None = None,
    as_json: bool = False,
    terminal: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> int:
    """Refresh every ``interval`` seconds, ``count`` times or until Ctrl-C.

    A checkpoint that cannot be read on the first refresh raises (the command exits
    with status 2, as without --watch); on a later refresh the error is shown and the
    watch goes on. Returns the status of the last frame, as the command without --watch
    would: 2 for an unreadable checkpoint, 1 for a server error, else 0.
    """
    previous: Frame | None = None
    status = 0
    number = 0
    try:
        while count is None or number < count:
            number += 1
            now_ms = int(clock() * 1000)
            try:
                report = read()
            except READ_ERRORS as err:
                if number == 1:
                    raise
                status = 2
                if as_json:
                    write(json.dumps(error_json(number, now_ms, str(err))) + "\n")
                else:
                    write(framed(error_text(number, now_ms, str(err)), number, terminal))
            else:
                frame = make_frame(report, now_ms, number, interval, previous)
                previous = frame
                status = 1 if report.server is not None and report.server.error else 0
                if as_json:
                    write(json.dumps(frame_json(frame), ensure_ascii=False) + "\n")
                else:
                    write(framed(frame_text(frame), number, terminal))
            if count is None or number < count:
                sleep(interval)
    except KeyboardInterrupt:
        pass
    return status
