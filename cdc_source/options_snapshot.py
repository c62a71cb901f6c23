"""The snapshot options (docs/options.md): how the chunked snapshot is cut, sized per batch,
read (client, parallelism, fetch size) and proven consistent with the binlog."""

from __future__ import annotations

from cdc_source import option_values as values
from cdc_source.option_spec import (
    DEFAULT_BYTES_PER_BATCH,
    DEFAULT_FETCH_SIZE,
    DEFAULT_ROWS_PER_BATCH,
    SNAPSHOT_CLIENTS,
    SNAPSHOT_VISIBILITY,
    Option,
    default_snapshot_parallelism,
)

SNAPSHOT_OPTIONS: tuple[Option, ...] = (
    Option(
        "scan.incremental.snapshot.chunk.size",
        kind="integer > 0",
        field="chunk_size",
        parse=values.positive,
        default=None,
        shown_default="by row length",
        summary=(
            "rows per snapshot chunk; default: about 16 MiB of the table's rows (by its "
            "average row length), between 1,024 and 65,536"
        ),
        manual=(
            "rows per snapshot chunk (one `SELECT` each). Default: about 16 MiB of the "
            "table's rows by its average row length, between 1,024 and 65,536 (each chunk's "
            "query costs about 2 ms of a task's stream, so narrow rows get big chunks)"
        ),
    ),
    Option(
        "scan.incremental.snapshot.chunk.key-column",
        kind="column, or regex:column;...",
        field="chunk_keys",
        parse=values.chunk_keys,
        default=None,
        shown_default="unset",
        summary=(
            "for tables without a primary key (Flink CDC's option): a column name, or "
            "'<db.table regex>:<column>;...' per table; the column must be NOT NULL with a "
            "UNIQUE index of its own and then keys the table as a primary key would; exactly "
            "once only while each row keeps its value (an update of it is a delete and an "
            "insert) and the index stays; for a table with a primary key only its first "
            "column is accepted"
        ),
        manual=(
            "for **tables without a primary key** (Flink CDC's option, in both its "
            "spellings): a column name for every captured table (Flink CDC's `mysql-cdc` SQL "
            "connector), or `<db.table regex>:<column>` entries separated by `;` (Flink CDC "
            "3.2+'s pipeline connector, e.g. `shop\\.log_[0-9]+:seq;shop\\.events:event_id;`; "
            "the regex is matched against `db.table` in full, as `table-name`, so Flink's "
            '`\\.` for "any character" is `.` here; two entries naming different columns for '
            "one table are refused; a table the entries miss is refused as having no key). "
            "The column must be NOT NULL and have a UNIQUE index of its own (the whole "
            "column, not a prefix); it then plays the primary key's role everywhere (chunks, "
            '`_seq`, the envelope\'s `key`, "latest row per key"). A column that is not kept '
            "unique by the server is refused, naming the table, the column and the `ALTER "
            "TABLE` that fixes it: two rows sharing a value would be merged silently. For a "
            "table with a primary key only its first column is accepted (nothing changes: the"
            " primary key chunks and keys it). Exactly once holds while the index stays (see "
            "[Limits](semantics.md#limits))"
        ),
    ),
    Option(
        "scan.snapshot.rows-per-batch",
        kind="integer > 0",
        field="rows_per_batch",
        parse=values.positive,
        default=DEFAULT_ROWS_PER_BATCH,
        shown_default="`2000000`",
        summary=(
            "snapshot rows planned per micro-batch (estimated as chunk.size per chunk), "
            "default 2,000,000: enough that a batch's fixed cost stays under 10%"
        ),
        manual=(
            "snapshot rows planned per micro-batch (chunks counted at their size). A "
            "micro-batch costs Spark about 0.1-0.2 s whatever its size, so batches are large:"
            " 2M rows keep that under 10%"
        ),
    ),
    Option(
        "scan.snapshot.bytes-per-batch",
        kind="integer > 0",
        field="bytes_per_batch",
        parse=values.positive,
        default=DEFAULT_BYTES_PER_BATCH,
        shown_default="`1073741824`",
        summary=(
            "snapshot bytes planned per micro-batch (by the table's average row length), "
            "default 1024 MiB"
        ),
        manual=(
            "snapshot bytes planned per micro-batch, by the table's average row length (a "
            "batch always takes one chunk)"
        ),
    ),
    Option(
        "scan.snapshot.chunks-per-batch",
        kind="integer > 0",
        field="chunks_per_batch",
        parse=values.positive,
        default=None,
        shown_default="unset",
        summary=(
            "snapshot chunks per micro-batch; overrides the two budgets above (default unset)"
        ),
        manual="a fixed number of chunks per micro-batch instead of the two budgets above",
    ),
    Option(
        "scan.snapshot.fetch.size",
        kind="integer > 0",
        field="fetch_size",
        parse=values.positive,
        default=DEFAULT_FETCH_SIZE,
        shown_default="`16384`",
        summary=(
            "rows fetched per round trip and per Arrow batch, default 16384 (a fetch also "
            "ends at 32 MiB of values)"
        ),
        manual=(
            "rows per fetch while reading a chunk, and per Arrow batch; a fetch also ends at "
            "32 MiB of values, so wide rows stay bounded by bytes"
        ),
    ),
    Option(
        "scan.snapshot.client",
        kind="one of auto|mysqlclient|pymysql",
        field="snapshot_client",
        parse=values.choice(SNAPSHOT_CLIENTS),
        default="auto",
        shown_default="`auto`",
        summary=(
            "auto (mysqlclient where installed, else PyMySQL), mysqlclient or pymysql: the "
            "client snapshot tasks read chunks with"
        ),
        manual=(
            "how snapshot tasks read: `mysqlclient` (C: where the package's "
            "`reader._textscan` extension is built, the rows go from libmariadb straight "
            "into Arrow buffers, in the binary protocol where libmariadb is Connector/C 3.1 "
            "or later, which spares the server printing numbers; else mysqlclient's cursor) "
            "where mysqlclient is installed (`pip install 'cdc-mysql[fast]'`, needs "
            "`libmariadb-dev` and `pkg-config` to build), else `pymysql`. All hand the "
            "values to the same Arrow casts: the same output"
        ),
    ),
    Option(
        "scan.snapshot.parallelism",
        kind="integer > 0",
        field="snapshot_parallelism",
        parse=values.positive,
        default=default_snapshot_parallelism,
        shown_default="cores",
        summary=(
            "snapshot tasks per micro-batch (each reads its chunks in one consistent "
            "snapshot), default: the cores of the machine planning the query, at least 2; on "
            "a cluster set it to the executors' cores"
        ),
        manual=(
            "snapshot tasks per micro-batch; each reads its share of the batch's chunks "
            "inside one consistent snapshot. Default: the cores of the machine that plans the"
            " query, at least 2. A Python data source is planned in a process that cannot ask"
            " Spark about its executors: in local mode this is Spark's cores; **on a cluster "
            "set it to the executors' total cores** "
            "(`spark.sparkContext.defaultParallelism`), or fewer if the server should see "
            "fewer concurrent scans"
        ),
    ),
    Option(
        "scan.snapshot.visibility",
        kind="one of auto|snapshot-status|gtid-wait|head-unsafe",
        field="snapshot_visibility",
        parse=values.choice(SNAPSHOT_VISIBILITY),
        default="auto",
        shown_default="`auto`",
        summary=(
            "how a snapshot task proves it sees every transaction at or before the batch's "
            "position: auto (default: the server's snapshot status on MariaDB and Percona, "
            "GTID waiting on MySQL with gtid_mode=ON, refused on MySQL without GTIDs), "
            "snapshot-status, gtid-wait, or head-unsafe (MySQL without GTIDs: accept the "
            "documented risk of missing a transaction committing while the snapshot opens)"
        ),
        manual=(
            "how a snapshot task proves its consistent snapshot sees every transaction at or "
            "before the batch's binlog position (a transaction is in the binlog before the "
            "engine commits it): `snapshot-status` (the server reports the snapshot's own "
            "position: MariaDB, Percona Server), `gtid-wait` (`WAIT_FOR_EXECUTED_GTID_SET` "
            "with the exact GTID set of the position, which the offset carries: MySQL with "
            "`gtid_mode=ON`), or `head-unsafe` (MySQL without GTIDs: no proof; a transaction "
            "committing while a snapshot opens can be missed). `auto` picks the first the "
            "server offers and refuses MySQL without GTIDs, naming the two ways out. On "
            "MariaDB, `gtid-wait` runs MySQL's path (the tests use it)"
        ),
    ),
    Option(
        "scan.snapshot.gtid-wait.timeout",
        kind="duration",
        field="gtid_wait_timeout",
        parse=values.whole_seconds,
        default=60,
        shown_default="`60s`",
        summary=(
            "duration (e.g. 90s, 2min; a bare number is seconds; rounded up to whole seconds)"
            " a snapshot task waits for the transactions at or before its position to commit "
            "(gtid-wait), default 60; then the task fails and is retried"
        ),
        manual=(
            "a duration as for `connect.timeout` (whole seconds, rounded up): how long a "
            "snapshot task waits (`gtid-wait`) for the transactions at or before its position"
            " to commit; then the task fails, naming the option, and Spark runs it again"
        ),
    ),
)
