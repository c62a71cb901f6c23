"""Preflight of the global settings that change what the binlog holds, against recorded
server answers (MySQL's binlog_row_value_options and binlog_transaction_compression cannot
be set on the MariaDB test server)."""

from __future__ import annotations

import pytest

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.preflight import PreflightError, check_binlog_contents


class RecordedServer:
    """Answers ``SELECT @@global.name`` from a dict; a missing name is an unknown variable."""

    def __init__(self, values: dict[str, object]) -> None:
        self.values = values

    def cursor(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql: str) -> None:
        import pymysql

        name = sql.rsplit(".", 1)[1]
        if name not in self.values:
            raise pymysql.err.OperationalError(1193, f"Unknown system variable '{name}'")
        self._value = self.values[name]

    def fetchone(self):
        return (self._value,)


def _table(json_column: bool) -> TableSchema:
    columns = [ColumnSpec("id", "int", "int(11)", False)]
    if json_column:
        columns.append(ColumnSpec("doc", "json", "json", True))
    return TableSchema("shop", "orders", tuple(columns), ("id",))


def test_partial_json_with_a_captured_json_column_is_refused_with_the_fix():
    server = RecordedServer({"binlog_row_value_options": "PARTIAL_JSON"})
    with pytest.raises(PreflightError, match="SET GLOBAL binlog_row_value_options=''"):
        check_binlog_contents(server, [_table(json_column=True)])


def test_partial_json_without_json_columns_is_only_stated():
    server = RecordedServer({"binlog_row_value_options": "PARTIAL_JSON"})
    notes = check_binlog_contents(server, [_table(json_column=False)])
    assert notes and "changes nothing captured" in notes[0]


def test_compression_settings_are_stated_as_decoded():
    server = RecordedServer({"binlog_transaction_compression": 1, "log_bin_compress": "ON"})
    notes = check_binlog_contents(server, [_table(json_column=False)])
    assert any("zlib" in n for n in notes) and any("zstd" in n for n in notes)


def test_a_server_without_these_settings_needs_no_note():
    assert check_binlog_contents(RecordedServer({}), [_table(json_column=True)]) == []
