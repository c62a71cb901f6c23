"""Every supported type arrives with the same value by snapshot and by binlog."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tests.integration.streams import StreamRun, read_output

COLUMNS = """
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, flag TINYINT(1), si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  d10 DECIMAL(10,2), d38 DECIMAL(38,10), d65 DECIMAL(65,30),
  f FLOAT, db DOUBLE, b1 BIT(1), b10 BIT(10),
  c CHAR(5), vc VARCHAR(50), tx TEXT, bn BINARY(4), vb VARBINARY(10), bl BLOB,
  dt DATE, dtm DATETIME, dtm6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME, tm6 TIME(6),
  yr YEAR, js JSON, en ENUM('small','large'), st SET('a','b','c')
"""


def _top_level_names(ddl: str) -> list[str]:
    names, depth, current = [], 0, ""
    for char in ddl + ",":
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            names.append(current.split()[0])
            current = ""
        else:
            current += char
    return [n for n in names if n]


NAMES = _top_level_names(COLUMNS)

ROWS = [
    (
        1,
        -128,
        255,
        1,
        -32768,
        65535,
        -8388608,
        16777215,
        -2147483648,
        4294967295,
        -9223372036854775808,
        18446744073709551615,
        "-12345678.99",
        "1234567890123456789012345678.0123456789",
        "-12345678901234567890123456789012345.123456789012345678901234567890",
        0.1,
        1.0000000000000002,
        1,
        0b1010101010,
        "ab",
        "Grüße 🙂",
        "long text",
        b"a\0",
        b"\0\x01\0",
        b"\xff\x00blob",
        "1000-01-01",
        "9999-12-31 23:59:59",
        "2024-02-29 12:34:56.789012",
        "2038-01-19 03:14:07.499",
        "-838:59:59",
        "-01:02:03.500000",
        0,
        '{"k": [1, 2.5, "x"], "n": null}',
        "large",
        "",
    ),
    (
        2,
        127,
        0,
        0,
        32767,
        0,
        8388607,
        0,
        2147483647,
        0,
        9223372036854775807,
        0,
        "0.00",
        "0",
        "0",
        -3.4028234e38,
        -1e-300,
        0,
        0,
        "",
        "",
        "",
        b"\0\0\0\0",
        b"",
        b"",
        "2000-01-01",
        "1970-01-01 00:00:01",
        "1970-01-01 00:00:00.000001",
        "1970-01-01 00:00:01.000",
        "838:59:59",
        "00:00:00.000001",
        2155,
        "[]",
        "small",
        "a,c",
    ),
    (3,) + (None,) * (len(NAMES) - 1),
]


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
