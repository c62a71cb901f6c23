"""Lake tables from a change stream: ``cdc_source.delta`` (``pip install 'cdc-mysql[lake]'``).

::

    changes = spark.readStream.format("cdc-mysql").options(**options).load()
    query = delta.mirror(changes, "/data/delta/orders", checkpoint="/data/ck/orders")

writes the stream into Delta with ``deltalake`` (delta-rs, from PyPI: no Spark jars), one
Delta table per source table (at ``<table_path>/<db>.<table>`` when the stream captures
several), in one of three modes:

- ``mirror``: the table as it is on the server (:mod:`cdc_source.delta.mirror_table`);
- ``history``: every version of every row, SCD type 2 (:mod:`cdc_source.delta.history_table`);
- ``append``: the change log, each change once (:mod:`cdc_source.delta.change_log`).

Exactly once: each commit carries Delta's application transaction of the batch's slice it
applied, so a batch Spark runs again after a crash skips what is already in the table
(:mod:`cdc_source.delta.transactions`). Keys are compared as the server compares them: each
row's ``_key`` is the source's ``row_key`` metadata column, its primary key's bytes under
the column's collation, computed by the source's tasks (a single table's stream must list
``row_key`` in ``metadata.list``; the envelope always has it). A batch is merged in
slices of bounded size, never collected whole (:mod:`cdc_source.delta.slices`).

``writer`` builds the ``foreachBatch`` function alone, for a query composed otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc_source.delta.change_log import ChangeLogTable
from cdc_source.delta.changes import ROW_KEY, reserved_clash
from cdc_source.delta.history_table import HistoryTable
from cdc_source.delta.lake_table import LakeTable, LegacyTableError, typed_fields
from cdc_source.delta.mirror_table import MirrorTable
from cdc_source.delta.slices import check_staging
from cdc_source.delta.source_options import source_options
from cdc_source.delta.table_set import TableSet
from cdc_source.delta.transactions import staging_of
from cdc_source.delta.writer import SLICE_ROWS, Applied, LakeWriter

MODES: dict[str, type[LakeTable]] = {
    "mirror": MirrorTable,
    "history": HistoryTable,
    "append": ChangeLogTable,
}

__all__ = ["MODES", "Applied", "LakeWriter", "LegacyTableError", "mirror", "writer"]


def writer(
    stream_df,
    table_path: str,
    checkpoint: str,
    mode: str = "mirror",
    *,
    options: dict[str, str] | None = None,
    slice_rows: int = SLICE_ROWS,
    staging: str | None = None,
    on_apply: Callable[[Applied], None] | None = None,
) -> LakeWriter:
    """The ``foreachBatch`` function writing ``stream_df`` (a ``cdc-mysql`` stream) into
    lake tables at ``table_path`` in ``mode``, its lake tables created (empty) if new.

    ``checkpoint`` is the query's checkpoint location (the writer's commits are named
    by the query's id, which Spark keeps there);
    ``options`` are the stream's (read from ``stream_df`` when not given); ``on_apply``
    is called after each table's slice is applied. ``staging`` is where the executors
    write a batch for the driver to read in slices (default: a directory of this writer
    under ``checkpoint``); on a cluster it must be a path or URI that the executors and
    the driver both open with pyarrow (:mod:`cdc_source.delta.slices`)."""
    from cdc_source.options import parse_options
    from cdc_source.output_schema import is_envelope
    from cdc_source.spark_readers import discover

    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    kind = MODES[mode]
    if staging is None:
        staging = _default_staging(stream_df, checkpoint)
    check_staging(staging)
    parsed = parse_options(options if options is not None else source_options(stream_df))
    tables = discover(parsed)
    if not tables:
        raise ValueError(f"the stream's options capture no table ({parsed.table_pattern!r})")
    for table in tables:
        reserved_clash(table)
    if is_envelope(tables):
        lakes = TableSet(
            table_path,
            tables,
            lambda path, table, fields: kind(path, table, None, fields),
        )
        result = LakeWriter(table_set=lakes, staging=staging, slice_rows=slice_rows)
    else:
        from pyspark.sql.pandas.types import to_arrow_schema

        if ROW_KEY not in parsed.metadata:
            raise ValueError(
                f"the stream of {tables[0].name} has no {ROW_KEY} column: add '{ROW_KEY}' to "
                "its 'metadata.list' option (the lake table matches rows on it)"
            )
        fields = typed_fields(to_arrow_schema(stream_df.schema, timezone="UTC"))
        lake = kind(table_path, tables[0], None, fields)
        result = LakeWriter(lake=lake, staging=staging, slice_rows=slice_rows)
    result.on_apply = on_apply
    result.create()
    return result


def _default_staging(stream_df, checkpoint: str) -> str:
    """Under the checkpoint; refused where a local path would be each machine's own."""
    try:
        master = stream_df.sparkSession.conf.get("spark.master", "local")
    except Exception:  # Spark Connect: no such setting to read; the path is checked later
        master = "local"
    if not master.startswith("local") and "://" not in checkpoint:
        raise ValueError(
            f"on a cluster (master {master}) the lake writer needs staging=: a directory "
            "every executor and the driver open with pyarrow (s3://, gs://, hdfs://...); "
            "a path without a scheme would be each machine's local disk"
        )
    return staging_of(checkpoint)


def mirror(
    stream_df,
    table_path: str,
    checkpoint: str,
    mode: str = "mirror",
    *,
    options: dict[str, str] | None = None,
    trigger: dict | None = None,
    slice_rows: int = SLICE_ROWS,
    staging: str | None = None,
):
    """Starts the query writing ``stream_df`` into lake tables at ``table_path`` in
    ``mode`` (``mirror``, ``history`` or ``append``) with its checkpoint at
    ``checkpoint``; returns the started ``StreamingQuery``. ``trigger`` is passed to
    ``DataStreamWriter.trigger`` (e.g. ``{"availableNow": True}``)."""
    batches = writer(
        stream_df,
        table_path,
        checkpoint,
        mode,
        options=options,
        slice_rows=slice_rows,
        staging=staging,
    )
    stream = stream_df.writeStream.foreachBatch(batches).option("checkpointLocation", checkpoint)
    if trigger:
        stream = stream.trigger(**trigger)
    return stream.start()
