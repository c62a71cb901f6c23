"""The driver's view of which tables a running capture owns at each offset
(:mod:`coordinator.table_set`): found from the offset alone when a run starts, carried
from batch to batch through the statements of each range (:mod:`coordinator.ddl_scan`),
with the schemas of tables that joined read from the catalog when they appear."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from cdc_source.binlog.ddl import TableChange
from cdc_source.catalog import TableSchema, base_tables
from cdc_source.chunk_key import with_chunk_keys
from cdc_source.mysql_client import read_head
from cdc_source.offsets import (
    BinlogPosition,
    SourceOffset,
    legacy_fingerprint,
    table_fingerprint,
)
from cdc_source.options import SourceOptions
from cdc_source.preflight import read_schemas, table_problems
from cdc_source.types import with_tinyint1_policy
from coordinator.ddl_scan import DdlScan
from coordinator.table_set import (
    MAX_DIFFERENCE,
    THREE_MOVES_MAX,
    Membership,
    RangeEffect,
    TableSetError,
    explain_difference,
    tables_at,
)

log = logging.getLogger("cdc_mysql")

Session = Callable[[Callable], object]  # runs a function on the driver's connection
_KEPT = 8  # memberships remembered: the batches in flight and their starts


def _key(offset: SourceOffset) -> tuple:
    position = None if offset.binlog is None else (offset.binlog.epoch, *offset.binlog.coordinates)
    return (position, offset.snapshot, offset.added, offset.tables)


class CapturedTables:
    def __init__(
        self,
        options: SourceOptions,
        tables: list[TableSchema],
        session: Session,
        ddl: DdlScan,
        typed: bool,
    ) -> None:
        self.options = options
        self.schemas = {t.name: t for t in tables}
        self.matching_at_start = frozenset(self.schemas)
        self._session = session
        self.ddl = ddl
        self.typed = typed
        self._memberships: dict[tuple, Membership] = {}

    def matches(self, name: str) -> bool:
        database, _, table = name.partition(".")
        return self.options.matches(database, table)

    # -- schemas ---------------------------------------------------------------------------
    def schema(self, name: str) -> TableSchema:
        """The table's schema as read when it joined (a table gone before it could be read
        gets one without columns: its rows carry their events' columns)."""
        schema = self.schemas.get(name)
        if schema is None:
            database, _, table = name.partition(".")
            schema = TableSchema(database=database, table=table, columns=(), primary_key=())
        return schema

    def _read_schemas(self, names: set[str]) -> None:
        """Read the schemas of tables that joined (those that exist now), checked as the
        preflight checks the tables of a new query."""
        wanted = {n for n in names if n not in self.schemas}
        if not wanted:
            return

        def read(conn) -> list[TableSchema]:
            found = read_schemas(conn, lambda db, t: f"{db}.{t}" in wanted)
            found, key_problems = with_chunk_keys(conn, found, self.options.chunk_keys)
            found = [with_tinyint1_policy(t, self.options.tinyint1_as_boolean) for t in found]
            problems = table_problems(found, key_problems)
            if problems:
                raise TableSetError(
                    "a table joined the capture that cdc-mysql cannot capture: "
                    + "; ".join(problems)
                )
            return found

        for schema in self._session(read):
            self.schemas[schema.name] = schema

    # -- memberships ---------------------------------------------------------------------
    def remember(self, offset: SourceOffset, membership: Membership) -> None:
        self._memberships[_key(offset)] = membership
        while len(self._memberships) > _KEPT:
            self._memberships.pop(next(iter(self._memberships)))

    def remembered(self, offset: SourceOffset) -> Membership | None:
        """The tables at ``offset`` if this run planned it or found them."""
        return self._memberships.get(_key(offset))

    def at(self, offset: SourceOffset) -> Membership:
        """The tables at ``offset``: remembered from planning, else found again."""
        known = self._memberships.get(_key(offset))
        if known is None:
            known = self._find(offset)
            self.remember(offset, known)
        return known

    def after(
        self, start: SourceOffset, end: BinlogPosition | None
    ) -> tuple[Membership, RangeEffect, tuple[TableChange, ...]]:
        """The tables at the end of the range ``(start, end]``, what the range's
        statements did, and the statements."""
        membership = self.at(start)
        if start.binlog is None or end is None:
            return membership, RangeEffect(), ()
        changes = tuple(p.change for p in self.ddl.changes(start.binlog, end))
        return (*self._applied(membership, changes, start), changes)

    def at_first_head(
        self, start: SourceOffset, head: BinlogPosition
    ) -> tuple[Membership, RangeEffect]:
        """The tables at ``head``, the first position of a run that starts without one
        (initial, snapshot and latest-offset mode): those matched when the query started,
        with the tables created or dropped since. A table that came has rows of its own:
        the main snapshot reads it in its turn, or, if its name sorts before the main
        cursor's table, a snapshot of its own (:mod:`coordinator.table_set`); without a
        snapshot (latest-offset) it is streamed from ``head``.

        The tables are those at ``head`` exactly, as a restarted driver finds them from
        the batch's end offset: listed now, with the statements between ``head`` and a
        head read after the listing undone (:meth:`_tables_at`)."""
        membership = self.at(start)
        now = {n for n in self._tables_at(head) if self.matches(n)}
        kind = "populate" if start.snapshot is not None else "create"
        changes = [TableChange(kind, n) for n in sorted(now - membership.names)]
        changes += [TableChange("drop", n) for n in sorted(membership.names - now)]
        after, effect = self._applied(membership, changes, start)
        return after, replace(effect, streamed_from_creation=frozenset())

    def _applied(
        self, membership: Membership, changes, start: SourceOffset
    ) -> tuple[Membership, RangeEffect]:
        after, effect = membership.apply(changes, start.snapshot, self.matches)
        self._check_typed(after.names | effect.streamed_from_creation)
        if effect.joined:
            self._read_schemas(set(effect.joined))
        return after, effect

    def log_effect(self, effect: RangeEffect, end: BinlogPosition) -> None:
        for name in effect.left:
            log.info("%s is no longer captured: dropped or renamed before %s", name, end)
        for name in effect.joined:
            log.info("%s joined the capture (created or renamed before %s)", name, end)
        for name in effect.swapped:
            log.info(
                "%s: an online schema-change tool's swap before %s is a schema change; the "
                "rows emitted stay (scan.parse.online.schema.changes.enabled)",
                name,
                end,
            )
        for name in effect.unswapped:
            log.info(
                "%s: an online schema-change tool's swap before %s comes before its snapshot "
                "is done: it is renamed away and the new table is read in full",
                name,
                end,
            )

    def _check_typed(self, names: frozenset[str]) -> None:
        """A typed query's output is one table's columns: no other table may join, not
        even one created and dropped within a batch range (its rows would be emitted)."""
        if not self.typed:
            return
        (only,) = self.matching_at_start
        others = sorted(names - {only})
        if others:
            raise TableSetError(
                f"'table-name' now also matches {', '.join(others)}, but this query's typed "
                f"output is the columns of {only} alone. Narrow 'table-name' to {only}, or "
                "start a new query whose 'table-name' matches every table to capture (the "
                "envelope output, which tables can join)"
            )

    # -- a restarted driver --------------------------------------------------------------
    def _find(self, offset: SourceOffset) -> Membership:
        """The tables at an offset this run did not plan (the first batch of a run)."""
        added = offset.added.table if offset.added is not None else None
        now = set(self.matching_at_start)
        if len(offset.tables) == 8:  # an offset written before tables could join
            if offset.tables != legacy_fingerprint(sorted(now)):
                raise TableSetError(
                    "the tables matched by 'database-name'/'table-name' are not the ones this "
                    f"checkpoint captured (now: {', '.join(sorted(now))}), and it was written "
                    "by a version that cannot tell which differ. Restore the tables and options "
                    "for one batch, or start a new query with a new checkpoint location"
                )
            return Membership(frozenset(now))
        guess = now - {added} if added else now
        if offset.binlog is None or table_fingerprint(guess) == offset.tables:
            return Membership(frozenset(guess), (), added)
        return self._explain(offset, added)

    def _tables_now_and_since(self, position: BinlogPosition) -> tuple[set[str], list[TableChange]]:
        """Every table on the server now, and the table statements since ``position``.
        The tables first, then the head: undoing a statement written between the two on
        tables listed before it changes nothing, whereas a table created after a head
        read would look like one that was there at ``position``."""
        server_now = self._session(_all_tables)
        head = self._session(read_head)
        changes = [p.change for p in self.ddl.changes(position, BinlogPosition(head[0], head[1]))]
        return server_now, changes

    def _tables_at(self, position: BinlogPosition) -> set[str]:
        """Every table on the server at ``position`` (a recent one)."""
        return tables_at(*self._tables_now_and_since(position))

    def _explain(self, offset: SourceOffset, added: str | None) -> Membership:
        """Tables at the offset's position: the server's tables now with the statements
        since undone, checked against the offset's fingerprint; a difference of up to
        three tables (a widened or narrowed pattern, tables waiting for a snapshot) is
        found by its hash sum."""

        position = offset.binlog
        server_now, changes = self._tables_now_and_since(position)
        then = tables_at(server_now, changes)
        matching = {n for n in then if self.matches(n)}
        guess = matching - {added}
        # A CREATE ... IF NOT EXISTS of a table that was there is undone above as if it
        # had not been: such names may be on either side.
        created = {c.table for c in changes if c.kind in ("create", "populate")}
        others = (then | (created & server_now)) - matching - {added}
        found = explain_difference(offset.tables, guess, others)
        if found is None:
            raise TableSetError(
                f"cannot tell which of the tables matching 'database-name'/'table-name' at "
                f"{position} this checkpoint captured: more than {MAX_DIFFERENCE} tables differ "
                f"from its set (more than 2 on a server with over {THREE_MOVES_MAX:,} tables; "
                f"matching now: {len(self.matching_at_start)} tables), or tables were dropped "
                f"with their database. Change 'table-name' by at most {MAX_DIFFERENCE} tables a "
                "run, or start a new query with a new checkpoint location"
            )
        waiting, extra = found
        kept = {n for n in extra if self.matches(n)}  # re-created with IF NOT EXISTS
        for name in sorted(extra - kept):
            log.info("%s is no longer matched by 'table-name': no longer captured", name)
        for name in sorted(waiting):
            log.info("%s joins the capture: snapshotted while the other tables stream", name)
        return Membership(frozenset((guess - waiting) | kept), tuple(sorted(waiting)), added)


def _all_tables(conn) -> set[str]:
    """Every base table on the server, as 'db.table'."""
    return {f"{db}.{table}" for db, table in base_tables(conn)}
