"""Quickstart: capture a live MySQL/MariaDB table with Spark, exactly once.

    python examples/quickstart.py [--rows 30000] [--seconds 30] [--out DIR]

(the same as ``python -m cdc_source quickstart``). It starts a throwaway local MariaDB,
creates ``shop.orders``, changes it from a writer thread while this code streams it into
a parquet folder, then checks that replaying the change log gives back the table.

The two functions below are all the user-facing code; the demo's scaffolding (server,
data, writer, progress printing, verification) lives in ``cdc_source/quickstart.py``.
"""

import sys

from pyspark.sql import Window
from pyspark.sql import functions as F

from cdc_source import quickstart


def start_capture(spark, server, out_dir, checkpoint_dir, chunk_size, chunks_per_batch):
    """Stream every change of shop.orders into a parquet folder (file sink: exactly once)."""
    orders = (
        spark.readStream.format("cdc-mysql")
        .option("hostname", server["hostname"])
        .option("port", server["port"])
        .option("username", server["username"])
        .option("password", server["password"])
        .option("database-name", "shop")
        .option("table-name", r"shop\.orders")  # a regex on 'db.table'
        .option("scan.incremental.snapshot.chunk.size", str(chunk_size))
        .option("scan.snapshot.chunks-per-batch", str(chunks_per_batch))
        .load()
    )
    # Columns: the table's own (id, customer, status, ...) + _op (r/c/u/d), _seq, _ts_ms.
    return (
        orders.writeStream.format("parquet")
        .option("path", out_dir)
        .option("checkpointLocation", checkpoint_dir)
        .trigger(processingTime="1 second")
        .start()
    )


def replay(spark, out_dir):
    """The table rebuilt from the change log: per key the latest change, deletes dropped."""
    latest_first = Window.partitionBy("id").orderBy(F.col("_seq").desc())
    return (
        spark.read.parquet(out_dir)
        .withColumn("_rank", F.row_number().over(latest_first))
        .where("_rank = 1 AND _op != 'd'")
        .drop("_rank", "_op", "_seq", "_ts_ms")
    )


if __name__ == "__main__":
    sys.exit(quickstart.main(sys.argv[1:], start_capture=start_capture, replay=replay))
