"""The pad attribute of a key's collation (docs/design.md, 'Key order': compare keys the
way the server does): read from information_schema.COLLATIONS.PAD_ATTRIBUTE where the server
has that column (MySQL 8.0+, MariaDB 12.1+), guessed from the name otherwise.

Pure logic over the answers a real MySQL 9.7 and MariaDB 10.11 gave to the discovery's
``SELECT * FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN (...)``
(``tests/data/server_answers/``, ``python -m tests.support.record_server_answers``)."""

from __future__ import annotations

import pytest

from cdc_source.catalog import ColumnSpec, pad_attributes, pad_space_by_name
from cdc_source.keys import weight_sql
from tests.support.server_answers import (
    ALL_PAD_ATTRIBUTES,
    COLLATIONS_DISCOVERY,
    PAD_COLLATIONS,
    RecordedServer,
)

# The discovery's query as the recorded servers answered it (MySQL 9.7 has the column as
# the seventh, as 8.0 does; MariaDB 10.11 has none: it arrives in 12.1), and MySQL's
# attribute of every collation it has.
NAMES = PAD_COLLATIONS
DISCOVERY = COLLATIONS_DISCOVERY
ALL_MYSQL = ALL_PAD_ATTRIBUTES


def _answer(flavour: str, query: str = DISCOVERY) -> tuple[tuple, list[tuple]]:
    """(cursor description, rows) as the recorded server gave them."""
    server = RecordedServer(flavour)
    server.execute(query)
    return server.description, server.fetchall()


def test_mysql_reports_the_pad_attribute_of_each_collation():
    description, rows = _answer("mysql-9.7")
    assert [d[0] for d in description].index("PAD_ATTRIBUTE") == 6
    assert pad_attributes(description, rows) == {
        "utf8mb4_0900_ai_ci": True,
        "utf8mb4_0900_bin": True,
        "utf8mb4_bin": False,
        "utf8mb4_general_ci": False,
    }


def test_the_column_is_found_by_name_and_bytes_are_read_as_text():
    """MySQL's answer with the names in lower case and the values as bytes (as a client
    that does not decode hands them over), the columns in another order."""
    description, rows = _answer("mysql-9.7")
    names = [d[0].lower() for d in description]
    order = [6, 2, 0]
    moved = tuple((names[i], 253, None, 256, 256, 0, True) for i in order)
    as_bytes = [
        tuple(v.encode() if isinstance(v, str) else v for v in (row[i] for i in order))
        for row in rows
    ]
    assert pad_attributes(moved, as_bytes) == pad_attributes(description, rows)


def test_a_server_without_the_column_reports_nothing():
    description, rows = _answer("mariadb-10.11")
    assert rows and "PAD_ATTRIBUTE" not in [d[0] for d in description]
    assert pad_attributes(description, rows) == {}
    assert pad_attributes(None, ()) == {}


def test_the_name_rule_agrees_with_mysql_except_for_binary():
    """Of MySQL 9.7's collations, only ``binary`` (NO PAD, a name that says nothing) is
    not what the name rule guesses."""
    _, rows = _answer("mysql-9.7", ALL_MYSQL)
    differ = [name for name, pad in rows if pad_space_by_name(name) != (pad == "PAD SPACE")]
    assert len(rows) > 250 and differ == ["binary"]


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
    """A collation whose name says nothing is what the server says it is: MySQL's
    ``binary`` is NO PAD, though the name rule would take it as PAD SPACE."""
    description, rows = _answer("mysql-9.7", ALL_MYSQL)
    reported = pad_attributes(description, rows)
    assert _key("binary", reported["binary"]).pad_space is False
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
