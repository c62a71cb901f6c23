"""The binlog options (docs/options.md): how the stream reads the binlog: tasks per batch, the
rows a batch takes, the row decoder, and what happens when the binlog the query needs was
purged."""

from __future__ import annotations

from cdc_source import option_values as values
from cdc_source.option_spec import (
    BINLOG_DECODERS,
    DEFAULT_BINLOG_PARALLELISM,
    DEFAULT_BINLOG_ROWS_PER_BATCH,
    ON_BINLOG_PURGED,
    Option,
)

BINLOG_OPTIONS: tuple[Option, ...] = (
    Option(
        "scan.binlog.parallelism",
        kind="integer > 0",
        field="binlog_parallelism",
        parse=values.positive,
        default=DEFAULT_BINLOG_PARALLELISM,
        shown_default="`1`",
        summary=(
            "binlog tasks per micro-batch, default 1: each reads the batch's binlog range and"
            " decodes every n-th row event; more than one speeds up decoding, but a fail-over"
            " during a batch then stops the query (a restart resumes it)"
        ),
        manual=(
            "binlog tasks per micro-batch: each reads the batch's binlog range and decodes "
            "every n-th row event (skipping an event is nearly free). More than one decodes "
            "in parallel (on 2 cores here: the same speed for 1,000-row transactions and wide"
            " rows, about 18% more for single-row transactions), but a fail-over while a "
            "batch runs then stops the query, since the batch's tasks may have read different"
            " servers; a restart resumes it exactly. With one, the query follows the "
            "fail-over by itself (see [Faults](semantics.md#faults))"
        ),
    ),
    Option(
        "scan.on-binlog-purged",
        kind="one of fail|resnapshot",
        field="on_binlog_purged",
        parse=values.choice(ON_BINLOG_PURGED),
        default="fail",
        shown_default="`fail`",
        summary=(
            "what a query does when the binlog it resumes in was purged: fail (default: an "
            "error saying so) or resnapshot (one 't' row per captured table, which tells a "
            "consumer to drop the table's earlier rows, then a new snapshot at the current "
            "head and the stream from there)"
        ),
        manual=(
            "what a restarted query does when the binlog file its checkpoint resumes in was "
            "purged: `fail` (an error that says so and names this option), or `resnapshot` "
            "(one `t` row per captured table, then a snapshot at the current head and the "
            "stream from there; see [Output](usage.md#output))"
        ),
    ),
    Option(
        "scan.binlog.max-rows-per-batch",
        kind="integer > 0",
        field="binlog_rows_per_batch",
        parse=values.positive,
        default=DEFAULT_BINLOG_ROWS_PER_BATCH,
        shown_default="`500000`",
        summary=(
            "row changes of the captured tables a stream batch takes at most, default "
            "500,000; a batch ends at a transaction boundary and takes at least one whole "
            "transaction, so a query behind the head catches up in bounded batches (Spark's "
            "maxRows / maxBytes read limits apply too)"
        ),
        manual=(
            "row changes of the captured tables a stream batch (after the hand-over) takes at"
            " most. A batch ends at a transaction boundary and takes at least one whole "
            "transaction, so a query restarted far behind the head catches up in bounded "
            "batches; `trigger(availableNow=True)` still stops at the head it saw when it "
            "started. The driver counts the rows by their images' lengths, without decoding "
            "values"
        ),
    ),
    Option(
        "scan.binlog.follower.enabled",
        kind="boolean",
        field="binlog_follower",
        parse=values.boolean,
        default=True,
        shown_default="`true`",
        summary=(
            "true (default) or false: whether the driver follows the binlog as the server "
            "writes it while a stream runs, so that planning a batch reads nothing; with "
            "false each batch's range is read when it is planned"
        ),
        manual=(
            "while the stream follows the binlog, the driver keeps one binlog dump open of "
            "its own (a thread, and the `server-id` before the range's last, which must not "
            "be one a task takes: the range needs two ids more than the two parallelisms, "
            "else the follower stays off) and reads each event once as the server writes it:"
            " the next batch's end, its GTID state, its table statements, its row count and "
            "its open XA transactions are then known when Spark asks, and planning reads no "
            "binlog. It holds a summary of one batch at most, never events, and stops "
            "reading when a batch's row limit is reached until that batch is planned; under "
            "`trigger(availableNow=True)` it reads nothing past the head frozen at the start."
            " The first batches of a run and a run after a fail-over read each batch's range"
            " when it is planned, as `false` always does; the batches are the same either way"
        ),
    ),
    Option(
        "scan.binlog.decoder",
        kind="one of auto|native|python",
        field="binlog_decoder",
        parse=values.choice(BINLOG_DECODERS),
        default="auto",
        shown_default="`auto`",
        summary=(
            "auto (the C extension where built, else pure Python), native or python: the row "
            "decoder of binlog and normalization reads, and how snapshot text is typed; both "
            "give the same output"
        ),
        manual=(
            "the binlog row decoder: `native` (the C extension, built at install time where a"
            " C compiler and Python's headers exist), `python` (its pure-Python twin), or "
            "`auto` (native where built). The same choice types the snapshot's temporal and "
            "decimal text and builds its `_seq` in C (`reader/_textvalues.c`) or with "
            "Arrow's kernels. Both give the same output; the driver log and `inspect` say "
            "which runs"
        ),
    ),
)
