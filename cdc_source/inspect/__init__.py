"""``cdc-mysql inspect <checkpointLocation>``: where a query is, read from Spark's checkpoint.

The offset of this source is the whole truth of a query's progress (docs/design.md,
'Offsets'), and Spark keeps one per micro-batch in the checkpoint, so the progress of a
running or stopped query can be read without Spark. With connection options the command also asks
the server how far the snapshot is through each table and how many binlog bytes the
query is behind the head.

    checkpoint  reading Spark's checkpoint directory (offsets/, commits/, metadata)
    records     what this source's offset of each logged batch means
    summary     the query's state at its latest batch
    server      the server's side: snapshot progress per table, binlog lag
    report      the three together
    render      a report as text and as JSON
    watch       ``--watch``: a live view redrawn every few seconds while a query runs
    cli         the command line and ``main``

Reading, summarizing and rendering are pure; reading files, asking the server and
printing happen at the edges (``read_checkpoint``, ``server_report``, ``main``).
"""

from cdc_source.inspect.checkpoint import (
    Checkpoint,
    CheckpointError,
    LoggedBatch,
    SourceEntry,
    parse_offset_file,
    read_checkpoint,
)
from cdc_source.inspect.cli import (
    PASSWORD_ENV,
    build_parser,
    connection_options,
    main,
    read_report,
)
from cdc_source.inspect.records import (
    BatchRecord,
    batch_record,
    batch_records,
    choose_source,
    source_ids,
)
from cdc_source.inspect.render import (
    FRONTIER_WIDTH,
    OFFSET_BYTES_TARGET,
    binlog_decoder,
    render_json,
    render_text,
    report_json,
)
from cdc_source.inspect.report import Report, build_report
from cdc_source.inspect.server import (
    ServerReport,
    TableProgressRow,
    binlog_lag,
    server_report,
    server_report_or_error,
    table_progress,
)
from cdc_source.inspect.summary import (
    Summary,
    current_record,
    split_tables,
    summarize,
    table_status,
)

__all__ = [
    "FRONTIER_WIDTH",
    "OFFSET_BYTES_TARGET",
    "PASSWORD_ENV",
    "BatchRecord",
    "Checkpoint",
    "CheckpointError",
    "LoggedBatch",
    "Report",
    "ServerReport",
    "SourceEntry",
    "Summary",
    "TableProgressRow",
    "batch_record",
    "batch_records",
    "binlog_decoder",
    "binlog_lag",
    "build_parser",
    "build_report",
    "choose_source",
    "connection_options",
    "current_record",
    "main",
    "parse_offset_file",
    "read_checkpoint",
    "read_report",
    "render_json",
    "render_text",
    "report_json",
    "server_report",
    "server_report_or_error",
    "source_ids",
    "split_tables",
    "summarize",
    "table_progress",
    "table_status",
]
