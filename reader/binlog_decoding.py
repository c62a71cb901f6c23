"""Decoding fixes for mysql-replication 1.0.17 (DESIGN section 7).

The library decodes a negative TIME(fsp) with a wrong fraction and returns ``None`` for an
empty SET, which a NULL SET also returns. Both would make the binlog disagree with the
snapshot, so these two column types are decoded here, from the raw bytes, following
the server's own packing (``my_time_packed_from_binary``). Everything else is left to the
library; the remaining pitfalls (BINARY padding, YEAR 0, BIT as a bit string) are fixed
on the decoded value in ``cdc_source.types.canonical_value``.
"""

from __future__ import annotations

import datetime as dt

from pymysqlreplication.bitmap import BitGet
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import RowsEvent

_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000
_installed = False


class EmptySet(frozenset):
    """A non-NULL SET value with no member (distinct from ``None``, which is NULL)."""


def _read_be(packet, size: int) -> int:
    return int.from_bytes(packet.read(size), "big")


def unpack_time2(raw_int: int, raw_frac: int | None, fsp: int) -> dt.timedelta:
    """TIME(fsp) from its binary form: 3 integer bytes (+ fraction bytes), offset-coded."""
    if fsp in (5, 6):
        packed = raw_int - _TIMEF_OFS  # raw_int holds all 6 bytes here
    else:
        intpart = raw_int - _TIMEF_INT_OFS
        frac = 0
        if fsp in (1, 2):
            frac = raw_frac  # stored unsigned; a negative value borrows from the integer part
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100
            frac *= 10000
        elif fsp in (3, 4):
            frac = raw_frac
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x10000
            frac *= 100
        packed = (intpart << 24) + frac
    negative = packed < 0
    magnitude = -packed if negative else packed
    hms = magnitude >> 24
    micros = magnitude % (1 << 24)
    hours, minutes, seconds = (hms >> 12) % (1 << 10), (hms >> 6) % (1 << 6), hms % (1 << 6)
    total = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros
    return dt.timedelta(microseconds=-total if negative else total)


def _read_time2(packet, fsp: int) -> dt.timedelta:
    if fsp in (5, 6):
        return unpack_time2(_read_be(packet, 6), None, fsp)
    raw_int = _read_be(packet, 3)
    frac_bytes = {1: 1, 2: 1, 3: 2, 4: 2}.get(fsp, 0)
    raw_frac = _read_be(packet, frac_bytes) if frac_bytes else 0
    return unpack_time2(raw_int, raw_frac, fsp)


def install() -> None:
    """Route TIME2 and SET columns through the decoders above (idempotent)."""
    global _installed
    if _installed:
        return
    original = RowsEvent._RowsEvent__read_values_name

    def read_values_name(
        self, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i
    ):
        if column.type not in (FIELD_TYPE.TIME2, FIELD_TYPE.SET):
            return original(
                self, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i
            )
        if BitGet(cols_bitmap, i) == 0 or self._is_null(null_bitmap, null_bitmap_index):
            return None
        if column.type == FIELD_TYPE.TIME2:
            return _read_time2(self.packet, column.fsp)
        mask = self.packet.read_uint_by_size(column.size)
        members = column.set_values or []
        chosen = frozenset(v for idx, v in enumerate(members) if mask & (1 << idx))
        return chosen if chosen else EmptySet()

    RowsEvent._RowsEvent__read_values_name = read_values_name
    _installed = True
