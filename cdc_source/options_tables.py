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
