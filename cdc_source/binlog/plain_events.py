"""The driver's plain events: the events of a binlog range that its planning listeners
(:mod:`coordinator.range_pass`) would take without looking at them one by one, which the
C splitter therefore folds into one :class:`PlainRun` per run instead of handing each to
Python as an event.

An event is plain for a pass where it is of a type that

- no listener wants (a transaction's XID event, for most passes): mode 1;
- only the row count wants, and it is a TABLE_MAP whose body is the one the count
  registered for its table id: mode 2 (the count already holds that map);
- a QUERY whose statement is BEGIN, where every listener that wants QUERY events takes
  BEGIN as nothing (MySQL writes one after each row transaction's GTID event): mode 4;
- only the row count wants, and it is a rows event (not a compressed one) whose header
  is the one the count registered for its type, table id and flags, with that header's
  table map still the current one for the table id: mode 3. The C splitter counts its
  rows as the count would (``count_rows``), where the count registered the table as
  captured.

A transaction start, a ROTATE, a FORMAT_DESCRIPTION, a heartbeat and a transaction
payload are never plain: the walk and the event reader act on each. Neither are events
an early listener reads before a pass's start, events past where the pass or follower
stops reading (``until``), nor anything after a ROTATE within one read of the stream.

A plain run stands where its events stood, with where the last one ends and the rows of
captured tables in it: the walk's sizes, ends and boundaries are what they would be from
the events themselves, and the count's total is the same. Without the C extension, or
with ``scan.binlog.decoder=python``, no event is plain and the walk takes every event:
the path the native one is checked against (``tests/unit/coordinator``).
"""

from __future__ import annotations

from cdc_source.binlog import constants as c
from cdc_source.binlog import framing
from cdc_source.offsets import file_number

PLAIN_RUN = 256  # the type of a PlainRun: past every event type (one byte)

NEVER_PLAIN = frozenset(
    {
        c.GTID,
        c.ANONYMOUS_GTID,
        c.GTID_TAGGED,
        c.MARIADB_GTID,
        c.ROTATE,
        c.FORMAT_DESCRIPTION,
        c.HEARTBEAT,
        c.HEARTBEAT_V2,
        c.TRANSACTION_PAYLOAD,
    }
)
ALWAYS, TABLE_MAPS, ROWS, BEGINS = 1, 2, 3, 4  # the modes of a plain type (the C one's)
_NO_LIMIT = 0xFFFFFFFF


class PlainRun:
    """Plain events, folded: where the last ends (``file``, ``end_pos``), where the first
    starts, and the row changes of captured tables among them. Its ``type`` is
    :data:`PLAIN_RUN`, so a walker tells it from an event by its type."""

    __slots__ = ("file", "end_pos", "start_pos", "rows")
    type = PLAIN_RUN

    def __init__(self, file: str, end_pos: int, start_pos: int, rows: int) -> None:
        self.file = file
        self.end_pos = end_pos
        self.start_pos = start_pos
        self.rows = rows

    @property
    def where(self) -> str:
        return f"plain events ending at {self.file}:{self.end_pos}"


class PlainEvents:
    """Which events of a pass are plain: the modes of the event types, the table maps and
    rows headers a row count registered (kept in C), and where reading stops folding."""

    def __init__(self, native) -> None:
        self.native = native
        self.until: tuple[int, int] | None = None  # (file number, position): fold none past

    def use(self, modes: bytes, until: tuple[int, int] | None) -> None:
        """The modes of a pass (256 bytes, by event type) and where it stops reading."""
        self.native.set_modes(modes)
        self.until = until

    def stop_in(self, file: str) -> int:
        """The last end position in ``file`` at which an event may still be folded."""
        if self.until is None:
            return _NO_LIMIT
        number = file_number(file)
        if number < self.until[0]:
            return _NO_LIMIT
        return self.until[1] if number == self.until[0] else 0

    def format_changed(self, fmt) -> None:
        """A FORMAT_DESCRIPTION (its :class:`~cdc_source.binlog.events.Format`): table ids
        are 4 bytes where the table map's post-header is 6, else 6. What was registered
        under the format before is forgotten, as the row count's header cache is."""
        id_width = 4 if fmt.post_header_len(c.TABLE_MAP, 8) == 6 else 6
        self.native.set_format(id_width, fmt.post_header_len(c.QUERY, 13))

    def table(
        self, table_id: int, body: bytes, captured: bool, sizes: bytes, json_bitmap: int
    ) -> None:
        self.native.table(table_id, body, captured, sizes, json_bitmap)

    def rows_header(
        self, event_type: int, header: bytes, table_id: int, images: int, partial: bool
    ) -> None:
        self.native.rows_header(event_type, header, table_id, images, partial)

    def clear(self) -> None:
        self.native.clear()


def new_plain_events(decoder: str | None = "auto") -> PlainEvents | None:
    """A registry for one row count (or one pass), where the C splitter runs."""
    if not framing.runs_native(decoder):
        return None
    return PlainEvents(framing.plain_events())


def plain_modes(wanted: list[tuple[frozenset[int] | None, frozenset[int], bool]]) -> bytes:
    """The mode of every event type for listeners that want ``(kinds, plain_kinds,
    counts)`` (``kinds`` None: every type; ``counts``: the listener keeps the registry the
    pass folds with, which holds its table maps and rows headers)."""
    modes = bytearray(256)
    for event_type in range(256):
        if event_type in NEVER_PLAIN:
            continue
        wanting = [w for w in wanted if w[0] is None or event_type in w[0]]
        if not wanting:
            modes[event_type] = ALWAYS
        elif event_type == c.QUERY:
            if all(c.QUERY in plain for _, plain, _ in wanting):
                modes[event_type] = BEGINS
        elif len(wanting) == 1 and wanting[0][2] and event_type in wanting[0][1]:
            if event_type == c.TABLE_MAP:
                modes[event_type] = TABLE_MAPS
            elif event_type in c.ROW_EVENTS and not c.ROW_EVENTS[event_type][2]:
                modes[event_type] = ROWS  # (a compressed one is never registered)
    return bytes(modes)
