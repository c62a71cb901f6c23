"""Whether a binlog range wrote the signal table (``signal.data.collection``): a listener
of :mod:`coordinator.range_pass`, on the driver's passes and the follower alike.

It reads table maps only (a table map comes before every row event of its table), never
a row value: the requests themselves are read from the table with a ``SELECT``
(:class:`coordinator.rereading.RequestInbox`). It may say yes for a write a little past a
batch's end (the follower reads ahead): that only makes a look at the table early.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import unwrap_payload
from cdc_source.binlog.table_map import TableMaps
from coordinator.range_pass import Listener, Where


class SignalWrites(Listener):
    """Calls ``written()`` for each table map of ``table`` it sees."""

    kinds = frozenset({c.TABLE_MAP, c.TRANSACTION_PAYLOAD})

    def __init__(self, table: str, written: Callable[[], None]) -> None:
        self.table = table
        self.written = written
        self.maps = TableMaps()

    def see(self, event, reader, where: Where) -> None:
        fmt = reader.format
        events = unwrap_payload(event) if event.type == c.TRANSACTION_PAYLOAD else (event,)
        for inner in events:
            if inner.type != c.TABLE_MAP:
                continue
            if len(self.maps.by_id) > 1_000:  # a follower sees ever new table ids
                self.maps = TableMaps()
            table_map = self.maps.add(inner.body, fmt.post_header_len(c.TABLE_MAP, 8), fmt.mariadb)
            if table_map.name == self.table:
                self.written()
