"""Lets Spark find ``format("cdc-mysql")`` by itself: it imports every ``pyspark_*`` module
and registers its ``DefaultSource``. Kept to one cheap import."""

from cdc_source.datasource import CdcMySQLDataSource as DefaultSource

__all__ = ["DefaultSource"]
