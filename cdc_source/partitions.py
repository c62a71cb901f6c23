"""What a task needs to read its share of a micro-batch: small, frozen, picklable.

The coordinator (driver) builds them, the readers (executors) consume them. Everything a
task needs travels inside, so a reader never depends on driver state.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_source.catalog import TableSchema
from cdc_source.offsets import BinlogPosition, SnapshotCursor


@dataclass(frozen=True)
class ChunkSpec:
    """Keys ``lo < k <= hi`` of one table (``None`` is open on that side); a re-read's
    chunk also selects only the rows matching its ``condition`` (SQL, checked by
    :func:`cdc_source.rereads.check_condition`)."""

    table: TableSchema
    table_index: int
    lo: tuple | None
    hi: tuple | None
    condition: str | None = None
    reread: int = 0  # a re-read's number (its rows' _seq: cdc_source.sequence), 0 for none


@dataclass(frozen=True)
class ChunkTask:
    """Read some chunks and emit each row's state exactly as of ``target``."""

    chunks: tuple[ChunkSpec, ...]
    target: BinlogPosition
    server_id: int
    fetch_size: int
    client: str = "auto"  # scan.snapshot.client
    decoder: str = "auto"  # scan.binlog.decoder
    server: str = ""  # the server the target belongs to (mysql_client.server_identity)
    visibility: str = "snapshot-status"  # cdc_source.visibility, resolved by the driver
    server_flavor: str = "mariadb"  # mysql or mariadb
    gtid_wait_timeout: int = 60
    lower_case_names: bool = False  # lower_case_table_names=1 (cdc_source.binlog.ddl)
    # scan.parse.online.schema.changes.enabled (cdc_source.online_schema_change)
    online_schema_changes: bool = False


@dataclass(frozen=True)
class BinlogTask:
    """Read the binlog in ``(start, end]`` and emit the changes owned at ``owned_at``."""

    start: BinlogPosition
    end: BinlogPosition
    tables: tuple[TableSchema, ...]
    owned_at: SnapshotCursor | None
    server_id: int
    stride: int = 1  # this task decodes the row events whose ordinal % stride == slot
    slot: int = 0
    decoder: str = "auto"  # scan.binlog.decoder
    server: str = ""  # the server the positions belong to (mysql_client.server_identity)
    # A table joining the running capture, snapshotted alone: keys <= after are owned.
    added: SnapshotCursor | None = None
    # Tables created in the range whose rows are streamed from their CREATE on
    # (coordinator.table_set): every row of a new table comes after it.
    streamed_from_creation: tuple[TableSchema, ...] = ()
    lower_case_names: bool = False  # lower_case_table_names=1 (cdc_source.binlog.ddl)
    # scan.parse.online.schema.changes.enabled (cdc_source.online_schema_change)
    online_schema_changes: bool = False


@dataclass(frozen=True)
class TableResetTask:
    """Emit one ``t`` row (table reset) per table: the binlog from the checkpoint's position
    on was purged, and the tables are snapshotted again as of ``position``; a consumer drops
    every earlier row of each table (``scan.on-binlog-purged=resnapshot``)."""

    tables: tuple[TableSchema, ...]
    table_indexes: tuple[int, ...]
    position: BinlogPosition
