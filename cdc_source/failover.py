"""Following a fail-over: a position of one server, found on another by its GTID state.

Positions of one server mean nothing on another (other file names and offsets), but the
GTID state an offset carries (:mod:`coordinator.gtid_tracker`) names the transactions
before it on any server of the same replication topology. :func:`relocate` finds the
same point in the binlog of the server reached now (:func:`cdc_source.binlog.gtid_scan.
locate`) and gives it the next epoch, so every ``_seq`` read from the new server sorts
after those read before (:mod:`cdc_source.sequence`).

A position is not relocated, and the fail-over stops the query with the reason, when:
- it carries no GTID state (MySQL with gtid_mode=OFF);
- an XA transaction prepared on the old server is unresolved at it (its prepare is at
  a position of the old server's binlog);
- the new server's binlog lacks a transaction before it (asynchronous replication lost
  it: the query has read changes the new primary does not have), or holds the same
  transactions in another order; the refusal names the transactions it lacks.

A server's GTID state at a position includes what it executed before its oldest binlog
file (:func:`cdc_source.binlog.gtid_scan.executed_before_binlog`, MySQL's
``gtid_purged``): a replica built from a dump or a clone has the dump's transactions only
there, in none of its binlog files.
"""

from __future__ import annotations

from dataclasses import replace

from cdc_source.binlog.gtid_scan import GtidLocateError, executed_before_binlog, locate
from cdc_source.mysql_client import binary_logs
from cdc_source.offsets import BinlogPosition


def relocate(
    position: BinlogPosition, open_dump, files: list[str], flavor: str, before: str = ""
) -> BinlogPosition:
    """``position`` of another server, in the binlog of this one (``open_dump``, ``files``:
    its dumps and binlog files, oldest first; ``before``: what it executed before its
    oldest file, :func:`server_binlog`), one epoch later."""
    if not position.gtids:
        raise GtidLocateError(
            f"the position {position} carries no GTID state, so it cannot be found on another "
            "server: with gtid_mode=ON a query follows a fail-over; start a new query with a "
            "new checkpoint location"
        )
    if position.xa is not None:
        raise GtidLocateError(
            f"an XA transaction prepared at {position.xa[0]}:{position.xa[1]} of the old server "
            f"is unresolved at {position}; its prepare cannot be found on another server by "
            "position. Restart the query once it is resolved, or with a new checkpoint"
        )
    file, pos = locate(open_dump, files, position.gtids, flavor, before)
    return replace(position, file=file, pos=pos, epoch=position.epoch + 1)


def binlog_files(conn) -> list[str]:
    """The server's binlog file names, oldest first."""
    return [name for name, _ in binary_logs(conn)]


def server_binlog(conn, flavor: str) -> tuple[list[str], str]:
    """What :func:`relocate` needs of the server reached: its binlog file names, oldest
    first, and the GTIDs it executed before the oldest."""
    return binlog_files(conn), executed_before_binlog(conn, flavor)
