"""Reading snapshot chunks, normalized exactly to the batch's planned position P.

One task reads its chunks inside one ``START TRANSACTION WITH CONSISTENT SNAPSHOT``,
opened so that it provably sees every transaction at or before P (:func:`open_snapshot`,
:mod:`cdc_source.visibility`); Q is the snapshot's exact position where the server
reports it (MariaDB, Percona), else the head read after it. The binlog between P and Q is
then read (only the chunks' tables, only their key ranges) and applied by
:mod:`reader.normalize`. Memory: the changed keys of that window plus one fetch of rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.binlog.transport import DumpSource
from cdc_source.catalog import STRING_TYPES, ColumnSpec, TableSchema
from cdc_source.charsets import is_utf8
from cdc_source.chunk_key import current_shape
from cdc_source.column_policy import ALL_COLUMNS, ColumnPolicy
from cdc_source.gtid import expand
from cdc_source.key_sql import key_range
from cdc_source.keys import needs_weight, weight_sql
from cdc_source.mysql_client import SameServer, as_text, quote_ident, read_head
from cdc_source.offsets import BinlogPosition
from cdc_source.partitions import ChunkSpec, ChunkTask
from cdc_source.retry import Attempts, RetryPolicy
from cdc_source.sequence import reread_seq_prefix, snapshot_seq_prefix
from cdc_source.visibility import GTID_WAIT, SNAPSHOT_STATUS
from reader.arrow_output import ArrowWriter, Emitted, RowOrigins
from reader.binlog_columns import ImageColumns
from reader.binlog_range import RangeReader
from reader.change_blocks import TableReset
from reader.frontier import READ
from reader.key_columns import snapshot_seq_column, sort_key_reader
from reader.key_weights import WeightResolver
from reader.normalize import (
    KeyedChange,
    in_any_key_range,
    in_key_range,
    redo_overrides,
    restored_rows,
    touched_keys,
    touches,
    undo_overrides,
    untouched_rows,
)
from reader.schema_drift import SchemaChangedError, server_charsets, shape_changes
from reader.snapshot_connection import SnapshotConnection, open_snapshot_connection
from reader.table_follow import ALL, TableFollow


class SnapshotVisibilityError(RuntimeError):
    """The transactions at or before a batch's position did not all commit in time."""

    transient = False  # the task fails; Spark runs it again (spark.task.maxFailures)


def open_snapshot(conn, task: ChunkTask) -> BinlogPosition:
    """Open the task's consistent snapshot; returns Q, a position with
    P <= (the snapshot's point) <= Q (:mod:`cdc_source.visibility`)."""
    if task.visibility == GTID_WAIT:
        return _open_after_gtid_wait(conn, task)
    conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    if task.visibility == SNAPSHOT_STATUS:
        reported = _snapshot_status(conn)
        if reported is None:
            raise SnapshotVisibilityError(
                "the server no longer reports binlog_snapshot_file; was the query moved to "
                "another kind of server? Restart it"
            )
        return reported
    return _head(conn)  # head-unsafe


def _snapshot_status(conn) -> BinlogPosition | None:
    """MariaDB's and Percona's exact binlog position of the open snapshot."""
    with conn.cursor() as cur:
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {as_text(k).lower(): as_text(v) for k, v in cur.fetchall()}
    if not status.get("binlog_snapshot_file"):
        return None
    return BinlogPosition(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))


def _head(conn) -> BinlogPosition:
    file, pos, gtids, _ = read_head(conn)
    return BinlogPosition(file, pos, gtids)


def _open_after_gtid_wait(conn, task: ChunkTask) -> BinlogPosition:
    """MySQL: ``WAIT_FOR_EXECUTED_GTID_SET`` with the exact GTID set at P, then the
    snapshot, then Q = the head. On MariaDB, whose ``MASTER_GTID_WAIT`` follows
    ``gtid_slave_pos`` (a primary's own commits never move it; MariaDB KB) and whose
    ``gtid_binlog_pos`` moves at the binlog write, before the engine commit, the same wait
    is made by opening snapshots until one's reported position is at or past P: this is
    how the test suite runs MySQL's path on MariaDB (``scan.snapshot.visibility=gtid-wait``).
    Either way, the position used afterwards is the head, as on MySQL."""
    target = task.target
    timeout = task.gtid_wait_timeout
    if task.server_flavor == "mariadb":
        deadline = time.monotonic() + timeout
        pause = 0.005
        while True:
            conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            seen = _snapshot_status(conn)
            if seen is not None and seen.coordinates >= target.coordinates:
                return _head(conn)
            conn.execute("ROLLBACK")
            if time.monotonic() >= deadline:
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
    else:
        gtids = expand(target.gtids)
        if not gtids:
            raise SnapshotVisibilityError(
                f"the batch's position {target} carries no GTID set to wait for; the "
                "driver tracks it when gtid_mode=ON"
            )
        with conn.cursor() as cur:
            cur.execute("SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (gtids, timeout))
            (timed_out,) = cur.fetchone()
        if not int(timed_out):
            conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            return _head(conn)
    raise SnapshotVisibilityError(
        f"the transactions at or before {target} were not all committed after {timeout} s "
        "(scan.snapshot.gtid-wait.timeout): a commit is held up on the server (semi-sync "
        "waiting for a replica, binlog_group_commit_sync_delay, a long flush)"
    )


def _selected(column: ColumnSpec, name: str) -> str:
    """How a column is selected: as stored, except FLOAT, which the text protocol prints
    with 6 digits (as DOUBLE it is the exact 32-bit value), and text of a character set
    other than UTF-8, read as its stored bytes and decoded as the binlog's are
    (:mod:`cdc_source.charsets`), not converted by the server, which turns a byte without
    a character into '?'."""
    if column.data_type == "float":
        return f"CAST({name} AS DOUBLE)"
    if column.data_type in STRING_TYPES and not is_utf8(column.charset):
        return f"CAST({name} AS BINARY)"
    return name


def is_utf8_text(column: ColumnSpec) -> bool:
    """Whether the SELECT reads ``column`` as UTF-8 text (see :func:`_selected`)."""
    if column.data_type in ("enum", "set"):
        return True
    return column.data_type in STRING_TYPES and is_utf8(column.charset)


def select_sql(chunk: ChunkSpec, columns: ColumnPolicy = ALL_COLUMNS) -> tuple[str, list]:
    """The chunk's SELECT: the columns the output keeps (``columns``; a column left out is
    not read), then a collation weight per collated key column (:mod:`reader.key_columns`).
    A re-read's condition only narrows the SELECT: a key whose state at P comes from the
    binlog's images is emitted whether it matches or not (an ``r`` restating its true
    state is harmless)."""
    schema = chunk.table
    expressions = []
    for column in columns.output_columns(schema):
        name = quote_ident(column.name)
        expressions.append(_selected(column, name))
    for column in schema.key_columns:
        if needs_weight(column):
            expressions.append(weight_sql(column, quote_ident(column.name)))
    where, params = key_range(schema, chunk.lo, chunk.hi)
    if chunk.condition is not None:  # a re-read's: keys restored from images pass anyway
        where = f"({where}) AND ({chunk.condition.replace('%', '%%')})"
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
        self.charsets = server_charsets(lambda: connect(connection_kwargs))

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
            q = open_snapshot(conn, self.task)
            chunks, gone = self._as_tables_are_now(chunks, writer)
            overrides, reset = self._overrides(q, writer, chunks, gone)
            for index, (chunk, chunk_overrides) in enumerate(zip(chunks, overrides), first):
                if chunk.table.name not in gone | reset:
                    for batch in self._chunk_batches(conn, chunk, chunk_overrides, writer):
                        yield index, batch
                yield index, None
            conn.execute("COMMIT")
        finally:
            conn.close()

    def _as_tables_are_now(
        self, chunks: tuple[ChunkSpec, ...], writer: ArrowWriter
    ) -> tuple[ChunkSpec, ...]:
        """The chunks, checked against the shape their tables have now (read after the
        snapshot opened: a later ALTER that rebuilds the table makes the snapshot's reads
        fail with ER_TABLE_DEF_CHANGED, and this task is run again). Typed output stops at
        a table altered since the query read its schema; the envelope reads the table as
        it is, so its rows carry the columns they have (a changed key stops both).

        A table that is gone (dropped or renamed away after the batch's position: the
        driver plans no chunk of a table gone before it) is read as no rows: the stream
        emits its reset (``t``) at the statement, after every row this chunk could give,
        in a later batch. Returns the chunks and the names of the tables gone."""
        conn = self.connect(self.connection_kwargs)
        try:
            shapes = {c.table.name: current_shape(conn, c.table) for c in chunks}
        finally:
            conn.close()
        result = []
        gone = {name for name, now in shapes.items() if not now.columns}
        for chunk in chunks:
            now = shapes[chunk.table.name]
            if chunk.table.name in gone:
                result.append(chunk)
                continue
            ignored = writer.columns.excluded_names(
                chunk.table, chunk.table.column_names + now.column_names
            )
            differences = shape_changes(chunk.table, now, ignored)
            if not differences:
                result.append(chunk)
            elif writer.envelope and now.primary_key == chunk.table.primary_key:
                result.append(replace(chunk, table=now))
            else:
                raise SchemaChangedError(
                    f"{chunk.table.name} was altered while the query ran (seen by a snapshot "
                    f"task): {'; '.join(differences)}. "
                    + (
                        "Whether its values stayed unique cannot be proven: start a new "
                        "query (new checkpoint location) once it has its UNIQUE index and "
                        "NOT NULL again, or add a primary key"
                        if chunk.table.declared_key and not now.primary_key
                        else "A changed primary key needs a new query (new checkpoint location)"
                        if now.primary_key != chunk.table.primary_key
                        else "Restart the query (same checkpoint): it reads the new schema "
                        "and continues from its last committed batch with the new output "
                        "schema"
                    )
                )
        return tuple(result), gone

    def _bounds(self, chunk: ChunkSpec) -> tuple[bytes | None, bytes | None]:
        lo, hi = self.weights.optional_sort_keys(chunk.table, [chunk.lo, chunk.hi])
        return lo, hi

    def _overrides(
        self,
        q: BinlogPosition,
        writer: ArrowWriter,
        chunks: tuple[ChunkSpec, ...],
        gone: set[str],
    ) -> tuple[list[dict], set[str]]:
        """Per chunk, the states at the target P of the keys touched between P and the
        snapshot's Q; and the tables a statement after P reset (DROP, TRUNCATE, RENAME
        away), whose chunks are read as no rows: the stream emits that reset after them,
        in a later batch. A reset between Q and an earlier P is still an error."""
        target = self.task.target
        if q.coordinates == target.coordinates:
            return [{} for _ in chunks], set()
        undo = q.coordinates > target.coordinates
        start, end = (target, q) if undo else (q, target)
        tables = {c.table.name: c.table for c in chunks if c.table.name not in gone}
        follow = TableFollow({name: ALL for name in tables}) if undo else None
        keyed: dict[str, list[KeyedChange]] = {name: [] for name in tables}
        reader = RangeReader(
            DumpSource(
                lambda: self.connect(self.connection_kwargs),
                self.task.server_id,
                self.task.decoder,
                self.policy,
                self.task.server,
            ),
            start,
            end,
            set(tables),
            decoder=self.task.decoder,
            follow=follow,
            lower_case_names=self.task.lower_case_names,
            online_schema_changes=self.task.online_schema_changes,
        )
        # Only the changes of keys in this task's chunks are kept: memory is bounded by the
        # keys the chunks' rows changed, not by the tables' writes in the window.
        wanted = {
            name: in_any_key_range(self._bounds(c) for c in chunks if c.table.name == name)
            for name in tables
        }
        positioned: dict[str, list[tuple[tuple, KeyedChange]]] = {n: [] for n in tables}
        reset: set[str] = set()
        for block in reader.blocks():
            if isinstance(block, TableReset):
                reset.add(block.table)
                continue
            schema = tables[block.table]
            images = ImageColumns.for_output(schema, block, writer, self.task.server, self.charsets)
            befores = images.python_images("before")
            afters = images.python_images("after")
            pairs = self.weights.image_sort_keys(schema, list(zip(befores, afters)))
            where = zip(block.file_number, block.end_pos, block.sub, block.row_index)
            changes = (
                (tuple(int(x) for x in at), KeyedChange(before_key, before, after_key, after))
                for at, (before_key, after_key), before, after in zip(where, pairs, befores, afters)
            )
            in_chunks = wanted[block.table]
            positioned[block.table].extend(c for c in changes if touches(c[1], in_chunks))
        for name, changes in positioned.items():
            # Binlog order (XA transactions come out of the reader last): first/last
            # images per key depend on it.
            changes.sort(key=lambda item: item[0])
            keyed[name] = [change for _, change in changes]
        result = []
        build = undo_overrides if undo else redo_overrides
        for chunk in chunks:
            if chunk.table.name not in tables:
                result.append({})
                continue
            lo, hi = self._bounds(chunk)
            result.append(build(keyed[chunk.table.name], in_key_range(lo, hi)))
        return result, reset

    def _fetches(
        self, conn: SnapshotConnection, chunk: ChunkSpec, columns: ColumnPolicy
    ) -> Iterator[list[pa.Array]]:
        """The SELECT's columns (the server's text), ``fetch_size`` rows at a time; a
        column of UTF-8 text may come as a string column (all ASCII), any other as
        binary."""
        query, params = select_sql(chunk, columns)
        text = frozenset(
            index
            for index, column in enumerate(columns.output_columns(chunk.table))
            if is_utf8_text(column)
        )
        try:
            yield from conn.fetch_columns(query, params, self.task.fetch_size, text_columns=text)
        except Exception as err:  # PyMySQL's or mysqlclient's OperationalError
            if err.args and err.args[0] == 1054:  # unknown column
                raise SchemaChangedError(
                    f"{chunk.table.name} was altered while the query ran: a column is gone "
                    f"({err.args[1]}). Restart the query (same checkpoint): it reads the new "
                    "schema and continues from its last committed batch with the new output "
                    "schema"
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
        if chunk.reread:
            prefix = reread_seq_prefix(target.file_number, target.pos, chunk.reread, target.epoch)
        else:
            prefix = snapshot_seq_prefix(
                target.file_number, target.pos, chunk.table_index, target.epoch
            )
        selected = writer.columns.output_columns(schema)
        sort_keys = sort_key_reader(
            schema, tuple(c.name for c in selected), native=writer.native_text
        )
        width = len(selected)
        touched = touched_keys(overrides)
        for columns in self._fetches(conn, chunk, writer.columns):
            keys = sort_keys(columns)
            if touched is not None:
                keep = untouched_rows(keys, touched)
                columns = [column.filter(keep) for column in columns]
                keys = keys.filter(keep)
            if len(keys):
                seqs = snapshot_seq_column(prefix, keys, writer.native_text)
                yield from writer.snapshot_text_batches(
                    schema, columns[:width], seqs, target.ts, target, keys
                )
        restored = restored_rows(overrides)
        images = [
            Emitted(schema, READ, None, row, prefix + key.hex(), target.ts) for key, row in restored
        ]
        keys = pa.array([key for key, _ in restored], pa.binary())
        yield from writer.batches(images, RowOrigins.snapshot(target, keys))
