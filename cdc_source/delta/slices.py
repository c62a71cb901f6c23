"""A change batch as Arrow slices of bounded size, in ``_seq`` order, without collecting it.

The batch (persisted on the executors' disks, so the source is read once) is range
partitioned by ``_seq`` into about one partition per ``rows`` rows and sorted within each;
each task writes its partition as one Arrow IPC stream file into a staging directory
(written under a temporary name, then renamed, so a retried task leaves one whole file).
The driver then reads the files in partition order, one Arrow batch
(``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) at a time, and cuts them every
``rows`` rows. No row of the batch passes through Spark's driver (a task's result is a
file name and a count), and the Python driver holds at most one slice and the rows
gathered for the next.

The staging directory is reached by the executors and by the driver through pyarrow's
file systems (``pyarrow.fs.FileSystem.from_uri``): a local path on one machine, or a URI
both sides can open (``s3://``, ``gs://``, ``hdfs://``) on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyarrow import fs

STAGED_SCHEMA = "partition int, path string, rows long"
BATCH_DIRECTORY = "batch-"  # a batch's directory: this and its id


@dataclass(frozen=True)
class StagedPart:
    """One partition of a batch, written by its task."""

    partition: int
    path: str
    rows: int


_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names of the object stores pyarrow opens


def _filesystem(uri: str):
    """pyarrow's file system of a staging path and the path in it. Hadoop's ``s3a://``
    is pyarrow's ``s3://``; ``file:`` is a local path."""
    if uri.startswith("file:"):
        uri = "/" + uri[len("file:") :].lstrip("/")
    if "://" not in uri:
        if ":" in uri.split("/", 1)[0]:
            raise ValueError(
                "a staging directory needs a path or a URI pyarrow opens (s3://, gs://, "
                "hdfs://...): pass staging= to the lake writer"
            )
        return fs.LocalFileSystem(), uri
    scheme, rest = uri.split("://", 1)
    return fs.FileSystem.from_uri(f"{_SCHEMES.get(scheme, scheme)}://{rest}")


def write_part(
    batches: Iterable[pa.RecordBatch], directory: str, partition: int, attempt: int
) -> StagedPart:
    """Writes one partition's batches as an IPC stream file in ``directory`` (under a name
    of the task ``attempt``, renamed once whole); an empty partition leaves no file."""
    filesystem, root = _filesystem(directory)
    path = f"{root}/part-{partition:06d}.arrow"
    temporary = f"{path}.{attempt}.tmp"
    rows = 0
    writer = None
    with filesystem.open_output_stream(temporary) as sink:
        for batch in batches:
            if not batch.num_rows:
                continue
            if writer is None:
                writer = pa.ipc.new_stream(sink, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is not None:
            writer.close()
    if rows and filesystem.get_file_info(path).type == fs.FileType.NotFound:
        filesystem.move(temporary, path)
    else:  # empty, or another attempt of the task wrote the same rows already
        filesystem.delete_file(temporary)
    return StagedPart(partition, path if rows else "", rows)


def check_staging(directory: str) -> None:
    """Refuses a staging directory pyarrow cannot open, before any batch runs."""
    filesystem, root = _filesystem(directory)
    filesystem.create_dir(root, recursive=True)


def part_writer(directory: str):
    """The ``mapInArrow`` function that writes a task's partition (:func:`write_part`)
    and returns its ``StagedPart`` as one row (on executors)."""

    def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        part = write_part(batches, directory, context.partitionId(), context.taskAttemptId())
        yield pa.record_batch(
            [
                pa.array([part.partition], pa.int32()),
                pa.array([part.path]),
                pa.array([part.rows], pa.int64()),
            ],
            names=["partition", "path", "rows"],
        )

    return write


def stage(batch_df, rows: int, directory: str) -> list[StagedPart]:
    """Writes ``batch_df`` into ``directory`` (emptied first) as IPC stream files, one per
    range partition of about ``rows`` rows, sorted by ``_seq``; returns the non-empty
    parts in order. ``batch_df`` should be persisted: it is counted, then sorted."""
    filesystem, root = _filesystem(directory)
    filesystem.create_dir(root, recursive=True)
    filesystem.delete_dir_contents(root, missing_dir_ok=True)
    count = batch_df.count()
    if not count:
        return []
    partitions = -(-count // rows)
    ordered = batch_df.repartitionByRange(partitions, "_seq").sortWithinPartitions("_seq")
    written = ordered.mapInArrow(part_writer(directory), STAGED_SCHEMA).collect()
    parts = [StagedPart(r["partition"], r["path"], r["rows"]) for r in written if r["rows"]]
    staged = sum(part.rows for part in parts)
    if staged != count:
        raise RuntimeError(f"the batch has {count} rows but its tasks staged {staged}")
    return sorted(parts, key=lambda part: part.partition)


def read_staged(directory: str, parts: list[StagedPart]) -> Iterator[pa.Table]:
    """The staged rows in ``_seq`` order, one Arrow batch at a time; a file that does
    not hold the rows its task counted is an error."""
    filesystem, _ = _filesystem(directory)
    for part in parts:
        rows = 0
        with filesystem.open_input_stream(part.path) as source:
            for batch in pa.ipc.open_stream(source):
                rows += batch.num_rows
                yield pa.Table.from_batches([batch])
        if rows != part.rows:
            raise RuntimeError(
                f"staged partition {part.partition} holds {rows} rows, its task wrote "
                f"{part.rows}: another writer shares the staging directory"
            )


def remove_batches_before(staging: str, batch_id: int) -> None:
    """Removes what earlier batches left in a query's staging directory (a batch found
    applied after a crash, or one whose query stopped mid-batch): Spark has committed
    every batch before ``batch_id``."""
    filesystem, root = _filesystem(staging)
    for info in filesystem.get_file_info(fs.FileSelector(root, allow_not_found=True)):
        name = info.base_name
        if info.type == fs.FileType.Directory and name.startswith(BATCH_DIRECTORY):
            number = name[len(BATCH_DIRECTORY) :]
            if number.isdigit() and int(number) < batch_id:
                filesystem.delete_dir(info.path)


def remove_staged(directory: str) -> None:
    """Removes the staging directory of a batch that is applied."""
    filesystem, root = _filesystem(directory)
    if filesystem.get_file_info(root).type != fs.FileType.NotFound:
        filesystem.delete_dir(root)


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
