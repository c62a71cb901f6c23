"""Several source tables (the envelope schema): one Delta table each, at
``<root>/<db>.<table>``, with the typed columns the source gives when it captures that
table alone. A slice's changes are applied table by table in name order, each table in its
own commit with its own application transaction (app id from the query and the
table), so a batch run again after a crash between two tables' commits skips the tables
already applied and applies the others."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cdc_source.delta.envelope_images import EnvelopeImages


def table_names(envelope: pa.Table) -> pa.Array:
    """Each envelope row's ``db.table``."""
    return pc.binary_join_element_wise(
        envelope.column("database").cast(pa.string()),
        envelope.column("table").cast(pa.string()),
        ".",
    )


class TableSet:
    """The lake tables of several source tables, in name order. ``make`` builds one
    table's :class:`~cdc_source.delta.lake_table.LakeTable` from its path, its source
    table and its typed fields."""

    def __init__(self, root: str, tables: list, make) -> None:
        ordered = sorted(tables, key=lambda t: t.name)
        self.images = {t.name: EnvelopeImages(t) for t in ordered}
        self.lakes = {
            t.name: make(f"{root.rstrip('/')}/{t.name}", t, self.images[t.name].fields)
            for t in ordered
        }

    def parts(self, envelope: pa.Table, batch_id: int) -> dict[str, pa.Table]:
        """Each table's typed changes of an envelope slice (empty for a table without)."""
        names = table_names(envelope)
        unknown = set(pc.unique(names).to_pylist()) - set(self.images)
        if unknown:
            raise ValueError(f"batch {batch_id} has changes of tables not mirrored: {unknown}")
        return {
            name: images.changes(envelope.filter(pc.equal(names, name)))
            for name, images in self.images.items()
        }
