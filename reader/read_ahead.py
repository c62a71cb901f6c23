"""A task's batches made on a thread of their own, a few ahead of the one Spark takes.

Spark's Python worker writes each batch a task yields to the JVM's socket, and builds
nothing while it writes; the JVM turns each batch into rows, and reads nothing while it
does. With the task's reading in line with the writing, the two take turns: the JVM
waits while the task decodes, and the task waits while the JVM takes the batch in.
:func:`read_ahead` runs the task's batches on a thread of the worker, so the next
batches are made while the worker writes one: a write that waits for a full socket
holds no GIL, nor does much of the decoding, which is in C, so the two threads do run at
once.

The contract, in the order things happen:

- ``read_ahead(batches)`` starts the thread, which takes ``batches`` (an iterator not
  started yet) and runs it there alone: its connections are opened, used and closed on
  that thread.
- The consumer receives the batches in their order. At most ``depth`` of them wait
  between the two: memory holds ``depth`` batches more than without it, never more.
- An exception ``batches`` raises reaches the consumer once the batches before it have,
  as the same object (with its traceback).
- When the consumer ends early (it closes the generator, or raises), the thread stops
  at its next batch and closes ``batches`` on its own thread; the consumer returns only
  once that thread has ended, so nothing of the task outlives the task.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

# Batches of reader.arrow_output's ROWS_PER_BATCH rows: a binlog block, or a fetch of
# the snapshot, is two of them.
READ_AHEAD_BATCHES = 4
# How often a thread waiting to hand a batch over looks whether the consumer has ended.
_WAIT_SECONDS = 0.05


class _End:
    """The batches ran out."""


class _Failed:
    """The batches raised ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _hand_over(waiting: queue.Queue, item: object, stopped: threading.Event) -> bool:
    """Put ``item`` for the consumer; False where the consumer ended first."""
    while not stopped.is_set():
        try:
            waiting.put(item, timeout=_WAIT_SECONDS)
            return True
        except queue.Full:
            continue
    return False


def _make(batches: Iterator, waiting: queue.Queue, stopped: threading.Event) -> None:
    try:
        for batch in batches:
            if not _hand_over(waiting, batch, stopped):
                return
        _hand_over(waiting, _End(), stopped)
    except BaseException as error:  # the consumer raises it
        _hand_over(waiting, _Failed(error), stopped)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def read_ahead(batches: Iterator[T], depth: int = READ_AHEAD_BATCHES) -> Iterator[T]:
    """``batches``, made on a thread of their own up to ``depth`` ahead (see the module's
    contract)."""
    if depth < 1:
        raise ValueError(f"read_ahead needs a depth of at least 1, not {depth}")
    waiting: queue.Queue = queue.Queue(maxsize=depth)
    stopped = threading.Event()
    maker = threading.Thread(
        target=_make, args=(batches, waiting, stopped), name="cdc-mysql read-ahead", daemon=True
    )
    maker.start()
    try:
        while True:
            item = waiting.get()
            if isinstance(item, _End):
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stopped.set()
        maker.join()
