"""The source's options: names (Flink CDC's where the concept is the same), defaults, validation.

Spark hands options over lower-cased with string values. Every problem is reported
before any connection is opened, naming the option and what it accepts.
"""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cdc_source.chunk_key import OPTION as CHUNK_KEY_OPTION
from cdc_source.chunk_key import ChunkKeyColumns, ChunkKeyRule
from cdc_source.retry import DEFAULT_MAX_RETRIES, RetryPolicy
from cdc_source.tls import SSL_MODES, VERIFYING

log = logging.getLogger("cdc_mysql")

# Modes whose query reads a snapshot of the tables (Flink CDC's names). The others only
# read the binlog, so one binlog task and one server id can be enough.
SNAPSHOTTING_MODES = ("initial", "snapshot")
STARTUP_MODES = (
    "initial",
    "latest-offset",
    "earliest-offset",
    "specific-offset",
    "timestamp",
    "snapshot",
)
# The options each mode needs (one of the tuples, whole) and the only ones it accepts.
STARTUP_OFFSET_FILE = "scan.startup.specific-offset.file"
STARTUP_OFFSET_POS = "scan.startup.specific-offset.pos"
STARTUP_GTID_SET = "scan.startup.specific-offset.gtid-set"
STARTUP_TIMESTAMP = "scan.startup.timestamp-millis"
STARTUP_MODE_OPTIONS = {
    "specific-offset": ((STARTUP_OFFSET_FILE, STARTUP_OFFSET_POS), (STARTUP_GTID_SET,)),
    "timestamp": ((STARTUP_TIMESTAMP,),),
}
# Modes that read no snapshot: the stream starts at a binlog position (coordinator.startup).
BINLOG_ONLY_MODES = ("latest-offset", "earliest-offset", "specific-offset", "timestamp")
ON_BINLOG_PURGED = ("fail", "resnapshot")
SNAPSHOT_CLIENTS = ("auto", "mysqlclient", "pymysql")
BINLOG_DECODERS = ("auto", "native", "python")
SNAPSHOT_VISIBILITY = ("auto", "snapshot-status", "gtid-wait", "head-unsafe")

DEFAULT_ROWS_PER_BATCH = 2_000_000
DEFAULT_BYTES_PER_BATCH = 1 << 30
DEFAULT_FETCH_SIZE = 16384
DEFAULT_BINLOG_ROWS_PER_BATCH = 500_000
MIN_SNAPSHOT_PARALLELISM = 2
DEFAULT_BINLOG_PARALLELISM = 1
DEFAULT_SERVER_ID_FIRST = 5400
DEFAULT_SERVER_IDS = 32
READ_TIMEOUT_FACTOR = 10
LOOPBACK_HOSTS = ("localhost", "::1")
# metadata.list: Flink CDC's metadata column names (database_name, table_name, op_ts) and
# Debezium's source fields (file, pos, gtid, server_id, row) under Flink-style names.
METADATA_NAMES = (
    "database_name",
    "table_name",
    "op_ts",
    "binlog_file",
    "binlog_pos",
    "gtid",
    "server_id",
    "row_index",
)

OPTION_DOCS: dict[str, str] = {
    "hostname": "server host name or IP (required)",
    "port": "server port, default 3306",
    "username": "account with SELECT, REPLICATION SLAVE, REPLICATION CLIENT (required)",
    "password": "password of that account",
    "ssl-mode": (
        "disabled, preferred (default: TLS when the server offers it; none on a loopback "
        "host unless set), required (TLS, certificate not checked), verify-ca (checked "
        "against ssl-ca) or verify-identity (also the host name)"
    ),
    "ssl-ca": "CA certificate file (PEM) for verify-ca and verify-identity",
    "ssl-cert": "client certificate file (PEM), with ssl-key, for accounts REQUIRE X509",
    "ssl-key": "the client certificate's private key file (PEM)",
    "database-name": "regular expression of the database(s) to capture (required)",
    "table-name": (
        "regular expression matched against 'db.table' (required); without a dot, Flink "
        "CDC's form: a regular expression of the table name alone, combined with "
        "database-name"
    ),
    "server-id": (
        f"replica server id or range 'a-b', default {DEFAULT_SERVER_ID_FIRST}-"
        f"{DEFAULT_SERVER_ID_FIRST + DEFAULT_SERVER_IDS - 1}, longer when a batch has more "
        "tasks; a single id only where a query never snapshots (a binlog-only "
        "scan.startup.mode) and scan.binlog.parallelism is 1"
    ),
    "server-time-zone": (
        "UTC only (Flink CDC's option): TIMESTAMP values are read as exact instants "
        "whatever the server's zone, so there is nothing for another zone to change; "
        "spark.sql.session.timeZone sets the zone they are shown in"
    ),
    "scan.startup.mode": (
        "initial (default: snapshot, then binlog), snapshot (snapshot only: no batch after "
        "the hand-over), latest-offset (binlog from the head), earliest-offset (binlog from "
        "the oldest file the server keeps), specific-offset (binlog from the position below) "
        "or timestamp (binlog from the first transaction at or after the time below); the "
        "last four read no snapshot"
    ),
    STARTUP_OFFSET_FILE: (
        "specific-offset: binlog file to start in, with scan.startup.specific-offset.pos"
    ),
    STARTUP_OFFSET_POS: (
        "specific-offset: position in that file where an event ends between two "
        "transactions (e.g. SHOW BINARY LOG STATUS's Position); 4 is the file's start"
    ),
    STARTUP_GTID_SET: (
        "specific-offset instead of file and pos: start after exactly these transactions, "
        "MySQL 'uuid:1-5,...' or MariaDB 'domain-server-seq,...' (gtid_binlog_pos)"
    ),
    STARTUP_TIMESTAMP: (
        "timestamp: milliseconds since the epoch; the stream starts at the first transaction "
        "whose binlog event time (whole seconds, as Flink CDC compares them) is at or after it"
    ),
    "scan.incremental.snapshot.chunk.size": (
        "rows per snapshot chunk; default: about 16 MiB of the table's rows (by its average "
        "row length), between 1,024 and 65,536"
    ),
    "scan.incremental.snapshot.chunk.key-column": (
        "for tables without a primary key (Flink CDC's option): a column name, or "
        "'<db.table regex>:<column>;...' per table; the column must be NOT NULL with a "
        "UNIQUE index of its own and then keys the table as a primary key would; exactly "
        "once only while each row keeps its value (an update of it is a delete and an "
        "insert) and the index stays; for a table with a primary key only its first "
        "column is accepted"
    ),
    "scan.snapshot.rows-per-batch": (
        f"snapshot rows planned per micro-batch (estimated as chunk.size per chunk), default "
        f"{DEFAULT_ROWS_PER_BATCH:,}: enough that a batch's fixed cost stays under 10%"
    ),
    "scan.snapshot.bytes-per-batch": (
        f"snapshot bytes planned per micro-batch (by the table's average row length), "
        f"default {DEFAULT_BYTES_PER_BATCH >> 20} MiB"
    ),
    "scan.snapshot.chunks-per-batch": (
        "snapshot chunks per micro-batch; overrides the two budgets above (default unset)"
    ),
    "scan.snapshot.fetch.size": (
        f"rows fetched per round trip and per Arrow batch, default {DEFAULT_FETCH_SIZE} "
        "(a fetch also ends at 32 MiB of values)"
    ),
    "scan.snapshot.client": (
        "auto (mysqlclient where installed, else PyMySQL), mysqlclient or pymysql: the "
        "client snapshot tasks read chunks with"
    ),
    "scan.binlog.parallelism": (
        f"binlog tasks per micro-batch, default {DEFAULT_BINLOG_PARALLELISM}: each reads the "
        "batch's binlog range and decodes every n-th row event; more than one speeds up "
        "decoding, but a fail-over during a batch then stops the query (a restart resumes it)"
    ),
    "scan.on-binlog-purged": (
        "what a query does when the binlog it resumes in was purged: fail (default: an error "
        "saying so) or resnapshot (one 't' row per captured table, which tells a consumer "
        "to drop the table's earlier rows, then a new snapshot at the current head and the "
        "stream from there)"
    ),
    "scan.binlog.max-rows-per-batch": (
        f"row changes of the captured tables a stream batch takes at most, default "
        f"{DEFAULT_BINLOG_ROWS_PER_BATCH:,}; a batch ends at a transaction boundary and takes "
        "at least one whole transaction, so a query behind the head catches up in bounded "
        "batches (Spark's maxRows / maxBytes read limits apply too)"
    ),
    "scan.binlog.decoder": (
        "auto (the C extension where built, else pure Python), native or python: the row "
        "decoder of binlog and normalization reads; both give the same output"
    ),
    "scan.snapshot.parallelism": (
        "snapshot tasks per micro-batch (each reads its chunks in one consistent snapshot), "
        f"default: the cores of the machine planning the query, at least "
        f"{MIN_SNAPSHOT_PARALLELISM}; on a cluster set it to the executors' cores"
    ),
    "scan.snapshot.visibility": (
        "how a snapshot task proves it sees every transaction at or before the batch's "
        "position: auto (default: the server's snapshot status on MariaDB and Percona, GTID "
        "waiting on MySQL with gtid_mode=ON, refused on MySQL without GTIDs), "
        "snapshot-status, gtid-wait, or head-unsafe (MySQL without GTIDs: accept the "
        "documented risk of missing a transaction committing while the snapshot opens)"
    ),
    "scan.snapshot.gtid-wait.timeout": (
        "duration (e.g. 90s, 2min; a bare number is seconds; rounded up to whole seconds) "
        "a snapshot task waits for the transactions at or before its position to "
        "commit (gtid-wait), default 60; then the task fails and is retried"
    ),
    "connect.timeout": (
        "duration to wait for a connection (e.g. 30s, 1min; a bare number is seconds; "
        "rounded up to whole seconds), default 30s; a read that waits 10 times as long "
        "counts as a lost connection"
    ),
    "connect.max-retries": (
        f"retries of a connection or query after a transient fault (server restart, "
        f"fail-over, lost connection), with waits of 0.5 s doubling to at most 15 s; default "
        f"{DEFAULT_MAX_RETRIES} (about 90 s of waiting); 0 fails at the first fault"
    ),
    "treat-tinyint1-as-boolean.enabled": (
        "true (default, Flink CDC's option) or false: whether TINYINT(1) columns are "
        "BOOLEAN; a value other than 0 or 1 in such a column is then refused (the query "
        "stops with an error naming it), never turned into true. With false they are "
        "tinyint. A key column is tinyint either way: a boolean key would merge rows"
    ),
    "metadata.list": (
        "comma-separated metadata columns appended to a single table's typed output, in "
        "this order: " + ", ".join(METADATA_NAMES) + " (the envelope output always has all)"
    ),
}


class OptionError(ValueError):
    """An option is missing, unknown or has a bad value."""


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
    on_binlog_purged: str = "fail"  # scan.on-binlog-purged
    connect_timeout: int = 30
    connect_max_retries: int = DEFAULT_MAX_RETRIES
    snapshot_visibility: str = "auto"  # scan.snapshot.visibility
    gtid_wait_timeout: int = 60
    metadata: tuple[str, ...] = ()  # metadata.list, in the order given
    chunk_keys: ChunkKeyColumns | None = None  # scan.incremental.snapshot.chunk.key-column
    tinyint1_as_boolean: bool = True  # treat-tinyint1-as-boolean.enabled

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


def _positive_int(options: dict[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got '{raw}'") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got '{raw}'")
    return value


def _non_negative_int(options: dict[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    if not raw.strip().isdigit():
        raise OptionError(f"option '{name}' must be an integer >= 0, got '{raw}'")
    return int(raw)


def default_snapshot_parallelism() -> int:
    """The cores of this machine, at least two. A Python data source is planned in a
    process on Spark's driver that cannot ask Spark for its executors: in local mode
    (the driver is the executor) this is Spark's cores; on a cluster the option should
    be set to the executors' cores (``spark.sparkContext.defaultParallelism``)."""
    return max(MIN_SNAPSHOT_PARALLELISM, os.cpu_count() or 1)


# Flink's Duration syntax (org.apache.flink.util.TimeUtils.parseDuration): a number, optional
# spaces, a unit from this table (Flink reads a bare number as milliseconds; here it stays
# seconds, as these options always were).
_DURATION_UNITS: dict[str, float] = {
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("h", "hour", "hours"), 3600.0),
    **dict.fromkeys(("min", "m", "minute", "minutes"), 60.0),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("us", "\u00b5s", "micro", "micros", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1e-9),
}


def parse_duration_seconds(name: str, raw: str) -> float:
    """Seconds of a duration option: ``30``, ``30s``, ``1min``, ``500ms``, ``2 h``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([^\d\s.]*)\s*", raw)
    unit = match.group(2).lower() if match else ""
    if not match or (unit and unit not in _DURATION_UNITS):
        raise OptionError(
            f"option '{name}' must be a duration such as '30s', '1min', '500ms' or '2 h' (a "
            f"bare number is seconds; units: d, h, min, s, ms, us, ns), got '{raw}'"
        )
    return float(match.group(1)) * (_DURATION_UNITS[unit] if unit else 1.0)


def _whole_seconds(options: dict[str, str], name: str, default: int) -> int:
    """A duration option for a client that takes whole seconds (PyMySQL's and
    mysqlclient's ``connect_timeout``, ``WAIT_FOR_EXECUTED_GTID_SET``): a fraction is
    rounded up, and the log says so."""
    raw = options.get(name)
    if raw is None:
        return default
    seconds = parse_duration_seconds(name, raw)
    if seconds <= 0:
        raise OptionError(f"option '{name}' must be a duration above zero, got '{raw}'")
    whole = math.ceil(seconds - 1e-9)
    if whole != seconds:
        log.warning("option '%s' is %s: rounded up to %d s (whole seconds)", name, raw, whole)
    return whole


def mode_snapshots(mode: str) -> bool:
    """Whether a query in ``scan.startup.mode`` ``mode`` reads a snapshot of the tables."""
    return mode in SNAPSHOTTING_MODES


def _parse_metadata(raw: str | None) -> tuple[str, ...]:
    if raw is None or not raw.strip():
        return ()
    names = tuple(name.strip().lower() for name in raw.split(","))
    unknown = [name for name in names if name not in METADATA_NAMES]
    if unknown:
        raise OptionError(
            f"option 'metadata.list' has unknown name(s) {', '.join(repr(u) for u in unknown)}; "
            f"valid names are: {', '.join(METADATA_NAMES)}"
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise OptionError(f"option 'metadata.list' names {', '.join(repeated)} more than once")
    return names


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


def parse_chunk_key_columns(raw: str | None) -> ChunkKeyColumns | None:
    """``scan.incremental.snapshot.chunk.key-column`` (cdc_source.chunk_key: both of
    Flink CDC's spellings)."""
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    if ":" not in raw:
        if ";" in raw or "," in raw:
            raise OptionError(
                f"option '{CHUNK_KEY_OPTION}' is '{raw}': a single column name, or "
                "'<db.table regex>:<column>;...' for several tables"
            )
        return ChunkKeyColumns((ChunkKeyRule(None, raw),))
    rules = []
    for entry in raw.split(";"):
        entry = entry.strip()
        if not entry:
            continue  # Flink's examples end with ';'
        pattern, sep, column = entry.rpartition(":")
        pattern, column = pattern.strip(), column.strip()
        if not sep or not pattern or not column:
            raise OptionError(
                f"option '{CHUNK_KEY_OPTION}' entry '{entry}' is not "
                "'<db.table regex>:<column>' (entries are separated by ';')"
            )
        try:
            re.compile(pattern)
        except re.error as err:
            raise OptionError(
                f"option '{CHUNK_KEY_OPTION}' entry '{entry}': '{pattern}' is not a valid "
                f"regular expression: {err}"
            ) from None
        rules.append(ChunkKeyRule(pattern, column))
    if not rules:
        raise OptionError(f"option '{CHUNK_KEY_OPTION}' is '{raw}': it names no column")
    return ChunkKeyColumns(tuple(rules))


def _check_regex(name: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as err:
        raise OptionError(f"option '{name}' is not a valid regular expression: {err}") from None


_UTC_NAMES = {"utc", "z", "gmt", "etc/utc", "etc/gmt", "etc/uct", "uct", "zulu", "etc/zulu"}


def _check_time_zone(raw: str) -> None:
    """Flink CDC's ``server-time-zone`` is the session zone MySQL TIMESTAMP values are
    converted to local date-times in (Flink CDC docs, MySQL connector options: "It
    controls how the TIMESTAMP type in MYSQL converted to STRING"). This source reads a
    TIMESTAMP as the exact instant it stores (Spark ``timestamp``; every session runs
    in UTC, and the binlog holds seconds since the epoch), so no zone changes a value:
    rather than accept a zone and ignore it, anything but UTC is refused with the reason
    (tests/integration/test_flink_options.py shows the values do not depend on zones)."""
    text = raw.strip()
    if text.lower() in _UTC_NAMES or re.fullmatch(r"(?:UTC|GMT)?[+-]0?0(?::?00)?", text, re.I):
        return
    if not re.fullmatch(r"[+-](0\d|1[0-4]):[0-5]\d", text):
        try:
            ZoneInfo(text)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise OptionError(
                f"option 'server-time-zone' must be an IANA zone such as 'Europe/Berlin' or "
                f"an offset such as '+02:00', got '{raw}'"
            ) from None
    raise OptionError(
        f"option 'server-time-zone' is '{raw}', but only UTC is accepted: in Flink CDC it is "
        "the zone MySQL TIMESTAMP values are converted to local date-times in, while this "
        "source reads a TIMESTAMP as the exact instant it stores (a Spark timestamp), "
        "whatever the server's time_zone, so another zone would change nothing. Remove the "
        "option (or set it to UTC) and show the values in a zone with Spark's "
        "spark.sql.session.timeZone; DATETIME values are the wall-clock values as stored"
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


def parse_options(raw_options: dict[str, str]) -> SourceOptions:
    """Validate Spark's (lower-cased, string) options into :class:`SourceOptions`."""
    options = {key.lower(): value for key, value in raw_options.items()}
    unknown = sorted(set(options) - set(OPTION_DOCS) - {"path"})
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(repr(u) for u in unknown)}; accepted options are: "
            + ", ".join(sorted(OPTION_DOCS))
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
    mode = options.get("scan.startup.mode", "initial")
    if mode not in STARTUP_MODES:
        raise OptionError(
            f"option 'scan.startup.mode' must be one of {', '.join(STARTUP_MODES)}, got '{mode}'"
        )
    startup = _parse_startup_point(mode, options)
    on_purged = options.get("scan.on-binlog-purged", "fail").strip().lower()
    if on_purged not in ON_BINLOG_PURGED:
        raise OptionError(
            f"option 'scan.on-binlog-purged' must be one of {', '.join(ON_BINLOG_PURGED)}, "
            f"got '{options['scan.on-binlog-purged']}'"
        )
    client = options.get("scan.snapshot.client", "auto")
    if client not in SNAPSHOT_CLIENTS:
        raise OptionError(
            f"option 'scan.snapshot.client' must be one of {', '.join(SNAPSHOT_CLIENTS)}, "
            f"got '{client}'"
        )
    decoder = options.get("scan.binlog.decoder", "auto")
    if decoder not in BINLOG_DECODERS:
        raise OptionError(
            f"option 'scan.binlog.decoder' must be one of {', '.join(BINLOG_DECODERS)}, "
            f"got '{decoder}'"
        )
    visibility = options.get("scan.snapshot.visibility", "auto")
    if visibility not in SNAPSHOT_VISIBILITY:
        raise OptionError(
            f"option 'scan.snapshot.visibility' must be one of "
            f"{', '.join(SNAPSHOT_VISIBILITY)}, got '{visibility}'"
        )
    _check_regex("database-name", options["database-name"])
    _check_regex("table-name", options["table-name"])
    chunk_keys = parse_chunk_key_columns(options.get(CHUNK_KEY_OPTION))
    time_zone = options.get("server-time-zone", "UTC")
    _check_time_zone(time_zone)
    binlog_parallelism = _positive_int(
        options, "scan.binlog.parallelism", DEFAULT_BINLOG_PARALLELISM
    )
    snapshot_parallelism = _positive_int(
        options, "scan.snapshot.parallelism", default_snapshot_parallelism()
    )
    if "server-id" in options:
        server_ids = _parse_server_ids(options["server-id"])
        _check_single_server_id(server_ids, mode, binlog_parallelism)
    else:  # one id per task of a batch, at least DEFAULT_SERVER_IDS
        needed = max(DEFAULT_SERVER_IDS, binlog_parallelism + snapshot_parallelism)
        server_ids = ServerIdRange(DEFAULT_SERVER_ID_FIRST, DEFAULT_SERVER_ID_FIRST + needed - 1)
    port = _positive_int(options, "port", 3306)
    if port > 65535:
        raise OptionError(f"option 'port' must be between 1 and 65535, got '{port}'")
    tls_settings = _parse_tls(options)
    return SourceOptions(
        hostname=options["hostname"],
        port=port,
        username=options["username"],
        password=options.get("password", ""),
        **tls_settings,
        database_pattern=options["database-name"],
        table_pattern=options["table-name"],
        server_ids=server_ids,
        server_time_zone=time_zone,
        startup_mode=mode,
        startup=startup,
        chunk_size=_positive_int(options, "scan.incremental.snapshot.chunk.size", None),
        chunks_per_batch=_positive_int(options, "scan.snapshot.chunks-per-batch", None),
        rows_per_batch=_positive_int(
            options, "scan.snapshot.rows-per-batch", DEFAULT_ROWS_PER_BATCH
        ),
        bytes_per_batch=_positive_int(
            options, "scan.snapshot.bytes-per-batch", DEFAULT_BYTES_PER_BATCH
        ),
        fetch_size=_positive_int(options, "scan.snapshot.fetch.size", DEFAULT_FETCH_SIZE),
        snapshot_parallelism=snapshot_parallelism,
        connect_timeout=_whole_seconds(options, "connect.timeout", 30),
        connect_max_retries=_non_negative_int(options, "connect.max-retries", DEFAULT_MAX_RETRIES),
        snapshot_client=client,
        binlog_parallelism=binlog_parallelism,
        binlog_decoder=decoder,
        on_binlog_purged=on_purged,
        binlog_rows_per_batch=_positive_int(
            options, "scan.binlog.max-rows-per-batch", DEFAULT_BINLOG_ROWS_PER_BATCH
        ),
        snapshot_visibility=visibility,
        gtid_wait_timeout=_whole_seconds(options, "scan.snapshot.gtid-wait.timeout", 60),
        metadata=_parse_metadata(options.get("metadata.list")),
        chunk_keys=chunk_keys,
        tinyint1_as_boolean=_boolean(options, "treat-tinyint1-as-boolean.enabled", True),
    )


def _boolean(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option '{name}' must be true or false, got '{raw}'")
    return value == "true"
