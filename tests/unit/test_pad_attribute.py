"""The pad attribute of a key's collation (docs/design.md, 'Key order': compare keys the
way the server does): read from information_schema.COLLATIONS.PAD_ATTRIBUTE where the server
has that column (MySQL 8.0+, MariaDB 12.1+), guessed from the name otherwise.

Pure logic over recorded answers to the discovery's
``SELECT * FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN (...)``."""

from __future__ import annotations

import pytest

from cdc_source.catalog import ColumnSpec, pad_attributes, pad_space_by_name
from cdc_source.keys import weight_sql


def _description(*names: str) -> tuple:
    """A DB-API cursor description: only the names are read."""
    return tuple((name, 253, None, 256, 256, 0, True) for name in names)


# MySQL 8.0 (the same columns in 8.4): PAD_ATTRIBUTE is the seventh column. Rows as the
# server lists them (SHOW COLLATION / information_schema.COLLATIONS, utf8mb4 collations).
MYSQL80_DESCRIPTION = _description(
    "COLLATION_NAME",
    "CHARACTER_SET_NAME",
    "ID",
    "IS_DEFAULT",
    "IS_COMPILED",
    "SORTLEN",
    "PAD_ATTRIBUTE",
)
MYSQL80_ROWS = (
    ("utf8mb4_0900_ai_ci", "utf8mb4", 255, "Yes", "Yes", 0, "NO PAD"),
    ("utf8mb4_0900_bin", "utf8mb4", 309, "", "Yes", 1, "NO PAD"),
    ("utf8mb4_bin", "utf8mb4", 46, "", "Yes", 1, "PAD SPACE"),
    ("utf8mb4_general_ci", "utf8mb4", 45, "", "Yes", 1, "PAD SPACE"),
)

# MariaDB 10.11.19, recorded: no PAD_ATTRIBUTE column (it arrives in 12.1).
MARIADB1011_DESCRIPTION = _description(
    "COLLATION_NAME", "CHARACTER_SET_NAME", "ID", "IS_DEFAULT", "IS_COMPILED", "SORTLEN"
)
MARIADB1011_ROWS = (
    ("utf8mb4_general_ci", "utf8mb4", 45, "Yes", "Yes", 1),
    ("utf8mb4_nopad_bin", "utf8mb4", 1070, "", "Yes", 1),
    ("utf8mb4_unicode_nopad_ci", "utf8mb4", 1248, "", "Yes", 8),
)


def test_mysql_reports_the_pad_attribute_of_each_collation():
    assert pad_attributes(MYSQL80_DESCRIPTION, MYSQL80_ROWS) == {
        "utf8mb4_0900_ai_ci": True,
        "utf8mb4_0900_bin": True,
        "utf8mb4_bin": False,
        "utf8mb4_general_ci": False,
    }


def test_the_column_is_found_by_name_and_bytes_are_read_as_text():
    description = _description("pad_attribute", "ID", "collation_name")
    rows = ((b"NO PAD", 1024, b"utf8mb4_acme_ci"), (b"PAD SPACE", 1025, b"latin1_acme_ci"))
    assert pad_attributes(description, rows) == {"utf8mb4_acme_ci": True, "latin1_acme_ci": False}


def test_a_server_without_the_column_reports_nothing():
    assert pad_attributes(MARIADB1011_DESCRIPTION, MARIADB1011_ROWS) == {}
    assert pad_attributes(None, ()) == {}


def _key(collation: str, no_pad: bool | None) -> ColumnSpec:
    return ColumnSpec(
        "k", "varchar", "varchar(10)", False, char_length=10, collation=collation, no_pad=no_pad
    )


@pytest.mark.parametrize(
    ("collation", "pad_space"),
    [
        ("utf8mb4_0900_ai_ci", False),  # MySQL 8.0's default: NO PAD
        ("utf8mb4_0900_bin", False),
        ("utf8mb4_ja_0900_as_cs", False),
        ("utf8mb4_general_ci", True),
        ("utf8mb4_bin", True),
        ("utf8mb4_nopad_bin", False),  # MariaDB
        ("utf8mb4_unicode_nopad_ci", False),
        ("utf8mb4_uca1400_nopad_ai_ci", False),
        ("utf8mb4_uca1400_ai_ci", True),
        ("utf8mb4_acme_ci", True),  # a name that says nothing: taken as PAD SPACE
    ],
)
def test_the_name_rule_where_the_server_reports_nothing(collation, pad_space):
    assert pad_space_by_name(collation) is pad_space
    assert _key(collation, None).pad_space is pad_space


def test_the_reported_attribute_wins_over_the_name():
    """A custom collation whose name says nothing is what the server says it is."""
    reported = pad_attributes(
        MYSQL80_DESCRIPTION,
        MYSQL80_ROWS + (("utf8mb4_acme_ci", "utf8mb4", 1024, "", "", 0, "NO PAD"),),
    )
    assert _key("utf8mb4_acme_ci", reported["utf8mb4_acme_ci"]).pad_space is False
    assert _key("utf8mb4_0900_ai_ci", reported["utf8mb4_0900_ai_ci"]).pad_space is False
    assert _key("utf8mb4_general_ci", reported["utf8mb4_general_ci"]).pad_space is True
    assert _key("utf8mb4_nopad_like_name", False).pad_space is True


def test_the_weight_query_pads_only_pad_space_keys():
    """``AS CHAR(n)`` pads with spaces: right for PAD SPACE (``'b'`` = ``'b '``), wrong
    for NO PAD, where the two are different keys."""
    no_pad = weight_sql(_key("utf8mb4_acme_ci", True), "%s")
    pad = weight_sql(_key("utf8mb4_acme_ci", False), "%s")
    assert "AS CHAR" not in no_pad and "COLLATE utf8mb4_acme_ci" in no_pad
    assert pad.endswith("AS CHAR(10))")


def test_columns_built_positionally_leave_the_attribute_unknown():
    column = ColumnSpec("id", "int", "int(11)", False)
    assert column.no_pad is None
