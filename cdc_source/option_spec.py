"""What an option is (:class:`Option`) and the constants the option declarations and their
readers share: the startup modes, the choices, the defaults."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
# Debezium's source fields (file, pos, gtid, server_id, row) under Flink-style names, and
# each row's key bytes as the server compares keys (row_key).
METADATA_NAMES = (
    "database_name",
    "table_name",
    "op_ts",
    "binlog_file",
    "binlog_pos",
    "gtid",
    "server_id",
    "row_index",
    "row_key",
)


def default_snapshot_parallelism() -> int:
    """The cores of this machine, at least two. A Python data source is planned in a
    process on Spark's driver that cannot ask Spark for its executors: in local mode
    (the driver is the executor) this is Spark's cores; on a cluster the option should
    be set to the executors' cores (``spark.sparkContext.defaultParallelism``)."""
    return max(MIN_SNAPSHOT_PARALLELISM, os.cpu_count() or 1)


@dataclass(frozen=True)
class Option:
    """One option. ``parse(text, key)`` and ``field`` are set for an option read on its
    own; ``default`` is its value when absent (a function: computed then).

    An option whose key carries parameters (Debezium's ``column.mask.with.<n>.chars``)
    has ``parameters``, a regular expression of its keys whose named groups are the
    parameters; ``key`` is then the key's template, as the documentation shows it. Such
    an option may be given several times, once per value of its parameters."""

    key: str
    kind: str
    shown_default: str
    summary: str
    manual: str
    field: str | None = None
    parse: Callable[[str, str], Any] | None = None
    default: Any = None
    parameters: str | None = None

    def key_parameters(self, key: str) -> dict[str, str] | None:
        """The parameters ``key`` gives this option (an option without parameters: its
        own key gives none, ``{}``); None when ``key`` is not one of this option's."""
        if self.parameters is None:
            return {} if key == self.key else None
        match = re.fullmatch(self.parameters, key)
        return match.groupdict() if match else None

    def value(self, given: dict[str, str]) -> Any:
        """This option's value among the ``given`` options (Spark's lower-cased texts)."""
        raw = given.get(self.key)
        if raw is None:
            return self.default() if callable(self.default) else self.default
        return self.parse(raw, self.key)
