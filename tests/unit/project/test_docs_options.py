"""docs/options.md is generated from the options' declarations: it lists every option
the parser accepts, and is regenerated whenever a declaration changes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from cdc_source.option_table import OPTIONS
from cdc_source.options import OptionError, parse_options

ROOT = Path(__file__).resolve().parents[3]


def _generator():
    spec = importlib.util.spec_from_file_location("make_options", ROOT / "docs" / "make_options.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_options_page_is_in_sync_with_the_declarations():
    assert (ROOT / "docs" / "options.md").read_text() == _generator().render(), (
        "docs/options.md is out of date: run python docs/make_options.py"
    )


def test_every_declared_option_is_documented_and_accepted():
    page = (ROOT / "docs" / "options.md").read_text()
    required = {"hostname": "h", "username": "u", "database-name": "d", "table-name": "t"}
    for option in OPTIONS:
        assert f"`{option.key}`" in page
        try:
            parse_options({**required, option.key: "x"})
        except OptionError as err:  # a bad value: named, never an unknown option
            assert "unknown option" not in str(err)
            assert option.key in str(err) or "scan.startup.mode" in str(err)


def test_an_option_read_on_its_own_has_a_field_and_a_default():
    for option in OPTIONS:
        if option.parse is not None:
            assert option.field is not None, option.key
