"""Every requirement of the source, checked on the server as ``cdc-mysql check`` shows it:
one :class:`~cdc_source.findings.Finding` each, OK / WARN / FAIL, with the fix. Privileges
are proven by doing what the source does (:mod:`cdc_source.findings`, which the query's
own preflight judges too); settings are read from the server. The preflight
(:mod:`cdc_source.preflight`) refuses to start on the same FAIL conditions."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pymysql

from cdc_source.binlog.transport import DumpSource
from cdc_source.catalog import TableSchema, discover_tables
from cdc_source.chunk_key import with_chunk_keys
from cdc_source.findings import (
    FAIL,
    OK,
    WARN,
    Finding,
    as_number,
    check_privileges,
    check_retention,
)
from cdc_source.gtid import expand
from cdc_source.mysql_client import binary_logs, server_flavor, variables
from cdc_source.options import SourceOptions, is_loopback
from cdc_source.preflight import (
    REQUIRED_SETTINGS,
    PreflightError,
    check_binlog_contents,
    name_case_problem,
    table_problems,
)
from cdc_source.tls import session_cipher
from cdc_source.visibility import VisibilityError, describe, read_traits
from coordinator import startup
from coordinator.planner import chunk_rows


def _server_version(conn) -> tuple[str, tuple[int, ...], bool]:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@version_comment")
        version, comment = (str(v) for v in cur.fetchone())
    numbers = tuple(int(n) for n in re.findall(r"\d+", version)[:3])
    return f"{version} ({comment})", numbers, "mariadb" in f"{version} {comment}".lower()


def check_version(conn) -> Iterator[Finding]:
    text, numbers, mariadb = _server_version(conn)
    needed = (10, 5, 0) if mariadb else (8, 0, 14)
    flavour = "MariaDB" if mariadb else "MySQL"
    if numbers < needed:
        yield Finding(
            "server version",
            FAIL,
            f"{flavour} {text}: binlog_row_metadata=FULL needs {flavour} "
            f"{'.'.join(map(str, needed))} or newer",
            f"upgrade the server to {flavour} {'.'.join(map(str, needed))}+",
        )
    else:
        yield Finding("server version", OK, f"{flavour} {text}")


def check_settings(conn) -> Iterator[Finding]:
    names = [name for name, _, _ in REQUIRED_SETTINGS]
    found = variables(conn, [*names, "lower_case_table_names"])
    for name, wanted, message in REQUIRED_SETTINGS:
        value = found.get(name, "missing")
        good = value.upper() in (wanted, "1" if wanted == "ON" else wanted)
        yield Finding(
            name,
            OK if good else FAIL,
            f"{name}={value}",
            "" if good else message.format(value=value),
        )
    value = found.get("lower_case_table_names", "missing")
    problem = name_case_problem(value)
    yield Finding(
        "lower_case_table_names",
        FAIL if problem else OK,
        f"lower_case_table_names={value}",
        problem or "",
    )


def check_contents(conn, tables: list[TableSchema]) -> Iterator[Finding]:
    try:
        notes = check_binlog_contents(conn, tables)
    except PreflightError as err:
        yield Finding("binlog compression / partial JSON", FAIL, str(err).split(":")[0], str(err))
        return
    yield Finding(
        "binlog compression / partial JSON",
        OK,
        "; ".join(notes) or "no compression, full JSON documents",
    )


def check_gtids(conn) -> Iterator[Finding]:
    found = variables(conn, ["gtid_mode", "gtid_binlog_pos", "gtid_strict_mode"])
    if "gtid_binlog_pos" in found:  # MariaDB: GTIDs are always written
        yield Finding(
            "GTIDs",
            OK,
            f"MariaDB GTIDs, gtid_binlog_pos={found['gtid_binlog_pos'] or '(empty)'}",
        )
    elif found.get("gtid_mode", "OFF").upper() == "ON":
        yield Finding("GTIDs", OK, "gtid_mode=ON")
    else:
        yield Finding(
            "GTIDs",
            WARN,
            f"gtid_mode={found.get('gtid_mode', 'missing')}: positions are file:offset only, "
            "so a fail-over to another server cannot be followed",
            "set gtid_mode=ON and enforce_gtid_consistency=ON",
        )


def check_visibility(conn, options: SourceOptions) -> Finding:
    """How snapshot tasks will prove they see every transaction up to their position."""
    try:
        traits = read_traits(conn, options.snapshot_visibility)
    except VisibilityError as err:
        return Finding(
            "snapshot visibility",
            FAIL,
            str(err),
            "set gtid_mode=ON and enforce_gtid_consistency=ON, or accept the risk with "
            "scan.snapshot.visibility=head-unsafe",
        )
    status = WARN if traits.visibility == "head-unsafe" else OK
    return Finding("snapshot visibility", status, describe(traits.visibility))


def check_tls(conn, options: SourceOptions) -> Finding:
    """Whether the connection the source makes is encrypted (the server's own word)."""
    mode = options.ssl_mode
    cipher = session_cipher(conn)
    if cipher:
        checked = {
            "verify-identity": "the certificate and the host name are verified",
            "verify-ca": "the certificate is verified, not the host name",
        }.get(mode, "the certificate is not verified")
        return Finding("TLS", OK, f"encrypted ({cipher}; ssl-mode={mode}: {checked})")
    if is_loopback(options.hostname):
        return Finding("TLS", OK, f"not encrypted (ssl-mode={mode}), on a loopback connection")
    return Finding(
        "TLS",
        WARN,
        f"not encrypted (ssl-mode={mode}): the password and the captured data cross the "
        "network in clear text",
        "enable TLS on the server (ssl_cert, ssl_key) and set ssl-mode=verify-identity with ssl-ca",
    )


def check_tables(conn, options: SourceOptions) -> tuple[list[TableSchema], list[Finding]]:
    tables = discover_tables(conn, options.matches)
    if not tables:
        return [], [
            Finding(
                "tables",
                FAIL,
                f"no table matches database-name '{options.database_pattern}' and table-name "
                f"'{options.table_pattern}'",
                options.no_table_hint(
                    [t.name for t in discover_tables(conn, options.matches_other_form)]
                )
                + "; the account also needs SELECT on the tables to see them",
            )
        ]
    tables, key_problems = with_chunk_keys(conn, tables, options.chunk_keys)
    problems = table_problems(tables, key_problems)
    names = ", ".join(t.name for t in tables)
    if problems:
        return tables, [Finding("tables", FAIL, p, "") for p in problems]
    declared = [f"{t.name} by {t.primary_key[0]}" for t in tables if t.declared_key]
    keyed = f"; keyed by their chunk key column: {', '.join(declared)}" if declared else ""
    return tables, [
        Finding("tables", OK, f"{len(tables)} table(s) with primary keys: {names}{keyed}")
    ]


def _replica_ids(conn) -> list[int] | None:
    for statement in ("SHOW REPLICAS", "SHOW SLAVE HOSTS"):
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                return [int(row[0]) for row in cur.fetchall()]
        except pymysql.err.MySQLError:
            continue
    return None


def check_server_ids(conn, options: SourceOptions) -> Iterator[Finding]:
    ids = options.server_ids
    own = int(as_number(variables(conn, ["server_id"]).get("server_id")))
    taken = _replica_ids(conn)
    clashes = [i for i in [own, *(taken or [])] if ids.first <= i <= ids.last]
    if clashes:
        yield Finding(
            "server-id range",
            FAIL,
            f"{ids} includes server id(s) in use: {', '.join(map(str, clashes))} (the server's "
            f"own is {own})",
            "choose a 'server-id' range that no server or replica of this topology uses",
        )
    elif taken is None:
        yield Finding(
            "server-id range",
            WARN,
            f"{ids} is clear of the server's own id {own}; the replicas could not be listed",
            "GRANT REPLICATION MASTER ADMIN (MariaDB) / REPLICATION SLAVE to list them",
        )
    else:
        yield Finding(
            "server-id range",
            OK,
            f"{ids} is clear of the server ({own}) and {len(taken)} replica(s)",
        )


def estimate_snapshot(conn, options: SourceOptions, tables: list[TableSchema]) -> Finding:
    with conn.cursor() as cur:
        sizes = {}
        for table in tables:
            cur.execute(
                "SELECT DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s",
                (table.database, table.table),
            )
            row = cur.fetchone()
            sizes[table.name] = int(row[0] or 0) if row else 0
    rows = sum(t.estimated_rows for t in tables)
    chunks = sum(max(1, -(-t.estimated_rows // chunk_rows(t, options.chunk_size))) for t in tables)
    size = sum(sizes.values())
    return Finding(
        "snapshot estimate",
        OK,
        f"about {rows:,} rows, {size / 2**20:,.1f} MiB of data, {chunks:,} chunks",
    )


def check_start(conn, connect: Callable[[], object], options: SourceOptions) -> Finding:
    """Where a new query of these options would start: for earliest-offset,
    specific-offset and timestamp the position found in the binlog now, exactly as the
    query's first batch finds it (:mod:`coordinator.startup`), or the reason it would fail."""
    mode = options.startup_mode
    if mode not in ("earliest-offset", "specific-offset", "timestamp"):
        what = {
            "initial": "a snapshot, then the binlog",
            "snapshot": "a snapshot only; the stream ends at the hand-over",
            "latest-offset": "the binlog from the head when the query's first batch is planned",
        }[mode]
        return Finding("start position", OK, f"scan.startup.mode={mode}: {what}")
    flavor = server_flavor(conn)
    gtids = flavor == "mariadb" or (
        variables(conn, ["gtid_mode"]).get("gtid_mode", "OFF").upper() == "ON"
    )
    with conn.cursor() as cur:
        cur.execute("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")
        (now_ms,) = cur.fetchone()
    dumps = DumpSource(connect, options.server_ids.last)
    try:
        position = startup.resolve(
            mode, options.startup, dumps.open, binary_logs(conn), flavor, gtids, int(now_ms)
        )
    except startup.StartupPositionError as err:
        return Finding(
            "start position",
            FAIL,
            str(err),
            "choose a start the server keeps, between two transactions, or another mode",
        )
    state = f", GTIDs {expand(position.gtids)}" if position.gtids else ""
    return Finding(
        "start position", OK, f"scan.startup.mode={mode}: the binlog from {position}{state}"
    )


def run_checks(conn, connect: Callable[[], object], options: SourceOptions) -> list[Finding]:
    """Every requirement, in the order a reader fixes them."""
    findings = [*check_version(conn), *check_settings(conn)]
    tables, table_findings = check_tables(conn, options)
    findings += check_contents(conn, tables)
    findings += check_gtids(conn)
    findings.append(check_visibility(conn, options))
    findings += check_retention(conn)
    findings += check_privileges(conn, connect, options, tables)
    findings += table_findings
    findings += check_server_ids(conn, options)
    findings.append(check_start(conn, connect, options))
    snapshots = options.startup_mode in ("initial", "snapshot")
    if snapshots and tables and not any(f.status == FAIL for f in table_findings):
        findings.append(estimate_snapshot(conn, options, tables))
    return findings
