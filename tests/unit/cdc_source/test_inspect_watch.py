"""``cdc-mysql inspect CHECKPOINT --watch``: the live view's figures and frames, on fake
checkpoints laid out as Spark 4.3 writes them (see test_inspect.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc_source import inspect
from cdc_source.inspect import watch
from cdc_source.inspect.records import BatchRecord
from cdc_source.offsets import BinlogPosition
from tests.support.spark_checkpoints import QUERY_ID, SNAPSHOT_RUN, cdc_offset, write_checkpoint

TS = 1795346227398  # the ts of every offset cdc_offset writes


def _records(committed: list[bool], first: int = 0) -> list[BatchRecord]:
    return [
        BatchRecord(batch_id=first + i, committed=done, phase="stream", offset_bytes=100)
        for i, done in enumerate(committed)
    ]


def _report(ck: Path, rows_below: int | None = None, table: str = "shop.orders", **server):
    """The report of ``ck``; with ``rows_below``, as if the server had been asked."""
    report = inspect.build_report(inspect.read_checkpoint(str(ck)))
    if rows_below is None and not server:
        return report
    tables = ()
    if rows_below is not None:
        tables = (inspect.TableProgressRow(table, "in progress", rows_below, 800),)
    fields = {"address": "cdc@db:3306", "head": BinlogPosition("binlog.000001", 537991)}
    fields.update(lag_bytes=600, tables=tables, tables_listed=True)
    fields.update(captured=("shop.customers", "shop.orders"))
    fields.update(server)
    return inspect.build_report(report.checkpoint, None, inspect.ServerReport(**fields))


# -- the pure figures -------------------------------------------------------------------


def test_in_flight_batches_are_those_logged_after_the_last_commit_without_one() -> None:
    assert watch.in_flight(_records([True, True, False])) == (2,)
    assert watch.in_flight(_records([True, True, True])) == ()
    assert watch.in_flight(_records([False, False])) == (0, 1)
    # batch 3 lost its commits/ file to Spark's purge; it is not in flight
    assert watch.in_flight(_records([False, True, True, False, False], first=3)) == (6, 7)


def test_lag_seconds_is_now_minus_the_ts_of_the_planned_end_position() -> None:
    position = BinlogPosition("binlog.000001", 4, ts=1_000_000)
    assert watch.lag_seconds(position, now_ms=1_002_500) == 2.5
    assert watch.lag_seconds(position, now_ms=999_000) == 0.0  # a driver clock ahead
    assert watch.lag_seconds(BinlogPosition("binlog.000001", 4), now_ms=5) is None  # no ts
    assert watch.lag_seconds(None, now_ms=5) is None


def test_per_second_needs_both_values_and_time_between_them() -> None:
    assert watch.per_second(10, 40, 2.0) == 15.0
    assert watch.per_second(None, 40, 2.0) is None
    assert watch.per_second(10, 40, 0.0) is None


def test_rates_between_two_frames_are_batches_committed_and_rows_below_the_frontier(
    tmp_path: Path,
) -> None:
    before = write_checkpoint(tmp_path / "a", SNAPSHOT_RUN, committed=1)
    after = write_checkpoint(tmp_path / "b", SNAPSHOT_RUN, committed=3)
    first = watch.make_frame(_report(before, 100), 10_000, 1, 2.0, None)
    assert first.rates.seconds is None and first.rates.rows_per_s is None
    second = watch.make_frame(_report(after, 598), 14_000, 2, 2.0, first)
    assert second.rates.seconds == 4.0
    assert second.rates.batches_per_s == 0.5  # committed 0 -> 2 in 4 s
    assert second.rates.rows_per_s == 124.5  # 100 -> 598 rows at or below the frontier
    assert second.rates.rows_table == "shop.orders" and second.rates.rows_note is None


def test_rows_rate_is_not_guessed_when_the_frontier_moves_to_another_table(
    tmp_path: Path,
) -> None:
    at_customers = write_checkpoint(tmp_path / "a", SNAPSHOT_RUN[:1], committed=1)
    at_orders = write_checkpoint(tmp_path / "b", SNAPSHOT_RUN, committed=3)
    first = watch.make_frame(_report(at_customers, 200, "shop.customers"), 0, 1, 2.0, None)
    second = watch.make_frame(_report(at_orders, 50), 2_000, 2, 2.0, first)
    assert second.rates.rows_per_s is None
    assert second.rates.rows_note == "the frontier moved from shop.customers to shop.orders"
    assert second.rates.batches_per_s == 1.0


def test_rows_rate_needs_the_server_and_a_snapshot(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=3)
    first = watch.make_frame(_report(ck), 0, 1, 2.0, None)
    second = watch.make_frame(_report(ck), 2_000, 2, 2.0, first)
    assert second.rates.rows_note == "needs the server (connection options)"
    streaming = write_checkpoint(tmp_path / "s", [[cdc_offset(None)]], committed=1)
    first = watch.make_frame(_report(streaming, lag_bytes=0), 0, 1, 2.0, None)
    second = watch.make_frame(_report(streaming, lag_bytes=0), 2_000, 2, 2.0, first)
    assert second.rates.rows_note == "no snapshot in progress"


# -- frames -----------------------------------------------------------------------------


def test_a_frame_in_the_middle_of_the_snapshot_shows_every_figure(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    first = watch.make_frame(_report(ck, 400), TS + 1_000, 1, 2.0, None)
    frame = watch.make_frame(_report(ck, 498), TS + 3_000, 2, 2.0, first)
    assert watch.frame_text(frame).splitlines() == [
        f"cdc-mysql inspect {ck} (query {QUERY_ID})",
        "refresh 2 at 2026-11-22 11:17:10 UTC, every 2 s",
        "  phase           snapshot",
        '  frontier        shop.orders after ["us",99], 498 rows at or below it of ~800 '
        "(server count)",
        "  tables          1 done, 1 pending",
        "  batches         latest 2, last committed 1, in flight 2 (in offsets/, no commits/ file)",
        "  batches/s       0.0 batches committed per second over the last 2.0 s "
        "(checkpoint commits/)",
        "  snapshot rows/s 49.0 rows of shop.orders at or below the frontier, over the last "
        "2.0 s (server count)",
        "  binlog lag      600 bytes behind the head binlog.000001:537991",
        "  lag seconds     3.0 s since the driver read the head that batch 2 ends at "
        "(offset ts; grows while nothing is written)",
        "  offset bytes    latest 153, largest 153 (batch 1), target under 1024",
        "  server          cdc@db:3306",
    ]


def test_a_frame_without_the_server_says_what_it_cannot_know(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", [[cdc_offset(None)]], committed=1)
    text = watch.frame_text(watch.make_frame(_report(ck), TS, 1, 2.0, None))
    assert "phase           stream" in text
    assert "frontier        none: no snapshot in the log" in text
    assert "binlog lag      unknown without the server" in text
    assert "only tables named in the offsets are known" in text
    assert "batches/s       - (rates from the second refresh on)" in text


def test_lag_seconds_of_a_caught_up_query_say_nothing_is_behind(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", [[cdc_offset(None)]], committed=1)
    frame = watch.make_frame(_report(ck, lag_bytes=0), TS + 60_000, 1, 2.0, None)
    assert "60.0 s since the driver read the head" in watch.frame_text(frame)
    assert "nothing is behind: 0 bytes to read" in watch.frame_text(frame)


def test_an_offset_over_the_target_is_flagged_in_the_frame(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", [[cdc_offset("db.t", ["k" * 1100])]], committed=1)
    text = watch.frame_text(watch.make_frame(_report(ck), TS, 1, 2.0, None))
    assert "target under 1024 - OVER THE TARGET" in text


def test_the_json_frame_names_what_each_figure_is_of(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    first = watch.make_frame(_report(ck, 400), TS + 1_000, 1, 2.0, None)
    obj = watch.frame_json(watch.make_frame(_report(ck, 498), TS + 3_000, 2, 2.0, first))
    assert obj["phase"] == "snapshot"
    assert obj["frontier"] == {"table": "shop.orders", "after": ["us", 99]}
    assert obj["frontier_rows"] == 498
    assert (obj["latest_batch"], obj["last_committed"], obj["in_flight"]) == (2, 1, [2])
    assert obj["rates"] == {
        "seconds": 2.0,
        "batches_committed_per_s": 0.0,
        "snapshot_rows_per_s": 49.0,
        "snapshot_rows_of": "shop.orders",
        "snapshot_rows_note": None,
    }
    assert obj["lag"]["bytes"] == 600 and obj["lag"]["seconds"] == 3.0
    assert obj["lag"]["seconds_batch"] == 2 and "ts" in obj["lag"]["seconds_is"]
    assert obj["offset_bytes"] == {
        "latest": 153,
        "largest": 153,
        "largest_batch": 1,
        "target": 1024,
    }
    assert obj["server"] == {"address": "cdc@db:3306", "error": None}


# -- the loop ---------------------------------------------------------------------------


class Screen:
    def __init__(self) -> None:
        self.writes: list[str] = []
        self.sleeps: list[float] = []

    def write(self, text: str) -> None:
        self.writes.append(text)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def test_on_a_terminal_each_frame_clears_the_screen_and_count_stops_it(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    screen = Screen()
    code = watch.run(
        lambda: _report(ck),
        screen.write,
        interval=0.5,
        count=3,
        terminal=True,
        sleep=screen.sleep,
        clock=lambda: TS / 1000,
    )
    assert code == 0
    assert len(screen.writes) == 3 and screen.sleeps == [0.5, 0.5]  # no sleep after the last
    assert all(w.startswith(watch.CLEAR_SCREEN + "cdc-mysql inspect ") for w in screen.writes)


def test_ctrl_c_ends_the_watch_quietly(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    screen = Screen()

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    assert watch.run(lambda: _report(ck), screen.write, sleep=interrupted) == 0
    assert len(screen.writes) == 1


def test_a_checkpoint_unreadable_on_a_later_refresh_is_shown_and_watched_on(
    tmp_path: Path,
) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    results: list = [_report(ck), inspect.CheckpointError("gone"), _report(ck)]

    def read():
        result = results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    screen = Screen()
    assert watch.run(read, screen.write, count=3, sleep=screen.sleep, clock=lambda: 0) == 0
    assert screen.writes[1].endswith(": cdc-mysql inspect: gone\n")
    assert screen.writes[2].startswith(watch.FRAME_SEPARATOR + "\ncdc-mysql inspect")


def test_piped_frames_are_separated_by_a_line_without_terminal_codes(
    tmp_path: Path, capsys
) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    assert inspect.main([str(ck), "--watch", "0.01", "--count", "2"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    frames = out.split(watch.FRAME_SEPARATOR + "\n")
    assert [f.splitlines()[1].split(" at ")[0] for f in frames] == ["refresh 1", "refresh 2"]
    assert all("phase           snapshot" in f for f in frames)


def test_watch_json_prints_one_object_a_line_per_refresh(tmp_path: Path, capsys) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    assert inspect.main([str(ck), "--watch", "--interval", "0.01", "--count", "2", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["refresh"] for line in lines] == [1, 2]


def test_watch_of_a_missing_checkpoint_exits_as_the_report_does(tmp_path: Path, capsys) -> None:
    assert inspect.main([str(tmp_path / "nowhere"), "--watch", "--count", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no checkpoint at" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--count", "2"], "--interval and --count go with --watch"),
        (["--interval", "1"], "--interval and --count go with --watch"),
        (["--watch", "--last", "3"], "the --watch view has no batch list"),
        (["--watch", "0"], "the interval must be more than 0 s"),
        (["--watch", "--count", "0"], "must be 1 or more"),
    ],
)
def test_watch_flags_are_checked(tmp_path: Path, capsys, flags, message) -> None:
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    with pytest.raises(SystemExit):
        inspect.main([str(ck), *flags])
    assert message in capsys.readouterr().err


def test_watch_never_prints_the_password(tmp_path: Path, capsys, monkeypatch) -> None:
    """A refused connection shows in every frame, without the password from the env."""
    ck = write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)
    monkeypatch.setenv(inspect.PASSWORD_ENV, "s3cr3t-env")
    flags = ["--hostname", "127.0.0.1", "--port", "1", "--username", "cdc"]
    for output in ([], ["--json"]):
        argv = [str(ck), "--watch", "0.01", "--count", "2", *flags, "--connect-timeout", "2"]
        assert inspect.main([*argv, *output]) == 1
        out, err = capsys.readouterr()
        assert "s3cr3t" not in out + err
        assert out.count("cannot connect to cdc@127.0.0.1:1") == 2
