"""``cdc-mysql inspect`` on fake checkpoints laid out exactly as Spark 4.3 writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc_source import inspect
from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.inspect import render
from cdc_source.offsets import BinlogPosition, SnapshotCursor, SourceOffset
from tests.support.spark_checkpoints import (
    CRC,
    QUERY_ID,
    SNAPSHOT_RUN,
    cdc_offset,
    write_checkpoint,
)

HANDED_OVER_RUN = [
    *SNAPSHOT_RUN,
    [cdc_offset(None)],
    [cdc_offset(None, pos=537983)],
]


@pytest.fixture
def snapshot_ck(tmp_path: Path) -> Path:
    """Stopped in the middle of the snapshot, with the last batch planned, not committed."""
    return write_checkpoint(tmp_path / "ck", SNAPSHOT_RUN, committed=2)


@pytest.fixture
def handed_over_ck(tmp_path: Path) -> Path:
    return write_checkpoint(tmp_path / "ck", HANDED_OVER_RUN, committed=5)


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = inspect.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- text output ------------------------------------------------------------------------


def test_text_output_in_the_middle_of_the_snapshot(snapshot_ck: Path, capsys) -> None:
    code, out, err = run([str(snapshot_ck)], capsys)
    assert code == 0 and err == ""
    sizes = [len(entry[0].encode()) for entry in SNAPSHOT_RUN]
    assert sizes == [151, 153, 153]
    assert out.splitlines() == [
        f"checkpoint {snapshot_ck} (query {QUERY_ID})",
        "batch  committed  phase     table           frontier   binlog                offset bytes",
        "    0  yes        snapshot  shop.customers  [200]      binlog.000001:537391           151",
        '    1  yes        snapshot  shop.orders     ["eu",99]  binlog.000001:537391           153',
        '    2  no         snapshot  shop.orders     ["us",99]  binlog.000001:537391           153',
        "",
        "summary",
        "  batches         0..2 (3 in the log), last committed 1, uncommitted 2",
        '  current phase   snapshot of shop.orders after ["us",99] at binlog.000001:537391, '
        "batch 2 (not committed)",
        "  tables done     shop.customers",
        "  tables pending  shop.orders",
        "  tables known    only those named in the offsets (connect to list every captured table)",
        "  offset bytes    largest 153 (batch 1), total 457",
        f"  binlog decoder  {inspect.binlog_decoder()}",
    ]


def test_text_output_after_the_hand_over(handed_over_ck: Path, capsys) -> None:
    code, out, _ = run([str(handed_over_ck)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[5].split() == ["3", "yes", "stream", "-", "-", "binlog.000001:537391", "112"]
    assert lines[6].split() == ["4", "yes", "stream", "-", "-", "binlog.000001:537983", "112"]
    assert "  current phase   stream (hand-over done) at binlog.000001:537983, batch 4" in lines
    assert "  tables done     shop.customers, shop.orders" in lines
    assert "  tables pending  none" in lines
    assert "uncommitted none" in out


def test_last_limits_the_batch_list_not_the_summary(handed_over_ck: Path, capsys) -> None:
    _, out, _ = run([str(handed_over_ck), "--last", "2"], capsys)
    assert "(showing the last 2 of 5 batches)" in out
    assert "shop.customers  [200]" not in out
    assert "0..4 (5 in the log)" in out


def test_long_frontier_is_shortened_in_text_but_whole_in_json(tmp_path: Path, capsys) -> None:
    key = ["x" * 80, 7]
    ck = write_checkpoint(tmp_path / "ck", [[cdc_offset("db.t", key)]], committed=1)
    _, out, _ = run([str(ck)], capsys)
    assert '["' + "x" * 35 + "..." in out
    _, out, _ = run([str(ck), "--json"], capsys)
    assert json.loads(out)["batches"][0]["after"] == key


def test_large_offsets_are_flagged(tmp_path: Path, capsys) -> None:
    ck = write_checkpoint(tmp_path / "ck", [[cdc_offset("db.t", ["k" * 1100])]], committed=1)
    _, out, _ = run([str(ck)], capsys)
    assert "warning         an offset is over 1024 bytes" in out


# -- JSON output ------------------------------------------------------------------------


def test_json_output(snapshot_ck: Path, capsys) -> None:
    code, out, _ = run([str(snapshot_ck), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["checkpoint"] == str(snapshot_ck)
    assert doc["query_id"] == QUERY_ID
    assert doc["source"] == "0"
    assert [b["batch"] for b in doc["batches"]] == [0, 1, 2]
    assert [b["committed"] for b in doc["batches"]] == [True, True, False]
    assert doc["batches"][1] == {
        "batch": 1,
        "committed": True,
        "phase": "snapshot",
        "table": "shop.orders",
        "after": ["eu", 99],
        "binlog": {"file": "binlog.000001", "pos": 537391, "gtids": "", "ts": 1795346227398},
        "offset_bytes": 153,
        "timestamp_ms": 1795346227426,
    }
    summary = doc["summary"]
    assert summary["phase"] == "snapshot"
    assert summary["latest_batch"] == 2 and summary["last_committed"] == 1
    assert summary["uncommitted"] == [2]
    assert summary["snapshot"] == {"table": "shop.orders", "after": ["us", 99]}
    assert summary["tables_done"] == ["shop.customers"]
    assert summary["tables_pending"] == ["shop.orders"]
    assert summary["tables_from"] == "offsets"
    assert summary["offset_bytes"] == {"largest": 153, "largest_batch": 1, "total": 457}
    assert "server" not in doc


def test_json_after_the_hand_over(handed_over_ck: Path, capsys) -> None:
    _, out, _ = run([str(handed_over_ck), "--json"], capsys)
    doc = json.loads(out)
    assert [b["phase"] for b in doc["batches"]] == ["snapshot"] * 3 + ["stream"] * 2
    assert doc["batches"][4]["table"] is None and doc["batches"][4]["after"] is None
    assert doc["summary"]["phase"] == "stream"
    assert doc["summary"]["snapshot"] is None
    assert doc["summary"]["binlog"]["pos"] == 537983
    assert doc["summary"]["tables_pending"] == []


# -- Spark's layout ---------------------------------------------------------------------


def test_crc_and_temp_files_are_ignored(snapshot_ck: Path, capsys) -> None:
    # a half-written batch 3 and a checksum whose commit file is gone
    (snapshot_ck / "offsets" / ".3.0f9a2c1e-5b7d-4e1a-9c3b-2d8e6f7a1b2c.tmp").write_text("v1\n")
    (snapshot_ck / "offsets" / ".3.crc").write_bytes(CRC)
    (snapshot_ck / "commits" / ".2.crc").write_bytes(CRC)
    (snapshot_ck / "commits" / ".2.5c1e0a9b-1111-2222-3333-444455556666.tmp").write_text("v1")
    records = inspect.batch_records(inspect.read_checkpoint(str(snapshot_ck)))
    assert [(r.batch_id, r.committed) for r in records] == [(0, True), (1, True), (2, False)]


def test_batches_sort_numerically_and_may_start_after_zero(tmp_path: Path) -> None:
    """Spark purges old batches (minBatchesToRetain), so the log can start anywhere."""
    ck = write_checkpoint(tmp_path / "ck", [[cdc_offset("db.t", [i])] for i in range(12)], 12)
    for batch in range(3):
        (ck / "offsets" / str(batch)).unlink()
        (ck / "commits" / str(batch)).unlink()
    records = inspect.batch_records(inspect.read_checkpoint(str(ck)))
    assert [r.batch_id for r in records] == list(range(3, 12))
    summary = inspect.summarize(records)
    assert (summary.first_batch, summary.latest_batch, summary.last_committed) == (3, 11, 11)


def test_void_offset_line(tmp_path: Path) -> None:
    ck = write_checkpoint(tmp_path / "ck", [[None], [cdc_offset("db.t", [1])]], committed=2)
    records = inspect.batch_records(inspect.read_checkpoint(str(ck)))
    size = len(cdc_offset("db.t", [1]))
    assert [(r.phase, r.offset_bytes) for r in records] == [("none", 0), ("snapshot", size)]


def test_second_source_is_found(tmp_path: Path, capsys) -> None:
    """A union with a rate source: Spark writes one line per source, in source order."""
    rate = '{"0":3}'
    ck = write_checkpoint(
        tmp_path / "ck",
        [[rate, cdc_offset("db.a", [5])], [rate, cdc_offset(None)]],
        committed=2,
    )
    code, out, _ = run([str(ck)], capsys)
    assert code == 0
    assert "source 1 of 0, 1" in out
    assert "current phase   stream (hand-over done)" in out
    code, _, err = run([str(ck), "--source", "7"], capsys)
    assert code == 2 and "no source '7'" in err


def test_offset_log_version_2(tmp_path: Path) -> None:
    ck = write_checkpoint(
        tmp_path / "ck", [[cdc_offset("db.t", [1])], [cdc_offset(None)]], committed=1, version=2
    )
    records = inspect.batch_records(inspect.read_checkpoint(str(ck)))
    assert [r.phase for r in records] == ["snapshot", "stream"]
    assert records[0].offset_bytes == len(cdc_offset("db.t", [1]))


def test_unreadable_offset_is_reported_not_fatal(tmp_path: Path, capsys) -> None:
    ck = write_checkpoint(
        tmp_path / "ck", [[cdc_offset("db.t", [1])], ['{"v": 1, "binlog": {"fi']], committed=1
    )
    code, out, _ = run([str(ck), "--json"], capsys)
    assert code == 0
    bad = json.loads(out)["batches"][1]
    assert bad["phase"] == "invalid" and "not JSON" in bad["error"]
    assert json.loads(out)["summary"]["offset_batch"] == 0


def test_file_uri_is_accepted(snapshot_ck: Path) -> None:
    checkpoint = inspect.read_checkpoint(f"file://{snapshot_ck}")
    assert checkpoint.query_id == QUERY_ID and len(checkpoint.batches) == 3


def test_query_without_batches(tmp_path: Path, capsys) -> None:
    ck = write_checkpoint(tmp_path / "ck", [], committed=0)
    code, out, _ = run([str(ck)], capsys)
    assert code == 0
    assert "batches         none yet" in out


# -- errors -----------------------------------------------------------------------------


def test_missing_directory(tmp_path: Path, capsys) -> None:
    code, out, err = run([str(tmp_path / "nowhere")], capsys)
    assert code == 2 and out == ""
    assert err == (
        f"cdc-mysql inspect: no checkpoint at {tmp_path / 'nowhere'}: "
        "the directory does not exist\n"
    )


def test_directory_that_is_not_a_checkpoint(tmp_path: Path, capsys) -> None:
    code, _, err = run([str(tmp_path)], capsys)
    assert code == 2 and "is not a Spark streaming checkpoint" in err


def test_checkpoint_of_another_source(tmp_path: Path, capsys) -> None:
    ck = write_checkpoint(tmp_path / "ck", [['{"0":3}']], committed=1)
    code, _, err = run([str(ck)], capsys)
    assert code == 2 and "no cdc-mysql offset" in err


def test_remote_locations_are_refused_clearly(capsys) -> None:
    code, _, err = run(["s3a://bucket/ck"], capsys)
    assert code == 2 and "not on the local file system" in err


def test_password_never_printed(snapshot_ck: Path, capsys, monkeypatch) -> None:
    """A refused connection still prints the checkpoint report, then fails without secrets."""
    flags = ["--hostname", "127.0.0.1", "--port", "1", "--username", "cdc"]
    for argv, env in (
        ([*flags, "--password", "s3cr3t-flag"], None),
        (flags, "s3cr3t-env"),
    ):
        if env:
            monkeypatch.setenv(inspect.PASSWORD_ENV, env)
        for output in ([], ["--json"]):
            code, out, err = run(
                [str(snapshot_ck), *argv, "--connect-timeout", "2", *output], capsys
            )
            assert code == 1
            assert "s3cr3t" not in out + err
            assert "cdc@127.0.0.1:1" in out and "cannot connect" in err


def test_misspelled_password_flag_is_not_echoed(snapshot_ck: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        inspect.main([str(snapshot_ck), "--pasword", "s3cr3t"])
    _, err = capsys.readouterr()
    assert "s3cr3t" not in err and "--pasword ***" in err


# -- pure pieces ------------------------------------------------------------------------


def test_split_tables_with_the_captured_list() -> None:
    captured = ["a.x", "b.y", "c.z", "d.w"]
    at_b = SourceOffset(BinlogPosition("binlog.000001", 4), SnapshotCursor("b.y", (3,)))
    assert inspect.split_tables(at_b, captured) == (("a.x",), ("b.y", "c.z", "d.w"))
    done = SourceOffset(BinlogPosition("binlog.000001", 4), None)
    assert inspect.split_tables(done, captured) == (tuple(captured), ())
    assert inspect.split_tables(None, captured) == ((), tuple(captured))
    assert [inspect.table_status(t, at_b) for t in captured] == [
        "done",
        "in progress",
        "pending",
        "pending",
    ]
    at_c_start = SourceOffset(None, SnapshotCursor("c.z", None))
    assert inspect.table_status("c.z", at_c_start) == "pending"


def test_summary_uses_the_servers_table_list(snapshot_ck: Path) -> None:
    records = inspect.batch_records(inspect.read_checkpoint(str(snapshot_ck)))
    captured = ["shop.addresses", "shop.customers", "shop.orders", "shop.payments"]
    summary = inspect.summarize(records, captured)
    assert summary.tables_done == ("shop.addresses", "shop.customers")
    assert summary.tables_pending == ("shop.orders", "shop.payments")
    assert summary.tables_from == "server"


LOGS = [("binlog.000001", 1000), ("binlog.000002", 500), ("binlog.000003", 300)]


@pytest.mark.parametrize(
    ("position", "head", "expected"),
    [
        (("binlog.000003", 100), ("binlog.000003", 300), 200),
        (("binlog.000003", 300), ("binlog.000003", 300), 0),
        (("binlog.000001", 900), ("binlog.000003", 250), 100 + 500 + 250),
        (("binlog.000002", 500), ("binlog.000003", 4), 4),
        (("binlog.000000", 5), ("binlog.000003", 300), None),  # purged
    ],
)
def test_binlog_lag(position, head, expected) -> None:
    lag = inspect.binlog_lag(BinlogPosition(*position), BinlogPosition(*head), LOGS)
    assert lag == expected


class FakeCursor:
    def __init__(self, log: list) -> None:
        self.log = log

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def execute(self, sql: str, params=None) -> None:
        self.log.append((sql, params))

    def fetchone(self) -> tuple:
        return (498,)


class FakeConn:
    def __init__(self) -> None:
        self.log: list = []

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.log)


def _schema(table: str, rows: int) -> TableSchema:
    columns = (
        ColumnSpec("region", "varchar", "varchar(10)", False, collation="utf8mb4_general_ci"),
        ColumnSpec("id", "int", "int(11)", False),
    )
    db, name = table.split(".")
    return TableSchema(db, name, columns, ("region", "id"), estimated_rows=rows)


def test_table_progress_counts_rows_below_the_frontier(capsys) -> None:
    conn = FakeConn()
    offset = SourceOffset(BinlogPosition("binlog.000001", 4), SnapshotCursor("s.o", ("us", 99)))
    schemas = [_schema("s.c", 250), _schema("s.o", 800), _schema("s.p", 10)]
    rows = inspect.table_progress(conn, schemas, offset, ["s.c", "s.gone", "s.o", "s.p"])
    assert rows == [
        inspect.TableProgressRow("s.c", "done", None, 250),
        inspect.TableProgressRow("s.gone", "missing", None, None),
        inspect.TableProgressRow("s.o", "in progress", 498, 800),
        inspect.TableProgressRow("s.p", "pending", 0, 10),
    ]
    [(sql, params)] = conn.log  # only the frontier table is counted
    assert sql.startswith("SELECT COUNT(*) FROM `s`.`o` WHERE (`region` < %s OR")
    assert params == ["us", "us", 99]

    server = inspect.ServerReport(
        address="cdc@db:3306",
        head=BinlogPosition("binlog.000001", 600),
        lag_bytes=596,
        tables=tuple(rows),
        tables_listed=True,
    )
    text = "\n".join(render._server_lines(server))
    assert "s.o     in progress                  498            ~800       62%" in text
    assert "s.c     done                         all            ~250      100%" in text
    assert "binlog lag      596 bytes behind the head" in text


def test_rereads_in_progress_are_shown(tmp_path: Path, capsys) -> None:
    rereads = {
        "n": 2,
        "queue": [
            {"n": 1, "table": "shop.orders", "where": "id > 10", "after": [400]},
            {"n": 2, "table": "shop.items", "after": None},
        ],
        "file": "00000000000000000001-1.json",
    }
    last = json.loads(cdc_offset(None, pos=537983))
    last.update(v=4, rereads=rereads)
    ck = write_checkpoint(tmp_path / "ck", [*HANDED_OVER_RUN, [json.dumps(last)]], committed=6)
    code, out, _ = run([str(ck)], capsys)
    assert code == 0
    assert "re-read #1 of shop.orders where id > 10: read to key [400]" in out
    assert "re-read #2 of shop.items: not begun" in out
    code, out, _ = run([str(ck), "--json"], capsys)
    assert json.loads(out)["summary"]["rereads"] == rereads["queue"]
