"""Reading the row changes of captured tables in a binlog range ``(start, end]``.

Positions are event *end* positions, as ``SHOW MASTER STATUS`` reports them, so ``end``
always falls on a transaction boundary. The library's non-blocking mode would read on to
the end of the last binlog; reading stops at ``end`` here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_source.offsets import BinlogPosition
from reader import binlog_decoding


class BinlogRangeError(RuntimeError):
    pass


class UnloggedRowChangeError(RuntimeError):
    """A statement changed a captured table's rows without row events (TRUNCATE, DROP)."""


@dataclass(frozen=True)
class RowChange:
    """One changed row. ``before``/``after`` are raw decoded images (None where absent)."""

    table: str  # "db.table"
    before: dict | None
    after: dict | None
    file_number: int
    end_pos: int
    row_index: int
    ts_ms: int


_DESTRUCTIVE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(TRUNCATE(?:\s+TABLE)?|DROP\s+TABLE(?:\s+IF\s+EXISTS)?)\s+(.+)$",
    re.I | re.S,
)
_DROP_DATABASE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*DROP\s+(?:DATABASE|SCHEMA)(?:\s+IF\s+EXISTS)?\s+(`(?:[^`]|``)+`|[\w$]+)",
    re.I | re.S,
)


_LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*.*?\*/|(?:--\s|#)[^\n]*(?:\n|$))*", re.S)
_PARTITION_CHANGE = re.compile(
    r"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(`(?:[^`]|``)+`|[\w$]+)"
    r"(?:\s*\.\s*(`(?:[^`]|``)+`|[\w$]+))?\s+.*?\b(TRUNCATE|DROP)\s+PARTITION\b",
    re.I | re.S,
)
_NAME_LIST_ITEM = re.compile(
    r"\s*(`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(`(?:[^`]|``)+`|[\w$]+))?\s*(?:,|$)"
)


def _strip_leading_comments(query: str) -> str:
    return query[_LEADING_COMMENTS.match(query).end() :]


def _qualified(first: str, second: str | None, default_schema: str) -> str:
    if second:
        return f"{_unquote(first)}.{_unquote(second)}"
    return f"{default_schema}.{_unquote(first)}"


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def destructive_targets(query: str, default_schema: str) -> tuple[str, list[str]]:
    """Statements that remove rows without row events: TRUNCATE, DROP TABLE (each named
    table), DROP DATABASE ('db.*'), ALTER TABLE ... TRUNCATE/DROP PARTITION.
    Returns (statement, ['db.table', ...]), or ('', []) for anything else."""
    query = _strip_leading_comments(query)
    dropped = _DROP_DATABASE.match(query)
    if dropped:
        return "DROP DATABASE", [f"{_unquote(dropped.group(1))}.*"]
    partition = _PARTITION_CHANGE.match(query)
    if partition:
        statement = f"ALTER TABLE ... {partition.group(3).upper()} PARTITION"
        return statement, [_qualified(partition.group(1), partition.group(2), default_schema)]
    match = _DESTRUCTIVE.match(query)
    if not match:
        return "", []
    statement = " ".join(match.group(1).upper().split()[:2])
    names = re.split(r"/\*|;|\s(?:RESTRICT|CASCADE|WAIT|NOWAIT)\b", match.group(2), flags=re.I)[0]
    targets = []
    position = 0
    while position < len(names):
        item = _NAME_LIST_ITEM.match(names, position)
        if not item or item.end() == position:
            break
        targets.append(_qualified(item.group(1), item.group(2), default_schema))
        position = item.end()
    return statement, targets


def _file_number(file: str) -> int:
    return int(re.search(r"(\d+)$", file).group(1))


def read_changes(
    connection_kwargs: dict,
    server_id: int,
    start: BinlogPosition,
    end: BinlogPosition,
    tables: set[str],
    watched: set[str] | None = None,
    stride: int = 1,
    slot: int = 0,
) -> Iterator[RowChange]:
    """Yield the row changes of ``tables`` in ``(start, end]``, in binlog order.

    Rows of other tables are skipped before they are decoded. ``watched`` (default:
    ``tables``) are the tables whose TRUNCATE/DROP stops the read with an error.

    ``stride``/``slot``: decode only the row events whose ordinal (among the row events of
    ``tables`` in the range) is ``slot`` modulo ``stride``. The library decodes rows
    lazily and reading past an event costs almost nothing next to decoding it, so
    ``stride`` readers of one range split the decoding work between them."""
    watched = tables if watched is None else watched
    binlog_decoding.install()
    end_coordinates = end.coordinates
    if start.coordinates >= end_coordinates:
        return
    schemas = sorted({t.split(".", 1)[0] for t in tables})
    names = sorted({t.split(".", 1)[1] for t in tables})
    settings = {k: v for k, v in connection_kwargs.items() if k != "connect_timeout"}
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=server_id,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, QueryEvent, RotateEvent],
        only_schemas=schemas,
        only_tables=names,
        freeze_schema=True,
    )
    reached = start.coordinates
    ordinal = -1
    try:
        for event in stream:
            current = (_file_number(stream.log_file), stream.log_pos)
            if isinstance(event, RotateEvent):
                continue
            if current > end_coordinates:
                reached = current
                break
            reached = current
            if isinstance(event, QueryEvent):
                _check_statement(event, watched)
                continue
            table = f"{event.schema}.{event.table}"
            if table not in tables:
                continue
            ordinal += 1
            if ordinal % stride != slot:
                continue
            ts_ms = int(event.timestamp) * 1000
            for index, row in enumerate(event.rows):
                if isinstance(event, WriteRowsEvent):
                    before, after = None, row["values"]
                elif isinstance(event, DeleteRowsEvent):
                    before, after = row["values"], None
                else:
                    before, after = row["before_values"], row["after_values"]
                yield RowChange(table, before, after, current[0], current[1], index, ts_ms)
        else:
            if stream.log_file:
                reached = max(reached, (_file_number(stream.log_file), stream.log_pos or 0))
    finally:
        stream.close()
    if reached < end_coordinates:
        raise BinlogRangeError(
            f"the binlog ended at {reached} before the planned position {end}; the server "
            "lost binlog events it had reported (crash with sync_binlog=0?)"
        )


def _check_statement(event: QueryEvent, tables: set[str]) -> None:
    query = (
        event.query.decode("utf-8", "replace") if isinstance(event.query, bytes) else event.query
    )
    schema = event.schema.decode() if isinstance(event.schema, bytes) else event.schema
    statement, targets = destructive_targets(query, schema or "")
    hit = [
        t
        for t in targets
        if t in tables or (t.endswith(".*") and any(x.startswith(t[:-1]) for x in tables))
    ]
    if hit:
        raise UnloggedRowChangeError(
            f"{statement} of captured table {', '.join(hit)} reached the binlog as a statement "
            "with no row events, so the rows it removed cannot be streamed as deletes. "
            "Start a new query (new checkpoint location) to snapshot the table again, or "
            "exclude it with 'table-name'."
        )
