"""Preflight of the global settings that change what the binlog holds, against the
answers a real MySQL 9.7 and MariaDB 10.11 gave with those settings
(``tests/data/server_answers/``, ``python -m tests.support.record_server_answers``)."""

from __future__ import annotations

import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.preflight import PreflightError, check_binlog_contents
from tests.support.server_answers import FLAVOURS, RecordedServer


def _table(json_column: bool) -> TableSchema:
    columns = [ColumnSpec("id", "int", "int(11)", False)]
    if json_column:
        columns.append(ColumnSpec("doc", "json", "json", True))
    return TableSchema("shop", "orders", tuple(columns), ("id",))


def test_partial_json_with_a_captured_json_column_is_refused_with_the_fix():
    server = RecordedServer("mysql-9.7", "binlog_row_value_options=PARTIAL_JSON")
    with pytest.raises(PreflightError, match="SET GLOBAL binlog_row_value_options=''"):
        check_binlog_contents(server, [_table(json_column=True)])


def test_partial_json_without_json_columns_is_only_stated():
    server = RecordedServer("mysql-9.7", "binlog_row_value_options=PARTIAL_JSON")
    notes = check_binlog_contents(server, [_table(json_column=False)])
    assert notes and "changes nothing captured" in notes[0]


@pytest.mark.parametrize(
    ("flavour", "setting", "says"),
    [
        ("mysql-9.7", "binlog_transaction_compression=ON", "zstd"),
        ("mariadb-10.11", "log_bin_compress=ON", "zlib"),
    ],
)
def test_compression_settings_are_stated_as_decoded(flavour, setting, says):
    notes = check_binlog_contents(RecordedServer(flavour, setting), [_table(json_column=False)])
    assert len(notes) == 1 and says in notes[0]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_server_as_started_needs_no_note(flavour):
    assert check_binlog_contents(RecordedServer(flavour), [_table(json_column=True)]) == []
