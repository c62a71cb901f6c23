"""One text per JSON document, whether it arrives as the server's text (snapshot) or as
MySQL's binary document (binlog): numbers keep their value, doubles and decimals alike."""

from __future__ import annotations

import json
import math
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from cdc_source.types import canonical_json, parse_json


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_double_printed_by_the_server_reads_back_as_the_binlogs_double(value):
    """The server prints a JSON double in its shortest form, as Python does: parsed as a
    Decimal it gives the same text as the binary document's double."""
    printed = json.dumps(value)
    assert canonical_json(parse_json(printed)) == canonical_json(value)


def test_a_decimal_keeps_every_digit_a_double_would_lose():
    text = "12345678901234567890.123456789"
    assert canonical_json(parse_json(text)) == text
    assert canonical_json(Decimal(text)) == text  # the binlog's opaque DECIMAL


def test_a_decimal_that_a_double_holds_exactly_is_written_as_the_double():
    assert canonical_json(Decimal("1.50")) == canonical_json(parse_json("1.5")) == "1.5"
    assert canonical_json(Decimal("-0.0")) == "-0.0"


def test_documents_are_compact_with_sorted_keys_and_unescaped_text():
    document = {"b": [1, 2.5, None, True], "a": {"é": "\n🙂"}, "": []}
    assert canonical_json(document) == '{"":[],"a":{"é":"\\n🙂"},"b":[1,2.5,null,true]}'
    assert math.isclose(json.loads(canonical_json(document))["b"][1], 2.5)
