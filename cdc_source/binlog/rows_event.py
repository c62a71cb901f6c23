"""The header of a rows event: which table, which kind, where its row data is.

Shared by the executors' range reader (``reader.binlog_range``) and the driver's batch
sizing (``coordinator.batch_end``), which counts rows without decoding their values.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import Event, Format, uncompress_mariadb
from cdc_source.binlog.wire import Cursor, MalformedEventError


class UndecodableEventError(RuntimeError):
    """An event that cannot be decoded exactly: the read stops rather than skip it."""


class PartialRowImageError(UndecodableEventError):
    """A row image without every column (binlog_row_image or binlog_row_value_options)."""


@dataclass(slots=True)
class RowsEvent:
    """The parsed header of a rows event: where its row data is, and its kind."""

    table_id: int
    kind: int
    data: bytes
    start: int
    partial: bool


def parse_rows_event(event: Event, fmt: Format, table_map_columns: int | None) -> RowsEvent:
    """Post-header: table id (6), flags (2), [v2: extra-data length (2, counting itself)
    and extra data]; then the column count, the columns-present bitmap(s) and the rows.
    A MariaDB compressed rows event zlib-compresses everything after the bitmaps."""
    kind, v2, compressed, partial = c.ROW_EVENTS[event.type]
    cur = Cursor(event.body)
    post = fmt.post_header_len(event.type, 10 if v2 else 8)
    table_id = cur.uint(4 if post == 6 else 6)
    cur.skip(2)
    if v2:
        extra = cur.uint(2)
        if extra < 2:
            raise MalformedEventError(f"{event.where}: extra data length {extra}")
        cur.skip(extra - 2)
    width = cur.lenenc()
    images = (
        ("before-image", "after-image")
        if kind == c.UPDATE
        else (("after-image",) if kind == c.WRITE else ("before-image",))
    )
    for image in images:
        present = cur.take((width + 7) // 8)
        if table_map_columns is not None and width != table_map_columns:
            raise MalformedEventError(
                f"{event.where}: {width} columns, its TABLE_MAP has {table_map_columns}"
            )
        if not _complete(present, width):
            raise PartialRowImageError(
                f"the {image} of the {event.where} lacks columns: the writing session had "
                "binlog_row_image other than FULL (it is a session variable; MINIMAL and "
                "NOBLOB leave columns out), so the change cannot be streamed exactly. Set "
                "binlog_row_image=FULL for every session that writes captured tables, then "
                "start a new query (new checkpoint location) to snapshot again"
            )
    data = event.body
    start = cur.pos
    if compressed:
        data = uncompress_mariadb(event.body[cur.pos :])
        start = 0
    return RowsEvent(table_id, kind, data, start, partial)


class RowsEventHeaders:
    """:func:`parse_rows_event` for a stream whose rows events repeat their headers: the
    events of one statement, and of every transaction that writes a table the same way,
    carry the same bytes up to their row data. An event whose body starts with the
    header bytes last accepted for its type and table width is that header again, so
    only its row data is new; any other event is parsed whole (and its header is then
    the one remembered). MariaDB's compressed events are always parsed whole."""

    def __init__(self) -> None:
        # (event type, post-header length, table width) -> (header bytes, table id)
        self._accepted: dict[tuple[int, int, int | None], tuple[bytes, int]] = {}

    def parse(self, event: Event, fmt: Format, table_map_columns: int | None) -> RowsEvent:
        kind, v2, compressed, partial = c.ROW_EVENTS[event.type]
        key = (event.type, fmt.post_header_len(event.type, 10 if v2 else 8), table_map_columns)
        known = self._accepted.get(key)
        body = event.body
        if known is not None and not compressed and body.startswith(known[0]):
            return RowsEvent(known[1], kind, body, len(known[0]), partial)
        parsed = parse_rows_event(event, fmt, table_map_columns)
        if not compressed:
            if len(self._accepted) > 1_000:
                self._accepted.clear()
            self._accepted[key] = (body[: parsed.start], parsed.table_id)
        return parsed


_FULL_BITMAPS: dict[int, bytes] = {}


def _complete(present: bytes, width: int) -> bool:
    """Whether a columns-present bitmap has every one of ``width`` columns (bits past
    ``width`` in the last byte are not looked at)."""
    full = _full_bitmap(width)
    if present == full:
        return True
    if not present:
        return width == 0
    last = full[-1]
    return present[:-1] == full[:-1] and present[-1] & last == last


def _full_bitmap(width: int) -> bytes:
    """The columns-present bitmap of an image that has all ``width`` columns."""
    bitmap = _FULL_BITMAPS.get(width)
    if bitmap is None:
        value = (1 << width) - 1
        bitmap = _FULL_BITMAPS[width] = value.to_bytes((width + 7) // 8, "little")
    return bitmap
