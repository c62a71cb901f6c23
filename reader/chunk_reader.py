"""Reading snapshot chunks, normalized exactly to the batch's planned position P.

One task reads its chunks inside one ``START TRANSACTION WITH CONSISTENT SNAPSHOT``.
MariaDB reports the binlog position Q of that very snapshot (``binlog_snapshot_file`` /
``binlog_snapshot_position``), so a transaction whose events end at or before Q is visible
and none after it is, whatever the engine's commit order. The binlog between P and Q is
then read (only the chunks' tables, only their key ranges) and applied by
:mod:`reader.normalize`. Memory: the changed keys of that window plus one fetch of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.binlog.transport import DumpSource
from cdc_source.catalog import TableSchema
from cdc_source.key_sql import key_range
from cdc_source.keys import needs_weight, weight_sql
from cdc_source.mysql_client import SameServer, quote_ident, read_head
from cdc_source.offsets import BinlogPosition
from cdc_source.partitions import ChunkSpec, ChunkTask
from cdc_source.retry import Attempts, RetryPolicy
from cdc_source.sequence import snapshot_seq_prefix
from reader.arrow_output import ArrowWriter, Emitted
from reader.binlog_columns import ImageColumns
from reader.binlog_range import RangeReader
from reader.frontier import READ
from reader.key_columns import snapshot_seq_column, sort_key_reader
from reader.key_weights import WeightResolver
from reader.normalize import (
    KeyedChange,
    in_key_range,
    redo_overrides,
    restored_rows,
    touched_keys,
    undo_overrides,
    untouched_rows,
)
from reader.row_decoding import native_splitter
from reader.snapshot_connection import SnapshotConnection, open_snapshot_connection


class SchemaChangedError(RuntimeError):
    """A captured table no longer has the columns the query started with."""


def snapshot_position(conn) -> BinlogPosition:
    """Q: the binlog position matching the open consistent snapshot.

    MariaDB reports it exactly. MySQL does not; there the head read right after the
    snapshot is used (see the README's limits)."""
    with conn.cursor() as cur:
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    if status.get("binlog_snapshot_file"):
        return BinlogPosition(
            status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
        )
    file, pos, gtids, _ = read_head(conn)
    return BinlogPosition(file, pos, gtids)


def select_sql(chunk: ChunkSpec) -> tuple[str, list]:
    schema = chunk.table
    expressions = []
    for column in schema.columns:
        name = quote_ident(column.name)
        # The text protocol prints FLOAT with 6 digits; as DOUBLE it is the exact 32-bit value.
        expressions.append(f"CAST({name} AS DOUBLE)" if column.data_type == "float" else name)
    for column in schema.key_columns:
        if needs_weight(column):
            expressions.append(weight_sql(column, quote_ident(column.name)))
    where, params = key_range(schema, chunk.lo, chunk.hi)
    return f"SELECT {', '.join(expressions)} FROM {schema.quoted} WHERE {where}", params


class ChunkReader:
    """A chunk task's rows. A lost connection or a server restart is ridden out (within
    ``connect.max-retries``): a new consistent snapshot is opened, normalized to P again,
    and reading goes on at the chunk where it stopped. A chunk's rows as of P do not
    depend on the snapshot they are read from, so the rows of that chunk already handed
    to Spark are recognized by their ``_seq`` (unique per key) and not emitted twice."""

    def __init__(
        self,
        task: ChunkTask,
        connection_kwargs: dict,
        connect: Callable[..., object],
        policy: RetryPolicy | None = None,
    ) -> None:
        self.task = task
        self.connection_kwargs = connection_kwargs
        self.connect = connect
        self.policy = policy or RetryPolicy(max_retries=0)
        self.weights = WeightResolver(lambda: connect(connection_kwargs), self.policy)

    def record_batches(self, writer: ArrowWriter) -> Iterator[pa.RecordBatch]:
        names = sorted({c.table.name for c in self.task.chunks})
        attempts = Attempts(self.policy, f"reading snapshot chunks of {', '.join(names)}")
        done = 0  # chunks wholly emitted
        seen: list[pa.Array] = []  # _seq of the rows emitted of chunk ``done``
        try:
            while done < len(self.task.chunks):
                already = pa.concat_arrays(seen) if seen else None
                try:
                    for index, batch in self._attempt(writer, done):
                        if batch is None:  # chunk ``index`` is complete
                            done, seen, already = index + 1, [], None
                            attempts.progressed()
                            continue
                        seq = batch.column(batch.schema.get_field_index("_seq"))
                        if already is not None:
                            fresh = pc.invert(pc.is_in(seq, value_set=already))
                            batch = batch.filter(fresh)
                            seq = seq.filter(fresh)
                        if batch.num_rows:
                            seen.append(seq)
                            yield batch
                except Exception as err:  # noqa: BLE001 - classified by Attempts.failed
                    attempts.failed(err)
        finally:
            self.weights.close()

    def _attempt(
        self, writer: ArrowWriter, first: int
    ) -> Iterator[tuple[int, pa.RecordBatch | None]]:
        """One snapshot: the batches of chunks ``first``..., each chunk followed by
        ``(index, None)`` once all its rows are out."""
        chunks = self.task.chunks[first:]
        conn = open_snapshot_connection(self.connection_kwargs, self.task.client, self.connect)
        try:
            # Q, and the binlog read to normalize from it, must come from the server the
            # target position belongs to (a resumed snapshot may reach another one).
            SameServer("a snapshot task", self.task.server).check(conn)
            conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            q = snapshot_position(conn)
            overrides = self._overrides(q, writer, chunks)
            for index, (chunk, chunk_overrides) in enumerate(zip(chunks, overrides), first):
                for batch in self._chunk_batches(conn, chunk, chunk_overrides, writer):
                    yield index, batch
                yield index, None
            conn.execute("COMMIT")
        finally:
            conn.close()

    def _bounds(self, chunk: ChunkSpec) -> tuple[bytes | None, bytes | None]:
        lo, hi = self.weights.optional_sort_keys(chunk.table, [chunk.lo, chunk.hi])
        return lo, hi

    def _overrides(
        self, q: BinlogPosition, writer: ArrowWriter, chunks: tuple[ChunkSpec, ...]
    ) -> list[dict]:
        target = self.task.target
        if q.coordinates == target.coordinates:
            return [{} for _ in chunks]
        undo = q.coordinates > target.coordinates
        start, end = (target, q) if undo else (q, target)
        tables = {c.table.name: c.table for c in chunks}
        keyed: dict[str, list[KeyedChange]] = {name: [] for name in tables}
        reader = RangeReader(
            DumpSource(
                lambda: self.connect(self.connection_kwargs),
                self.task.server_id,
                native_splitter(self.task.decoder),
                self.policy,
                self.task.server,
            ),
            start,
            end,
            set(tables),
            decoder=self.task.decoder,
        )
        positioned: dict[str, list[tuple[tuple, KeyedChange]]] = {n: [] for n in tables}
        for block in reader.blocks():
            schema = tables[block.table]
            images = ImageColumns(schema, block, writer.column_types(schema))
            befores = images.python_images("before")
            afters = images.python_images("after")
            pairs = self.weights.image_sort_keys(schema, list(zip(befores, afters)))
            where = zip(block.file_number, block.end_pos, block.sub, block.row_index)
            positioned[block.table].extend(
                (tuple(int(x) for x in at), KeyedChange(before_key, before, after_key, after))
                for at, (before_key, after_key), before, after in zip(where, pairs, befores, afters)
            )
        for name, changes in positioned.items():
            # Binlog order (XA transactions come out of the reader last): first/last
            # images per key depend on it.
            changes.sort(key=lambda item: item[0])
            keyed[name] = [change for _, change in changes]
        result = []
        build = undo_overrides if undo else redo_overrides
        for chunk in chunks:
            lo, hi = self._bounds(chunk)
            result.append(build(keyed[chunk.table.name], in_key_range(lo, hi)))
        return result

    def _fetches(self, conn: SnapshotConnection, chunk: ChunkSpec) -> Iterator[list[pa.Array]]:
        """The SELECT's columns (the server's text), ``fetch_size`` rows at a time."""
        query, params = select_sql(chunk)
        try:
            yield from conn.fetch_columns(query, params, self.task.fetch_size)
        except Exception as err:  # PyMySQL's or mysqlclient's OperationalError
            if err.args and err.args[0] == 1054:  # unknown column
                raise SchemaChangedError(
                    f"{chunk.table.name} lost a column since the query started "
                    f"({err.args[1]}); the output schema is fixed per query: start a new "
                    "query with a new checkpoint location to snapshot the new shape"
                ) from None
            raise

    def _chunk_batches(
        self, conn: SnapshotConnection, chunk: ChunkSpec, overrides: dict, writer: ArrowWriter
    ) -> Iterator[pa.RecordBatch]:
        """The chunk's rows as of P (:func:`reader.normalize.merge` on columns): the
        SELECT's rows whose key was touched between P and Q are dropped by an anti-join
        on the key bytes, and the touched keys' states at P (binlog images, few) follow."""
        schema: TableSchema = chunk.table
        target = self.task.target
        prefix = snapshot_seq_prefix(target.file_number, target.pos, chunk.table_index)
        sort_keys = sort_key_reader(schema)
        width = len(schema.columns)
        touched = touched_keys(overrides)
        for columns in self._fetches(conn, chunk):
            keys = sort_keys(columns)
            if touched is not None:
                keep = untouched_rows(keys, touched)
                columns = [column.filter(keep) for column in columns]
                keys = keys.filter(keep)
            if len(keys):
                seqs = snapshot_seq_column(prefix, keys)
                yield from writer.snapshot_text_batches(schema, columns[:width], seqs, target.ts)
        images = [
            Emitted(schema, READ, None, row, prefix + key.hex(), target.ts)
            for key, row in restored_rows(overrides)
        ]
        yield from writer.batches(images)
