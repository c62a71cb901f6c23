"""A stream's rows-event headers, remembered: every event reads as if parsed whole."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import Event, Format
from cdc_source.binlog.rows_event import RowsEventHeaders, parse_rows_event
from tests.support import binlog_encoder as enc

TYPES = [c.WRITE_ROWS_V2, c.UPDATE_ROWS_V2, c.DELETE_ROWS_V2, c.WRITE_ROWS_V1]

events = st.builds(
    lambda event_type, table_id, width, flags, present, rows: Event(
        event_type,
        0,
        0,
        "binlog.000001",
        1_000,
        enc.rows_body(
            table_id,
            width,
            rows,
            event_type == c.UPDATE_ROWS_V2,
            event_type != c.WRITE_ROWS_V1,
            present=None
            if present is None
            else present[: (width + 7) // 8].ljust((width + 7) // 8, b"\xff"),
            flags=flags,
        ),
    ),
    st.sampled_from(TYPES),
    st.sampled_from([77, 78]),
    st.sampled_from([3, 9]),
    st.sampled_from([0x0000, 0x0001]),
    st.one_of(st.none(), st.binary(min_size=2, max_size=2)),
    st.binary(max_size=12),
)


def _outcome(parse, event: Event, columns: int) -> object:
    try:
        return asdict(parse(event, Format(), columns))
    except Exception as err:  # the same refusal, by type and message
        return (type(err), str(err))


@settings(max_examples=200, deadline=None)
@given(stream=st.lists(st.tuples(events, st.sampled_from([3, 9])), max_size=30))
def test_every_event_of_a_stream_reads_as_if_its_header_were_parsed_whole(stream):
    headers = RowsEventHeaders()
    for event, columns in stream:
        assert _outcome(headers.parse, event, columns) == _outcome(parse_rows_event, event, columns)


def test_an_event_after_a_refused_one_is_still_checked():
    """A header that was refused is never remembered as accepted."""
    headers = RowsEventHeaders()
    good = Event(c.WRITE_ROWS_V2, 0, 0, "b.1", 10, enc.rows_body(77, 3, b"", False, True))
    partial = Event(
        c.WRITE_ROWS_V2, 0, 0, "b.1", 20, enc.rows_body(77, 3, b"", False, True, b"\x03")
    )
    headers.parse(good, Format(), 3)
    for _ in range(2):
        with pytest.raises(Exception, match="lacks columns"):
            headers.parse(partial, Format(), 3)
