"""The Spark glue: ``spark.readStream.format("cdc-mysql")``, and ``spark.read`` of one
consistent snapshot.

Spark starts a Python process for each step of a query, and each one imports this
module: looking the source up by name (every session that reads any Python source), the
source's creation (options and output schema), the driver's stream reader, and every
executor task on a fresh Python worker. This module therefore imports only what the
first of them needs, Spark's base class; each method imports what its step needs, and
the readers live in :mod:`cdc_source.spark_readers`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
    from pyspark.sql.types import StructType


class CdcMySQLDataSource(DataSource):
    """Change data capture of MySQL/MariaDB tables: a chunked snapshot, then the binlog."""

    @classmethod
    def name(cls) -> str:
        return "cdc-mysql"

    def __init__(self, options: dict[str, str]) -> None:
        from cdc_source.options import parse_options

        super().__init__(options)
        self.source_options = parse_options(dict(options))

    def schema(self) -> StructType:
        from cdc_source.output_schema import output_schema
        from cdc_source.spark_readers import discover

        options = self.source_options
        return output_schema(discover(options), options.metadata, options.columns)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from cdc_source.spark_readers import CdcStreamReader

        # Spark builds a stream reader in its driver-side process, and another for every
        # micro-batch only to call read(): the tables are read lazily, by the first.
        return CdcStreamReader(self.source_options, schema=schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        from cdc_source.spark_readers import CdcSnapshotReader, discover

        return CdcSnapshotReader(self.source_options, discover(self.source_options))
