"""A query writing a change stream into lake tables with ``cdc_source.delta``, run as a
child process by the lake tests, with hooks that end the process between commits.

    python -m tests.support.delta_runner --hostname ... --checkpoint CK --lake mirror=PATH

``--lake MODE=PATH`` (repeatable) writes every batch into each lake in turn, in one
``foreachBatch``: the way a user composes writers. Each applied slice is printed as
``batch B: TABLE: what it did``. The hooks (environment variables) exit with status 3:
after a batch's Delta commits before Spark commits it, after the first table's commit of a
slice while a later table of it has changes, or after the first slice of a batch that has
several.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

PASSWORD_ENV = "CDC_MYSQL_PASSWORD"
CRASH_AFTER_ENV = "CDC_MYSQL_LAKE_CRASH_AFTER_BATCH"
CRASH_BETWEEN_TABLES_ENV = "CDC_MYSQL_LAKE_CRASH_BETWEEN_TABLES"
CRASH_BETWEEN_SLICES_ENV = "CDC_MYSQL_LAKE_CRASH_BETWEEN_SLICES"
CRASH_EXIT_STATUS = 3


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--port", default="3306")
    parser.add_argument("--username", required=True)
    parser.add_argument("--database-name", required=True)
    parser.add_argument("--table-name", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--lake", action="append", required=True, metavar="MODE=PATH")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--trigger-seconds", type=float, default=10.0)
    parser.add_argument("--slice-rows", type=int, default=None)
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE")
    return parser.parse_args(argv)


def _crash(text: str) -> None:
    print(text, flush=True)
    os._exit(CRASH_EXIT_STATUS)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from pyspark.sql import SparkSession

    from cdc_source import delta

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("cdc_mysql.delta").addHandler(handler)
    logging.getLogger("cdc_mysql.delta").setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.appName("lake-runner")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    options = {
        "hostname": args.hostname,
        "port": args.port,
        "username": args.username,
        "password": os.environ.get(PASSWORD_ENV, ""),
        "database-name": args.database_name,
        "table-name": args.table_name,
        "metadata.list": "row_key",  # what the lake tables match rows on
    }
    options.update(dict(item.split("=", 1) for item in args.option))
    changes = spark.readStream.format("cdc-mysql").options(**options).load()
    between_tables = bool(os.environ.get(CRASH_BETWEEN_TABLES_ENV))
    between_slices = bool(os.environ.get(CRASH_BETWEEN_SLICES_ENV))

    def on_apply(applied: delta.Applied) -> None:
        head = f"batch {applied.batch_id}: "
        if between_tables and applied.outcome.committed and applied.later:
            _crash(head + f"crashing after {applied.table}'s commit, before {applied.later[0]}'s")
        if between_slices and applied.outcome.committed and not applied.last:
            _crash(head + f"crashing after slice {applied.index} of {applied.table}")

    extra = {} if args.slice_rows is None else {"slice_rows": args.slice_rows}
    writers = []
    for lake in args.lake:
        mode, path = lake.split("=", 1)
        try:  # options read back from the DataFrame's plan, as a user's call does
            writers.append(
                delta.writer(changes, path, args.checkpoint, mode, on_apply=on_apply, **extra)
            )
        except ValueError as error:  # LegacyTableError, a reserved column name
            print(error, file=sys.stderr)
            return 2
    crash_after = os.environ.get(CRASH_AFTER_ENV)

    def apply(batch_df, batch_id: int) -> None:
        for write in writers:
            write(batch_df, batch_id)
        if crash_after == str(batch_id):
            _crash(f"batch {batch_id}: crashing before Spark commits")

    stream = changes.writeStream.foreachBatch(apply).option("checkpointLocation", args.checkpoint)
    if args.available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=f"{args.trigger_seconds} seconds")
    stream.start().awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
