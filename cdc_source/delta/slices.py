"""A change batch as Arrow slices of bounded size, in ``_seq`` order, without collecting it.

The batch (persisted on the executors' disks, so the source is read once) is range
partitioned by ``_seq`` into about one partition per ``rows`` rows and sorted within each;
each partition leaves the executors as Arrow IPC streams (one per Arrow batch of
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows), which the driver reads one
partition at a time (``toLocalIterator``) and cuts every ``rows`` rows. The Python driver
holds at most one slice and the rows gathered for the next; Spark's driver one partition, about
a slice (range partitioning samples the batch, so partitions are near, not exactly, equal).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

IPC_COLUMN = "ipc"


def _ipc_streams(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each Arrow batch of a partition as one row holding its IPC stream (on executors)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        stream = sink.getvalue()
        offsets = pa.array([0, stream.size], pa.int32()).buffers()[1]
        blob = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, stream])
        yield pa.record_batch([blob], names=[IPC_COLUMN])


def arrow_batches(batch_df, rows: int) -> Iterator[pa.Table]:
    """The rows of a Spark DataFrame in ``_seq`` order, as Arrow tables of at most
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each, read in partitions of about
    ``rows`` rows. ``batch_df`` should be persisted: it is counted, then sorted."""
    count = batch_df.count()
    if not count:
        return
    partitions = -(-count // rows)
    ordered = batch_df.repartitionByRange(partitions, "_seq").sortWithinPartitions("_seq")
    streams = ordered.mapInArrow(_ipc_streams, f"{IPC_COLUMN} binary")
    for row in streams.toLocalIterator():
        yield pa.ipc.open_stream(pa.py_buffer(row[0])).read_all()


def cut(tables: Iterable[pa.Table], rows: int) -> Iterator[tuple[int, pa.Table, bool]]:
    """``tables`` as slices of ``rows`` rows (the last one fewer), each with its index and
    whether it is the last: ``(index, slice, last)``. A full slice is handed on as soon as
    a row after it arrives (then it is not the last), so at most one slice and the rows
    gathered for the next are held."""
    if rows < 1:
        raise ValueError(f"a slice needs at least one row, not {rows}")
    pending: list[pa.Table] = []
    count = 0
    index = 0
    ready: pa.Table | None = None
    for table in tables:
        if not table.num_rows:
            continue
        if ready is not None:  # rows follow it: not the last
            yield index, ready, False
            index, ready = index + 1, None
        pending.append(table)
        count += table.num_rows
        while count >= rows:
            if ready is not None:  # cut in this loop, and rows follow it
                yield index, ready, False
                index, ready = index + 1, None
            whole = pa.concat_tables(pending)
            ready = whole.slice(0, rows).combine_chunks()
            rest = whole.slice(rows)
            pending, count = ([rest] if rest.num_rows else []), rest.num_rows
    if count:
        if ready is not None:
            yield index, ready, False
            index += 1
        ready = pa.concat_tables(pending).combine_chunks()
    if ready is not None:
        yield index, ready, True
