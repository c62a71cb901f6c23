"""The startup options (docs/options.md): where a query starts: a snapshot first (Flink CDC's
`initial` and `snapshot`), or the binlog from its head, its oldest file, a position, a GTID
set or a time."""

from __future__ import annotations

from cdc_source import option_values as values
from cdc_source.option_spec import STARTUP_MODES, Option

STARTUP_OPTIONS: tuple[Option, ...] = (
    Option(
        "scan.startup.mode",
        kind="one of initial|latest-offset|earliest-offset|specific-offset|timestamp|snapshot",
        field="startup_mode",
        parse=values.choice(STARTUP_MODES),
        default="initial",
        shown_default="`initial`",
        summary=(
            "initial (default: snapshot, then binlog), snapshot (snapshot only: no batch "
            "after the hand-over), latest-offset (binlog from the head), earliest-offset "
            "(binlog from the oldest file the server keeps), specific-offset (binlog from the"
            " position below) or timestamp (binlog from the first transaction at or after the"
            " time below); the last four read no snapshot"
        ),
        manual=(
            "where a new query starts (Flink CDC's names; see "
            "[Startup modes](usage.md#startup-modes)): `initial` "
            "(snapshot, then binlog), `snapshot` (snapshot only; no batch after the "
            "hand-over), `latest-offset` (binlog from the head), `earliest-offset` (binlog "
            "from the oldest file the server keeps), `specific-offset` (binlog from a "
            "position or GTID set), `timestamp` (binlog from a time). The last four read no "
            "snapshot. The start is used only by a new checkpoint; `snapshot` also ends every"
            " later run of its checkpoint at the hand-over"
        ),
    ),
    Option(
        "scan.startup.specific-offset.file",
        kind="binlog file name",
        shown_default="unset",
        summary="specific-offset: binlog file to start in, with scan.startup.specific-offset.pos",
        manual=(
            "`specific-offset`: a binlog file (`SHOW BINARY LOGS`) and a position in it where"
            " an event ends between two transactions (`SHOW BINARY LOG STATUS`, or the "
            "`End_log_pos` of an XID/COMMIT event in `SHOW BINLOG EVENTS`); `4`, the file's "
            "start, is accepted. A position inside a transaction or not at an event's end is "
            "refused with the reason"
        ),
    ),
    Option(
        "scan.startup.specific-offset.pos",
        kind="integer >= 4",
        shown_default="unset",
        summary=(
            "specific-offset: position in that file where an event ends between two "
            "transactions (e.g. SHOW BINARY LOG STATUS's Position); 4 is the file's start"
        ),
        manual=(
            "`specific-offset`: a binlog file (`SHOW BINARY LOGS`) and a position in it where"
            " an event ends between two transactions (`SHOW BINARY LOG STATUS`, or the "
            "`End_log_pos` of an XID/COMMIT event in `SHOW BINLOG EVENTS`); `4`, the file's "
            "start, is accepted. A position inside a transaction or not at an event's end is "
            "refused with the reason"
        ),
    ),
    Option(
        "scan.startup.specific-offset.gtid-set",
        kind="GTID set",
        shown_default="unset",
        summary=(
            "specific-offset instead of file and pos: start after exactly these transactions,"
            " MySQL 'uuid:1-5,...' or MariaDB 'domain-server-seq,...' (gtid_binlog_pos)"
        ),
        manual=(
            "`specific-offset` instead of file and position: start right after exactly these "
            "transactions, MySQL syntax `uuid:1-5,uuid2:1-3` (`gtid_executed`) or MariaDB "
            "`0-1-42,1-2-7` (`gtid_binlog_pos`); the syntax must be the server's"
        ),
    ),
    Option(
        "scan.startup.timestamp-millis",
        kind="integer >= 0",
        shown_default="unset",
        summary=(
            "timestamp: milliseconds since the epoch; the stream starts at the first "
            "transaction whose binlog event time (whole seconds, as Flink CDC compares them) "
            "is at or after it"
        ),
        manual=(
            "`timestamp`: epoch milliseconds; the stream starts at the first transaction "
            "whose binlog event time (whole seconds: included when `seconds * 1000 >= "
            "millis`, as Flink CDC compares) is at or after it"
        ),
    ),
)
