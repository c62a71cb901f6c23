"""How a snapshot task proves that its consistent snapshot sees every transaction at or
before the batch's planned position P (docs/design.md, 'Visibility').

The binlog is written before the storage engine commits (MySQL group commit: flush
stage, then sync, then the engine commit; semi-sync AFTER_SYNC waits in between), so a
transaction can be in the binlog at or before P and still be invisible to a snapshot
opened after P was read. Normalization needs P <= (the snapshot's point) <= HW, with HW
the head read after the snapshot opened: keys touched in (P, HW] are restored from the
first before-image after P, the others are the same at P and at the snapshot's point.

- ``snapshot-status``: MariaDB and Percona Server report the snapshot's own binlog
  position (``binlog_snapshot_file``/``binlog_snapshot_position``), exact either way.
- ``gtid-wait``: MySQL adds a transaction's GTID to ``gtid_executed`` only after the engine
  commit (``Gtid_state::update_on_commit``), and ``WAIT_FOR_EXECUTED_GTID_SET(set, t)``
  returns once a set is in it (MySQL manual, "Functions Used with GTIDs"). The task
  waits for the exact GTID state at P, which the offset carries, then opens its snapshot;
  HW is the head read after it.
- ``head-unsafe``: MySQL without GTIDs has no such proof. The snapshot is taken as of the
  head read after it; a transaction flushed to the binlog at or before P but not yet
  committed when the snapshot opens is missed. Only with the user's explicit consent.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_source.mysql_client import server_flavor, variables

SNAPSHOT_STATUS, GTID_WAIT, HEAD_UNSAFE = "snapshot-status", "gtid-wait", "head-unsafe"


class VisibilityError(RuntimeError):
    """The server offers no way to prove a snapshot sees everything up to its position."""


def resolve_visibility(
    requested: str, flavor: str, gtids_on: bool, has_snapshot_status: bool
) -> str:
    """The visibility proof snapshot tasks use on this server (never ``auto``)."""
    if requested == SNAPSHOT_STATUS and not has_snapshot_status:
        raise VisibilityError(
            "scan.snapshot.visibility=snapshot-status needs a server that reports "
            "binlog_snapshot_file/binlog_snapshot_position (MariaDB, Percona Server); this "
            f"{flavor} server does not"
        )
    if requested == GTID_WAIT and not gtids_on:
        raise VisibilityError(
            "scan.snapshot.visibility=gtid-wait needs GTIDs: set gtid_mode=ON and "
            "enforce_gtid_consistency=ON on the server"
        )
    if requested != "auto":
        return requested
    if has_snapshot_status:
        return SNAPSHOT_STATUS
    if gtids_on:
        return GTID_WAIT
    raise VisibilityError(
        "this MySQL server has gtid_mode=OFF, so a snapshot cannot be proven to see every "
        "transaction at or before its binlog position: MySQL writes a transaction to the "
        "binlog before the engine commits it. Set gtid_mode=ON and "
        "enforce_gtid_consistency=ON (recommended), or accept the risk of missing a "
        "transaction that commits while a snapshot opens with the option "
        "scan.snapshot.visibility=head-unsafe"
    )


def describe(visibility: str) -> str:
    return {
        SNAPSHOT_STATUS: "the server's snapshot position (binlog_snapshot_*), exact",
        GTID_WAIT: "waits for the GTID set of each batch's position, exact",
        HEAD_UNSAFE: "the head after the snapshot, without proof (accepted risk)",
    }[visibility]


@dataclass(frozen=True)
class ServerTraits:
    flavor: str  # mysql or mariadb
    gtids: bool  # the binlog has GTIDs (MariaDB always; MySQL with gtid_mode=ON)
    visibility: str  # cdc_source.visibility, resolved
    # lower_case_table_names=1: statements name tables in any case (cdc_source.binlog.ddl)
    lower_case_names: bool = False


def read_traits(conn, requested_visibility: str) -> ServerTraits:
    """The server's flavor, whether its binlog has GTIDs, and the resolved visibility
    proof (raises :class:`VisibilityError` where there is none and no risk was accepted)."""
    flavor = server_flavor(conn)
    found = variables(conn, ["gtid_mode", "lower_case_table_names"])
    # MariaDB's binlog always has GTIDs; MySQL's with gtid_mode=ON.
    gtids = flavor == "mariadb" or found.get("gtid_mode", "OFF").upper() == "ON"
    lower_case_names = found.get("lower_case_table_names", "OFF") in ("1", "ON")
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'binlog_snapshot_file'")
        has_snapshot_status = bool(cur.fetchall())
    visibility = resolve_visibility(requested_visibility, flavor, gtids, has_snapshot_status)
    return ServerTraits(flavor, gtids, visibility, lower_case_names)
