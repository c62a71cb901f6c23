"""docs/errors.md lists every error the package raises (generated from the code by
docs/make_errors.py): it must be regenerated when a ``raise`` is added or reworded, and
every raised class must have its cause and fix written down."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _generator():
    spec = importlib.util.spec_from_file_location("make_errors", ROOT / "docs" / "make_errors.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_error_table_is_in_sync_with_the_code():
    generated = _generator().render()
    assert (ROOT / "docs" / "errors.md").read_text() == generated, (
        "docs/errors.md is out of date: run python docs/make_errors.py"
    )


def test_the_table_holds_the_errors_users_meet():
    text = (ROOT / "docs" / "errors.md").read_text()
    for message in (
        "the checkpoint resumes at binlog file",
        "no table matches database-name",
        "binlog_row_value_options=PARTIAL_JSON",
        "option '…' must be a positive integer",
    ):
        assert message in text
