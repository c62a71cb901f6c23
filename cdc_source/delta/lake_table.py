"""What every lake table of a mode shares: its Delta table, created on first use, and its
commits, each with the application transaction of the slice it applied."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from cdc_source.delta.changes import KEY, RESERVED, ROW_KEY, reserved_clash
from cdc_source.delta.transactions import batch_applied, slice_applied, slice_version


class LegacyTableError(ValueError):
    """A Delta table without the columns its mode keeps (``_key`` and the mode's own):
    written by an earlier version of the mirror or in another mode."""


SHARED = "cdc-mysql lake table written by several queries"
UNCLAIMED = "cdc-mysql lake table, created empty, not written yet"


@dataclass(frozen=True)
class Outcome:
    """What applying one table's slice did."""

    text: str
    committed: bool  # a Delta commit (with the slice's application transaction) was made


def typed_fields(schema: pa.Schema) -> list[pa.Field]:
    """The fields of a change batch's schema that are the table's own columns (and
    ``metadata.list`` columns), nullable: all but the source's ``_op``, ``_seq``,
    ``_ts_ms`` and ``row_key`` (which the lake tables keep as ``_key``)."""
    return [f.with_nullable(True) for f in schema if f.name not in (*RESERVED, ROW_KEY)]


class LakeTable:
    """One source table's Delta table in one mode. ``fields`` are its typed columns (else
    taken from the first slice); ``apply`` merges a slice of changes (the typed columns,
    ``_op``, ``_seq``, ``_ts_ms`` and ``_key``, in any order) in one commit. ``app_id``
    names the query's commits (:func:`~cdc_source.delta.transactions.app_id_of`); a writer
    that learns it at its first batch passes None and calls :meth:`bind` then."""

    mode = ""
    own_columns: tuple[str, ...] = ()  # the columns of the mode, after the typed ones

    def __init__(self, path: str, table, app_id: str | None, fields=None) -> None:
        reserved_clash(table)
        self.path = path
        self.name = table.name
        self._app_id = app_id
        self.fields = list(fields) if fields is not None else None

    @property
    def app_id(self) -> str:
        if self._app_id is None:
            raise RuntimeError(f"the lake table of {self.name} is not bound to a query yet")
        return self._app_id

    def bind(self, app_id: str) -> None:
        """Names the query whose commits this object makes."""
        self._app_id = app_id

    def own_fields(self) -> list[pa.Field]:
        raise NotImplementedError

    def delta_schema(self, fields: list[pa.Field]) -> pa.Schema:
        return pa.schema(list(fields) + self.own_fields())

    def table(self, schema: pa.Schema | None = None):
        """The Delta table, created (empty) if it does not exist; one without the mode's
        columns is refused."""
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path):
            fields = self.fields if self.fields is not None else typed_fields(schema)
            DeltaTable.create(
                self.path, self.delta_schema(fields), mode="ignore", description=UNCLAIMED
            )
        table = DeltaTable(self.path)
        have = {f.name for f in table.schema().fields}
        missing = [c for c in (KEY, *self.own_columns) if c not in have]
        if missing:
            raise LegacyTableError(
                f"the Delta table {self.path} has no {', '.join(missing)} column(s): it was "
                f"written by an earlier version of the mirror or in another mode than "
                f"{self.mode!r} ({KEY} holds each row's primary-key bytes under the server's "
                "collation, which rows are matched on); rebuild it: remove it (and the "
                "query's checkpoint) and run again"
            )
        return table

    @property
    def marker(self) -> str:
        """The description of a Delta table this query claimed (its application id)."""
        return f"cdc-mysql {self.mode} of {self.name}, written by application {self.app_id}"

    def written_alone(self, table) -> bool:
        """Whether every row of the table came from this query, in ``_seq`` order: no
        other query has written to it. The first write of a query to a table created
        empty claims it (its description names the query); the first write of another
        query to a claimed table marks it shared, for good. A table created empty is
        claimed while it holds no data file, whatever else was committed to it."""
        description = table.metadata().description
        if description == self.marker:
            return True
        if description == UNCLAIMED and not table.file_uris():
            table.alter.set_table_description(self.marker)
            return True
        if description != SHARED:
            table.alter.set_table_description(SHARED)
        return False

    def append(self, table, rows: pa.Table, commit) -> None:
        """Adds ``rows`` (the table's columns) in one commit, without reading the table."""
        from deltalake import write_deltalake

        schema = pa.schema(table.schema())
        rows = rows.select(schema.names).cast(schema)
        write_deltalake(table, rows, mode="append", commit_properties=commit)

    def check(self) -> None:
        """Refuses an existing Delta table of another layout (before any batch runs)."""
        from deltalake import DeltaTable

        if DeltaTable.is_deltatable(self.path):
            self.table()

    def done(self, table=None) -> int | None:
        """The latest application transaction version of this query in the table."""
        table = table if table is not None else self.table()
        return table.transaction_version(self.app_id)

    def batch_applied(self, batch_id: int) -> bool:
        """Whether the table holds every slice of the batch (checked before reading it)."""
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path):
            return False
        return batch_applied(self.done(), batch_id)

    def apply(self, changes: pa.Table, batch_id: int, index: int = 0, last: bool = True):
        """Merges slice ``index`` of the batch (``last``: the batch's last) in one commit,
        unless the table already holds it."""
        from deltalake import CommitProperties, DeltaTable, Transaction

        table = self.table(changes.schema)
        if slice_applied(self.done(table), batch_id, index):
            return Outcome("already applied", False)
        if not changes.num_rows:  # nothing to write: running it again changes nothing either
            return Outcome("no changes", False)
        version = slice_version(batch_id, index, last)
        commit = CommitProperties(app_transactions=[Transaction(self.app_id, version)])
        alone = self.written_alone(table)
        before = table.version()
        text = self.merge(table, changes, commit, alone=alone)
        return Outcome(text, DeltaTable(self.path).version() != before)

    def merge(self, table, changes: pa.Table, commit, alone: bool) -> str:
        """Writes ``changes`` in one commit carrying ``commit``; says what it did.
        ``alone``: every row of the table came from this query (:meth:`written_alone`)."""
        raise NotImplementedError
