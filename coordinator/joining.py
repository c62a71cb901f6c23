"""The snapshot of a table joining a running capture (docs/design.md, 'Tables joining and
leaving'): after the hand-over, one joining table at a time is read in chunks next to the
stream, its progress carried in the offset's ``added`` cursor."""

from __future__ import annotations

import logging

from cdc_source.offsets import SnapshotCursor, SourceOffset
from coordinator.captured_tables import CapturedTables
from coordinator.planner import BatchBudget, Planner
from coordinator.table_set import Membership

log = logging.getLogger("cdc_mysql")


def joining_table(start: SourceOffset, members: Membership):
    """The table joining the capture whose snapshot the batch from ``start`` reads, the
    key its snapshot is done to, and the tables after this batch's statements."""
    current = start.added if start.added and start.added.table == members.added else None
    members = members.next_added()
    return members, members.added, (current.after if current else None)


def plan_joining(
    planner: Planner,
    captured: CapturedTables,
    start: SourceOffset,
    members: Membership,
    budget: BatchBudget,
) -> tuple[Membership, SnapshotCursor | None]:
    """The next chunks of a table joining the capture (after the hand-over; one table
    at a time): the tables at the batch's end and its ``added`` cursor."""
    members, table, after = joining_table(start, members)
    if table is None:
        return members, None
    _, done_to = planner.plan_table(captured.schema(table), after, budget)
    if done_to is None:
        log.info("%s: the snapshot of the table joining the capture is done", table)
        return members.finish_added(), None
    return members, SnapshotCursor(table, done_to)


def joining_chunks(
    planner: Planner,
    captured: CapturedTables,
    start: SourceOffset,
    end: SourceOffset,
    members: Membership,
):
    """The chunks of the joining table read by the batch (start, end]."""
    if start.snapshot is not None:
        return ()
    members, table, after = joining_table(start, members)
    if table is None:
        return ()
    until = end.added.after if end.added and end.added.table == table else None
    return planner.table_chunks(captured.schema(table), after, until)
