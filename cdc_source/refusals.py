"""Refusals of stored values that the output cannot hold: the one error every road a
value takes (snapshot text, binlog images, per-value conversion) raises, so the same
stored value is refused the same way, naming its table, column and value."""

from __future__ import annotations

TINYINT1_OPTION = "treat-tinyint1-as-boolean.enabled"
MASKED_VALUE = "(not shown: the column is masked)"


class ValueRefusedError(ValueError):
    """A stored value that its column's Spark type cannot hold. It is refused, never
    changed: the task fails and nothing of its batch is emitted. ``table`` and ``where``
    (a binlog position) are filled in by the reader that knows them."""

    def __init__(
        self, column: str, value: str, why: str, *, table: str = "", where: str = ""
    ) -> None:
        self.column, self.value, self.why = column, value, why
        self.table, self.where = table, where
        named = f"{table}.{column}" if table else column
        at = f" ({where})" if where else ""
        super().__init__(f"column {named}: the value {value}{at} {why}")

    def in_table(self, table: str, where: str = "") -> ValueRefusedError:
        return ValueRefusedError(
            self.column, self.value, self.why, table=table, where=where or self.where
        )

    def hidden(self) -> ValueRefusedError:
        """This refusal without its value, for a masked column (column.mask.*,
        column.truncate.*): a masked value reaches no message."""
        return ValueRefusedError(
            self.column, MASKED_VALUE, self.why, table=self.table, where=self.where
        )


def masked_failure(column: str, err: Exception) -> ValueRefusedError:
    """A value of a masked column that could not be converted, told without the value
    (the conversion's own message may quote it)."""
    return ValueRefusedError(
        column, MASKED_VALUE, f"could not be converted to its column's type ({type(err).__name__})"
    )


def boolean_refusal(column: str, value: object) -> ValueRefusedError:
    return ValueRefusedError(
        column,
        str(value),
        f"is not 0 or 1, so the column cannot be a boolean; set "
        f"'{TINYINT1_OPTION}' to false to read TINYINT(1) columns as integers",
    )


def invalid_date_refusal(column: str, value: object) -> ValueRefusedError:
    return ValueRefusedError(
        column,
        f"'{value}'",
        "is neither a real date nor the zero date (the server keeps such dates under "
        "ALLOW_INVALID_DATES, or without NO_ZERO_IN_DATE), and no Spark date or timestamp "
        "holds it: correct the value, or exclude the table with 'table-name'",
    )
