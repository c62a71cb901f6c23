"""scan.startup.mode: option validation, GTID sets in both syntaxes, the binary search over
binlog files' first event times (recorded values), and transaction boundaries on
hand-built event sequences."""

from __future__ import annotations

import math
import struct

import pytest

from cdc_source.binlog import constants as c
from cdc_source.binlog.events import Event, Format
from cdc_source.options import OptionError, StartupPoint, gtid_flavor, parse_options
from coordinator.startup import (
    FL_STANDALONE,
    Boundary,
    TransactionWalk,
    last_file_before,
    scan_to_time,
)
from tests.support.server_answers import FLAVOURS, load

BASE = {
    "hostname": "db.example.com",
    "username": "cdc",
    "password": "s3cret-Pa55",
    "database-name": "shop",
    "table-name": r"shop\.orders",
}
FILE = "scan.startup.specific-offset.file"
POS = "scan.startup.specific-offset.pos"
GTIDS = "scan.startup.specific-offset.gtid-set"
MILLIS = "scan.startup.timestamp-millis"


def parse(**extra: str):
    return parse_options({**BASE, **extra})


def error(**extra: str) -> str:
    with pytest.raises(OptionError) as raised:
        parse(**extra)
    assert BASE["password"] not in str(raised.value)
    return str(raised.value)


@pytest.mark.parametrize(
    "mode", ["initial", "latest-offset", "earliest-offset", "snapshot", "timestamp"]
)
def test_every_flink_mode_name_is_accepted(mode):
    extra = {MILLIS: "1700000000000"} if mode == "timestamp" else {}
    options = parse(**{"scan.startup.mode": mode, **extra})
    assert options.startup_mode == mode
    assert (options.startup is not None) == (mode == "timestamp")


def test_specific_offset_takes_file_and_position_or_a_gtid_set():
    options = parse(**{"scan.startup.mode": "specific-offset", FILE: "mysql-bin.000042", POS: "4"})
    assert options.startup == StartupPoint(file="mysql-bin.000042", pos=4)
    options = parse(**{"scan.startup.mode": "specific-offset", GTIDS: " 0-1-42, 1-2-7 "})
    assert options.startup == StartupPoint(gtid_set="0-1-42,1-2-7")
    assert "gtid-set" in options.startup.describe()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({}, ["needs", FILE, GTIDS, "none of them"]),
        ({FILE: "b.000001"}, ["needs", POS]),
        ({POS: "4"}, ["needs", FILE]),
        ({FILE: "b.000001", POS: "4", GTIDS: "0-1-2"}, ["not more than one"]),
        ({MILLIS: "5"}, [MILLIS, "does not use"]),
        ({FILE: "b.000001", POS: "3"}, [POS, ">= 4"]),
        ({FILE: "b.000001", POS: "x"}, [POS]),
        ({FILE: "no-number", POS: "4"}, [FILE, "SHOW BINARY LOGS"]),
        ({GTIDS: "x:1"}, [GTIDS, "MySQL", "MariaDB"]),
        ({GTIDS: "0-1"}, [GTIDS]),
        ({GTIDS: "0-1-5,0-2-6"}, [GTIDS, "twice"]),
    ],
)
def test_specific_offset_errors_name_what_to_set(extra, words):
    message = error(**{"scan.startup.mode": "specific-offset", **extra})
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("value", ["-1", "soon", "1.5", ""])
def test_timestamp_needs_milliseconds(value):
    message = error(**{"scan.startup.mode": "timestamp", MILLIS: value})
    assert MILLIS in message


@pytest.mark.parametrize("mode", ["initial", "snapshot", "latest-offset", "earliest-offset"])
@pytest.mark.parametrize("stray", [FILE, POS, GTIDS, MILLIS])
def test_a_start_option_of_another_mode_is_refused_not_ignored(mode, stray):
    message = error(**{"scan.startup.mode": mode, stray: "4"})
    assert stray in message and mode in message


def test_a_gtid_set_of_another_mode_is_refused():
    message = error(**{"scan.startup.mode": "timestamp", MILLIS: "1", GTIDS: "0-1-2"})
    assert GTIDS in message and "timestamp" in message


@pytest.mark.parametrize(
    ("text", "flavor"),
    [
        ("0-1-42", "mariadb"),
        ("0-1-42,1-2-7", "mariadb"),
        (" 0-1-42 , 10-3-1 ", "mariadb"),
        ("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", "mysql"),
        (
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:11:47-49,0aa5a5e2-71ca-11e1-9e33-c80aa9429562:1",
            "mysql",
        ),
        ("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:tag_a:1-3", "mysql"),
        ("3e11fa4771ca11e19e33c80aa9429562:7", "mysql"),
    ],
)
def test_gtid_sets_of_both_syntaxes(text, flavor):
    assert gtid_flavor(text) == flavor


@pytest.mark.parametrize(
    "text",
    [
        "",
        " , ",
        "0-1",
        "a-b-c",
        "3e11fa47-71ca-11e1-9e33-c80aa9429562",
        "uuid:1-5",
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-1",
    ],
)
def test_malformed_gtid_sets_are_refused(text):
    with pytest.raises(OptionError):
        gtid_flavor(text)


# First event times (ms) of binlog files as real servers wrote them
# (tests/data/server_answers/, python -m tests.support.record_server_answers): files
# opened by FLUSH BINARY LOGS in bursts, several in one second, others seconds apart.
RECORDED = {flavour: load(flavour)["binary logs"]["first_event_ms"] for flavour in FLAVOURS}


class Probes:
    def __init__(self, times):
        self.times = times
        self.calls: list[int] = []

    def __call__(self, index: int):
        self.calls.append(index)
        return self.times[index]


def _targets(times: list[int]) -> list[int]:
    """Each file's time, a millisecond before and after it, and the far ends."""
    return sorted({1, 2**62, *(t + d for t in times for d in (-1, 0, 1, 500))})


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_binary_search_finds_the_last_file_starting_before_the_time(flavour):
    times = RECORDED[flavour]
    assert len(set(times)) < len(times)  # some files share their first second
    for target in _targets(times):
        probes = Probes(times)
        found = last_file_before(len(times), probes, target)
        assert found == max((i for i, t in enumerate(times) if t < target), default=-1)
        assert len(probes.calls) <= 1 + math.ceil(math.log2(len(times)))
    # the oldest file starts at the time: earlier changes may be purged
    assert last_file_before(len(times), Probes(times), times[0]) == -1
    # a time just after a second several files opened in: the last of them
    shared = next(t for t in times if times.count(t) > 1)
    last = len(times) - 1 - times[::-1].index(shared)
    assert last_file_before(len(times), Probes(times), shared + 1) == last


def test_binary_search_reads_log_n_of_many_files():
    times = [1_600_000_000_000 + 60_000 * i for i in range(10_000)]
    probes = Probes(times)
    assert last_file_before(len(times), probes, times[6789] + 1) == 6789
    assert len(probes.calls) <= 15


def test_binary_search_treats_a_file_without_events_as_later():
    probes = Probes([1000, 2000, None])
    assert last_file_before(3, probes, 5000) == 1
    assert last_file_before(0, Probes([]), 5000) == -1


# -- transaction boundaries on hand-built event sequences ---------------------------------


def ev(type_: int, end: int, ts: int = 100, body: bytes = b"", file: str = "b.000001", start=None):
    return Event(type_, ts, 0, file, end, body, end - 10 if start is None else start, 1)


def query(text: str, end: int, ts: int = 100) -> Event:
    # thread id, exec time, schema length 0, error code, status vars length 0; schema NUL
    body = struct.pack("<IIBHH", 1, 0, 0, 0, 0) + b"\0" + text.encode()
    return ev(c.QUERY, end, ts, body)


def maria_gtid(seq: int, end: int, flags: int = 0, ts: int = 100) -> Event:
    return ev(c.MARIADB_GTID, end, ts, struct.pack("<QIB", seq, 0, flags))


def boundaries(events, flavor="mariadb") -> list[int]:
    walk = TransactionWalk(flavor, lambda: Format())
    found = []
    for event in events:
        if walk.boundary_before(event):
            found.append(event.start_pos)
        walk.feed(event)
    return found


def test_mariadb_dml_ddl_and_header_boundaries():
    events = [
        ev(c.MARIADB_GTID_LIST, 300, body=b"\0\0\0\0"),
        ev(c.BINLOG_CHECKPOINT, 350, body=b"\x04\0\0\0" + b"b.0001"),
        maria_gtid(1, 400),
        ev(c.TABLE_MAP, 450),
        ev(c.WRITE_ROWS_V2, 500),
        ev(c.XID, 510),
        maria_gtid(2, 560, FL_STANDALONE),
        query("CREATE TABLE x (a INT)", 600),
        maria_gtid(3, 650),
        query("BEGIN", 660),
        ev(c.TABLE_MAP, 700),
        ev(c.WRITE_ROWS_V2, 750),
        query("COMMIT", 760),
    ]
    # positions before events (start = end - 10): the header's end (before the first GTID),
    # then before each transaction; never inside one, nor after the standalone GTID
    assert boundaries(events) == [390, 550, 640]


def test_mysql_transactions_ddl_and_xa_prepare():
    uuid = bytes.fromhex("3e11fa4771ca11e19e33c80aa9429562")
    numbers = iter(range(1, 100))
    gtid = lambda end: ev(c.GTID, end, body=b"\x01" + uuid + struct.pack("<Q", next(numbers)))  # noqa: E731
    events = [
        ev(c.PREVIOUS_GTIDS, 300, body=b"\0" * 8),
        gtid(400),
        query("BEGIN", 410),
        ev(c.TABLE_MAP, 420),
        ev(c.WRITE_ROWS_V2, 430),
        ev(c.XID, 440),
        gtid(450),
        query("ALTER TABLE t ADD c INT", 460),
        gtid(470),
        query("XA START X'01',X'',1", 480),
        ev(c.WRITE_ROWS_V2, 490),
        query("XA END X'01',X'',1", 500),
        ev(c.XA_PREPARE, 510),
        gtid(520),
        query("XA COMMIT X'01',X'',1", 530),
        gtid(540),
    ]
    assert boundaries(events, "mysql") == [390, 440, 460, 510, 530]
    walk = TransactionWalk("mysql", lambda: Format())
    states = {}
    for event in events:
        if walk.boundary_before(event):
            states[event.start_pos] = walk.here(event).gtids
        walk.feed(event)
    # the exact GTID state at each boundary: the transactions before it
    source = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert states == {
        390: "",
        440: f"{source}:1",
        460: f"{source}:1-2",
        510: f"{source}:1-3",
        530: f"{source}:1-4",
    }


def test_scan_to_time_stops_before_the_first_transaction_at_or_after_it():
    walked = [
        (ev(c.MARIADB_GTID_LIST, 300, ts=90), False, Boundary("b.000001", 290, "", 0)),
        (maria_gtid(1, 400, ts=99), True, Boundary("b.000001", 390, "0-1-0", 90_000)),
        (maria_gtid(2, 500, ts=100), True, Boundary("b.000001", 490, "0-1-1", 99_000)),
        (None, True, Boundary("b.000001", 600, "0-1-2", 100_000)),
    ]
    found = scan_to_time(walked, 99_500, gtids=True)
    assert (found.file, found.pos, found.gtids) == ("b.000001", 490, "0-1-1")
    # seconds compare as seconds * 1000 >= millis, so a 99 s event is not at or after 99.5 s
    found = scan_to_time(walked, 100_001, gtids=False)
    assert (found.pos, found.gtids) == (600, "")  # none yet: the end, where the next begins
