"""Runs one streaming query on ``local-cluster[2,1,1024]`` (two executors in their own
JVMs, Spark's RPC message limit enforced) until told where to stop; driven by
test_cluster.py in a subprocess, since a process holds one SparkContext.

    python -m tests.support.cluster_query OPTIONS_JSON CHECKPOINT OUT CONTROL_DIR

It streams into ``OUT/batch=N`` until ``CONTROL_DIR/head.json`` names a binlog head
([file number, position]) and a committed batch has reached it, then stops the query and
exits 0 (1 if the query died).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.support.streams import committed_position

MASTER = "local-cluster[2,1,1024]"


def main(options_path: str, checkpoint: str, out: str, control: str) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(MASTER)
        .appName("cdc-mysql-cluster-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.task.maxFailures", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    options = json.loads(Path(options_path).read_text())

    def write(df, batch_id: int) -> None:
        target = f"{out}/batch={batch_id}"
        df.withColumn("_batch", F.lit(batch_id)).write.mode("overwrite").parquet(target)

    reader = spark.readStream.format("cdc-mysql")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    head_file = Path(control) / "head.json"
    try:
        while query.isActive:
            head = tuple(json.loads(head_file.read_text())) if head_file.exists() else None
            if head is not None and committed_position(Path(checkpoint)) >= head:
                return 0
            time.sleep(0.2)
        print(f"query ended: {query.exception()}", file=sys.stderr)
        return 1
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
