"""The server's side: per-table snapshot progress and binlog lag against the head.

``binlog_lag`` is pure; the other functions query the server through the connection
they are given (``server_report`` opens its own). The server-side modules are imported
lazily: reading a checkpoint needs none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc_source.inspect.summary import Summary, table_status
from cdc_source.offsets import BinlogPosition, SourceOffset

if TYPE_CHECKING:
    from cdc_source.catalog import TableSchema


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
        elif (
            status == "in progress"
            and offset is not None
            and offset.snapshot is not None
            and schema.primary_key
        ):
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
    from cdc_source.chunk_key import with_chunk_keys
    from cdc_source.mysql_client import binary_logs, connect, read_head
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
            lag = binlog_lag(offset.binlog, head, binary_logs(conn))
            if lag is None:
                note = f"{offset.binlog.file} is no longer on the server (purged?)"
        if listed:
            schemas = discover_tables(conn, parsed.matches)
        else:
            wanted = set(named_tables)
            schemas = discover_tables(conn, lambda db, t: f"{db}.{t}" in wanted)
        # A table without a primary key is counted by its chunk key column, when the
        # options name a usable one (the inspector reports; it does not refuse).
        schemas, _ = with_chunk_keys(conn, schemas, parsed.chunk_keys)
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


def server_report_or_error(
    options: dict[str, str], summary: Summary, named: list[str]
) -> ServerReport:
    """``server_report``, or a report that carries the error: a server that cannot be
    asked must not hide the checkpoint's report."""
    from cdc_source.mysql_client import SourceConnectionError
    from cdc_source.options import OptionError

    address = f"{options.get('username', '?')}@{options['hostname']}:{options.get('port', 3306)}"
    try:
        return server_report(options, summary.offset, named)
    except (OptionError, SourceConnectionError) as err:
        return ServerReport(address=address, error=str(err))
    except Exception as err:  # a server error must not hide the checkpoint's report
        return ServerReport(address=address, error=f"{type(err).__name__}: {err}")
