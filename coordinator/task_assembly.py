"""A planned batch's tasks (docs/design.md, 'Micro-batches'): the binlog range's tasks and
the snapshot's chunk tasks, with the server ids they read with.

Server ids go to binlog tasks first, then to snapshot tasks; a batch never has more
tasks than ids. One id serves a binlog-only batch; a batch with no binlog range gives
every id to its snapshot tasks.
"""

from __future__ import annotations

from cdc_source.catalog import TableSchema
from cdc_source.offsets import BinlogPosition, SnapshotCursor
from cdc_source.options import SourceOptions
from cdc_source.partitions import BinlogTask, ChunkSpec, ChunkTask
from cdc_source.visibility import ServerTraits


def binlog_task_count(options: SourceOptions, reads_binlog: bool) -> int:
    """How many tasks read the batch's binlog range: ``scan.binlog.parallelism``, leaving
    one server id for snapshot tasks where there are several."""
    if not reads_binlog:
        return 0
    return min(options.binlog_parallelism, max(1, options.server_ids.size - 1))


def binlog_tasks(
    *,
    start: BinlogPosition,
    end: BinlogPosition,
    tables: tuple[TableSchema, ...],
    owned_at: SnapshotCursor | None,
    added: SnapshotCursor | None,
    created: tuple[TableSchema, ...],
    count: int,
    options: SourceOptions,
    server: str,
    traits: ServerTraits,
) -> list[BinlogTask]:
    """``count`` tasks that read ``(start, end]`` together, each decoding every
    ``count``-th rows event, with the first ``count`` server ids."""
    return [
        BinlogTask(
            start=start,
            end=end,
            tables=tables,
            owned_at=owned_at,
            server_id=options.server_ids.first + slot,
            stride=count,
            slot=slot,
            decoder=options.binlog_decoder,
            server=server,
            added=added,
            streamed_from_creation=created,
            lower_case_names=traits.lower_case_names,
            online_schema_changes=options.online_schema_changes,
        )
        for slot in range(count)
    ]


def chunk_tasks(
    *,
    chunks: tuple[ChunkSpec, ...],
    target: BinlogPosition,
    ids_taken: int,
    options: SourceOptions,
    server: str,
    traits: ServerTraits,
) -> list[ChunkTask]:
    """Few tasks, each reading several contiguous chunks in one consistent snapshot as of
    ``target``: every chunk task decodes the binlog from the planned position to its
    snapshot, so more tasks than cores only multiply that work and widen the windows.
    ``ids_taken``: the server ids the batch's binlog tasks hold."""
    if not chunks:
        return []
    ids = options.server_ids
    slots = min(ids.size - ids_taken, options.snapshot_parallelism)
    if slots < 1:
        raise RuntimeError(
            f"server-id '{ids}' leaves no id for the snapshot tasks of a batch that "
            f"snapshots {chunks[0].table.name} next to its binlog task; give "
            f"'server-id' a range such as '{ids.first}-{ids.first + 8}'"
        )
    return [
        ChunkTask(
            chunks=group,
            target=target,
            server_id=ids.first + ids_taken + i,
            fetch_size=options.fetch_size,
            client=options.snapshot_client,
            decoder=options.binlog_decoder,
            server=server,
            visibility=traits.visibility,
            server_flavor=traits.flavor,
            gtid_wait_timeout=options.gtid_wait_timeout,
            lower_case_names=traits.lower_case_names,
            online_schema_changes=options.online_schema_changes,
        )
        for i, group in enumerate(spread(chunks, min(len(chunks), slots)))
    ]


def spread(chunks: tuple[ChunkSpec, ...], groups: int) -> list[tuple[ChunkSpec, ...]]:
    """Split chunks into ``groups`` contiguous runs of near-equal length."""
    size, extra = divmod(len(chunks), groups)
    result, index = [], 0
    for g in range(groups):
        take = size + (1 if g < extra else 0)
        result.append(tuple(chunks[index : index + take]))
        index += take
    return result
