"""What the binlog may hold (docs/design.md, 'What the binlog may hold'), on a real
server: every type by snapshot and by both row decoders, zero dates, compressed events,
XA transactions, partial row images."""

from __future__ import annotations

import json
import threading
import time

import pymysql
import pytest

from cdc_source.embedded_server import EmbeddedServer
from tests.support.streams import StreamRun, read_output, wait_for
from tests.support.typed_rows import COLUMNS, NAMES, ROWS

ZERO_DATES = "zd DATE NULL, zdt DATETIME(3) NULL, zts TIMESTAMP(2) NULL, marker INT NULL"


def _images(output, op):
    return [
        (
            json.loads(r["before"]) if r["before"] else None,
            json.loads(r["after"]) if r["after"] else None,
        )
        for r in output
        if r["op"] == op and r["table"] == "t"
    ]


def test_every_type_agrees_by_snapshot_and_binlog_in_every_image(
    server, spark, tmp_path, binlog_decoder
):
    """snapshot == binlog for inserts, updates (before and after images) and deletes, with
    the C decoder and with the pure-Python one; zero dates are NULL on both roads."""
    database = server.fresh_database(f"fidelity_{binlog_decoder}")
    server.execute(
        f"CREATE TABLE t ({COLUMNS}, {ZERO_DATES})",
        "CREATE TABLE u (id INT PRIMARY KEY)",
        database=database,
    )
    placeholders = ", ".join(["%s"] * len(NAMES))
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.executemany(f"INSERT INTO t ({', '.join(NAMES)}) VALUES ({placeholders})", ROWS)
        cur.execute(
            "UPDATE t SET zd = '0000-00-00', zdt = '0000-00-00 00:00:00', zts = 0 WHERE id = 1"
        )
        cur.execute(
            "UPDATE t SET zd = '2020-01-02', zdt = '2020-01-02 03:04:05.678', "
            "zts = '2020-01-02 03:04:05.67' WHERE id = 2"
        )
    options = server.source_options(database, rf"{database}\.(t|u)")
    assert options["scan.binlog.decoder"] == binlog_decoder
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute("UPDATE t SET marker = 1")
        cur.execute("UPDATE t SET id = id + 100")
        cur.execute("DELETE FROM t")
    run.run_to_end()

    output = read_output(spark, run.out)
    snapshot = {after["id"]: after for _, after in _images(output, "r")}
    assert set(snapshot) == {1, 2, 3}
    assert snapshot[1]["zd"] is None and snapshot[1]["zdt"] is None and snapshot[1]["zts"] is None
    assert snapshot[2]["zd"] == "2020-01-02" and snapshot[2]["zts"].startswith("2020-01-02T03")

    updates = {before["id"]: (before, after) for before, after in _images(output, "u")}
    deletes = [before for before, _ in _images(output, "d")]
    inserts = {after["id"]: after for _, after in _images(output, "c")}
    assert set(updates) == {1, 2, 3} and set(inserts) == {101, 102, 103}
    for key, state in snapshot.items():
        marked = {**state, "marker": 1}
        assert updates[key][0] == state, f"before-image of the update of {key}"
        assert updates[key][1] == marked, f"after-image of the update of {key}"
        assert inserts[key + 100] == {**marked, "id": key + 100}, f"insert of {key + 100}"
        assert deletes.count(marked) == 1, f"key-change delete of {key}"
        assert deletes.count({**marked, "id": key + 100}) == 1, f"delete of {key + 100}"
    assert len(deletes) == 6


def test_compressed_binlog_is_streamed_exactly(spark, tmp_path, binlog_decoder):
    """log_bin_compress=ON: QUERY and rows events arrive zlib-compressed (types 165-171)."""
    embedded = EmbeddedServer(extra_args=("--log-bin-compress=ON", "--log-bin-compress-min-len=10"))
    info = embedded.start()
    try:
        with info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE z")
            cur.execute("CREATE TABLE z.t (id INT PRIMARY KEY, v VARCHAR(200), n INT)")
            cur.executemany(
                "INSERT INTO z.t VALUES (%s, %s, %s)",
                [(i, f"row {i} " * 5, i) for i in range(1, 1001)],
            )
        options = {
            **info.source_options(),
            "database-name": "z",
            "table-name": r"z\.t",
            "scan.binlog.decoder": binlog_decoder,
        }
        run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
        run.run_to_end()
        with info.admin_connect() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO z.t VALUES (%s, %s, %s)",
                [(i, f"new {i} " * 5, i) for i in range(1001, 1501)],
            )
            cur.execute("UPDATE z.t SET n = n + 1 WHERE id <= 100")
            cur.execute("DELETE FROM z.t WHERE id > 1450")
            cur.execute("SELECT id, v, n FROM z.t")
            expected = {row[0]: (row[1], row[2]) for row in cur.fetchall()}
            cur.execute("SHOW BINLOG EVENTS")
            kinds = {str(row[2]) for row in cur.fetchall()}
        assert "Query_compressed" in kinds
        assert any("rows_compressed" in kind.lower() for kind in kinds), kinds
        run.run_to_end()
        output = read_output(spark, run.out)
        counts = {op: sum(1 for r in output if r["_op"] == op) for op in "rcud"}
        assert counts == {"r": 1000, "c": 500, "u": 100, "d": 50}
        latest: dict[int, dict] = {}
        for row in sorted(output, key=lambda r: r["_seq"]):
            latest[row["id"]] = row
        replayed = {k: (r["v"], r["n"]) for k, r in latest.items() if r["_op"] != "d"}
        assert replayed == expected
    finally:
        embedded.stop()


def _xa(server, database: str, name: str, statements: list[str], end: str | None) -> None:
    """An XA transaction on its own connection; left prepared (the connection closes, the
    transaction stays, MariaDB 10.5+ and MySQL) unless ``end`` commits or rolls it back."""
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute(f"XA START '{name}'")
        for statement in statements:
            cur.execute(statement)
        cur.execute(f"XA END '{name}'")
        cur.execute(f"XA PREPARE '{name}'")
        if end:
            cur.execute(f"XA {end} '{name}'")


def _end_detached_xa(server, database: str, verb: str, name: str) -> None:
    """``XA COMMIT`` or ``XA ROLLBACK`` of a transaction another connection prepared and
    closed. The server detaches the XID from the closing session after the client has gone
    (``COM_QUIT`` is not answered), so for a moment the XID is unknown (1397, XAER_NOTA) to
    every other session; the statement is repeated until the server knows it, for at most
    30 s."""
    deadline = time.monotonic() + 30
    with server.admin(database) as conn, conn.cursor() as cur:
        while True:
            try:
                cur.execute(f"XA {verb} '{name}'")
                return
            except pymysql.err.OperationalError as error:
                if error.args[0] != 1397 or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


def _roll_back_prepared(server, database: str) -> None:
    """Roll back every XA transaction a test left prepared, so that its row and metadata
    locks do not outlive the test on the shared server."""
    for _format, _gtrid_length, _bqual_length, xid in server.query("XA RECOVER", database=database):
        name = xid.decode() if isinstance(xid, bytes) else xid
        _end_detached_xa(server, database, "ROLLBACK", name)


def test_xa_rows_appear_once_at_commit_even_across_batches(server, spark, tmp_path):
    _roll_back_prepared(server, None)  # a failed run before may have left one
    database = server.fresh_database("xa_stream")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO t VALUES (1, 'one'), (2, 'two')",
        "CREATE TABLE filler (id INT PRIMARY KEY, pad CHAR(200))",
        "INSERT INTO filler SELECT seq, REPEAT('x', 200) "
        f"FROM {server.seq(1, 100000)} ORDER BY seq",
        database=database,
    )
    options = server.source_options(database, rf"{database}\.t")
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()  # snapshot
    rolled = [
        "INSERT INTO t VALUES (5000, 'never')",
        "UPDATE t SET v = 'never' WHERE id = 1",
        "DELETE FROM t WHERE id = 2",
    ]
    _xa(server, database, "rolled", rolled, "ROLLBACK")
    later = ["INSERT INTO t VALUES (6000, 'xa')", "UPDATE t SET v = 'xa' WHERE id = 1"]
    _xa(server, database, "later", later, None)
    server.execute("INSERT INTO t VALUES (3, 'plain')", database=database)
    run.run_to_end()  # a batch ends while 'later' is prepared, not committed
    first = read_output(spark, run.out)
    assert {r["id"] for r in first if r["_op"] != "r"} == {3}
    _end_detached_xa(server, database, "COMMIT", "later")
    # Tens of MB after the commit: the range's dump is still streaming when the XA
    # transaction is read again (a second dump with the same server id would kill it).
    server.execute("UPDATE filler SET pad = REPEAT('y', 200)", database=database)
    _xa(server, database, "onephase", ["INSERT INTO t VALUES (7000, 'one phase')"], None)
    _end_detached_xa(server, database, "COMMIT", "onephase")
    server.execute(
        "XA START 'direct'",
        "INSERT INTO t VALUES (8000, 'direct')",
        "XA END 'direct'",
        "XA COMMIT 'direct' ONE PHASE",
        database=database,
    )
    run.run_to_end()
    output = read_output(spark, run.out)
    changes = sorted((r for r in output if r["_op"] != "r"), key=lambda r: r["_seq"])
    assert [(r["_op"], r["id"], r["v"]) for r in changes] == [
        ("c", 3, "plain"),
        ("c", 6000, "xa"),
        ("u", 1, "xa"),
        ("c", 7000, "one phase"),
        ("c", 8000, "direct"),
    ]
    offsets = [
        json.loads(p.read_text().splitlines()[2])
        for p in (tmp_path / "ck" / "offsets").iterdir()
        if p.name.isdigit()
    ]
    assert any(o["binlog"] and o["binlog"].get("xa") for o in offsets), "the watermark was carried"


def test_xa_committed_while_the_snapshot_runs_is_exact(server, spark, tmp_path):
    """An XA transaction prepared before a batch's planned position and committed while
    its chunks are read: the chunk state at P excludes it, the stream emits it once."""
    _roll_back_prepared(server, None)  # a failed run before may have left one
    database = server.fresh_database("xa_snapshot")
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database=database)
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, 0) for i in range(1, 20001)])
    stop = threading.Event()

    writer_errors: list[BaseException] = []

    def xa_writer():
        round_ = 0
        try:
            while not stop.is_set():
                round_ += 1
                key = 1 + (round_ * 7919) % 20000
                _xa(
                    server,
                    database,
                    f"w{round_}",
                    [
                        f"UPDATE t SET v = v + 1 WHERE id = {key}",
                        f"INSERT INTO t VALUES ({100000 + round_}, {round_})",
                    ],
                    None,
                )
                stop.wait(0.05)
                verb = "ROLLBACK" if round_ % 5 == 0 else "COMMIT"
                _end_detached_xa(server, database, verb, f"w{round_}")
        except BaseException as error:  # the test asserts on it after the join
            writer_errors.append(error)

    options = server.source_options(
        database,
        rf"{database}\.t",
        **{"scan.incremental.snapshot.chunk.size": "1000", "scan.snapshot.chunks-per-batch": "2"},
    )
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    held = ["UPDATE t SET v = -1 WHERE id = 20000", "INSERT INTO t VALUES (200000, -1)"]
    _xa(server, database, "held", held, None)  # prepared before the first planned position
    writer = threading.Thread(target=xa_writer)
    writer.start()
    query = run.start()
    try:
        wait_for(lambda: run.batches_seen and max(run.batches_seen) >= 3, 240, "batch 3", query)
        _end_detached_xa(server, database, "COMMIT", "held")
        wait_for(lambda: run.batches_seen and max(run.batches_seen) >= 14, 240, "snapshot", query)
    finally:
        stop.set()
        writer.join()
        _roll_back_prepared(server, database)
    assert not writer_errors, writer_errors
    head = server.binlog_head()
    head_at = (int(str(head[0]).rsplit(".", 1)[1]), int(head[1]))
    try:
        wait_for(
            lambda: any(
                o.get("binlog")
                and o["snapshot"] is None
                and (int(o["binlog"]["file"].rsplit(".", 1)[1]), o["binlog"]["pos"]) >= head_at
                for o in _committed_offsets(run)
            ),
            240,
            "the stream to pass the writer's last commit",
            query,
        )
    finally:
        query.stop()
    output = read_output(spark, run.out)
    latest: dict[int, dict] = {}
    for row in sorted(output, key=lambda r: r["_seq"]):
        latest[row["id"]] = row
    replayed = {k: r["v"] for k, r in latest.items() if r["_op"] != "d"}
    expected = dict(server.query("SELECT id, v FROM t", database=database))
    assert replayed == expected
    assert replayed[200000] == -1
    carried = [o["binlog"]["xa"] for o in _committed_offsets(run) if (o["binlog"] or {}).get("xa")]
    assert carried, "batches planned while 'held' was prepared carry its watermark"


def _committed_offsets(run) -> list[dict]:
    from tests.support.streams import committed_batches, source_offsets

    done = committed_batches(run.checkpoint)
    return [o for batch, o in source_offsets(run.checkpoint).items() if batch in done]


@pytest.mark.parametrize(
    "image, column",
    [("MINIMAL", "v"), ("NOBLOB", "body")],
)
def test_a_session_with_a_partial_row_image_stops_the_query_naming_the_setting(
    server, spark, tmp_path, image, column
):
    database = server.fresh_database(f"image_{image.lower()}")
    server.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT, body TEXT)",
        "INSERT INTO t VALUES (1, 1, 'text'), (2, 2, 'text')",
        database=database,
    )
    options = server.source_options(database, rf"{database}\.t")
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.execute(f"SET SESSION binlog_row_image = '{image}'")
        cur.execute(f"UPDATE t SET {'v = v + 1' if column == 'v' else 'v = 9'}")
    query = run.start(available_now=True)
    with pytest.raises(Exception) as info:
        query.awaitTermination()
    message = str(info.value)
    assert "binlog_row_image" in message and "lacks columns" in message
    assert not [r for r in read_output(spark, run.out) if r["_op"] != "r"]
