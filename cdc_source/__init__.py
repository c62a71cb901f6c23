"""cdc-mysql: change data capture of MySQL/MariaDB tables as a Spark streaming source."""

from __future__ import annotations

__version__ = "0.1.0"


def register(spark) -> None:
    """Register ``format("cdc-mysql")`` where Spark's auto-discovery is off."""
    from cdc_source.datasource import CdcMySQLDataSource

    spark.dataSource.register(CdcMySQLDataSource)
