"""Delta application transactions: how a re-run batch (or slice of one) is recognised.

Every commit of a lake table carries an application transaction: its app id names the
query (Spark's query id, kept in the checkpoint: the same across restarts, new for a new
checkpoint, even at the same path), the mode and the source table; its version names the Spark batch
and the slice of the batch it applied. A batch is merged in slices of bounded size, in
``_seq`` order, one commit per slice, so a batch that Spark runs again after a crash skips
the slices already committed and applies the rest. A slice is identified by its index: the
batch's rows in ``_seq`` order cut every ``slice_rows`` rows, the same cut on a re-run as
long as ``slice_rows`` is unchanged (Spark replays a batch's offsets, and ``_seq`` is unique
per change). The last slice of a batch commits with the highest version of the batch, so a
batch wholly applied is recognised without reading it.
"""

from __future__ import annotations

import hashlib
import os

SLICE_LIMIT = 1 << 24  # slices per batch (the versions between two batches' ids)


def app_id_of(query_id: str, mode: str, table: str) -> str:
    """Delta's application id of a query's commits to one source table's lake table."""
    key = f"{query_id}\0{table}"
    return f"cdc-mysql:{mode}:" + hashlib.sha1(key.encode()).hexdigest()


def staging_of(checkpoint: str) -> str:
    """The default staging directory of the lake writers of a query: under its
    checkpoint (each writer stages in a subdirectory of its own)."""
    if "://" in checkpoint or checkpoint.startswith("file:"):
        return checkpoint.rstrip("/") + "/lake-staging"
    return os.path.abspath(checkpoint) + "/lake-staging"


def slice_version(batch_id: int, index: int, last: bool) -> int:
    """The application transaction version of a batch's slice ``index``."""
    if not 0 <= index < SLICE_LIMIT - 1:
        raise ValueError(f"batch {batch_id} has more than {SLICE_LIMIT - 1} slices")
    return batch_id * SLICE_LIMIT + (SLICE_LIMIT - 1 if last else index)


def slice_applied(done: int | None, batch_id: int, index: int) -> bool:
    """Whether slice ``index`` of the batch is in a table whose latest version of the
    application is ``done`` (None: no commit of it yet)."""
    return done is not None and done >= batch_id * SLICE_LIMIT + index


def batch_applied(done: int | None, batch_id: int) -> bool:
    """Whether every slice of the batch is in the table (its last slice was committed)."""
    return done is not None and done >= (batch_id + 1) * SLICE_LIMIT - 1
