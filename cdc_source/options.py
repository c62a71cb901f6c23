"""The source's options: names (Flink CDC's where the concept is the same), defaults, validation.

Spark hands options over lower-cased with string values. Every problem is reported
before any connection is opened, naming the option and what it accepts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from cdc_source.chunk_key import ChunkKeyColumns
from cdc_source.column_policy import ALL_COLUMNS, ColumnPolicy, column_policy
from cdc_source.online_schema_change import is_shadow_table
from cdc_source.option_spec import (  # noqa: F401  (re-exported: the options' constants)
    BINLOG_ONLY_MODES,
    DEFAULT_BINLOG_PARALLELISM,
    DEFAULT_BINLOG_ROWS_PER_BATCH,
    DEFAULT_BYTES_PER_BATCH,
    DEFAULT_FETCH_SIZE,
    DEFAULT_ROWS_PER_BATCH,
    DEFAULT_SERVER_ID_FIRST,
    DEFAULT_SERVER_IDS,
    LOOPBACK_HOSTS,
    METADATA_NAMES,
    MIN_SNAPSHOT_PARALLELISM,
    READ_TIMEOUT_FACTOR,
    SNAPSHOTTING_MODES,
    STARTUP_GTID_SET,
    STARTUP_MODE_OPTIONS,
    STARTUP_MODES,
    STARTUP_OFFSET_FILE,
    STARTUP_OFFSET_POS,
    STARTUP_TIMESTAMP,
    default_snapshot_parallelism,
)
from cdc_source.option_table import BY_KEY, OPTION_DOCS, OPTIONS  # noqa: F401
from cdc_source.option_values import (  # noqa: F401  (re-exported)
    OptionError,
    parse_chunk_key_columns,
    parse_duration_seconds,
    regex,
)
from cdc_source.retry import DEFAULT_MAX_RETRIES, RetryPolicy
from cdc_source.tls import SSL_MODES, VERIFYING


@dataclass(frozen=True)
class ServerIdRange:
    first: int
    last: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


@dataclass(frozen=True)
class StartupPoint:
    """Where ``specific-offset`` or ``timestamp`` mode starts, as the options give it:
    one of ``file`` + ``pos``, ``gtid_set`` (the text the user gave; its syntax picks the
    flavor), or ``timestamp_ms``. Resolved to a binlog position by
    :mod:`coordinator.startup` when the first batch is planned."""

    file: str | None = None
    pos: int | None = None
    gtid_set: str | None = None
    timestamp_ms: int | None = None

    def describe(self) -> str:
        if self.gtid_set is not None:
            return f"{STARTUP_GTID_SET}={self.gtid_set}"
        if self.timestamp_ms is not None:
            return f"{STARTUP_TIMESTAMP}={self.timestamp_ms}"
        return f"{STARTUP_OFFSET_FILE}={self.file}, {STARTUP_OFFSET_POS}={self.pos}"


@dataclass(frozen=True)
class SourceOptions:
    """Validated options. The password is kept out of ``repr`` so it never reaches a log."""

    hostname: str
    port: int
    username: str
    password: str = field(repr=False)
    database_pattern: str = ""
    table_pattern: str = ""
    server_ids: ServerIdRange = ServerIdRange(
        DEFAULT_SERVER_ID_FIRST, DEFAULT_SERVER_ID_FIRST + DEFAULT_SERVER_IDS - 1
    )
    server_time_zone: str = "UTC"
    ssl_mode: str = "preferred"  # cdc_source.tls; the files' paths hold on every executor
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    startup_mode: str = "initial"
    startup: StartupPoint | None = None  # specific-offset and timestamp: where to start
    chunk_size: int | None = None  # None: by the table's row length (coordinator.planner)
    chunks_per_batch: int | None = None  # None: sized by rows_per_batch and bytes_per_batch
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH
    bytes_per_batch: int = DEFAULT_BYTES_PER_BATCH
    fetch_size: int = DEFAULT_FETCH_SIZE
    snapshot_parallelism: int = MIN_SNAPSHOT_PARALLELISM
    snapshot_client: str = "auto"
    binlog_parallelism: int = DEFAULT_BINLOG_PARALLELISM
    binlog_decoder: str = "auto"
    binlog_rows_per_batch: int | None = DEFAULT_BINLOG_ROWS_PER_BATCH
    binlog_follower: bool = True  # scan.binlog.follower.enabled (coordinator.follower)
    on_binlog_purged: str = "fail"  # scan.on-binlog-purged
    connect_timeout: int = 30
    connect_max_retries: int = DEFAULT_MAX_RETRIES
    snapshot_visibility: str = "auto"  # scan.snapshot.visibility
    gtid_wait_timeout: int = 60
    metadata: tuple[str, ...] = ()  # metadata.list, in the order given
    chunk_keys: ChunkKeyColumns | None = None  # scan.incremental.snapshot.chunk.key-column
    tinyint1_as_boolean: bool = True  # treat-tinyint1-as-boolean.enabled
    online_schema_changes: bool = False  # scan.parse.online.schema.changes.enabled
    # column.include.list, column.exclude.list, column.mask.*, column.truncate.* (its
    # masks' salts are kept out of repr)
    columns: ColumnPolicy = ALL_COLUMNS
    signal_directory: str | None = None  # signal.directory: request files (cdc_source.rereads)
    signal_table: str | None = None  # signal.data.collection: Debezium's signal table

    @property
    def flink_table_form(self) -> bool:
        """``table-name`` without a dot is Flink CDC's form: a regular expression of the
        table name alone, combined with ``database-name`` (Flink CDC's MySQL connector
        joins the two with ``\\.``); with a dot it is matched against 'db.table'."""
        return "." not in self.table_pattern

    def no_table_hint(self, other_form_matches: list[str]) -> str:
        """Why nothing matched, by the form ``table-name`` was read in, with the other
        form's matches (``other_form_matches``, 'db.table' names) when it has some."""
        if self.flink_table_form:
            used = (
                "table-name has no dot, so it was read in Flink CDC's form: a regular "
                "expression of the table name alone, combined with database-name"
            )
            other = "write it as a 'db.table' expression, e.g. 'shop\\.orders' or 'shop\\..*'"
        else:
            used = (
                "table-name has a dot, so it was matched against 'db.table' (e.g. "
                "'shop\\.orders' or 'shop\\..*'; a '.' in it is a regex wildcard here)"
            )
            other = (
                "for Flink CDC's form (the table name alone, combined with database-name) "
                "write it without a dot, e.g. 'orders' or 'order_[0-9]+'"
            )
        if other_form_matches:
            shown = ", ".join(other_form_matches[:5])
            more = ", ..." if len(other_form_matches) > 5 else ""
            return f"{used}; read in the other form it would match {shown}{more}: {other}"
        return f"{used}; {other}"

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.connect_max_retries)

    def connection_kwargs(self) -> dict:
        """Arguments for :func:`cdc_source.mysql_client.connect` and the snapshot clients
        (contains the password: never log it): PyMySQL's, plus the TLS settings
        (``ssl_mode``, ``ssl_ca``, ``ssl_cert``, ``ssl_key``) each client maps for itself
        (:mod:`cdc_source.tls`)."""
        kwargs = {
            "host": self.hostname,
            "port": self.port,
            "user": self.username,
            "password": self.password,
            "connect_timeout": self.connect_timeout,
            # A half-open connection (a fail-over that left no RST behind) would block a
            # read for ever; past this it is a lost connection, retried (cdc_source.retry).
            "read_timeout": self.connect_timeout * READ_TIMEOUT_FACTOR,
            "write_timeout": self.connect_timeout * READ_TIMEOUT_FACTOR,
        }
        kwargs["ssl_mode"] = self.ssl_mode
        for name in ("ssl_ca", "ssl_cert", "ssl_key"):
            if getattr(self, name):
                kwargs[name] = getattr(self, name)
        return kwargs

    def matches(self, database: str, table: str) -> bool:
        if not re.fullmatch(self.database_pattern, database):
            return False
        if self.online_schema_changes and is_shadow_table(table):
            return False  # an online schema-change tool's copy (cdc_source.online_schema_change)
        if self.flink_table_form:
            return bool(re.fullmatch(self.table_pattern, table))
        return bool(re.fullmatch(self.table_pattern, f"{database}.{table}"))

    def matches_other_form(self, database: str, table: str) -> bool:
        """:meth:`matches` with ``table-name`` read in the form it was not read in (for the
        hint of a ``table-name`` that matches nothing)."""
        if not re.fullmatch(self.database_pattern, database):
            return False
        if self.flink_table_form:
            return bool(re.fullmatch(self.table_pattern, f"{database}.{table}"))
        return bool(re.fullmatch(self.table_pattern, table))


def mode_snapshots(mode: str) -> bool:
    """Whether a query in ``scan.startup.mode`` ``mode`` reads a snapshot of the tables."""
    return mode in SNAPSHOTTING_MODES


def _parse_server_ids(raw: str) -> ServerIdRange:
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", raw)
    if not match:
        raise OptionError(
            f"option 'server-id' must be a number or a range like '5400-5420', got '{raw}'"
        )
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first or last > 2**32 - 1:
        raise OptionError(
            f"option 'server-id' range '{raw}' is invalid: use 1 <= first <= last < 2^32"
        )
    return ServerIdRange(first, last)


def _check_single_server_id(ids: ServerIdRange, mode: str, binlog_parallelism: int) -> None:
    """One id is enough only for one binlog task per batch and no snapshot: every binlog
    dump needs its own server id (the server kills an older dump of the same id), and a
    snapshotting batch runs its binlog task and its snapshot tasks (each of which reads the
    binlog to normalize its chunks) at once (coordinator/driver.py ``tasks``)."""
    if ids.size > 1:
        return
    why = None
    if mode_snapshots(mode):
        why = (
            f"scan.startup.mode '{mode}' snapshots the tables, and a snapshot batch reads the "
            "binlog in one task and normalizes snapshot chunks in others, each needing its "
            "own id"
        )
    elif binlog_parallelism > 1:
        why = (
            f"scan.binlog.parallelism is {binlog_parallelism}, and each binlog task of a batch "
            "needs its own id"
        )
    if why:
        raise OptionError(
            f"option 'server-id' is the single id '{ids.first}', but {why}; give a range such "
            f"as '{ids.first}-{ids.first + 8}' (its size caps the tasks of a batch)"
        )


def _parse_startup_point(mode: str, options: dict[str, str]) -> StartupPoint | None:
    """The start position options of ``mode``: exactly one of the sets the mode takes
    (:data:`STARTUP_MODE_OPTIONS`), none of the others' (a forgotten option of another
    mode would otherwise be silently ignored)."""
    every = {name for sets in STARTUP_MODE_OPTIONS.values() for group in sets for name in group}
    given = {name for name in every if options.get(name) not in (None, "")}
    sets = STARTUP_MODE_OPTIONS.get(mode, ())
    allowed = {name for group in sets for name in group}
    stray = sorted(given - allowed)
    if stray:
        raise OptionError(
            f"option(s) {', '.join(repr(s) for s in stray)} are set, but "
            f"scan.startup.mode={mode} does not use them: "
            + (
                f"{mode} takes {' or '.join(' + '.join(g) for g in sets)}"
                if sets
                else "remove them, or set the mode that takes them (specific-offset, timestamp)"
            )
        )
    if not sets:
        return None
    complete = [group for group in sets if all(name in given for name in group)]
    if len(complete) != 1 or given - set(complete[0]):
        needs = " or ".join("'" + "' + '".join(group) + "'" for group in sets)
        got = ", ".join(sorted(given)) or "none of them"
        raise OptionError(
            f"scan.startup.mode={mode} needs {needs}"
            + (", not more than one of these" if len(sets) > 1 and complete else "")
            + f" (got {got})"
        )
    if STARTUP_TIMESTAMP in given:
        raw = options[STARTUP_TIMESTAMP].strip()
        if not raw.isdigit():
            raise OptionError(
                f"option '{STARTUP_TIMESTAMP}' must be milliseconds since the epoch "
                f"(an integer >= 0), got '{options[STARTUP_TIMESTAMP]}'"
            )
        return StartupPoint(timestamp_ms=int(raw))
    if STARTUP_GTID_SET in given:
        raw = options[STARTUP_GTID_SET]
        gtid_flavor(raw)  # the syntax is checked now, the server's flavor at the start
        return StartupPoint(gtid_set="".join(raw.split()))
    pos = options[STARTUP_OFFSET_POS].strip()
    if not pos.isdigit() or int(pos) < 4:
        raise OptionError(
            f"option '{STARTUP_OFFSET_POS}' must be a byte position >= 4 in the binlog file "
            f"(4 is its start), got '{options[STARTUP_OFFSET_POS]}'"
        )
    file = options[STARTUP_OFFSET_FILE].strip()
    if not re.fullmatch(r"[^/\\]+\.\d+", file):
        raise OptionError(
            f"option '{STARTUP_OFFSET_FILE}' must be a binlog file name as SHOW BINARY LOGS "
            f"lists it (e.g. 'binlog.000042'), got '{options[STARTUP_OFFSET_FILE]}'"
        )
    return StartupPoint(file=file, pos=int(pos))


def gtid_flavor(text: str) -> str:
    """'mysql' or 'mariadb': which syntax the GTID set ``text`` is written in (MySQL
    ``uuid:1-5,uuid2:1-3``; MariaDB ``domain-server-seq,...``). Raises :class:`OptionError`
    naming both syntaxes when it is neither."""
    from cdc_source.gtid import GtidError, GtidSet, MariaGtidPos

    compact = "".join(text.split())
    errors = []
    for flavor, parse in (("mariadb", MariaGtidPos.parse), ("mysql", GtidSet.parse)):
        try:
            state = parse(compact)
        except GtidError as err:
            errors.append(str(err))
            continue
        if state.text():
            return flavor
        errors.append("it names no transaction")
    raise OptionError(
        f"option '{STARTUP_GTID_SET}' must be a MySQL GTID set ('uuid:1-5,uuid2:1-3') or a "
        f"MariaDB GTID position ('0-1-42,1-2-7'), got '{text}' ({'; '.join(errors)})"
    )


def is_loopback(hostname: str) -> bool:
    return hostname in LOOPBACK_HOSTS or hostname.startswith("127.")


def _parse_tls(options: dict[str, str]) -> dict[str, str | None]:
    """``ssl-mode`` and its files. Without ``ssl-mode`` a loopback host connects without
    TLS: PyMySQL builds an SSL context per connection (0.03-0.13 s), and on loopback TLS
    protects nothing; set ``ssl-mode`` to have it there (an SSH tunnel to a server that
    requires TLS)."""
    raw = options.get("ssl-mode")
    if raw is None:
        mode = "disabled" if is_loopback(options["hostname"]) else "preferred"
    else:
        mode = raw.strip().lower().replace("_", "-")  # also MySQL's VERIFY_IDENTITY
        if mode not in SSL_MODES:
            raise OptionError(
                f"option 'ssl-mode' must be one of {', '.join(SSL_MODES)}, got '{raw}'"
            )
    files = {name: options.get(name) or None for name in ("ssl-ca", "ssl-cert", "ssl-key")}
    if mode in VERIFYING and not files["ssl-ca"]:
        raise OptionError(
            f"option 'ssl-mode' is {mode}, which checks the server's certificate against a "
            "CA: set 'ssl-ca' to the CA's certificate file (PEM; for a cloud database, its "
            "provider's CA bundle)"
        )
    if files["ssl-ca"] and mode not in VERIFYING:
        raise OptionError(
            f"option 'ssl-ca' is set, but ssl-mode={mode} checks no certificate: set "
            "'ssl-mode' to verify-identity (or verify-ca), or remove 'ssl-ca'"
        )
    if bool(files["ssl-cert"]) != bool(files["ssl-key"]):
        raise OptionError(
            "options 'ssl-cert' and 'ssl-key' go together: the client certificate and its "
            "private key"
        )
    if files["ssl-cert"] and mode in ("disabled", "preferred"):
        raise OptionError(
            f"options 'ssl-cert' and 'ssl-key' are set, but ssl-mode={mode} may connect "
            "without TLS: set 'ssl-mode' to required, verify-ca or verify-identity"
        )
    for name, path in files.items():
        if path and not os.path.isfile(path):
            raise OptionError(
                f"option '{name}': no file '{path}' here; TLS files must be at the same path "
                "on the driver and on every executor"
            )
    return {
        "ssl_mode": mode,
        "ssl_ca": files["ssl-ca"],
        "ssl_cert": files["ssl-cert"],
        "ssl_key": files["ssl-key"],
    }


COLUMN_LISTS = ("column.include.list", "column.exclude.list")


def _shown_key(key: str) -> str:
    """An option key as an error may show it: a mistyped hash key may hold a salt."""
    if key.startswith("column.mask.hash"):
        return "'column.mask.hash...' (the rest not shown: it may hold a salt)"
    return repr(key)


def parse_options(raw_options: dict[str, str]) -> SourceOptions:
    """Validate Spark's (lower-cased, string) options into :class:`SourceOptions`: each
    option read on its own by its declaration (:mod:`cdc_source.option_table`), then the
    ones read as a group."""
    options = {key.lower(): value for key, value in raw_options.items()}
    # Keys that carry parameters (column.mask.with.<n>.chars): (template, parameters, value).
    parameterised = [
        (option.key, parameters, options[key])
        for key in sorted(options)
        for option in OPTIONS
        if option.parameters and (parameters := option.key_parameters(key)) is not None
    ]
    given = {key for key in options if any(o.key_parameters(key) is not None for o in OPTIONS)}
    unknown = sorted(set(options) - given - {"path"})
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(_shown_key(u) for u in unknown)}; accepted options "
            "are: " + ", ".join(sorted(BY_KEY))
        )
    missing = [
        name
        for name in ("hostname", "username", "database-name", "table-name")
        if not options.get(name)
    ]
    if missing:
        raise OptionError(
            "missing required option(s) " + ", ".join(f"'{m}' ({OPTION_DOCS[m]})" for m in missing)
        )
    fields = {option.field: option.value(options) for option in OPTIONS if option.parse}
    mode = fields["startup_mode"]
    startup = _parse_startup_point(mode, options)
    regex(options["database-name"], "database-name")
    regex(options["table-name"], "table-name")
    if "server-id" in options:
        server_ids = _parse_server_ids(options["server-id"])
        _check_single_server_id(server_ids, mode, fields["binlog_parallelism"])
    else:  # one id per task of a batch, at least DEFAULT_SERVER_IDS
        needed = max(
            DEFAULT_SERVER_IDS, fields["binlog_parallelism"] + fields["snapshot_parallelism"]
        )
        server_ids = ServerIdRange(DEFAULT_SERVER_ID_FIRST, DEFAULT_SERVER_ID_FIRST + needed - 1)
    columns = column_policy(
        [(key, {}, options[key]) for key in COLUMN_LISTS if key in options] + parameterised,
        secret=options.get("column.mask.hash.secret"),
    )
    return SourceOptions(
        hostname=options["hostname"],
        columns=columns,
        username=options["username"],
        **_parse_tls(options),
        database_pattern=options["database-name"],
        table_pattern=options["table-name"],
        server_ids=server_ids,
        startup=startup,
        **fields,
    )
