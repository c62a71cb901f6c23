"""Mirror MySQL/MariaDB tables into Delta tables, kept up to date, exactly once.

    CDC_MYSQL_PASSWORD=... python examples/mysql_to_delta.py \\
        --hostname db.example.com --username cdc --database-name shop \\
        --table-name 'shop\\.orders' --checkpoint /data/ck/orders --table-path /data/delta/orders

    spark-submit examples/mysql_to_delta.py ...        (the same arguments)

The change stream (``spark.readStream.format("cdc-mysql")``) is applied batch by batch
with ``foreachBatch`` and a MERGE into the Delta table by ``deltalake`` (delta-rs, from
PyPI: no Spark jars to download). Per primary key the change with the highest ``_seq``
of the batch wins: ``d`` deletes the row, anything else upserts it. The Delta table keeps
``_seq`` too, and a row is only replaced by a newer one.

Keys are compared the way the server compares them: each row carries ``_key``, the
source's own order-preserving bytes of its primary key (:func:`cdc_source.keys.sort_key`,
computed on columns by :func:`reader.key_columns.sort_key_reader`), which are equal
exactly when the server holds the keys equal. A string key's bytes come from the
server's ``WEIGHT_STRING`` under the column's collation (fetched in bulk and cached by
:class:`reader.key_weights.WeightResolver`), so under ``utf8mb4_general_ci`` ``'a'``,
``'A'`` and ``'a '`` are one key: the latest change per ``_key`` is kept and the MERGE
matches on ``_key``, and an update that re-spells a key (one ``u`` carrying the new
spelling) replaces the row and its spelling. A Delta table written by an earlier
version of this example has no ``_key``: it is refused at start-up (its rows of
re-spelled keys may already be doubled or stale), to be rebuilt with a new checkpoint.

An op ``t`` (the table was reset) deletes every row of the table whose ``_seq`` is lower,
in the same commit, before the batch's later changes are applied.

Each MERGE commits with Delta's application transaction (``app_id`` = the checkpoint,
``version`` = Spark's batch id) in the same commit. A batch that Spark runs again after a
crash between the Delta commit and its own commit is recognised and skipped, so it is
never applied twice.

Several tables: when ``--table-name`` matches more than one table, the source emits its
envelope schema and ``--table-path`` is a directory holding one Delta table per MySQL
table, ``<table-path>/<db>.<table>``, with the typed columns the source gives when it
captures that table alone (plus ``_seq`` and ``_key``). Each row's ``after`` image (a delete's
``before``) is parsed by Arrow's JSON reader against the table's Arrow schema, read from
the server at start-up. Each table's MERGE commits with its own application
transaction (app id from the checkpoint and the table), so a batch re-run after a crash
between two tables' commits skips the tables already applied and applies the others.

Read a table back with ``deltalake`` (``DeltaTable(path).to_pandas()``), with pandas, or
with any Delta reader.
"""

from __future__ import annotations

import argparse
import base64
import decimal
import hashlib
import os
import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

PASSWORD_ENV = "CDC_MYSQL_PASSWORD"
# Test hooks. Exit right after this batch's Delta commit(s), before Spark commits the batch:
CRASH_AFTER_ENV = "CDC_MYSQL_EXAMPLE_CRASH_AFTER_BATCH"
# Several tables: exit right after a table's Delta commit in the first batch in which a
# later table still has changes to commit (a crash between two tables' commits).
CRASH_BETWEEN_ENV = "CDC_MYSQL_EXAMPLE_CRASH_BETWEEN_TABLES"
CRASH_EXIT_STATUS = 3
RESET_OP = "t"
KEY = "_key"  # the Delta table's column of each row's primary-key bytes
RESERVED = ("_op", "_seq", "_ts_ms", KEY)  # column names the mirror needs for its own


class LegacyTableError(ValueError):
    """A Delta table written by an earlier version of this example (no ``_key``)."""


def latest_changes(batch: pa.Table) -> pa.Table:
    """Per key (its ``_key`` bytes), the row with the highest ``_seq`` of the batch
    (``_seq`` is unique per change, so the rows holding their key's maximum are exactly
    one per key)."""
    if batch.num_rows == 0:
        return batch
    newest = batch.group_by([KEY]).aggregate([("_seq", "max")])
    return batch.filter(pc.is_in(batch.column("_seq"), value_set=newest.column("_seq_max")))


def _key_text(column, values: pa.Array) -> pa.Array:
    """A typed key column of the output as the server's text of it, binary (what
    :func:`reader.key_columns.sort_key_reader` reads from a snapshot fetch)."""
    from cdc_source.keys import time_literal

    if column.data_type == "time":  # microseconds (LongType): to the server's text
        return pa.array([time_literal(v) for v in values.to_pylist()], pa.binary())
    if pa.types.is_timestamp(values.type):  # TIMESTAMP's instants in UTC, as the session's
        values = values.cast(pa.timestamp(values.type.unit))
    elif pa.types.is_boolean(values.type):  # TINYINT(1)
        values = values.cast(pa.int8())
    if pa.types.is_binary(values.type):
        return values
    return values.cast(pa.string()).cast(pa.binary())


class KeyBytes:
    """The ``_key`` column of one table's changes: per row the source's order-preserving
    bytes of its primary key (:func:`cdc_source.keys.sort_key`), equal exactly when the
    server holds the keys equal. Collated string key columns take the server's collation
    weights from ``weights`` (a :class:`reader.key_weights.WeightResolver`: one round trip
    per 500 values not yet seen); a key without one never needs the server."""

    def __init__(self, table, weights=None) -> None:
        from cdc_source.keys import needs_weight
        from reader.key_columns import sort_key_reader

        self.table = table
        self.weights = weights
        self.names = list(table.column_names)
        self.weighted = [needs_weight(c) for c in table.key_columns]
        if any(self.weighted) and weights is None:
            raise ValueError(f"{table.name}: a string key needs the server's collation weights")
        self.read = sort_key_reader(table)

    def _weights(self, column, values: pa.Array) -> pa.Array:
        distinct = pc.unique(values)
        texts = distinct.to_pylist()
        self.weights.prefetch((column, text) for text in texts)  # one batched round trip
        weights = pa.array([self.weights.weight(column, text) for text in texts], pa.binary())
        return weights.take(pc.index_in(values, value_set=distinct))

    def __call__(self, changes: pa.Table) -> pa.Array:
        if not changes.num_rows:
            return pa.array([], pa.binary())
        columns: list[pa.Array | None] = [None] * len(self.names)
        weights = []
        for column, weighted in zip(self.table.key_columns, self.weighted):
            values = changes.column(column.name).combine_chunks()
            if values.null_count:
                raise ValueError(f"{self.table.name}: a change has no value of key {column.name}")
            columns[self.names.index(column.name)] = _key_text(column, values)
            if weighted:
                weights.append(self._weights(column, values))
        # Row by row (a TIME key, DECIMAL beyond 38 digits), a DECIMAL's units are exact
        # only with the context's precision above its 65 digits (the default is 28).
        with decimal.localcontext() as context:
            context.prec = 100
            return self.read(columns + weights).cast(pa.binary())

    def add(self, changes: pa.Table) -> pa.Table:
        """``changes`` with their ``_key`` column appended."""
        return changes.append_column(pa.field(KEY, pa.binary(), False), self(changes))


def reserved_clash(table) -> None:
    clash = set(RESERVED) & set(table.column_names)
    if clash:
        raise ValueError(
            f"table {table.name} has column(s) {sorted(clash)}, which the Delta mirror "
            "needs for its own columns"
        )


def after_last_reset(batch: pa.Table) -> tuple[pa.Table, str | None]:
    """The changes of one table's batch that follow its last reset (op ``t``), and that
    reset's ``_seq`` (None without a reset: then every change of the batch)."""
    resets = pc.equal(batch.column("_op"), RESET_OP)
    if not pc.any(resets).as_py():
        return batch, None
    last = pc.max(batch.filter(resets).column("_seq")).as_py()
    return batch.filter(pc.greater(batch.column("_seq"), last)), last


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class Outcome:
    text: str
    committed: bool  # a Delta commit (with the batch's application transaction) was made


class DeltaMirror:
    """Applies the change batches of one source table (its typed columns, ``_op`` and
    ``_seq``) to a Delta table of the typed columns, ``_seq`` and ``_key``."""

    def __init__(
        self, path: str, table, app_id: str, weights=None, schema: pa.Schema | None = None
    ):
        self.path = path
        self.keys = KeyBytes(table, weights)
        self.app_id = app_id
        self.schema = schema  # the Delta table's schema; else taken from the first batch

    def table(self, schema: pa.Schema | None = None):
        """The Delta table, created (empty) if it does not exist; one without ``_key``
        (written by an earlier version) is refused."""
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path):
            schema = self.schema or schema
            columns = [f for f in schema if f.name not in RESERVED or f.name == "_seq"]
            columns.append(pa.field(KEY, pa.binary(), False))
            DeltaTable.create(self.path, pa.schema(columns), mode="ignore")
        table = DeltaTable(self.path)
        if KEY not in [f.name for f in table.schema().fields]:
            raise LegacyTableError(
                f"the Delta table {self.path} was written by an earlier version of this "
                f"example: it has no {KEY} column (its primary key's bytes under the "
                "server's collation, which rows are now matched on), and rows whose string "
                "key was re-spelled ('a' to 'A') may be doubled or stale in it; rebuild it: "
                "remove it (and the query's checkpoint) and run again"
            )
        return table

    def check(self) -> None:
        """Refuses an existing Delta table without ``_key`` (before any batch runs)."""
        from deltalake import DeltaTable

        if DeltaTable.is_deltatable(self.path):
            self.table()

    def applied(self, batch_id: int, table=None) -> bool:
        """Whether a Delta commit of this batch (or a later one) is in the table."""
        table = table if table is not None else self.table()
        done = table.transaction_version(self.app_id)
        return done is not None and done >= batch_id

    def apply(self, batch: pa.Table, batch_id: int) -> Outcome:
        from deltalake import CommitProperties, Transaction

        table = self.table(batch.schema)
        if self.applied(batch_id, table):
            return Outcome(f"already applied (Delta version of {self.app_id})", False)
        if not batch.num_rows:  # nothing to write: running it again changes nothing either
            return Outcome("no changes", False)
        if "_ts_ms" in batch.column_names:
            batch = batch.drop_columns(["_ts_ms"])
        later, reset = after_last_reset(batch)
        changes = latest_changes(self.keys.add(later))
        columns = [name for name in changes.column_names if name != "_op"]
        values = {f"`{c}`": f"s.`{c}`" for c in columns}
        commit = CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])
        version = table.version()
        merge = (
            table.merge(
                changes,
                f"t.`{KEY}` = s.`{KEY}`",
                source_alias="s",
                target_alias="t",
                commit_properties=commit,
            )
            .when_matched_delete(predicate="s._op = 'd'")
            .when_matched_update(values, predicate="s._op != 'd' AND s._seq > t._seq")
            .when_not_matched_insert(values, predicate="s._op != 'd'")
        )
        if reset is not None:  # every row older than the reset goes, unless a change replaces it
            merge = merge.when_not_matched_by_source_delete(f"t._seq < {_sql_string(reset)}")
        merge.execute()
        text = f"{changes.num_rows} key(s) merged"
        if reset is not None:
            text += f", rows before the reset at {reset} deleted"
        return Outcome(text, self.table().version() != version)


# -- several tables: the envelope schema ------------------------------------------------


def _json_read_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type Arrow's JSON reader reads a value of ``arrow_type`` as, from the envelope's
    JSON images (see ``cdc_source.types.json_default``): decimals (and unsigned BIGINT) are
    strings, binary values base64 strings, dates and timestamps ISO strings, FLOAT a
    double (JSON carries the shortest text of the double; read as float32 directly it
    could round differently)."""
    if pa.types.is_decimal(arrow_type) or pa.types.is_binary(arrow_type):
        return pa.string()
    if pa.types.is_date(arrow_type) or pa.types.is_timestamp(arrow_type):
        return pa.string()
    if pa.types.is_float32(arrow_type):
        return pa.float64()
    return arrow_type


def base64_decode(text: pa.Array) -> pa.Array:
    """Base64 strings as binary values, decoded all together in one call: each value is
    whole 4-character groups, so the values decode side by side once their padding ('=')
    reads as zero bits; the bytes the padding stood for are then dropped."""
    valid = text.is_valid()
    text = pc.fill_null(text.cast(pa.large_string()), "")
    count = len(text)
    offsets = np.frombuffer(text.buffers()[1], np.int64)[text.offset : text.offset + count + 1]
    lengths = np.diff(offsets)
    if (lengths % 4).any():
        raise ValueError("a binary value of the envelope is not base64 text")
    buffer = text.buffers()[2]
    data = np.frombuffer(buffer, np.uint8) if buffer is not None and buffer.size else _NO_BYTES
    data = data[offsets[0] : offsets[-1]].copy()
    ends = (offsets[1:] - offsets[0])[lengths > 0]  # one past each non-empty value's text
    last, second = np.zeros(count, bool), np.zeros(count, bool)
    last[lengths > 0] = data[ends - 1] == ord("=")
    second[lengths > 0] = data[ends - 2] == ord("=")
    pads = last.astype(np.int64) + (last & second)
    data[data == ord("=")] = ord("A")
    decoded = np.frombuffer(base64.b64decode(data.tobytes(), validate=True), np.uint8)
    whole = lengths // 4 * 3  # decoded bytes of each value, the padding's included
    out_ends = np.cumsum(whole)
    keep = np.ones(len(decoded), bool)
    keep[out_ends[pads >= 1] - 1] = False
    keep[out_ends[pads >= 2] - 2] = False
    out_offsets = np.concatenate([[0], np.cumsum(whole - pads)]).astype(np.int64)
    values = pa.Array.from_buffers(
        pa.large_binary(),
        count,
        [None, pa.py_buffer(out_offsets), pa.py_buffer(decoded[keep].tobytes())],
    )
    return pc.if_else(valid, values, pa.scalar(None, pa.large_binary())).cast(pa.binary())


_NO_BYTES = np.zeros(0, np.uint8)


def _typed(column: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    if column.type == arrow_type:
        return column
    if pa.types.is_binary(arrow_type):
        return base64_decode(column)
    if pa.types.is_timestamp(arrow_type):  # naive ISO text; TIMESTAMP's is UTC
        return column.cast(pa.timestamp(arrow_type.unit)).cast(arrow_type)
    return column.cast(arrow_type)  # decimals, dates, FLOAT


class EnvelopeImages:
    """Turns one table's rows of the envelope schema into the typed columns the source
    gives when it captures that table alone, plus ``_op`` and ``_seq``."""

    def __init__(self, table) -> None:
        from pyspark.sql.pandas.types import to_arrow_type

        from cdc_source.types import spark_type

        self.name = table.name
        self.fields = [
            pa.field(c.name, to_arrow_type(spark_type(c), timezone="UTC"), True)
            for c in table.columns
        ]
        self.read_schema = pa.schema(
            [pa.field(f.name, _json_read_type(f.type), True) for f in self.fields]
        )
        self.schema = pa.schema(
            self.fields + [pa.field("_op", pa.string(), False), pa.field("_seq", pa.string())]
        )

    @property
    def delta_schema(self) -> pa.Schema:
        return pa.schema(
            self.fields + [pa.field("_seq", pa.string(), False), pa.field(KEY, pa.binary(), False)]
        )

    def parse(self, images: pa.Array) -> list[pa.Array]:
        """The typed columns of JSON row images (no nulls), read as newline-delimited JSON."""
        count = len(images)
        if not count:
            return [pa.array([], f.type) for f in self.fields]
        images = images.cast(pa.large_string())
        lines = pc.binary_join(
            pa.LargeListArray.from_arrays(pa.array([0, count], pa.int64()), images),
            pa.scalar("\n", pa.large_string()),
        )[0].as_buffer()
        longest = pc.max(pc.binary_length(images)).as_py()
        parsed = pa_json.read_json(
            pa.BufferReader(lines),
            read_options=pa_json.ReadOptions(block_size=max(1 << 20, 2 * longest + 2)),
            parse_options=pa_json.ParseOptions(
                explicit_schema=self.read_schema, unexpected_field_behavior="error"
            ),
        )
        if parsed.num_rows != count:
            raise ValueError(f"{self.name}: {count} images read as {parsed.num_rows} rows")
        return [_typed(parsed.column(f.name).combine_chunks(), f.type) for f in self.fields]

    def changes(self, rows: pa.Table) -> pa.Table:
        """``rows`` (this table's, envelope schema) typed; a reset's columns are null."""
        op = rows.column("op").cast(pa.string()).combine_chunks()
        seq = rows.column("_seq").cast(pa.string()).combine_chunks()
        resets = pc.equal(op, RESET_OP)
        data = pc.invert(resets)
        after, before = (
            rows.column(n).cast(pa.string()).combine_chunks() for n in ("after", "before")
        )
        images = pc.coalesce(after, before).filter(data)
        if images.null_count:
            raise ValueError(f"{self.name}: a change of the envelope has no row image")
        columns = self.parse(images) + [op.filter(data), seq.filter(data)]
        typed = pa.Table.from_arrays(columns, schema=self.schema)
        reset_count = pc.sum(resets).as_py() or 0
        if reset_count:
            nulls = [pa.nulls(reset_count, f.type) for f in self.fields]
            reset_rows = pa.Table.from_arrays(
                nulls + [op.filter(resets), seq.filter(resets)], schema=self.schema
            )
            typed = pa.concat_tables([typed, reset_rows])
        return typed


def app_id_of(checkpoint: str, table: str | None = None) -> str:
    """Delta's application id of a query's commits (per table when there are several)."""
    key = os.path.abspath(checkpoint) + ("" if table is None else "\0" + table)
    return "cdc-mysql:" + hashlib.sha1(key.encode()).hexdigest()


class TablesMirror:
    """Applies change batches of the envelope schema to one Delta table per source table,
    at ``<root>/<db>.<table>``; tables are applied in name order, each in its own commit."""

    def __init__(self, root: str, tables: list, checkpoint: str, weights=None) -> None:
        for table in tables:
            reserved_clash(table)
        self.images = {t.name: EnvelopeImages(t) for t in sorted(tables, key=lambda t: t.name)}
        self.mirrors = {
            t.name: DeltaMirror(
                f"{root.rstrip('/')}/{t.name}",
                t,
                app_id_of(checkpoint, t.name),
                weights,
                self.images[t.name].delta_schema,
            )
            for t in tables
        }

    def create(self) -> None:
        """Every table, empty if it is new (so each can be read before it has a change)."""
        for mirror in self.mirrors.values():
            mirror.table()

    def apply(self, envelope: pa.Table, batch_id: int, crash_between: bool = False) -> None:
        names = pc.binary_join_element_wise(
            envelope.column("database").cast(pa.string()),
            envelope.column("table").cast(pa.string()),
            ".",
        )
        parts = {name: envelope.filter(pc.equal(names, name)) for name in self.images}
        unknown = set(pc.unique(names).to_pylist()) - set(self.images)
        if unknown:
            raise ValueError(f"batch {batch_id} has changes of tables not mirrored: {unknown}")
        order = list(self.images)
        for i, name in enumerate(order):
            mirror = self.mirrors[name]
            if mirror.applied(batch_id):
                print(f"batch {batch_id}: {name}: already applied", flush=True)
                continue
            outcome = mirror.apply(self.images[name].changes(parts[name]), batch_id)
            print(f"batch {batch_id}: {name}: {outcome.text}", flush=True)
            later = [n for n in order[i + 1 :] if parts[n].num_rows]
            if crash_between and outcome.committed and later:
                print(
                    f"batch {batch_id}: crashing after {name}'s commit, before {later[0]}'s",
                    flush=True,
                )
                os._exit(CRASH_EXIT_STATUS)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--port", default="3306")
    parser.add_argument("--username", required=True)
    parser.add_argument("--database-name", required=True)
    parser.add_argument(
        "--table-name", required=True, help="regex matching the 'db.table' names to mirror"
    )
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location")
    parser.add_argument(
        "--table-path",
        required=True,
        help="the Delta table's path (one table), or the directory of the Delta tables, "
        "one per MySQL table at <table-path>/<db>.<table> (several)",
    )
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
    if not tables:
        print(f"table-name {args.table_name!r} matches no table", file=sys.stderr)
        return 2
    weights = _weight_resolver(options)
    try:
        if len(tables) == 1:
            reserved_clash(tables[0])
            mirror = DeltaMirror(args.table_path, tables[0], app_id_of(args.checkpoint), weights)
            mirror.check()
        else:
            mirrors = TablesMirror(args.table_path, tables, args.checkpoint, weights)
            mirrors.create()
    except ValueError as error:  # LegacyTableError, a reserved column name
        print(error, file=sys.stderr)
        return 2
    changes = spark.readStream.format("cdc-mysql").options(**options).load()
    crash_after = os.environ.get(CRASH_AFTER_ENV)

    if len(tables) == 1:

        def apply(batch_df, batch_id: int) -> None:
            batch = batch_df.toArrow()
            print(f"batch {batch_id}: {mirror.apply(batch, batch_id).text}", flush=True)
            if crash_after == str(batch_id) and batch.num_rows:
                print(f"batch {batch_id}: crashing before Spark commits", flush=True)
                os._exit(CRASH_EXIT_STATUS)

    else:
        crash_between = bool(os.environ.get(CRASH_BETWEEN_ENV))

        def apply(batch_df, batch_id: int) -> None:
            batch = batch_df.toArrow()
            mirrors.apply(batch, batch_id, crash_between)
            if crash_after == str(batch_id) and batch.num_rows:
                print(f"batch {batch_id}: crashing before Spark commits", flush=True)
                os._exit(CRASH_EXIT_STATUS)

    writer = changes.writeStream.foreachBatch(apply).option("checkpointLocation", args.checkpoint)
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    query = writer.start()
    try:
        query.awaitTermination()
    finally:
        weights.close()
    return 0


def _captured_tables(options: dict) -> list:
    """The tables the options capture, as the source discovers them (with their keys)."""
    from cdc_source.datasource import discover
    from cdc_source.options import parse_options

    return discover(parse_options(options))


def _weight_resolver(options: dict):
    """The server's collation weights of string key values, for ``_key`` (a session of
    the driver's own, opened at the first string key and reopened after a lost one)."""
    from cdc_source.mysql_client import connect
    from cdc_source.options import parse_options
    from reader.key_weights import WeightResolver

    parsed = parse_options(options)
    kwargs = parsed.connection_kwargs()
    return WeightResolver(lambda: connect(dict(kwargs)), parsed.retry_policy())


if __name__ == "__main__":
    sys.exit(main())
