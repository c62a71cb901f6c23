"""Column control (Debezium's names): which columns of the captured tables the output has
(``column.include.list``, ``column.exclude.list``) and which are masked
(``column.mask.hash.<algorithm>.with.salt.<salt>``, ``column.mask.with.<n>.chars``,
``column.truncate.to.<n>.chars``).

A :class:`ColumnPolicy` is read from the options on the driver and travels to the
executors inside the options: it decides by the column's ``db.table.column`` name, so a
column an ALTER adds while the query runs is excluded or masked by the same patterns as
the columns the query started with. Patterns are regular expressions, each matched whole
and without regard to case (MySQL compares column names that way; Debezium too)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdc_source.catalog import STRING_TYPES, ColumnSpec, TableSchema
from cdc_source.column_masks import HASH, MASK, TRUNCATE, Mask, hash_algorithm
from cdc_source.option_values import OptionError

INCLUDE = "column.include.list"
EXCLUDE = "column.exclude.list"
SECRET = "column.mask.hash.secret"
# Where a mask or a truncation applies: columns whose value is text (a hash applies to
# any column: its output is text whatever the column holds).
CHARACTER_TYPES = STRING_TYPES | {"enum", "set"}


def patterns(text: str, option: str) -> tuple[str, ...]:
    """A comma-separated list of regular expressions, each checked to compile."""
    found = tuple(p.strip() for p in text.split(",") if p.strip())
    if not found:
        raise OptionError(f"option '{option}' is set but names no regular expression")
    for pattern in found:
        try:
            re.compile(pattern)
        except re.error as err:
            raise OptionError(
                f"option '{option}': '{pattern}' is not a regular expression ({err})"
            ) from None
    return found


def _matches(pattern_list: tuple[str, ...], name: str) -> bool:
    return any(re.fullmatch(p, name, re.IGNORECASE) for p in pattern_list)


def _length(text: str, option: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise OptionError(
            f"option '{option}': the number of characters must be a whole number >= 1, got '{text}'"
        )
    return int(text)


def hash_mask(parameters: dict[str, str], secret: str | None = None) -> Mask:
    """The mask of a ``column.mask.hash.<algorithm>.with.salt.<salt>`` key's parameters
    (the salt kept as the key gives it, lower-cased: Spark lower-cases keys), or of a
    ``column.mask.hash.<algorithm>`` key's, whose salt is ``secret``, the value of
    ``column.mask.hash.secret``."""
    in_key = "salt" in parameters
    shown = f"column.mask.hash.{parameters['algorithm']}" + (".with.salt.<salt>" if in_key else "")
    if not in_key and not secret:
        raise OptionError(
            f"option '{shown}' hashes with the salt of option '{SECRET}', which is not set: "
            f"set '{SECRET}' to the salt (or give it in the key, "
            f"'{shown}.with.salt.<salt>')"
        )
    algorithm = hash_algorithm(parameters["algorithm"])
    if algorithm is None:
        raise OptionError(
            f"option '{shown}': no hash "
            f"algorithm '{parameters['algorithm']}'; use one of MD5, SHA-1, SHA-224, SHA-256, "
            "SHA-384, SHA-512, SHA3-256, SHA3-512, BLAKE2b"
        )
    salt = parameters["salt"] if in_key else secret
    return Mask(HASH, algorithm=algorithm, salt=salt, salt_in_key=in_key)


def chars_mask(kind: str, parameters: dict[str, str]) -> Mask:
    """The mask of a ``column.mask.with.<n>.chars`` (``kind`` MASK) or
    ``column.truncate.to.<n>.chars`` (TRUNCATE) key's parameters."""
    option = (
        f"column.mask.with.{parameters['n']}.chars"
        if kind == MASK
        else f"column.truncate.to.{parameters['n']}.chars"
    )
    return Mask(kind, length=_length(parameters["n"], option))


@dataclass(frozen=True)
class ColumnPolicy:
    """The column options' decisions. ``include`` and ``exclude`` (at most one set) are
    regex lists of ``db.table.column``; ``masks`` pairs each mask with its regex list."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    masks: tuple[tuple[Mask, tuple[str, ...]], ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.include or self.exclude or self.masks)

    def excluded(self, table: TableSchema, column: str) -> bool:
        """Whether ``column`` of ``table`` is left out of the output."""
        name = f"{table.database}.{table.table}.{column}"
        if self.include:
            return not _matches(self.include, name)
        return _matches(self.exclude, name)

    def excluded_names(self, table: TableSchema, names) -> frozenset[str]:
        """The names among ``names`` (columns of ``table``, as the catalog or a binlog
        event names them) that are left out of the output."""
        if not (self.include or self.exclude):
            return frozenset()
        return frozenset(name for name in names if self.excluded(table, name))

    def masked_names(self, table: TableSchema, names) -> frozenset[str]:
        """The names among ``names`` whose values are masked: a message never shows them."""
        if not self.masks:
            return frozenset()
        return frozenset(name for name in names if self.mask(table, name) is not None)

    def mask(self, table: TableSchema, column: str) -> Mask | None:
        """The mask of ``column`` of ``table`` (the first whose patterns match it)."""
        name = f"{table.database}.{table.table}.{column}"
        for mask, pattern_list in self.masks:
            if _matches(pattern_list, name):
                return mask
        return None

    def output_columns(self, table: TableSchema) -> tuple[ColumnSpec, ...]:
        """``table``'s columns the output has, in the table's order."""
        if not self.active:
            return table.columns
        return tuple(c for c in table.columns if not self.excluded(table, c.name))

    def check(self, tables: list[TableSchema] | tuple[TableSchema, ...]) -> None:
        """Refuses what the tables make wrong: a key column left out or masked (the
        source orders and matches a table's changes by its raw key), a column matched by
        two masks, a mask or truncation of a column that holds no text."""
        for table in tables:
            key = set(table.primary_key)
            for column in table.columns:
                name = f"{table.name}.{column.name}"
                if column.name in key and self.excluded(table, column.name):
                    option = INCLUDE if self.include else EXCLUDE
                    raise OptionError(
                        f"option '{option}' leaves out {name}, a key column of "
                        f"{table.name}: the source orders and matches the table's changes by "
                        "its key, so every key column stays in the output; "
                        + (
                            "add it to the list"
                            if self.include
                            else "narrow the pattern so it does not match it"
                        )
                    )
                if self.excluded(table, column.name):
                    continue
                matched = [m for m, p in self.masks if _matches(p, name)]
                if matched and column.name in key:
                    raise OptionError(
                        f"option '{matched[0].option}' masks {name}, a key column of "
                        f"{table.name}: the source orders and matches the table's changes by "
                        "its raw key, so a key column cannot be masked or hashed; narrow the "
                        "pattern so it does not match it"
                    )
                if len(matched) > 1:
                    raise OptionError(
                        f"options {' and '.join(repr(m.option) for m in matched)} both match "
                        f"{name}: a column takes one mask; narrow the patterns"
                    )
                if matched and matched[0].kind in (MASK, TRUNCATE):
                    if column.data_type not in CHARACTER_TYPES:
                        raise OptionError(
                            f"option '{matched[0].option}' matches {name}, a "
                            f"{column.column_type} column: masking and truncation apply to "
                            "text columns only (a hash applies to any column); narrow the "
                            "pattern so it does not match it, or hash the column"
                        )

    def unmatched(self, tables: list[TableSchema] | tuple[TableSchema, ...]) -> list[str]:
        """Each pattern that matches no column of ``tables``, with its option: a typo
        would otherwise pass unnoticed (the caller logs them; a pattern may well be meant
        for a column an ALTER adds later, so it is not an error)."""
        names = [f"{t.name}.{c.name}" for t in tables for c in t.columns]
        lists = [(INCLUDE, self.include), (EXCLUDE, self.exclude)] + [
            (mask.option, pattern_list) for mask, pattern_list in self.masks
        ]
        return [
            f"'{pattern}' of option '{option}'"
            for option, pattern_list in lists
            for pattern in pattern_list
            if not any(re.fullmatch(pattern, name, re.IGNORECASE) for name in names)
        ]


# No column option: every column, unmasked.
ALL_COLUMNS = ColumnPolicy()


def column_policy(
    given: list[tuple[str, dict[str, str], str]], secret: str | None = None
) -> ColumnPolicy:
    """The policy of the column options ``given``: (option key template, the key's
    parameters, the value) for each column option the user set; ``secret`` is the value
    of ``column.mask.hash.secret``."""
    include = exclude = ()
    masks: list[tuple[Mask, tuple[str, ...]]] = []
    for template, parameters, text in given:
        if template == INCLUDE:
            include = patterns(text, INCLUDE)
        elif template == EXCLUDE:
            exclude = patterns(text, EXCLUDE)
        elif "algorithm" in parameters:
            mask = hash_mask(parameters, secret)
            masks.append((mask, patterns(text, mask.option)))
        else:
            kind = MASK if template.startswith("column.mask.with") else TRUNCATE
            mask = chars_mask(kind, parameters)
            masks.append((mask, patterns(text, mask.option)))
    if include and exclude:
        raise OptionError(
            f"options '{INCLUDE}' and '{EXCLUDE}' are both set: set one of them (the columns "
            "to keep, or the columns to leave out)"
        )
    return ColumnPolicy(include=include, exclude=exclude, masks=tuple(masks))
