"""The Python worker's long-lived objects, kept out of the cyclic garbage collector.

Spark reuses a Python worker for task after task (``spark.python.worker.reuse``), and
its daemon calls ``gc.collect()`` after every task. A full collection walks every object
the collector tracks: in a worker that has loaded PySpark, pyarrow, pandas (which
pyarrow imports on first use) and this package, about 85,000 objects, 30-60 ms of CPU
on the machine of ``bench/README.md``. A stream pays it once per task, several times a
second in the binlog phase, where most of the objects are modules and classes that
live as long as the worker.

:func:`freeze_long_lived` moves the objects alive at a task's start into the
collector's permanent generation (``gc.freeze()``), so later collections walk only what
was made since. At a task's start the daemon has just collected the previous task's
garbage, so what is alive there is what the worker keeps. A frozen object is still
freed when its last reference goes; only a frozen object that later becomes part of an
unreachable cycle is never freed. To keep that bounded, a freeze happens only when the
objects made since the last one number more than :data:`FREEZE_AFTER_NEW_OBJECTS`
(imports: a worker's first tasks), never per task of a worker in its steady state.
"""

from __future__ import annotations

import gc

FREEZE_AFTER_NEW_OBJECTS = 10_000


def unfrozen_objects() -> int:
    """Objects the collector tracks outside its permanent generation."""
    return sum(len(gc.get_objects(generation)) for generation in range(3))


def freeze_long_lived() -> bool:
    """Freezes what is alive now, after a collection, when more than
    :data:`FREEZE_AFTER_NEW_OBJECTS` objects have been made since the last freeze;
    returns whether it did."""
    if unfrozen_objects() <= FREEZE_AFTER_NEW_OBJECTS:
        return False
    gc.collect()  # garbage made since the daemon's last collection is not frozen
    gc.freeze()
    return True
