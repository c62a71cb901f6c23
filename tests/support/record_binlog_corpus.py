"""Records the binlog corpus of ``tests/unit/cdc_source/test_binlog_corpus.py`` and
``tests/unit/cdc_source/test_binlog_encoder_matches_servers.py``: real binlog files written by a
throwaway MySQL 9.7 and a throwaway MariaDB 10.11, with what the server
version's own ``mysqlbinlog -v`` / ``mariadb-binlog -v`` prints for them.

    python -m tests.support.record_binlog_corpus             # both flavours
    python -m tests.support.record_binlog_corpus mariadb     # or one of them

Each server (:class:`cdc_source.embedded_server.EmbeddedServer`: binlog_format=ROW,
binlog_row_image=FULL, binlog_row_metadata=FULL) runs :func:`workload` after a
``FLUSH BINARY LOGS``, so the workload's events are alone in one file, which a second
flush closes. Into ``tests/data/binlog/<flavour>-<series>/`` go:

* the binlog file as the server wrote it (``binlog.000002``),
* ``<file>.verbose.txt``: ``mysqlbinlog --base64-output=DECODE-ROWS -v <file>`` of the
  same server version (MySQL: the tree's own ``usr/bin/mysqlbinlog``; MariaDB:
  ``/usr/bin/mariadb-binlog``, which ships with the server), bytes as printed,
* ``VERSION``: ``SELECT VERSION()`` and the dump tool's ``--version``,
* MySQL only, ``large-json/<next file>``: the binlog file after it, holding
  :data:`LARGE_JSON_ROWS` (JSON documents over 64 KiB), without a listing.

A rerun replaces them (timestamps and server UUIDs differ, the values do not).
The workload covers every column kind the row decoders have, each with its edge values,
through inserts, updates and deletes; MySQL adds JSON and a zstd-compressed transaction
(TRANSACTION_PAYLOAD), MariaDB a zlib-compressed rows event (log_bin_compress).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from cdc_source.embedded_server import EmbeddedServer
from tests.support.json_documents import (
    CANONICAL_DOCUMENT,
    LARGE_ARRAY,
    LARGE_OBJECT,
    SCALARS_AND_CONTAINERS,
)
from tests.support.mysql_dist import ensure

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "binlog"
MARIADB_BINLOG = "/usr/bin/mariadb-binlog"
DIRS = {"mysql": "mysql-9.7", "mariadb": "mariadb-10.11"}
SCHEMA = "corpus"

INTEGERS = """CREATE TABLE ints (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, biu BIGINT UNSIGNED, b BOOL
)"""

INTEGER_ROWS = [
    "INSERT INTO ints VALUES (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, "
    "-9223372036854775808, 0, 0)",
    "INSERT INTO ints VALUES (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, "
    "4294967295, 9223372036854775807, 18446744073709551615, 1), "
    "(3, -1, 128, -1, 32768, -1, 8388608, -1, 2147483648, -1, 9223372036854775808, 0), "
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
    "(5, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1)",
    "UPDATE ints SET ti = ti - 1, tiu = 254, biu = biu - 1, bi = -bi WHERE id = 2",
    "UPDATE ints SET ti = 7, iu = 4000000000 WHERE id IN (4, 5)",
    "DELETE FROM ints WHERE id = 3",
]

NUMBERS = """CREATE TABLE numbers (
  id INT PRIMARY KEY,
  d52 DECIMAL(5,2), d189 DECIMAL(18,9), d100 DECIMAL(10,0), d3810 DECIMAL(38,10),
  d39 DECIMAL(39,{scale}), d650 DECIMAL(65,0), d6530 DECIMAL(65,30), du DECIMAL(6,3) UNSIGNED,
  f FLOAT, dbl DOUBLE, b1 BIT(1), b5 BIT(5), b10 BIT(10), b64 BIT(64)
)"""  # scale: 38 on MariaDB, MySQL allows 30

NUMBER_ROWS = [
    "INSERT INTO numbers VALUES (1, 123.45, 123456789.123456789, 1234567890, "
    "1234567890123456789012345678.0123456789, 0.12345678901234567890123456789012345678, "
    "12345678901234567890123456789012345678901234567890123456789012345, "
    "12345678901234567890123456789012345.123456789012345678901234567890, 999.999, "
    "1.5, 3.141592653589793, 1, 21, 1023, 18446744073709551615)",
    "INSERT INTO numbers VALUES (2, -999.99, -0.000000001, -9999999999, "
    "-9999999999999999999999999999.9999999999, -0.99999999999999999999999999999999999999, "
    "-99999999999999999999999999999999999999999999999999999999999999999, "
    "-0.000000000000000000000000000001, 0.001, "
    "-3.4028234e38, -1.7976931348623157e308, 0, 0, 512, 9223372036854775808), "
    "(3, 0, 0, 0, 0, 0, 0, 0, 0, 1.17549435e-38, 2.2250738585072014e-308, "
    "NULL, b'10000', b'0000000001', 1), "
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
    "(5, 0.5, -1.5, 1, -0.5, 0.00000000000000000000000000000000000001, -1, "
    "1.000000000000000000000000000001, 0, 0.1, 0.1, 1, 1, 1, 0)",
    "UPDATE numbers SET f = -f, dbl = dbl / 3, d52 = -d52, b5 = b5 ^ 31 WHERE id IN (1, 5)",
    "DELETE FROM numbers WHERE id = 2",
]

STRINGS = """CREATE TABLE strings (
  id INT PRIMARY KEY,
  c CHAR(10) CHARACTER SET utf8mb4, vc VARCHAR(300) CHARACTER SET utf8mb4,
  t TEXT CHARACTER SET utf8mb4, cl CHAR(10) CHARACTER SET latin1,
  vcl VARCHAR(20) CHARACTER SET latin1, tl TINYTEXT CHARACTER SET latin1,
  bin BINARY(8), vb VARBINARY(300), bl BLOB, mb MEDIUMBLOB
)"""

STRING_ROWS = [
    "INSERT INTO strings VALUES (1, 'abc', 'héllo wörld ✓ 😀', 'line1\\nline2\\ttab',"
    " 'café', 'naïve', 'Ünïcödé', 'ab', x'00ff10', x'', x'deadbeef')",
    "INSERT INTO strings VALUES (2, '', '', '', '', '', '', '', '', '', ''), "
    "(3, 'quote''s', 'back\\\\slash', REPEAT('x', 300), 'trail  ', ' lead', 'x', "
    "x'0000000000000001', x'2700275c', "
    "x'000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f7f80fe', "
    "REPEAT(x'ab', 400)), "
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
    "(5, '日本語', REPEAT('é', 300), '€', 'ÿ', '¿?', '±', x'0102030405060708', 'abc', "
    "'plain', 'text')",
    "UPDATE strings SET vc = CONCAT(vc, '!'), bin = x'ff', cl = 'changed' WHERE id IN (1, 3)",
    "DELETE FROM strings WHERE id = 2",
]

TEMPORALS = """CREATE TABLE temporals (
  id INT PRIMARY KEY, d DATE,
  dt0 DATETIME, dt1 DATETIME(1), dt2 DATETIME(2), dt3 DATETIME(3), dt4 DATETIME(4),
  dt5 DATETIME(5), dt6 DATETIME(6),
  ts0 TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL, ts2 TIMESTAMP(2) NULL, ts3 TIMESTAMP(3) NULL,
  ts4 TIMESTAMP(4) NULL, ts5 TIMESTAMP(5) NULL, ts6 TIMESTAMP(6) NULL,
  t0 TIME, t1 TIME(1), t2 TIME(2), t3 TIME(3), t4 TIME(4), t5 TIME(5), t6 TIME(6),
  y YEAR
)"""


def _temporal_row(id_, d, dt, ts, t, y) -> str:
    def q(v):
        return "NULL" if v is None else f"'{v}'"

    return f"({id_}, {q(d)}, {', '.join([q(dt)] * 7)}, {', '.join([q(ts)] * 7)}, " + (
        f"{', '.join([q(t)] * 7)}, {'NULL' if y is None else y})"
    )


TEMPORAL_ROWS = [
    "INSERT INTO temporals VALUES "
    + _temporal_row(
        1,
        "2024-02-29",
        "2024-02-29 23:59:58.987654",
        "2024-02-29 23:59:58.987654",
        "12:34:56.123456",
        2024,
    ),  # fmt: skip
    "INSERT INTO temporals VALUES "
    + ", ".join(
        [
            _temporal_row(
                2,
                "1000-01-01",
                "1000-01-01 00:00:00",
                "1970-01-01 00:00:01",
                "-838:59:59",
                1901,
            ),
            _temporal_row(
                3,
                "9999-12-31",
                "9999-12-31 23:59:59.999999",
                "2038-01-19 03:14:07.999999",
                "838:59:59",
                2155,
            ),
            _temporal_row(4, None, None, None, None, None),
            _temporal_row(
                5,
                "1970-01-01",
                "1970-01-01 00:00:00.000001",
                "2000-06-15 12:00:00.5",
                "-00:00:00.5",
                0,
            ),
            _temporal_row(
                6,
                "1969-12-31",
                "1969-12-31 23:59:59.1",
                "1999-12-31 23:59:59.09",
                "-12:34:56.789012",
                1999,
            ),
            _temporal_row(
                7,
                "0000-00-00",
                "0000-00-00 00:00:00",
                "0000-00-00 00:00:00",
                "100:00:00.000100",
                2000,
            ),
        ]
    ),  # fmt: skip
    "UPDATE temporals SET t3 = '-01:02:03.004', dt6 = '2001-02-03 04:05:06.000007', "
    "ts6 = '2001-02-03 04:05:06.000007', y = 1970 WHERE id IN (1, 5)",
    "DELETE FROM temporals WHERE id = 6",
]

# Two of its three character columns share a collation: the TABLE_MAP lists their
# collations in the DEFAULT_CHARSET form (the strings table's take COLUMN_CHARSET).
MEMBERS = """CREATE TABLE members (
  id INT PRIMARY KEY,
  e ENUM('a', 'b', 'c'), s SET('x', 'y', 'z'),
  s9 SET('m1','m2','m3','m4','m5','m6','m7','m8','m9'),
  e300 ENUM({e300}),
  label VARCHAR(8) CHARACTER SET utf8mb4, tag CHAR(3) CHARACTER SET utf8mb4,
  code CHAR(2) CHARACTER SET ascii
)""".format(e300=", ".join(f"'v{i}'" for i in range(300)))

MEMBER_ROWS = [
    "INSERT INTO members VALUES (1, 'a', '', 'm1', 'v0', 'one', 'a  ', 'x'), "
    "(2, 'c', 'x,z', 'm1,m9', 'v299', '', '', ''), "
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL), (4, 'b', 'x,y,z', '', 'v255', 'ü', 'ü', 'zz')",
    "UPDATE members SET e = 'c', s = 'y', s9 = 'm8,m9', e300 = 'v256', tag = ' b' "
    "WHERE id IN (1, 4)",
    "DELETE FROM members WHERE id = 2",
]

JSONS = "CREATE TABLE jsons (id INT PRIMARY KEY, j JSON)"

JSON_ROWS = [
    'INSERT INTO jsons VALUES (1, \'{"a": 1, "b": [true, false, null], "c": "x"}\'), '
    "(2, '[]'), (3, '{}'), (4, NULL), (5, '\"just a string with \\\\\" quote\"'), "
    "(6, '[1.5, -2, 18446744073709551615, -9223372036854775808, 1e300, \"é😀\"]'), "
    "(7, 'null'), (8, 'true'), (9, '123456789012'), "
    "(10, CAST(CAST('2024-01-02 03:04:05.123456' AS DATETIME(6)) AS JSON)), "
    "(11, JSON_OBJECT('d', CAST(12.340 AS DECIMAL(10,3)), 't', CAST('10:11:12' AS TIME), "
    "'day', CAST('2020-02-29' AS DATE)))",
    "UPDATE jsons SET j = JSON_SET(j, '$.a', 2, '$.new', JSON_ARRAY(1, 'two')) WHERE id = 1",
    "DELETE FROM jsons WHERE id = 3",
    # The documents tests/unit/reader/test_json_binary.py builds, and the key order of objects.
    "INSERT INTO jsons VALUES "
    + ", ".join(
        f"({id_}, '{json.dumps(document, ensure_ascii=False)}')"
        for id_, document in (
            (20, SCALARS_AND_CONTAINERS),
            (21, CANONICAL_DOCUMENT),
            (22, {"bb": 1, "a": [], "ab": {"z": -1, "y": 70000}, "b": "s", "": None, "ba": -1.25}),
            (23, [65535, 32768, -32769, 2147483648, 4294967295, 4294967296, -2147483649]),
            (24, -5),  # top-level integers are never inlined
            (25, 70000),
            (26, -9_000_000_000),
        )
    ),
    # Opaque values: a column's DECIMAL (precision and scale of the column), a BLOB
    # (base64:type252), TIMESTAMP, DATETIME, DATE and TIME. A temporary table is not
    # written to the binlog in ROW format.
    "CREATE TEMPORARY TABLE json_sources (d DECIMAL(10,2), bl BLOB, ts TIMESTAMP(6) NULL, "
    "dt DATETIME(6), da DATE, ti TIME)",
    "INSERT INTO json_sources VALUES (-12.50, x'00ff', '2024-02-29 23:59:58.125', "
    "'2024-02-29 23:59:58.125', '2001-12-31', '-838:59:59')",
    *(
        f"INSERT INTO jsons SELECT {id_}, {document} FROM json_sources"  # (no self-union)
        for id_, document in (
            (30, "JSON_OBJECT('v', d)"),
            (31, "JSON_OBJECT('v', dt)"),
            (32, "JSON_OBJECT('v', da)"),
            (33, "JSON_OBJECT('v', ti)"),
            (34, "JSON_OBJECT('v', bl)"),
            (35, "JSON_ARRAY(ts, d, CAST('00:00:00.000001' AS TIME(6)))"),
        )
    ),
]

# JSON documents over 64 KiB (the large form: 4-byte counts and offsets, 32-bit integers
# inlined) with small containers nested in them, in one zstd-compressed transaction of a
# binlog file of their own (large-json/): the dump tool's listing of them would be
# larger than the rest of the corpus. The object is the one test_json_binary.py builds.

LARGE_JSON_ROWS = [
    "SET SESSION binlog_transaction_compression = ON",
    "BEGIN",
    f"INSERT INTO jsons VALUES (40, '{json.dumps(LARGE_OBJECT)}')",
    f"INSERT INTO jsons VALUES (41, JSON_ARRAY_APPEND('{json.dumps(LARGE_ARRAY)}', "
    "'$', CAST(-12.50 AS DECIMAL(10,2)), '$', CAST('2020-02-29' AS DATE)))",
    "COMMIT",
    "SET SESSION binlog_transaction_compression = OFF",
]
LARGE_JSON_DIR = "large-json"


def workload(flavour: str) -> list[str]:
    """The statements, in order (one transaction each: autocommit)."""
    statements = [
        "SET SESSION time_zone = '+00:00'",
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",  # the zero dates of row 7
        f"CREATE DATABASE {SCHEMA}",
        f"USE {SCHEMA}",
    ]
    for create, rows in (
        (INTEGERS, INTEGER_ROWS),
        (NUMBERS.format(scale=30 if flavour == "mysql" else 38), NUMBER_ROWS),
        (STRINGS, STRING_ROWS),
        (TEMPORALS, TEMPORAL_ROWS),
        (MEMBERS, MEMBER_ROWS),
    ):
        statements += [create, *rows]
    if flavour == "mysql":
        statements += [JSONS, *JSON_ROWS]
        # One zstd-compressed transaction (TRANSACTION_PAYLOAD) of several rows events.
        statements += [
            "SET SESSION binlog_transaction_compression = ON",
            "BEGIN",
            "INSERT INTO ints VALUES (10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1)",
            "UPDATE strings SET t = REPEAT('compressed ', 50) WHERE id = 5",
            "DELETE FROM members WHERE id = 1",
            "COMMIT",
            "SET SESSION binlog_transaction_compression = OFF",
        ]
    else:
        # zlib-compressed rows events (WRITE/UPDATE/DELETE_ROWS_COMPRESSED).
        statements += [
            "SET GLOBAL log_bin_compress = ON",
            "SET GLOBAL log_bin_compress_min_len = 10",
            "INSERT INTO ints VALUES (10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1)",
            "UPDATE strings SET t = REPEAT('compressed ', 50) WHERE id = 5",
            "DELETE FROM members WHERE id = 1",
            "SET GLOBAL log_bin_compress = OFF",
        ]
    return statements


def record(flavour: str, out_root: Path = CORPUS) -> Path:
    mysql = ensure() if flavour == "mysql" else None  # the cached MySQL 9.7 tree
    server = EmbeddedServer(buffer_pool="64M", mysql=mysql)
    info = server.start()
    try:
        with info.admin_connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = cur.fetchone()[0]
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW BINARY LOGS")
            name = cur.fetchall()[-1][0]
            for statement in workload(flavour):
                cur.execute(statement)
            cur.execute("FLUSH BINARY LOGS")
            large_name = None
            if flavour == "mysql":
                cur.execute("SHOW BINARY LOGS")
                large_name = cur.fetchall()[-1][0]
                for statement in LARGE_JSON_ROWS:
                    cur.execute(statement)
                cur.execute("FLUSH BINARY LOGS")
        out = out_root / DIRS[flavour]
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        shutil.copyfile(server.datadir / name, out / name)
        if large_name:
            (out / LARGE_JSON_DIR).mkdir()
            shutil.copyfile(server.datadir / large_name, out / LARGE_JSON_DIR / large_name)
    finally:
        server.stop()
    tool = mysql.command("usr/bin/mysqlbinlog") if mysql else [MARIADB_BINLOG]
    verbose = subprocess.run(
        [*tool, "--no-defaults", "--base64-output=DECODE-ROWS", "-v", str(out / name)],
        capture_output=True,
        check=True,
    ).stdout
    (out / f"{name}.verbose.txt").write_bytes(verbose)
    tool_version = subprocess.run(
        [*tool, "--no-defaults", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    tool_version = tool_version[tool_version.find("mysqlbinlog") :] if mysql else tool_version
    (out / "VERSION").write_text(f"server {version}\ndump {tool_version}\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flavours", nargs="*", help="mysql, mariadb (default: both)")
    args = parser.parse_args(argv)
    unknown = set(args.flavours) - set(DIRS)
    if unknown:
        parser.error(f"unknown flavour(s) {', '.join(sorted(unknown))}")
    for flavour in args.flavours or sorted(DIRS):
        out = record(flavour)
        sizes = ", ".join(f"{p.name} {p.stat().st_size} B" for p in sorted(out.iterdir()))
        print(f"{flavour}: {out} ({sizes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
