"""Every supported type arrives with the same value by snapshot and by binlog."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tests.support.streams import StreamRun, read_output
from tests.support.typed_rows import COLUMNS, NAMES, ROWS


@pytest.mark.parametrize("client", ["pymysql", "mysqlclient"])
def test_every_type_has_the_same_value_from_snapshot_and_binlog(server, spark, tmp_path, client):
    """Both snapshot clients (PyMySQL's parsed values, mysqlclient's text cast by Arrow)
    give the binlog's values."""
    database = server.fresh_database(f"types_{client}")
    server.execute(f"CREATE TABLE t ({COLUMNS})", database=database)
    placeholders = ", ".join(["%s"] * len(NAMES))
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO t VALUES ({placeholders})", ROWS)
    options = server.source_options(database, rf"{database}\.t", **{"scan.snapshot.client": client})
    run = StreamRun(spark, options, tmp_path / "ck", tmp_path / "out")
    run.run_to_end()  # the snapshot
    with server.admin(database) as conn, conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO t VALUES ({placeholders})", [(row[0] + 100,) + row[1:] for row in ROWS]
        )
        cur.execute("UPDATE t SET vc = 'updated' WHERE id = 101")
        cur.execute("DELETE FROM t WHERE id = 102")
    run.run_to_end()  # the binlog

    output = read_output(spark, run.out)
    snapshot = {r["id"]: r for r in output if r["_op"] == "r"}
    inserted = {r["id"] - 100: r for r in output if r["_op"] == "c"}
    assert set(snapshot) == set(inserted) == {1, 2, 3}
    for key in snapshot:
        for name in NAMES[1:]:
            assert snapshot[key][name] == inserted[key][name], (
                f"row {key} column {name}: snapshot {snapshot[key][name]!r} "
                f"!= binlog {inserted[key][name]!r}"
            )
    deleted = [r for r in output if r["_op"] == "d"]
    assert len(deleted) == 1 and deleted[0]["id"] == 102
    assert deleted[0]["d65"] == "0." + "0" * 30  # the before-image of the delete
    updated = [r for r in output if r["_op"] == "u"]
    assert updated[0]["vc"] == "updated" and updated[0]["biu"] == snapshot[1]["biu"]

    first = snapshot[1]
    assert first["biu"] == Decimal(18446744073709551615)
    assert first["flag"] is True and first["b1"] is True
    assert first["b10"] == (0b1010101010).to_bytes(2, "big")
    assert first["d65"] == "-12345678901234567890123456789012345.123456789012345678901234567890"
    assert first["d38"] == Decimal("1234567890123456789012345678.0123456789")
    assert abs(first["f"] - 0.1) < 1e-7 and first["db"] == 1.0000000000000002
    assert first["vc"] == "Grüße 🙂"
    assert first["bn"] == b"a\0\0\0" and first["vb"] == b"\0\x01\0"
    assert first["tm"] == -(838 * 3600 + 59 * 60 + 59) * 1_000_000
    assert first["tm6"] == -(3723 * 1_000_000 + 500_000)
    assert first["yr"] == 0 and snapshot[2]["yr"] == 2155
    assert first["dtm6"] == dt.datetime(2024, 2, 29, 12, 34, 56, 789012)
    assert first["ts"].replace(tzinfo=None) == dt.datetime(2038, 1, 19, 3, 14, 7, 499000) or (
        first["ts"].astimezone(dt.timezone.utc).replace(tzinfo=None)
        == dt.datetime(2038, 1, 19, 3, 14, 7, 499000)
    )
    assert first["en"] == "large" and first["st"] == "" and snapshot[2]["st"] == "a,c"
    assert first["dt"] == dt.date(1000, 1, 1)
    assert all(snapshot[3][name] is None for name in NAMES[1:])
