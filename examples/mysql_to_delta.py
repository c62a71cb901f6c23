"""Mirror a MySQL/MariaDB table into a Delta table, kept up to date, exactly once.

    pip install 'cdc-mysql[lake]'
    CDC_MYSQL_PASSWORD=... python examples/mysql_to_delta.py

A ``table-name`` matching several tables writes one Delta table per table under the path
(``/data/delta/shop/shop.orders``, ...). ``mode="history"`` keeps every version of every
row (SCD type 2), ``mode="append"`` the change log; see ``cdc_source.delta``.
"""

import os

from pyspark.sql import SparkSession

from cdc_source import delta

spark = SparkSession.builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
orders = (
    spark.readStream.format("cdc-mysql")
    .option("hostname", "db.example.com")
    .option("username", "cdc")
    .option("password", os.environ["CDC_MYSQL_PASSWORD"])
    .option("database-name", "shop")
    .option("table-name", r"shop\.orders")
    .option("metadata.list", "row_key")  # the key bytes the Delta table matches rows on
    .load()
)
query = delta.mirror(orders, "/data/delta/orders", checkpoint="/data/ck/orders", mode="mirror")
query.awaitTermination()
