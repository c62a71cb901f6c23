"""No value changes meaning on its way to Spark: a value the output type cannot hold is
refused, naming it, on both roads (snapshot and binlog); every other value arrives exact."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from pyspark.errors import StreamingQueryException

from tests.support.streams import StreamRun, read_output

TINYINT1_OPTION = "treat-tinyint1-as-boolean.enabled"
PERMISSIVE = "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'"


def _run(server, spark, tmp_path, database: str, table: str, name: str, **options) -> StreamRun:
    return StreamRun(
        spark,
        server.source_options(database, rf"{database}\.{table}", **options),
        tmp_path / f"{name}-ck",
        tmp_path / f"{name}-out",
    )


def _refusal(run: StreamRun) -> str:
    with pytest.raises(StreamingQueryException) as caught:
        run.run_to_end()
    return str(caught.value)


def _rows(spark, out) -> list[dict]:
    """What the sink holds: the rows of every batch file written (none: [])."""
    if not list(out.rglob("*.parquet")):
        return []
    return read_output(spark, out)


def _by_key(run: StreamRun, spark) -> dict:
    """The latest row per key, as a sink that keeps the last change per key would."""
    latest = {}
    for row in sorted(read_output(spark, run.out), key=lambda r: r["_seq"]):
        latest[row["id"]] = row
    return latest


@pytest.mark.one_decoder  # the snapshot reads no binlog; its typing: see the dates below
def test_a_tinyint1_other_than_0_or_1_is_refused_by_the_snapshot_naming_it(server, spark, tmp_path):
    database = server.fresh_database("tiny_refused_snapshot")
    server.execute(
        "CREATE TABLE flags (id INT PRIMARY KEY, f TINYINT(1))",
        "INSERT INTO flags VALUES (1, 0), (2, 1), (3, 5), (4, NULL)",
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "flags", "s")
    message = _refusal(run)
    assert f"{database}.flags.f" in message and "value 5 " in message
    assert TINYINT1_OPTION in message
    assert _rows(spark, run.out) == []  # nothing of that batch


def test_a_tinyint1_other_than_0_or_1_is_refused_by_the_binlog_naming_it(server, spark, tmp_path):
    database = server.fresh_database("tiny_refused_binlog")
    server.execute(
        "CREATE TABLE flags (id INT PRIMARY KEY, f TINYINT(1))",
        "INSERT INTO flags VALUES (1, 0), (2, 1)",
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "flags", "b")
    run.run_to_end()
    server.execute("INSERT INTO flags VALUES (3, 1), (4, -1)", database=database)
    message = _refusal(run)
    assert f"{database}.flags.f" in message and "value -1 " in message
    assert TINYINT1_OPTION in message and "ending at binlog" in message
    assert {r["id"] for r in read_output(spark, run.out)} == {1, 2}  # not 3: same batch
    assert {type(r["f"]) for r in read_output(spark, run.out)} == {bool}


def test_with_the_option_off_a_tinyint1_is_an_exact_integer(server, spark, tmp_path):
    database = server.fresh_database("tiny_integer")
    server.execute(
        "CREATE TABLE flags (id INT PRIMARY KEY, f TINYINT(1), u TINYINT(1) UNSIGNED)",
        "INSERT INTO flags VALUES (1, 0, 0), (2, 1, 1), (3, 5, 200), (4, -1, 255), "
        "(5, 127, 2), (6, -128, NULL), (7, NULL, NULL)",
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "flags", "i", **{TINYINT1_OPTION: "false"})
    run.run_to_end()
    server.execute(
        "INSERT INTO flags VALUES (8, 2, 254)",
        "UPDATE flags SET f = 0 WHERE id = 3",
        database=database,
    )
    run.run_to_end()
    rows = _by_key(run, spark)
    assert {k: (r["f"], r["u"]) for k, r in rows.items()} == {
        1: (0, 0), 2: (1, 1), 3: (0, 200), 4: (-1, 255), 5: (127, 2), 6: (-128, None),
        7: (None, None), 8: (2, 254),
    }  # fmt: skip
    schema = spark.read.parquet(str(run.out)).schema
    assert schema["f"].dataType.typeName() == "byte"
    assert schema["u"].dataType.typeName() == "short"


def test_a_tinyint1_key_is_an_integer_whatever_the_option(server, spark, tmp_path):
    database = server.fresh_database("tiny_key")
    server.execute(
        "CREATE TABLE codes (id TINYINT(1) PRIMARY KEY, v VARCHAR(10), f TINYINT(1))",
        "INSERT INTO codes VALUES (1, 'one', 1), (5, 'five', 0)",
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "codes", "k")  # the default: booleans
    run.run_to_end()
    server.execute("INSERT INTO codes VALUES (7, 'seven', 1)", database=database)
    run.run_to_end()
    rows = _by_key(run, spark)
    assert {k: (r["v"], r["f"]) for k, r in rows.items()} == {
        1: ("one", True),
        5: ("five", False),
        7: ("seven", True),
    }
    schema = spark.read.parquet(str(run.out)).schema
    assert schema["id"].dataType.typeName() == "byte"
    assert schema["f"].dataType.typeName() == "boolean"


# The snapshot reads no binlog; how its two typing paths (C and Arrow) treat every shape of
# date is tests/unit/reader/test_native_columns.py's: both leave a date that is not real to
# the same per-value check. A day past the month's end and a zero month stand for the rest.
@pytest.mark.one_decoder
@pytest.mark.parametrize("value", ["2020-02-31", "2020-00-15"])
def test_a_date_neither_real_nor_zero_is_refused_by_the_snapshot(server, spark, tmp_path, value):
    database = server.fresh_database("date_refused_snapshot")
    server.execute(
        "CREATE TABLE days (id INT PRIMARY KEY, d DATE, dt DATETIME(3))",
        PERMISSIVE,
        f"INSERT INTO days VALUES (1, '2020-01-01', NULL), (2, '{value}', NULL)",
        database=database,
    )
    message = _refusal(_run(server, spark, tmp_path, database, "days", "d"))
    assert f"{database}.days.d" in message and value in message


@pytest.mark.one_decoder  # the snapshot reads no binlog; its typing: see above
@pytest.mark.parametrize("client", ["pymysql", "mysqlclient"])
def test_a_datetime_neither_real_nor_zero_is_refused_by_either_snapshot_client(
    server, spark, tmp_path, client
):
    database = server.fresh_database(f"datetime_refused_{client}")
    server.execute(
        "CREATE TABLE days (id INT PRIMARY KEY, dt DATETIME(3))",
        PERMISSIVE,
        "INSERT INTO days VALUES (1, '2021-02-29 10:11:12.5')",
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "days", "c", **{"scan.snapshot.client": client})
    message = _refusal(run)
    assert f"{database}.days.dt" in message and "2021-02-29 10:11:12" in message


@pytest.mark.parametrize(
    "column, value, spelled",
    [
        ("d", "'2020-00-15'", "2020-00-15"),
        ("dt", "'2020-04-31 01:02:03.250'", "2020-04-31 01:02:03.250000"),
    ],
)
def test_a_date_neither_real_nor_zero_is_refused_by_the_binlog(
    server, spark, tmp_path, column, value, spelled
):
    database = server.fresh_database("date_refused_binlog")
    server.execute(
        "CREATE TABLE days (id INT PRIMARY KEY, d DATE, dt DATETIME(3))",
        "INSERT INTO days VALUES (1, '2020-01-01', '2020-01-01 00:00:00')",
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "days", "b")
    run.run_to_end()
    server.execute(
        PERMISSIVE, f"INSERT INTO days (id, {column}) VALUES (2, {value})", database=database
    )
    message = _refusal(run)
    assert f"{database}.days.{column}" in message and spelled in message
    assert "ending at binlog" in message


def test_the_zero_date_is_null_on_both_roads(server, spark, tmp_path):
    database = server.fresh_database("zero_dates")
    zero = "(%s, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')"
    server.execute(
        "CREATE TABLE days (id INT PRIMARY KEY, d DATE, dt DATETIME(6), ts TIMESTAMP NULL)",
        "SET SESSION sql_mode = ''",
        "INSERT INTO days VALUES " + zero % 1,
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "days", "z")
    run.run_to_end()
    server.execute("SET SESSION sql_mode = ''", "INSERT INTO days VALUES " + zero % 2,
                   database=database)  # fmt: skip
    run.run_to_end()
    rows = _by_key(run, spark)
    assert {k: (r["d"], r["dt"], r["ts"]) for k, r in rows.items()} == {
        1: (None, None, None),
        2: (None, None, None),
    }


EDGE_COLUMNS = """
  id INT PRIMARY KEY,
  yr YEAR, tm TIME(6), f FLOAT, db DOUBLE, en ENUM('a','b'), st SET('a','b','c'),
  c CHAR(5), lc CHAR(5) CHARACTER SET latin1,
  l VARCHAR(300) CHARACTER SET latin1, w VARCHAR(300) CHARACTER SET cp1251,
  g VARCHAR(100) CHARACTER SET gbk, big BIGINT UNSIGNED, dec65 DECIMAL(65,30),
  dec38 DECIMAL(38,{scale}), b1 BIT(1), b64 BIT(64)
"""
EDGE_NAMES = [
    "id", "yr", "tm", "f", "db", "en", "st", "c", "lc", "l", "w", "g", "big", "dec65",
    "dec38", "b1", "b64",
]  # fmt: skip
HIGH_BYTES = "x'" + bytes(range(0x20, 0x100)).hex() + "'"
CP1251_BYTES = "x'" + bytes(b for b in range(0x20, 0x100) if b != 0x98).hex() + "'"  # 0x98: none
EDGE_ROWS = [
    "(1, 0, '-838:59:59', 1.401298464324817e-45, 4.9e-324, 2, 5, 'ab  ', 'x  ', "
    f"{HIGH_BYTES}, {CP1251_BYTES}, x'b0a1d6d0cec4', 9223372036854775808, "
    "'99999999999999999999999999999999999.999999999999999999999999999999', "
    "'0.99999999999999999999999999999999999999', 0, 0)",
    "(2, 1901, '838:59:59', 3.4028234e38, 1.7976931348623157e308, 'zz', 7, ' a', '', "
    "'', '', '', 18446744073709551615, "
    "'-99999999999999999999999999999999999.999999999999999999999999999999', "
    "'-0.00000000000000000000000000000000000001', 1, x'ffffffffffffffff')",
    "(3, 2155, '-00:00:00.5', 16777217, -0.0, 1, 0, '', NULL, NULL, NULL, NULL, 0, "
    "'-0.000000000000000000000000000001', 0, NULL, x'0000000000000001')",
    "(4, 1970, '25:00:00.123456', -1.5, 2.5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL)",
]


def _edges_by_both_roads(
    server, spark, tmp_path, database: str, *, scale: int, also: str = "", **options: str
) -> list[dict]:
    """The edge rows read by the snapshot (ids 1-4), then written again through the
    binlog (ids 101-104): the query's output. ``also``: another table captured with
    ``edges`` (the envelope output); ``options``: more source options."""
    server.execute(
        f"CREATE TABLE edges ({EDGE_COLUMNS.format(scale=scale)})",
        "SET SESSION sql_mode = ''",
        "INSERT INTO edges VALUES " + ", ".join(EDGE_ROWS),
        database=database,
    )
    tables = f"(edges|{also})" if also else "edges"
    run = _run(server, spark, tmp_path, database, tables, "edges", **options)
    run.run_to_end()
    server.execute(
        "SET SESSION sql_mode = ''",
        "INSERT INTO edges VALUES " + ", ".join(r.replace("(", "(10", 1) for r in EDGE_ROWS),
        database=database,
    )
    run.run_to_end()
    return read_output(spark, run.out)


def test_edge_values_of_every_type_are_the_same_on_both_roads_and_as_the_server_shows(
    server, spark, tmp_path
):
    """Values at the ends of each type's range and values written the odd ways the
    server accepts (ENUM and SET by number, an invalid ENUM as '', CHAR with trailing
    spaces, every byte of single-byte character sets): the snapshot (the server's own
    text, converted by the server) and the binlog (our decoding) give the same value."""
    database = server.fresh_database("edge_values")
    # MariaDB allows DECIMAL scales up to 38, MySQL up to 30.
    output = _edges_by_both_roads(
        server, spark, tmp_path, database, scale=38 if server.is_mariadb else 30
    )
    snapshot = {r["id"]: r for r in output if r["_op"] == "r"}
    binlog = {r["id"] - 100: r for r in output if r["_op"] == "c"}
    assert set(snapshot) == set(binlog) == {1, 2, 3, 4}
    for key in snapshot:
        for name in EDGE_NAMES[1:]:
            assert snapshot[key][name] == binlog[key][name], (key, name)
    one, two, three, four = (snapshot[k] for k in (1, 2, 3, 4))
    assert (one["yr"], two["yr"], three["yr"], four["yr"]) == (0, 1901, 2155, 1970)
    assert one["tm"] == -(838 * 3600 + 59 * 60 + 59) * 10**6
    assert three["tm"] == -500_000 and four["tm"] == (25 * 3600) * 10**6 + 123_456
    assert one["en"] == "b" and two["en"] == "" and three["en"] == "a"
    assert one["st"] == "a,c" and two["st"] == "a,b,c" and three["st"] == ""
    assert one["c"] == "ab" and two["c"] == " a" and one["lc"] == "x"
    assert one["big"] == 2**63 and two["big"] == 2**64 - 1
    assert one["dec65"] == "9" * 35 + "." + "9" * 30
    if server.is_mariadb:
        assert two["dec38"] == Decimal("-1E-38")
    assert three["f"] == 16777216.0 and one["db"] == 5e-324
    assert one["b64"] == b"\0" * 8 and two["b64"] == b"\xff" * 8
    (latin1,) = server.query(
        "SELECT CONVERT(l USING utf8mb4), CONVERT(w USING utf8mb4), CONVERT(g USING utf8mb4) "
        "FROM edges WHERE id = 1",
        database=database,
    )
    assert (one["l"], one["w"], one["g"]) == tuple(latin1)


@pytest.mark.parametrize("road", ["snapshot", "binlog"])
def test_a_byte_without_a_character_in_its_character_set_is_refused(server, spark, tmp_path, road):
    """cp1251 has no character for 0x98: the server shows '?', which would be a value
    changed on its way; it is refused on both roads instead, naming the byte."""
    database = server.fresh_database(f"charset_refused_{road}")
    server.execute(
        "CREATE TABLE words (id INT PRIMARY KEY, w VARCHAR(10) CHARACTER SET cp1251)",
        "INSERT INTO words VALUES (1, x'cff0e8e2e5f2')",
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "words", road)
    if road == "binlog":
        run.run_to_end()
        assert [r["w"] for r in read_output(spark, run.out)] == ["Привет"]
    server.execute("INSERT INTO words VALUES (2, x'419842')", database=database)
    message = _refusal(run)
    assert f"{database}.words.w" in message and "0x98 at offset 1" in message


def test_edge_values_are_the_same_on_both_roads_in_the_envelope(server, spark, tmp_path):
    """The envelope's JSON images (several tables) of the same edge values: the snapshot's
    (read by PyMySQL here, by mysqlclient in the typed test) and the binlog's are the
    same documents."""
    database = server.fresh_database("edge_envelope")
    server.execute("CREATE TABLE other (id INT PRIMARY KEY)", database=database)
    images = {}
    output = _edges_by_both_roads(
        server,
        spark,
        tmp_path,
        database,
        scale=30,
        also="other",
        **{"scan.snapshot.client": "pymysql"},
    )
    for row in output:
        image = json.loads(row["after"])
        key = image.pop("id")
        images[(row["op"], key % 100)] = image
    assert {k for k in images} == {(op, k) for op in ("r", "c") for k in (1, 2, 3, 4)}
    for key in (1, 2, 3, 4):
        assert images[("r", key)] == images[("c", key)], key
    assert images[("r", 1)]["en"] == "b" and images[("r", 1)]["b1"] is False


def test_json_documents_are_the_same_on_both_roads(server, spark, tmp_path):
    """MySQL's JSON: numbers of every kind (integers past 2^63, doubles, decimals from a
    cast), nesting, unicode and escapes: the snapshot's text and the binlog's binary
    document give the same canonical text."""
    if server.is_mariadb:
        pytest.skip("MariaDB's JSON is LONGTEXT: it arrives as stored (test_types)")
    database = server.fresh_database("json_values")
    documents = [
        '\'{"big": 18446744073709551615, "neg": -9223372036854775808, "d": 1.5e300}\'',
        "CAST(CAST(12345678901234567890.123456789 AS DECIMAL(30,9)) AS JSON)",
        "JSON_OBJECT('dec', CAST(1.50 AS DECIMAL(4,2)), 'x', JSON_ARRAY(0.1, -0.0, 1e-320))",
        '\'["\\\\u00e9\\\\n\\\\"", {"": null, "b": true}, [], {}]\'',
        "'\"\\\\ud83d\\\\ude42\"'",
    ]
    server.execute("CREATE TABLE docs (id INT PRIMARY KEY, j JSON)", database=database)
    server.execute(
        *[f"INSERT INTO docs VALUES ({i}, {d})" for i, d in enumerate(documents, 1)],
        database=database,
    )
    run = _run(server, spark, tmp_path, database, "docs", "json")
    run.run_to_end()
    server.execute(
        *[f"INSERT INTO docs VALUES ({i + 100}, {d})" for i, d in enumerate(documents, 1)],
        database=database,
    )
    run.run_to_end()
    output = read_output(spark, run.out)
    snapshot = {r["id"]: r["j"] for r in output if r["_op"] == "r"}
    binlog = {r["id"] - 100: r["j"] for r in output if r["_op"] == "c"}
    assert snapshot == binlog
    assert json.loads(snapshot[1])["big"] == 18446744073709551615
    assert snapshot[2] == "12345678901234567890.123456789"  # a DECIMAL keeps its digits
