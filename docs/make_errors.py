"""Writes docs/errors.md: every error the package raises, read from its code, grouped by
exception class with what causes it and what to do. ``python docs/make_errors.py``;
tests/unit/project/test_docs_errors.py fails when the file is out of date, so a new ``raise``
needs a line here (its class's cause and fix) and a regeneration."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cdc_source", "coordinator", "reader")
OUTPUT = ROOT / "docs" / "errors.md"

# class -> (when it happens, what to do). Every class raised with a message must be here.
CLASSES: dict[str, tuple[str, str]] = {
    "LegacyTableError": (
        "cdc_source.delta finds a Delta table at the path without the columns its mode "
        "keeps (_key and the mode's own): written by an earlier mirror or in another mode",
        "write to a new path, or remove the table and the query's checkpoint and run again",
    ),
    "OptionError": (
        "an option is missing, unknown or malformed (checked before any connection)",
        "correct the option named in the message",
    ),
    "SourceConnectionError": (
        "the server cannot be reached, refuses the account or the connection's TLS, or has "
        "no binlog",
        "check hostname, port, username and password, ssl-mode and its files (the message "
        "says which), and that the server runs with log_bin",
    ),
    "StartupPositionError": (
        "the start position of scan.startup.mode earliest-offset, specific-offset or "
        "timestamp is purged, in the future, inside a transaction or not where an event ends",
        "give a position the server keeps, between two transactions (the message names the "
        "option, the position and the files the server keeps), or use earliest-offset",
    ),
    "SnapshotClientError": (
        "a snapshot task's client cannot connect, or the requested client is not installed",
        "as the message says: install mysqlclient on the executors or use "
        "scan.snapshot.client=auto",
    ),
    "TlsSetupError": (
        "a TLS file named by ssl-ca, ssl-cert or ssl-key cannot be read or used on the "
        "machine opening the connection (driver or executor)",
        "put the files at the same path on the driver and every executor; check that "
        "ssl-cert and ssl-key are a PEM certificate and its key",
    ),
    "RetriesExhaustedError": (
        "a transient fault (restart, fail-over, cut connection) outlasted connect.max-retries",
        "bring the server back; raise connect.max-retries for longer outages; the query "
        "resumes exactly from its checkpoint when restarted",
    ),
    "ServerChangedError": (
        "a connection reached a server other than the one the query's positions belong to "
        "(a fail-over, a DNS change), and the positions cannot follow: no GTIDs, or a batch "
        "with several binlog tasks was running when it happened",
        "with GTIDs, restart the query (it resumes on the new server from its checkpoint); "
        "without them, start a new query with a new checkpoint",
    ),
    "ServerChangeFollowed": (
        "the driver's connections reached another server four times during one planning "
        "step (a fail-over is followed by doing the step again on the new server)",
        "servers that keep changing under the address the query connects to: make the "
        "address lead to one server, then restart the query",
    ),
    "ValueRefusedError": (
        "a stored value that the column's Spark type cannot hold (a TINYINT(1) other than 0 "
        "or 1 read as BOOLEAN, a date that is neither real nor the zero date, text that is "
        "not valid in its character set); the task fails and nothing of its batch is emitted",
        "as the message says: the option that maps the type differently, or correct the "
        "value on the server; the query resumes from its last committed batch",
    ),
    "HeadPrivilegeError": (
        "the account may not read the binlog head (SHOW BINARY LOG STATUS / SHOW MASTER STATUS)",
        "GRANT REPLICATION CLIENT (MySQL) or BINLOG MONITOR (MariaDB 10.5+) to the account",
    ),
    "VisibilityError": (
        "the server offers no proof that a snapshot sees every transaction at or before "
        "its binlog position (MySQL with gtid_mode=OFF), or the requested "
        "scan.snapshot.visibility does not exist on this server",
        "set gtid_mode=ON and enforce_gtid_consistency=ON, or accept the documented risk "
        "with scan.snapshot.visibility=head-unsafe",
    ),
    "SnapshotVisibilityError": (
        "a snapshot task waited scan.snapshot.gtid-wait.timeout seconds for the "
        "transactions at or before its position to commit, or the server stopped reporting "
        "its snapshot position",
        "find the held commit (semi-sync waiting for a replica, binlog_group_commit_sync_"
        "delay); Spark retries the task; raise the timeout if commits are slow by design",
    ),
    "GtidError": (
        "a GTID set or position (an option, a server variable or a checkpoint's offset) "
        "cannot be read",
        "check the GTID text in the message; a damaged offset needs a new checkpoint",
    ),
    "GtidLocateError": (
        "after a fail-over, the checkpoint's position cannot be found on the new server by "
        "its GTID state: no GTIDs, an unresolved XA transaction at it, a purged binlog, or "
        "the new server lacks transactions the query read (asynchronous replication lost "
        "them) or holds them in another order",
        "as the message says; where the new server lacks transactions (the message names "
        "them in the server's GTID syntax), apply them to it from the old primary's binlog "
        "and restart the query, or start a new query with a new checkpoint: until then the "
        "data of the sink and of the server differ",
    ),
    "GtidTrackingError": (
        "the binlog's GTID events do not reach a planned position (the server lost events "
        "it had reported, or the position is not an event boundary)",
        "use sync_binlog=1; start a new query with a new checkpoint after a crash that lost "
        "binlog events",
    ),
    "PreflightError": (
        "the server, the account or the tables are not ready for CDC (checked when a query "
        "starts and by `cdc-mysql check`)",
        "apply the fix in the message; `cdc-mysql check` lists every requirement at once",
    ),
    "SourceStateError": (
        "the checkpoint and the current options or tables disagree",
        "restore the options and tables the checkpoint was started with, or use a new checkpoint",
    ),
    "PlanningError": (
        "the checkpoint's snapshot frontier names a table no longer captured (or, for the "
        "hand-over message, a bug)",
        "restore the table or start a new query with a new checkpoint",
    ),
    "RequestError": (
        "a request for a snapshot on demand (cdc-mysql signal, a signal file or a row of "
        "the signal table) names no table or a malformed one, or its condition is longer "
        "than 512 characters or holds ';', a comment or unbalanced parentheses",
        "correct the request; a query logs a request it cannot read and goes on without it "
        "(a signal row whose id is not an integer stops it: give the table an increasing "
        "integer id)",
    ),
    "OffsetError": (
        "a checkpoint offset is not one this version can read",
        "use the package version that wrote the checkpoint, or a new checkpoint",
    ),
    "KeyTypeError": (
        "a primary key column's type or value cannot be put in order for chunking",
        "capture the table with a supported key type (integers, DECIMAL, strings, binary, "
        "temporal types) or exclude it",
    ),
    "UnsupportedTypeError": (
        "a column type has no Spark type",
        "exclude the table with table-name, or change the column's type",
    ),
    "BinlogPurgedError": (
        "the binlog file the checkpoint resumes in was purged (expire_logs_days / "
        "binlog_expire_logs_seconds, or PURGE BINARY LOGS)",
        "keep binlogs longer than queries stay stopped; set scan.on-binlog-purged=resnapshot "
        "to reset the tables ('t') and snapshot them again, or start a new query",
    ),
    "SchemaChangedError": (
        "a captured table was altered while the query ran (a column added, dropped, renamed "
        "or retyped; typed output), or its primary key changed (any output)",
        "restart the query with the same checkpoint: it reads the new schema and continues "
        "from its last committed batch with the new output schema; a changed primary key "
        "needs a new query (new checkpoint location)",
    ),
    "BinlogSchemaMismatchError": (
        "a binlog value cannot be converted (an unsupported character set, an ENUM index "
        "beyond its members)",
        "exclude the table, or convert the column",
    ),
    "BinlogRangeError": (
        "the server's binlog is shorter than a position it reported: events were lost "
        "(a crash with sync_binlog other than 1) or this is another server",
        "set sync_binlog=1; start a new query with a new checkpoint",
    ),
    "UnloggedRowChangeError": (
        "a TRUNCATE, DROP, RENAME or partition drop of a captured table between a snapshot "
        "task's consistent snapshot and an earlier batch position it rolls forward to (in "
        "the stream these are 't' rows)",
        "Spark retries the task; if it recurs, a new query (new checkpoint)",
    ),
    "TableSetError": (
        "tables joined or left the capture in a way the query cannot follow: a typed "
        "(single-table) query whose 'table-name' now matches another table; a joining table "
        "without a primary key (also one created and dropped between two batches); a "
        "restart whose table set differs from the checkpoint's by more than three tables, or "
        "after a DROP DATABASE",
        "narrow 'table-name', or change it by at most three tables a run; or start a new "
        "query with a new checkpoint location",
    ),
    "DdlParseError": (
        "a table statement in the binlog (CREATE, DROP, RENAME, TRUNCATE, ALTER TABLE ... "
        "RENAME or PARTITION) that the source starts to read but cannot (the message names "
        "its position and text), e.g. a name in double quotes under ANSI_QUOTES",
        "report it with the statement; a new query (new checkpoint) past that position",
    ),
    "DdlScanError": (
        "the binlog ended before a planned position while the driver read its statements: "
        "the server lost events it had reported",
        "set sync_binlog=1; start a new query with a new checkpoint",
    ),
    "PartialRowImageError": (
        "a session wrote a captured table with binlog_row_image other than FULL, or with "
        "PARTIAL_JSON",
        "set binlog_row_image=FULL and binlog_row_value_options='' for every session that "
        "writes captured tables; a new checkpoint",
    ),
    "PartialJsonError": (
        "an after-image holds a partial JSON update (binlog_row_value_options=PARTIAL_JSON)",
        "set binlog_row_value_options='' on the server; a new checkpoint",
    ),
    "UndecodableEventError": (
        "an event the source does not understand, or an INCIDENT event, in the captured "
        "range: nothing is skipped silently",
        "the message names the event and position; report it with that position",
    ),
    "XaTransactionError": (
        "an XA transaction's PREPARE is outside what the offsets cover",
        "start a new query with a new checkpoint; report it with the positions",
    ),
    "MalformedEventError": (
        "binlog bytes that break the format (a damaged file, a CRC32 mismatch, a server bug)",
        "the message names the event and position; check the server's binlog with "
        "mariadb-binlog / mysqlbinlog at that position",
    ),
    "UnsupportedEventError": (
        "a compressed event the source cannot inflate",
        "install zstandard where the message says so; otherwise report it",
    ),
    "UnsupportedColumnError": (
        "a binlog column type or metadata no known server writes",
        "report it with the table's definition",
    ),
    "RowDecodeError": (
        "row image bytes that do not decode (damaged data or a decoder bug)",
        "report it with the position the enclosing error names",
    ),
    "JsonBinaryError": (
        "MySQL binary JSON bytes that do not decode",
        "report it with the position the enclosing error names",
    ),
    "CheckpointError": (
        "`cdc-mysql inspect` was given something that is not a readable checkpoint",
        "pass the query's checkpointLocation, on the local file system",
    ),
    "EmbeddedServerError": (
        "the quickstart's or the tests' throwaway MariaDB cannot start",
        "install mariadb-server, or point the tests at a server with CDC_MYSQL_TEST_URL",
    ),
    "RuntimeError": (
        "a required piece is missing (the native decoder asked for but not built) or, in "
        "the quickstart, the query or its writer failed",
        "as the message says",
    ),
    "TimeoutError": ("the quickstart's stream did not catch up in time", "raise --timeout"),
}
# Raised only for broken internal invariants or programming errors; not user-facing.
INTERNAL = {
    "KeyError",
    "TypeError",
    "ValueError",
    "error",
    "ArrowInvalid",
    "_InvalidDate",
    "FileNotFoundError",  # a throwaway server's unpacked tree is incomplete (tests, quickstart)
    "FollowerStopped",  # ends the driver's follower thread, which logs it and never raises it
    "ReadAheadBroken",  # a task's read-ahead thread ended without an end or an error
}


# Functions whose returned messages the connecting code raises as the given class (the
# messages of TLS and authentication failures, shared by PyMySQL's and mysqlclient's).
RETURNED_MESSAGES = {
    ("cdc_source/tls.py", "explain"): "SourceConnectionError",
    ("cdc_source/tls.py", "not_encrypted_message"): "SourceConnectionError",
}


@dataclass(frozen=True)
class Raise:
    cls: str
    message: str
    where: str


def _template(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            value.value if isinstance(value, ast.Constant) else "…" for value in node.values
        )
    return None


def _returned_messages(where: str, tree: ast.Module) -> list[Raise]:
    found = []
    for function in ast.walk(tree):
        cls = RETURNED_MESSAGES.get((where, getattr(function, "name", None)))
        if cls is None or not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                message = _template(node.value)
                if message is not None:
                    found.append(Raise(cls, " ".join(message.split()), where))
    return found


def _value_refusals(where: str, tree: ast.Module) -> list[Raise]:
    """The refusals of stored values: functions that return a ``ValueRefusedError`` built
    from a column, a value and why (its third argument), raised by the readers."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Return) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        if getattr(call.func, "id", None) != "ValueRefusedError" or len(call.args) < 3:
            continue
        why = _template(call.args[2])
        if why is not None:
            message = f"column …: the value … {' '.join(why.split())}"
            found.append(Raise("ValueRefusedError", message, where))
    return found


def raises() -> list[Raise]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                    continue
                func = node.exc.func
                cls = getattr(func, "id", getattr(func, "attr", None))
                message = _template(node.exc.args[0]) if node.exc.args else None
                if cls and message is not None:
                    where = f"{path.relative_to(ROOT).as_posix()}"
                    found.append(Raise(cls, " ".join(message.split()), where))
            found += _returned_messages(path.relative_to(ROOT).as_posix(), tree)
            found += _value_refusals(path.relative_to(ROOT).as_posix(), tree)
    return sorted(set(found), key=lambda r: (r.cls, r.message, r.where))


def render() -> str:
    by_class: dict[str, list[Raise]] = {}
    for item in raises():
        if item.cls in INTERNAL:
            continue
        by_class.setdefault(item.cls, []).append(item)
    unknown = sorted(set(by_class) - set(CLASSES))
    if unknown:
        raise SystemExit(f"docs/make_errors.py: add a cause and fix for {', '.join(unknown)}")
    lines = [
        "# Errors",
        "",
        "Every error the source and its commands raise, generated from the code by",
        "`python docs/make_errors.py` (a test keeps this file in sync). `…` stands for a",
        "value filled in at run time: a table, a position, the server's own message.",
        "Errors of broken internal invariants are not listed; report them.",
        "",
    ]
    for cls in sorted(by_class):
        cause, fix = CLASSES[cls]
        lines += [f"## {cls}", "", f"**When:** {cause}.", "", f"**What to do:** {fix}.", ""]
        lines += ["| message | raised in |", "|---|---|"]
        for item in by_class[cls]:
            message = item.message.replace("|", "\\|")
            lines.append(f"| {message} | `{item.where}` |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT.relative_to(ROOT)}", file=sys.stderr)
