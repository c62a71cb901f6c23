"""Checks run on the driver before any data moves. Each failure says what to change."""

from __future__ import annotations

import logging
from dataclasses import replace

from cdc_source.catalog import TableSchema, discover_tables
from cdc_source.chunk_key import OPTION as CHUNK_KEY_OPTION
from cdc_source.chunk_key import with_chunk_keys
from cdc_source.findings import FAIL, WARN, check_privileges, check_retention, unreadable_tables
from cdc_source.keys import KeyTypeError, encode_component
from cdc_source.mysql_client import binary_logs, read_head, server_identity, variables
from cdc_source.offsets import BinlogPosition, file_number
from cdc_source.options import SourceOptions
from cdc_source.types import spark_type, with_tinyint1_policy
from cdc_source.visibility import describe, read_traits

log = logging.getLogger("cdc_mysql")


class PreflightError(RuntimeError):
    """The server or the tables are not ready for CDC."""


class BinlogPurgedError(PreflightError):
    """The binlog file a checkpoint resumes in is no longer on the server."""


REQUIRED_SETTINGS = (
    ("log_bin", "ON", "the binlog is off: start the server with --log-bin (log_bin=ON)"),
    (
        "binlog_format",
        "ROW",
        "binlog_format is {value}: row changes are only in the binlog with ROW; set "
        "binlog_format=ROW in the server configuration",
    ),
    (
        "binlog_row_image",
        "FULL",
        "binlog_row_image is {value}: updates and deletes would lack the full before-image that "
        "exact snapshot normalization needs; set binlog_row_image=FULL",
    ),
    (
        "binlog_row_metadata",
        "FULL",
        "binlog_row_metadata is {value}: row events would carry no column names or primary "
        "key, so rows written before an ALTER TABLE could not be decoded; set "
        "binlog_row_metadata=FULL (MySQL >= 8.0.14, MariaDB >= 10.5)",
    ),
)


def name_case_problem(value: str) -> str | None:
    """``lower_case_table_names``: 0 (names as written, compared exactly) and 1 (stored
    and compared in lowercase: statements' names are read in lowercase) are followed;
    with 2 (macOS, Windows) names are stored as created but compared without case, so a
    statement may name a captured table in another spelling than the catalog's and the
    binlog's table maps (MySQL manual, "Identifier Case Sensitivity")."""
    value = {"OFF": "0", "ON": "1"}.get(value, value)  # as mysql_client.variables reads it
    if value in ("0", "1", "missing"):
        return None
    return (
        f"lower_case_table_names is {value}: statements could name a captured table in "
        "another case than its own, and a DROP or TRUNCATE of it would go unseen; run the "
        "server with lower_case_table_names=0 or 1"
    )


def check_server_settings(conn) -> None:
    names = [name for name, _, _ in REQUIRED_SETTINGS]
    found = variables(conn, [*names, "lower_case_table_names"])
    problems = []
    for name, wanted, message in REQUIRED_SETTINGS:
        value = found.get(name, "missing")
        if value.upper() not in (wanted, "1" if wanted == "ON" else wanted):
            problems.append(message.format(value=value))
    name_case = name_case_problem(found.get("lower_case_table_names", "missing"))
    if name_case:
        problems.append(name_case)
    if problems:
        raise PreflightError("the server is not configured for CDC: " + "; ".join(problems))


def check_binlog_access(conn, connect, options: SourceOptions) -> None:
    """The account may read the binlog, proven by doing it: a head read and a dump
    handshake at the head (:func:`cdc_source.findings.check_privileges`), so that
    privileges granted through roles count, which ``SHOW GRANTS`` would not show."""
    for finding in check_privileges(conn, connect, options, []):
        if finding.status == FAIL:
            raise PreflightError(
                f"the account '{options.username}' cannot read the binlog "
                f"({finding.requirement}: {finding.detail}); run: {finding.fix}"
            )


def check_tables(conn, options: SourceOptions) -> list[TableSchema]:
    tables = read_schemas(conn, options.matches)
    if not tables:
        other = [t.name for t in discover_tables(conn, options.matches_other_form)]
        raise PreflightError(
            f"no table matches database-name '{options.database_pattern}' and table-name "
            f"'{options.table_pattern}' ({options.no_table_hint(other)}); the account "
            f"'{options.username}' also needs SELECT on the tables to see them"
        )
    tables, key_problems = with_chunk_keys(conn, tables, options.chunk_keys)
    tables = [with_tinyint1_policy(t, options.tinyint1_as_boolean) for t in tables]
    problems = table_problems(tables, key_problems)
    if problems:
        raise PreflightError("; ".join(problems))
    _check_select(conn, tables, options.username)
    return tables


def read_schemas(conn, matches) -> list[TableSchema]:
    """The matching tables' schemas, each stamped with where it is known to hold: the head
    read just before the catalog (``TableSchema.read_at``). A change written before that
    position is in the schema read; rows of an earlier shape are then placed by column
    name, and a row event after it of another shape is a change the query has not seen
    (:mod:`reader.schema_drift`)."""
    file, pos, _, _ = read_head(conn)
    identity = server_identity(conn)
    return [
        replace(t, read_at=(file_number(file), pos), read_on=identity)
        for t in discover_tables(conn, matches)
    ]


def table_problems(
    tables: list[TableSchema], key_problems: dict[str, str] | None = None
) -> list[str]:
    """What keeps each table from being captured: no primary key (nor a usable chunk key
    column: ``key_problems``, from :func:`cdc_source.chunk_key.with_chunk_keys`), a
    column type without a Spark type, a key type that cannot be chunked. Empty when all
    are fine."""
    problems = []
    key_problems = key_problems or {}
    for table in tables:
        if table.name in key_problems:
            problems.append(key_problems[table.name])
            if not table.primary_key:
                continue
        elif not table.primary_key:
            problems.append(
                f"{table.name} has no primary key: cdc-mysql chunks the snapshot and identifies "
                f"changed rows by primary key; add one, or name a NOT NULL column with a UNIQUE "
                f"index of its own in '{CHUNK_KEY_OPTION}' (e.g. '{table.name}:<column>'), or "
                "exclude the table with 'table-name'"
            )
            continue
        for column in table.columns:
            try:
                spark_type(column)
            except ValueError as err:
                problems.append(f"{table.name}: {err}")
        for column in table.key_columns:
            try:
                encode_component(column, _sample(column), b"")
            except KeyTypeError as err:
                problems.append(f"{table.name}: {err}")
    return problems


def _sample(column):
    import datetime as dt
    from decimal import Decimal

    t = column.data_type
    if t == "decimal":
        return Decimal(0)
    if t == "date":
        return dt.date(2000, 1, 1)
    if t in ("datetime", "timestamp"):
        return dt.datetime(2000, 1, 1)
    if t in ("binary", "varbinary"):
        return b""
    if t in ("char", "varchar"):
        return ""
    return 0


def _check_select(conn, tables: list[TableSchema], user: str) -> None:
    refused = unreadable_tables(conn, tables)
    if refused:
        table, reason = refused[0]
        raise PreflightError(
            f"the account '{user}' cannot read {table.name} ({reason}); run: "
            f"GRANT SELECT ON {table.quoted} TO '{user}'@'%'"
        )


def check_binlog_available(conn, position: BinlogPosition) -> None:
    """The checkpoint's binlog position must still exist on the server: its file is kept,
    and the file reaches that far. A file shorter than the position means the server is
    not the one the position was read on (a fail-over to a server whose binlog files have
    the same names) or it lost binlog events it had reported (a crash with sync_binlog
    other than 1); reading on would mix two histories."""
    sizes = dict(binary_logs(conn))
    if position.file not in sizes:
        raise BinlogPurgedError(
            f"the checkpoint resumes at binlog file {position.file}, which the server no "
            f"longer has (oldest kept: {next(iter(sizes), 'none')}): the changes in between "
            "are lost. Raise binlog_expire_logs_seconds / expire_logs_days so binlogs outlive "
            "stopped queries; set scan.on-binlog-purged=resnapshot to have the query reset "
            "its tables ('t' rows) and snapshot them again, or start a new query with a new "
            "checkpoint location"
        )
    if position.pos > sizes[position.file]:
        raise PreflightError(
            f"the checkpoint resumes at {position.file}:{position.pos}, but that file has "
            f"{sizes[position.file]} bytes on this server: it is not the server the position "
            "was read on (a fail-over: binlog positions do not carry over between servers) or "
            "it lost binlog events in a crash (set sync_binlog=1). Start a new query with a "
            "new checkpoint location to snapshot again"
        )


BINLOG_CONTENT_SETTINGS = (
    "log_bin_compress",  # MariaDB 10.2+: QUERY and rows events zlib-compressed (165-171)
    "binlog_transaction_compression",  # MySQL 8.0.20+: TRANSACTION_PAYLOAD events, zstd
    "binlog_row_value_options",  # MySQL 8.0.3+: PARTIAL_JSON writes JSON diffs
)


def check_binlog_contents(conn, tables: list[TableSchema]) -> list[str]:
    """The global settings that change what the binlog holds (docs/design.md, 'What the
    binlog may hold'). Returns what will happen, one line each; raises where the capture
    could not be exact.

    These are also session variables: a session may still write compressed events, a
    partial image or partial JSON with other global values. The decoder catches those
    (it decodes compressed events and refuses partial images with the position)."""
    found = variables(conn, list(BINLOG_CONTENT_SETTINGS))
    notes = []
    if found.get("log_bin_compress", "OFF").upper() in ("ON", "1"):
        notes.append("log_bin_compress=ON: compressed events (zlib) are decoded")
    if found.get("binlog_transaction_compression", "OFF").upper() in ("ON", "1"):
        try:
            import zstandard  # noqa: F401
        except ImportError:
            raise PreflightError(
                "binlog_transaction_compression=ON: transactions reach the binlog as zstd "
                "TRANSACTION_PAYLOAD events; install the 'zstandard' package on the driver "
                "and executors (pip install zstandard)"
            ) from None
        notes.append("binlog_transaction_compression=ON: zstd transaction payloads are decoded")
    value_options = found.get("binlog_row_value_options", "")
    if "PARTIAL_JSON" in value_options.upper():
        with_json = [t.name for t in tables if any(c.data_type == "json" for c in t.columns)]
        if with_json:
            raise PreflightError(
                "binlog_row_value_options=PARTIAL_JSON: updates of JSON columns reach the "
                f"binlog as diffs, not documents, so changes of {', '.join(with_json)} could "
                "not be streamed exactly. Run SET GLOBAL binlog_row_value_options='' (and "
                "set it in the server configuration)"
            )
        notes.append(
            "binlog_row_value_options=PARTIAL_JSON: no captured table has a JSON column, so "
            "it changes nothing captured"
        )
    return notes


def check_retention_at_start(conn) -> None:
    """Binlogs that would be purged almost at once (RDS with ``binlog retention hours``
    NULL) refuse the query: the stream would lose changes whenever it is a little behind.
    Retention under a day is a WARN line with the remedy (``cdc-mysql check`` says the
    same)."""
    for finding in check_retention(conn):
        if finding.status == FAIL:
            raise PreflightError(f"{finding.detail}; {finding.fix}")
        if finding.status == WARN:
            log.warning("preflight: %s; %s", finding.detail, finding.fix)


def run_preflight(conn, connect, options: SourceOptions) -> list[TableSchema]:
    """``connect``: opens another connection (the dump handshake needs its own)."""
    check_server_settings(conn)
    check_retention_at_start(conn)
    check_binlog_access(conn, connect, options)
    tables = check_tables(conn, options)
    traits = read_traits(conn, options.snapshot_visibility)  # refuses MySQL without GTIDs
    log.info("preflight: snapshot visibility: %s", describe(traits.visibility))
    for note in check_binlog_contents(conn, tables):
        log.info("preflight: %s", note)
    return tables
