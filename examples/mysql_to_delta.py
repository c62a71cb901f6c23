"""Mirror a MySQL/MariaDB table into a Delta table, kept up to date, exactly once.

    CDC_MYSQL_PASSWORD=... python examples/mysql_to_delta.py \\
        --hostname db.example.com --username cdc --database-name shop \\
        --table-name 'shop\\.orders' --checkpoint /data/ck/orders --table-path /data/delta/orders

    spark-submit examples/mysql_to_delta.py ...        (the same arguments)

The change stream (``spark.readStream.format("cdc-mysql")``) is applied batch by batch
with ``foreachBatch`` and a MERGE into the Delta table by ``deltalake`` (delta-rs, from
PyPI: no Spark jars to download). Per primary key the change with the highest ``_seq``
of the batch wins: ``d`` deletes the row, anything else upserts it. The Delta table keeps
``_seq`` too, and a row is only replaced by a newer one.

Each MERGE commits with Delta's application transaction (``app_id`` = the checkpoint,
``version`` = Spark's batch id) in the same commit. A batch that Spark runs again after a
crash between the Delta commit and its own commit is recognised and skipped, so it is
never applied twice.

Read the table back with ``deltalake`` (``DeltaTable(path).to_pandas()``), with pandas, or
with any Delta reader. This example mirrors one table (the source's typed output); for
several tables, run one query per table.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc

PASSWORD_ENV = "CDC_MYSQL_PASSWORD"
# Test hook: exit right after this batch's Delta commit, before Spark commits the batch.
CRASH_AFTER_ENV = "CDC_MYSQL_EXAMPLE_CRASH_AFTER_BATCH"


def latest_changes(batch: pa.Table, keys: list[str]) -> pa.Table:
    """Per key, the row with the highest ``_seq`` of the batch (``_seq`` is unique per
    change, so the rows holding their key's maximum are exactly one per key)."""
    if batch.num_rows == 0:
        return batch
    newest = batch.group_by(keys).aggregate([("_seq", "max")])
    return batch.filter(pc.is_in(batch.column("_seq"), value_set=newest.column("_seq_max")))


class DeltaMirror:
    """Applies the change batches of one source table to a Delta table."""

    def __init__(self, path: str, keys: list[str], app_id: str) -> None:
        self.path = path
        self.keys = keys
        self.app_id = app_id

    def _table(self, schema: pa.Schema):
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path):
            columns = [f for f in schema if f.name not in ("_op", "_ts_ms")]
            DeltaTable.create(self.path, pa.schema(columns), mode="ignore")
        return DeltaTable(self.path)

    def apply(self, batch: pa.Table, batch_id: int) -> str:
        from deltalake import CommitProperties, Transaction

        table = self._table(batch.schema)
        done = table.transaction_version(self.app_id)
        if done is not None and done >= batch_id:
            return f"batch {batch_id}: already applied (Delta version of {self.app_id})"
        if batch.num_rows:
            changes = latest_changes(batch, self.keys).drop_columns(["_ts_ms"])
            columns = [name for name in changes.column_names if name != "_op"]
            on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in self.keys)
            values = {f"`{c}`": f"s.`{c}`" for c in columns}
            commit = CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])
            (
                table.merge(
                    changes, on, source_alias="s", target_alias="t", commit_properties=commit
                )
                .when_matched_delete(predicate="s._op = 'd'")
                .when_matched_update(values, predicate="s._op != 'd' AND s._seq > t._seq")
                .when_not_matched_insert(values, predicate="s._op != 'd'")
                .execute()
            )
            applied = f"{changes.num_rows} key(s) merged"
            if os.environ.get(CRASH_AFTER_ENV) == str(batch_id):
                print(f"batch {batch_id}: {applied}; crashing before Spark commits", flush=True)
                os._exit(3)
        else:  # nothing to write: running it again changes nothing either
            applied = "no changes"
        return f"batch {batch_id}: {applied}"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--port", default="3306")
    parser.add_argument("--username", required=True)
    parser.add_argument("--database-name", required=True)
    parser.add_argument("--table-name", required=True, help="regex matching one 'db.table'")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location")
    parser.add_argument("--table-path", required=True, help="the Delta table's path")
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="stop once caught up with the binlog head seen at start (default: run on)",
    )
    parser.add_argument("--trigger-seconds", type=float, default=10.0)
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=VALUE", help="more source options"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.appName("mysql-to-delta")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    options = {
        "hostname": args.hostname,
        "port": args.port,
        "username": args.username,
        "password": os.environ.get(PASSWORD_ENV, ""),
        "database-name": args.database_name,
        "table-name": args.table_name,
    }
    options.update(dict(item.split("=", 1) for item in args.option))
    tables = _captured_tables(options)
    if len(tables) != 1:
        names = ", ".join(t.name for t in tables)
        print(f"table-name matches {names}: run one query per table", file=sys.stderr)
        return 2
    keys = list(tables[0].primary_key)
    changes = spark.readStream.format("cdc-mysql").options(**options).load()
    app_id = "cdc-mysql:" + hashlib.sha1(os.path.abspath(args.checkpoint).encode()).hexdigest()
    mirror = DeltaMirror(args.table_path, keys, app_id)

    def apply(batch_df, batch_id: int) -> None:
        print(mirror.apply(batch_df.toArrow(), batch_id), flush=True)

    writer = changes.writeStream.foreachBatch(apply).option("checkpointLocation", args.checkpoint)
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    query = writer.start()
    query.awaitTermination()
    return 0


def _captured_tables(options: dict) -> list:
    """The tables the options capture, as the source discovers them (with their keys)."""
    from cdc_source.datasource import discover
    from cdc_source.options import parse_options

    return discover(parse_options(options))


if __name__ == "__main__":
    sys.exit(main())
