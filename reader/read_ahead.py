"""A task's batches made on a thread of their own, a few ahead of the one Spark takes.

Spark's Python worker writes each batch a task yields to the JVM's socket, and makes
nothing while it writes; the JVM turns each batch into rows, and reads nothing while it
does. With the task's reading in line with the writing, the two take turns: the JVM
waits while the task decodes, and the task waits while the JVM takes the batch in.
:func:`read_ahead` runs the task's batches on a thread of the worker, so the next
batches are made while the worker writes one: a write that waits for a full socket
holds no GIL, nor does much of the decoding, which is in C, so the two threads do run at
once.

The contract, in the order things happen:

- ``read_ahead(batches)``, once iterated, starts the thread, which takes ``batches`` (an
  iterator not started yet) and runs it there alone: its connections are opened, used
  and closed on that thread.
- The consumer receives the batches in their order. Between the two wait at most
  ``depth`` batches and, unless one batch alone is larger, ``max_bytes`` of them
  (``nbytes``): a task's memory holds that much more than without it, never more.
- An exception ``batches`` raises reaches the consumer once the batches before it have,
  as the same object (with its traceback).
- When the consumer ends early (it closes the generator, or raises), the thread stops
  at its next batch and closes ``batches`` on its own thread; the consumer returns only
  once that thread has ended, so nothing of the task outlives the task.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import TypeVar

from reader.snapshot_connection import DEFAULT_FETCH_BYTES

T = TypeVar("T")

# Batches of reader.arrow_output's ROWS_PER_BATCH rows: a binlog block, or a fetch of
# the snapshot, is two of them.
READ_AHEAD_BATCHES = 4
# As much as one snapshot fetch may hold: wide rows wait one batch at a time.
READ_AHEAD_BYTES = DEFAULT_FETCH_BYTES


class ReadAheadBroken(RuntimeError):
    """The thread ended without handing over an end or an error: a broken invariant."""


class _End:
    """The batches ran out."""


class _Failed:
    """The batches raised ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Waiting:
    """The batches made and not yet taken, bounded in count and bytes. One that arrives
    while none waits is always let in, however large."""

    def __init__(self, depth: int, max_bytes: int) -> None:
        self.depth = depth
        self.max_bytes = max_bytes
        self.items: deque[tuple[object, int]] = deque()
        self.bytes = 0
        self.closed = False
        self.changed = threading.Condition()

    def _full_for(self, size: int) -> bool:
        if not self.items:
            return False
        return len(self.items) >= self.depth or self.bytes + size > self.max_bytes

    def put(self, item: object, size: int = 0) -> bool:
        """Wait for room and add ``item``; False where the consumer ended first."""
        with self.changed:
            while not self.closed and self._full_for(size):
                self.changed.wait()
            if self.closed:
                return False
            self.items.append((item, size))
            self.bytes += size
            self.changed.notify_all()
            return True

    def take(self, maker: threading.Thread) -> object:
        """The next item, once there is one; an error where ``maker`` ended without
        one (it always hands over an end or an error, unless it could not run)."""
        with self.changed:
            while not self.items:
                if not maker.is_alive():
                    raise ReadAheadBroken("the read-ahead thread ended before its batches did")
                self.changed.wait(timeout=1.0)
            item, size = self.items.popleft()
            self.bytes -= size
            self.changed.notify_all()
            return item

    def close(self) -> None:
        """The consumer has ended: what waits is dropped and the maker let go."""
        with self.changed:
            self.closed = True
            self.items.clear()
            self.bytes = 0
            self.changed.notify_all()


def _make(batches: Iterator, waiting: _Waiting) -> None:
    try:
        for batch in batches:
            if not waiting.put(batch, getattr(batch, "nbytes", 0)):
                return
        waiting.put(_End())
    except BaseException as error:  # the consumer raises it
        waiting.put(_Failed(error))
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def read_ahead(
    batches: Iterator[T], depth: int = READ_AHEAD_BATCHES, max_bytes: int = READ_AHEAD_BYTES
) -> Iterator[T]:
    """``batches``, made on a thread of their own up to ``depth`` batches and
    ``max_bytes`` ahead (see the module's contract)."""
    if depth < 1:
        raise ValueError(f"read_ahead needs a depth of at least 1, not {depth}")
    waiting = _Waiting(depth, max_bytes)
    maker = threading.Thread(
        target=_make, args=(batches, waiting), name="cdc-mysql read-ahead", daemon=True
    )
    maker.start()
    try:
        while True:
            item = waiting.take(maker)
            if isinstance(item, _End):
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        waiting.close()
        maker.join()
