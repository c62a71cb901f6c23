"""A table of every supported column type and rows of values at their edges, which the
type tests write and read back by snapshot and by binlog, with each client and decoder."""

from __future__ import annotations

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
