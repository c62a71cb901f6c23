"""The worker's long-lived objects are frozen once they are many, and not per task.

Each case runs in a fresh interpreter: freezing this test process's heap would keep
other tests' cyclic garbage alive."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, timeout=120)


def test_a_worker_that_has_loaded_its_modules_freezes_them_once():
    _run(
        """
        import gc
        import pyarrow  # a worker's heap: tens of thousands of objects
        from reader.worker_heap import FREEZE_AFTER_NEW_OBJECTS, freeze_long_lived, unfrozen_objects
        assert unfrozen_objects() > FREEZE_AFTER_NEW_OBJECTS
        assert freeze_long_lived()
        assert gc.get_freeze_count() > FREEZE_AFTER_NEW_OBJECTS
        assert unfrozen_objects() < FREEZE_AFTER_NEW_OBJECTS
        assert not freeze_long_lived()  # the next task's start: nothing new to freeze
        """
    )


def test_many_objects_made_after_a_freeze_are_frozen_at_the_next_task():
    _run(
        """
        import gc
        import pyarrow
        from reader.worker_heap import FREEZE_AFTER_NEW_OBJECTS, freeze_long_lived
        freeze_long_lived()
        frozen = gc.get_freeze_count()
        kept = [[i] for i in range(FREEZE_AFTER_NEW_OBJECTS + 1)]  # an import, say
        assert freeze_long_lived()
        assert gc.get_freeze_count() > frozen + FREEZE_AFTER_NEW_OBJECTS
        """
    )


def test_garbage_made_before_a_freeze_is_collected_not_frozen():
    _run(
        """
        import gc, weakref
        import pyarrow
        from reader.worker_heap import freeze_long_lived

        class Node:
            pass

        cycle = Node()
        cycle.self = cycle
        gone = weakref.ref(cycle)
        del cycle
        gc.disable()  # only the freeze's own collection may free it
        assert gone() is not None
        assert freeze_long_lived()
        assert gone() is None
        """
    )
