"""reader/read_ahead.py: a task's batches made on their own thread, in order, bounded."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reader.read_ahead import read_ahead


class Boom(Exception):
    pass


def _batches(count: int, fail_at: int | None, log: dict):
    """``count`` batches (0, 1, ...), raising Boom instead of batch ``fail_at``; notes
    the thread it ran on, how many it made and whether it was closed."""
    log["thread"] = threading.get_ident()
    log["made"] = 0
    try:
        for n in range(count):
            if n == fail_at:
                raise Boom(n)
            log["made"] += 1
            yield n
    finally:
        log["closed_on"] = threading.get_ident()


def _threads_named_read_ahead() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "cdc-mysql read-ahead"]


@given(
    count=st.integers(0, 30),
    fail_at=st.none() | st.integers(0, 30),
    take=st.none() | st.integers(0, 30),
    depth=st.integers(1, 5),
)
def test_the_consumer_gets_the_batches_in_order_up_to_an_error_or_where_it_stops(
    count, fail_at, take, depth
):
    log: dict = {}
    got, raised = [], None
    reader = read_ahead(_batches(count, fail_at, log), depth)
    try:
        for batch in reader:
            if take is not None and len(got) == take:
                break
            got.append(batch)
    except Boom as error:
        raised = error
    finally:
        reader.close()
    failing = fail_at is not None and fail_at < count
    reached = fail_at if failing else count
    if take is not None and take < reached:
        assert got == list(range(take)) and raised is None
    else:
        assert got == list(range(reached))
        assert (raised is not None) == failing
        if failing:
            assert raised.args == (fail_at,)
    assert log["closed_on"] == log["thread"] != threading.get_ident()
    assert not _threads_named_read_ahead()


def test_the_error_is_the_batches_own_object_with_its_traceback():
    def failing():
        yield 1
        raise Boom("the server went away")

    reader = read_ahead(failing())
    assert next(reader) == 1
    with pytest.raises(Boom, match="the server went away") as caught:
        next(reader)
    frames = []
    tb = caught.value.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert "failing" in frames


def test_the_batches_run_at_most_depth_ahead_of_the_consumer():
    log: dict = {}
    reader = read_ahead(_batches(100, None, log), depth=3)
    assert next(reader) == 0
    time.sleep(0.3)  # room for the thread to run ahead as far as it may
    # in the consumer's hand 1, waiting 3, one made and not yet handed over
    assert log["made"] <= 1 + 3 + 1
    reader.close()
    assert log["made"] < 100


class Sized:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def test_the_batches_waiting_stay_under_the_byte_bound_and_a_larger_one_still_passes():
    made = []

    def sized(sizes):
        for size in sizes:
            made.append(size)
            yield Sized(size)

    reader = read_ahead(sized([40] * 20), depth=10, max_bytes=100)
    next(reader)
    time.sleep(0.3)
    assert len(made) <= 1 + 2 + 1  # in hand, two waiting (80 bytes), one made
    reader.close()
    assert [b.nbytes for b in read_ahead(sized([500, 10, 500]), depth=2, max_bytes=100)] == [
        500,
        10,
        500,
    ]


def test_a_consumer_that_ends_early_returns_only_once_the_batches_are_closed():
    closed = threading.Event()

    def slow_to_close():
        try:
            while True:
                yield b"batch"
        finally:
            time.sleep(0.2)
            closed.set()

    reader = read_ahead(slow_to_close(), depth=2)
    next(reader)
    reader.close()
    assert closed.is_set()


def test_a_depth_under_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        next(read_ahead(iter([1]), depth=0))
