"""Bounds-checked little readers over event bodies. A short or malformed body raises
:class:`MalformedEventError`, never an ``IndexError`` deep in a caller."""

from __future__ import annotations


class MalformedEventError(ValueError):
    """Bytes that do not form the event they claim to be."""


class Cursor:
    __slots__ = ("data", "pos", "end")
    error: type[ValueError] = MalformedEventError  # what a subclass raises instead

    def __init__(self, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def need(self, size: int) -> None:
        if size < 0 or self.pos + size > self.end:
            raise self.error(f"needs {size} bytes at offset {self.pos}, has {self.end - self.pos}")

    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, size: int) -> bytes:
        self.need(size)
        start = self.pos
        self.pos += size
        return bytes(self.data[start : self.pos])

    def skip(self, size: int) -> None:
        self.need(size)
        self.pos += size

    def uint(self, size: int) -> int:
        start, end = self.pos, self.pos + size
        if size < 0 or end > self.end:
            self.need(size)  # raises, naming the shortfall
        self.pos = end
        return int.from_bytes(self.data[start:end], "little")

    def uint_be(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def lenenc(self) -> int:
        """MySQL's length-encoded integer (``net_field_length``)."""
        first = self.uint(1)
        if first < 0xFB:
            return first
        if first == 0xFC:
            return self.uint(2)
        if first == 0xFD:
            return self.uint(3)
        if first == 0xFE:
            return self.uint(8)
        raise self.error(f"invalid length-encoded integer prefix {first:#x}")

    def lenenc_bytes(self) -> bytes:
        return self.take(self.lenenc())

    def cstring(self) -> bytes:
        end = bytes(self.data[self.pos : self.end]).find(b"\0")
        if end < 0:
            raise self.error(f"unterminated string at offset {self.pos}")
        value = self.take(end)
        self.pos += 1
        return value

    def rest(self) -> bytes:
        return self.take(self.end - self.pos)
