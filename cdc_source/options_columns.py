"""The column options (docs/options.md), Debezium's: which columns of the captured tables
the output has, and which are masked before they leave the executor. Read together into a
:class:`cdc_source.column_policy.ColumnPolicy`; the mask keys carry their parameters."""

from __future__ import annotations

from cdc_source.option_spec import Option

_PATTERNS = "regexes, comma-separated"

COLUMNS_OPTIONS: tuple[Option, ...] = (
    Option(
        "column.include.list",
        kind=_PATTERNS,
        shown_default="unset",
        summary=(
            "comma-separated regular expressions of 'db.table.column' (full match, any case):"
            " the columns the output has; not with column.exclude.list"
        ),
        manual=(
            "comma-separated regular expressions matched against `db.table.column` (full "
            "match, case-insensitive), e.g. `shop\\.orders\\.id, shop\\.orders\\.total`: "
            "only the columns that match are read and emitted. Every key column must match "
            "(the source orders and matches changes by the key): one left out is refused. "
            "A pattern that matches no column is logged as a warning, not refused (it may "
            "be meant for a column added later). Not together with `column.exclude.list`"
        ),
    ),
    Option(
        "column.exclude.list",
        kind=_PATTERNS,
        shown_default="unset",
        summary=(
            "comma-separated regular expressions of 'db.table.column' (full match, any case):"
            " the columns left out; not with column.include.list"
        ),
        manual=(
            "comma-separated regular expressions matched against `db.table.column` (full "
            "match, case-insensitive), e.g. `shop\\.customers\\.ssn`: the columns "
            "that match are not read by the snapshot, not decoded from the binlog and not in "
            "the output (typed columns or envelope images), including a column an ALTER adds "
            "while the query runs. A key column cannot be left out (refused). A pattern that "
            "matches no column is logged as a warning. Not together with "
            "`column.include.list`"
        ),
    ),
    Option(
        "column.mask.hash.<algorithm>.with.salt.<salt>",
        kind=_PATTERNS,
        shown_default="unset",
        parameters=r"column\.mask\.hash\.(?P<algorithm>[^.]+)\.with\.salt\.(?P<salt>.+)",
        summary=(
            "comma-separated regular expressions of 'db.table.column': those columns' values "
            "are replaced by the lower-case hex hash of the salt followed by the value's text"
        ),
        manual=(
            "Debezium's option, e.g. `column.mask.hash.SHA-256.with.salt.CzQMA0cB5K` = "
            "`shop\\.customers\\.email`: each non-NULL value of a matching column is "
            "replaced by the lower-case hex digest of the salt's UTF-8 followed by the "
            "value's text (a string's UTF-8, a binary value's bytes, any other value as the "
            "envelope's JSON writes it), computed on the executor; the column becomes a "
            "string. Algorithms: MD5, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512, SHA3-*, "
            "BLAKE2b/BLAKE2s. **Spark lower-cases option keys, so the salt is used "
            "lower-cased**. The source never logs the salt, but Spark shows option keys in "
            "the query's plan: `column.mask.hash.<algorithm>` with `column.mask.hash.secret`"
            " keeps it out. A key column cannot be hashed (refused)"
        ),
    ),
    Option(
        "column.mask.hash.<algorithm>",
        kind=_PATTERNS,
        shown_default="unset",
        parameters=r"column\.mask\.hash\.(?!secret$)(?P<algorithm>[^.]+)",
        summary=(
            "comma-separated regular expressions of 'db.table.column': those columns are "
            "hashed as by column.mask.hash.<algorithm>.with.salt.<salt>, with the salt of "
            "column.mask.hash.secret"
        ),
        manual=(
            "the form of `column.mask.hash.<algorithm>.with.salt.<salt>` that keeps the salt "
            "out of the key: the salt is the value of `column.mask.hash.secret`, e.g. "
            "`column.mask.hash.SHA-256` = `shop\\.customers\\.email`. Spark shows every "
            "option's key in the query's plan (`explain()`, the UI's SQL tab) and hides the "
            "value of an option whose key contains `secret` (`spark.redaction.regex`): with "
            "this form the salt is in no plan, and its case is kept"
        ),
    ),
    Option(
        "column.mask.hash.secret",
        kind="text (a secret)",
        shown_default="unset",
        summary="the salt of the column.mask.hash.<algorithm> options (never logged)",
        manual=(
            "the salt of the `column.mask.hash.<algorithm>` options, as given (its case "
            "kept); never logged, and redacted from Spark's plans by Spark's default "
            "`spark.redaction.regex`"
        ),
    ),
    Option(
        "column.mask.with.<n>.chars",
        kind=_PATTERNS,
        shown_default="unset",
        parameters=r"column\.mask\.with\.(?P<n>[^.]+)\.chars",
        summary=(
            "comma-separated regular expressions of 'db.table.column': those text columns' "
            "values are replaced by n '*'"
        ),
        manual=(
            "Debezium's option, e.g. `column.mask.with.8.chars` = `shop\\.customers\\.phone`:"
            " each non-NULL value of a matching text column (CHAR, VARCHAR, TEXT, ENUM, SET)"
            " becomes n `*` characters (n >= 1), on the executor. A pattern that matches a "
            "column of another type, or a key column, is refused"
        ),
    ),
    Option(
        "column.truncate.to.<n>.chars",
        kind=_PATTERNS,
        shown_default="unset",
        parameters=r"column\.truncate\.to\.(?P<n>[^.]+)\.chars",
        summary=(
            "comma-separated regular expressions of 'db.table.column': those text columns' "
            "values are cut to their first n characters"
        ),
        manual=(
            "Debezium's option, e.g. `column.truncate.to.20.chars` = `shop\\.orders\\.note`:"
            " each value of a matching text column keeps its first n characters (n >= 1; "
            "characters, not bytes), on the executor. A pattern that matches a column of "
            "another type, or a key column, is refused"
        ),
    ),
)
