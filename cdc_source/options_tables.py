"""The tables options (docs/options.md): which tables are captured, and how their columns
arrive: TINYINT(1) as a boolean or an integer, and the metadata columns of a single table's
typed output."""

from __future__ import annotations

from cdc_source import option_values as values
from cdc_source.option_spec import METADATA_NAMES, Option

TABLES_OPTIONS: tuple[Option, ...] = (
    Option(
        "database-name",
        kind="regex",
        shown_default="(required)",
        summary="regular expression of the database(s) to capture (required)",
        manual="regular expression of the database(s) to capture (full match)",
    ),
    Option(
        "table-name",
        kind="regex",
        shown_default="(required)",
        summary=(
            "regular expression matched against 'db.table' (required); without a dot, Flink "
            "CDC's form: a regular expression of the table name alone, combined with "
            "database-name"
        ),
        manual=(
            "regular expression matched against `db.table` (full match), e.g. `shop\\.orders`,"
            " `shop\\..*`. **Without a dot it is Flink CDC's form**: a regular expression of "
            "the table name alone (full match), combined with `database-name`, e.g. `orders` "
            "or `order_[0-9]+` (any `.`, a wildcard too, makes it the `db.table` form: in "
            "Flink's form write `order_\\w*`, not `order_.*`). When nothing matches, the error"
            " says which form was used and what the other form would match"
        ),
    ),
    Option(
        "treat-tinyint1-as-boolean.enabled",
        kind="boolean",
        field="tinyint1_as_boolean",
        parse=values.boolean,
        default=True,
        shown_default="`true`",
        summary=(
            "true (default, Flink CDC's option) or false: whether TINYINT(1) columns are "
            "BOOLEAN; a value other than 0 or 1 in such a column is then refused (the query "
            "stops with an error naming it), never turned into true. With false they are "
            "tinyint. A key column is tinyint either way: a boolean key would merge rows"
        ),
        manual=(
            "Flink CDC's option: `TINYINT(1)` (and `BOOLEAN`, its alias) columns are Spark "
            "`boolean`. `TINYINT(1)` is a one-byte integer whose display width is 1, and "
            "older schemas keep status codes in it: a value other than 0 and 1 is **refused**"
            " (the query stops with an error naming the table, the column, the value and this"
            " option; nothing of that batch is emitted), never turned into `true`. `false`: "
            "such columns are `tinyint` (`smallint` if unsigned), exact. A `TINYINT(1)` **key"
            " column is `tinyint` whatever this says**: a boolean key would merge rows the "
            "server keeps apart"
        ),
    ),
    Option(
        "scan.parse.online.schema.changes.enabled",
        kind="boolean",
        field="online_schema_changes",
        parse=values.boolean,
        default=False,
        shown_default="`false`",
        summary=(
            "true or false (default; Flink CDC's option): whether the cut-over of gh-ost or "
            "pt-online-schema-change (RENAME TABLE t TO _t_del, _t_gho TO t, or t TO _t_old, "
            "_t_new TO t, in one statement) is a schema change of t that keeps the rows "
            "already emitted, instead of t leaving and joining again with a new snapshot; the "
            "tools' own tables (_t_gho, _t_ghc, _t_del, _t_new, _t_old) are then never captured"
        ),
        manual=(
            "Flink CDC's option. `true`: the cut-over of **gh-ost** (`RENAME TABLE t TO "
            "_t_del, _t_gho TO t`) or **pt-online-schema-change** (`RENAME TABLE t TO _t_old,"
            " _t_new TO t`), in **one** statement, in one database, of a table the stream "
            "owns entirely, is a **schema change of `t`**: no `t` row, no new snapshot; the "
            "stream goes on with the new table's columns (typed output stops with the usual "
            "'restart the query (same checkpoint)' error, and the restart goes on without "
            "reading `t` again; the envelope goes on by itself). This relies on the tools' "
            "cut-over guarantee that the shadow table holds exactly `t`'s rows at the swap: "
            "gh-ost applies every change of `t` to `_t_gho` and renames both under a lock on "
            "`t`; pt-online-schema-change's triggers write each change of `t` to `_t_new` in "
            "the same transaction, and the RENAME is atomic. A swap by another tool or by "
            "hand that does not keep that guarantee loses or keeps stale rows. Any other "
            "rename of such names (two RENAME statements, a shadow named otherwise, a table "
            "whose snapshot is not done) is a table leaving and joining as with `false`, "
            "and the driver logs why. The tools' tables `_<t>_gho`, `_<t>_ghc`, `_<t>_del`, "
            "`_<t>_new`, `_<t>_old` are never captured while this is `true`, whatever "
            "`table-name` matches (their rows are copies of `t`'s). `false`: a swap is `t` "
            "renamed away (a `t` row) and the shadow renamed in, snapshotted again in full"
        ),
    ),
    Option(
        "metadata.list",
        kind="names, comma-separated",
        field="metadata",
        parse=values.names_among(METADATA_NAMES),
        default=(),
        shown_default="unset",
        summary=(
            "comma-separated metadata columns appended to a single table's typed output, in "
            "this order: database_name, table_name, op_ts, binlog_file, binlog_pos, gtid, "
            "server_id, row_index, row_key (the envelope output always has all)"
        ),
        manual=(
            "comma-separated metadata columns for a single table's typed output, added after "
            "`_ts_ms` in the order listed: `database_name`, `table_name`, `op_ts`, "
            "`binlog_file`, `binlog_pos`, `gtid`, `server_id`, `row_index`, `row_key` (see "
            "[Output](usage.md#output)). An "
            "unknown name is refused with the valid ones; a name that is also a column of the"
            " table is refused. The envelope output always has all of them"
        ),
    ),
)
