"""``cdc_source.delta`` without a server or Spark, a batch as one slice: the envelope's
JSON images parse to the typed columns the single-table output gives, on both roads
(binlog images and snapshot text); a reset (op ``t``) drops every earlier row of its table;
each table's MERGE is applied once per batch, whichever tables a crash left unapplied;
keys are the source's collation-exact key bytes (``_key``), so keys the collation holds
equal ('a', 'A', 'a ') are one row, spelled as the latest change spells it."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal, localcontext

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.delta.changes import after_last_reset, latest_changes
from cdc_source.delta.envelope_images import EnvelopeImages, base64_decode
from cdc_source.delta.lake_table import LegacyTableError, typed_fields
from cdc_source.delta.mirror_table import MirrorTable
from cdc_source.delta.table_set import TableSet
from cdc_source.delta.transactions import app_id_of
from cdc_source.delta.writer import LakeWriter
from cdc_source.keys import sort_key, time_literal
from cdc_source.offsets import BinlogPosition
from reader.arrow_output import ArrowWriter, Emitted, RowOrigins
from reader.key_weights import WeightResolver
from reader.row_keys import RowKeys

# Where the envelope's rows come from (its metadata columns; not looked at here).
ORIGIN = BinlogPosition("binlog.000001", 4, "", 7)


class TablesMirror:
    """The several-table road of the library on one Arrow batch: the writer's table set
    in mode ``mirror``, a batch applied as one slice (as the writer applies each)."""

    def __init__(self, root: str, tables: list, checkpoint: str) -> None:
        def make(path, table, fields):
            app_id = app_id_of(checkpoint, "mirror", table.name)
            return MirrorTable(path, table, app_id, fields)

        self.writer = LakeWriter(table_set=TableSet(root, tables, make), staging=checkpoint)
        self.mirrors = self.writer.table_set.lakes
        self.images = self.writer.table_set.images

    def create(self) -> None:
        self.writer.create()

    def apply(self, envelope: pa.Table, batch_id: int) -> None:
        self.writer.apply_slice(envelope, batch_id, 0, True)


def _col(name, data_type, column_type, **kw) -> ColumnSpec:
    return ColumnSpec(name, data_type, column_type, True, **kw)


COLUMNS = (
    _col("id", "int", "int(11)"),
    _col("ti", "tinyint", "tinyint(4)"),
    _col("tiu", "tinyint", "tinyint(3) unsigned"),
    _col("flag", "tinyint", "tinyint(1)", boolean=True),
    _col("si", "smallint", "smallint(6)"),
    _col("siu", "smallint", "smallint(5) unsigned"),
    _col("mi", "mediumint", "mediumint(9)"),
    _col("miu", "mediumint", "mediumint(8) unsigned"),
    _col("iu", "int", "int(10) unsigned"),
    _col("bi", "bigint", "bigint(20)"),
    _col("biu", "bigint", "bigint(20) unsigned"),
    _col("d10", "decimal", "decimal(10,2)", precision=10, scale=2),
    _col("d38", "decimal", "decimal(38,10)", precision=38, scale=10),
    _col("d65", "decimal", "decimal(65,30)", precision=65, scale=30),
    _col("f", "float", "float"),
    _col("db", "double", "double"),
    _col("b1", "bit", "bit(1)"),
    _col("b10", "bit", "bit(10)"),
    _col("c", "char", "char(5)", char_length=5, collation="utf8mb4_general_ci"),
    _col("vc", "varchar", "varchar(50)", char_length=50, collation="utf8mb4_general_ci"),
    _col("tx", "text", "text", collation="utf8mb4_general_ci"),
    _col("bn", "binary", "binary(4)", octet_length=4),
    _col("vb", "varbinary", "varbinary(10)", octet_length=10),
    _col("bl", "blob", "blob"),
    _col("day", "date", "date"),
    _col("dtm", "datetime", "datetime"),
    _col("dtm6", "datetime", "datetime(6)", fsp=6),
    _col("ts", "timestamp", "timestamp(3)", fsp=3),
    _col("tm", "time", "time"),
    _col("tm6", "time", "time(6)", fsp=6),
    _col("yr", "year", "year(4)"),
    _col("js", "json", "json"),
    _col("en", "enum", "enum('small','large')"),
    _col("st", "set", "set('a','b','c')"),
)
TABLE = TableSchema("db", "t", COLUMNS, ("id",))
OTHER = TableSchema(
    "db", "u", (_col("k", "varchar", "varchar(10)"), _col("n", "int", "int")), ("k",)
)

# Values as the binlog decoder or PyMySQL hands them over (before canonicalization).
RECORDS = [
    (
        1, -128, 255, 1, -32768, 65535, -8388608, 16777215, 4294967295,
        -9223372036854775808, 18446744073709551615,
        Decimal("-12345678.99"), Decimal("1234567890123456789012345678.0123456789"),
        Decimal("-12345678901234567890123456789012345.123456789012345678901234567890"),
        0.10000000149011612, 1.0000000000000002, b"\x01", b"\x02\xaa",
        "ab", "Grüße 🙂 \"quoted\"\n\\", "long text\ttab", b"a\0\0\0", b"\0\x01\0", b"\xff\x00blob",
        dt.date(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59),
        dt.datetime(2024, 2, 29, 12, 34, 56, 789012), dt.datetime(2038, 1, 19, 3, 14, 7, 499000),
        dt.timedelta(hours=-838, minutes=-59, seconds=-59),
        -dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=500000),
        0, '{"k": [1, 2.5, "x"], "n": null, "u": "é"}', "large", "",
    ),
    (
        2, 127, 0, 0, 32767, 0, 8388607, 0, 0, 9223372036854775807, 0,
        Decimal("0.00"), Decimal("0E-10"), Decimal("0E-30"),
        -3.4028234663852886e38, -1e-300, b"\0", b"\0\0",
        "", "", "", b"\0\0\0\0", b"", b"",
        dt.date(2000, 1, 1), dt.datetime(1970, 1, 1, 0, 0, 1),
        dt.datetime(1970, 1, 1, 0, 0, 0, 1), dt.datetime(1970, 1, 1, 0, 0, 1),
        dt.timedelta(hours=838, minutes=59, seconds=59), dt.timedelta(microseconds=1),
        2155, "[]", "small", "a,c",
    ),
    (
        3, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1,
        Decimal("0.01"), Decimal("-0.0000001000"), Decimal("1E-30"),
        1e-45, 5e-324, b"\x01", b"\x03\xff",
        "x", "a'b", "c", b"\x01\x02\x03\x04", b"\xff" * 10, b"\0" * 1000,
        dt.date(9999, 12, 31), "0000-00-00 00:00:00",
        dt.datetime(1000, 1, 1), "0000-00-00 00:00:00",
        dt.timedelta(0), dt.timedelta(seconds=1), 1901, '"s"', "small", "a,b,c",
    ),
    (4,) + (None,) * (len(COLUMNS) - 1),
]  # fmt: skip


def _image(record) -> dict:
    return dict(zip(TABLE.column_names, record, strict=True))


def _emitted(ops_records, table=TABLE) -> list[Emitted]:
    rows = []
    for i, (op, record) in enumerate(ops_records):
        image = _image(record) if table is TABLE else dict(zip(table.column_names, record))
        before = image if op in ("u", "d") else None
        after = image if op != "d" else None
        rows.append(Emitted(table, op, before, after, f"s{i:04d}", 7))
    return rows


def _typed(rows: list[Emitted], table=TABLE) -> pa.Table:
    return pa.Table.from_batches(list(ArrowWriter([table]).batches(rows)))


def _envelope(rows: list[Emitted]) -> pa.Table:
    return pa.Table.from_batches(list(ArrowWriter([TABLE, OTHER]).batches(rows, _origins(rows))))


def _no_keys(rows) -> pa.Array:
    return pa.nulls(len(rows), pa.binary())


def _origins(rows: list[Emitted]) -> RowOrigins:
    return RowOrigins.snapshot(ORIGIN, _no_keys(rows))


def _same(envelope: pa.Table, typed: pa.Table, table=TABLE) -> None:
    images = EnvelopeImages(table)
    parsed = images.changes(envelope)
    for name in table.column_names + ("_op", "_seq"):
        got, want = parsed.column(name), typed.column(name)
        assert got.type == want.type, f"column {name}: {got.type} != {want.type}"
        assert got.to_pylist() == want.to_pylist(), f"column {name}"


def test_binlog_images_through_the_envelope_equal_the_typed_columns():
    """Every type, its extremes, zero dates and NULLs: the JSON image parsed by Arrow equals
    the single-table output's column (value and Arrow type); a delete takes its before-image."""
    rows = _emitted(
        [("c", RECORDS[0]), ("u", RECORDS[1]), ("r", RECORDS[2]), ("c", RECORDS[3])]
        + [("d", RECORDS[0])]
    )
    _same(_envelope(rows), _typed(rows))


def _text_form(value):
    """How the server prints a value in the text protocol (what mysqlclient hands over)."""
    if value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, dt.timedelta):
        return time_literal(value // dt.timedelta(microseconds=1)).encode()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ").encode()
    if isinstance(value, float):
        return repr(value).encode()
    if isinstance(value, Decimal):
        return f"{value:f}".encode()
    return str(value).encode()


def test_snapshot_text_through_the_envelope_equals_the_typed_columns():
    """The snapshot road: the typed output casts the server's text on columns, the envelope
    parses it per value; both agree after the envelope's JSON."""
    texts = [pa.array([_text_form(v) for v in values], pa.binary()) for values in zip(*RECORDS)]
    seqs = pa.array([f"s{i}" for i in range(len(RECORDS))])
    typed = pa.Table.from_batches(
        list(ArrowWriter([TABLE]).snapshot_text_batches(TABLE, texts, seqs, 1))
    )
    envelope = pa.Table.from_batches(
        list(
            ArrowWriter([TABLE, OTHER]).snapshot_text_batches(
                TABLE, texts, seqs, 1, ORIGIN, _no_keys(seqs)
            )
        )
    )
    _same(envelope, typed)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.decimals(min_value=-(10**8) + 1, max_value=10**8 - 1, places=2),
            st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False),
            st.none() | st.floats(allow_nan=False, allow_infinity=False),
            st.none() | st.binary(max_size=12),
            st.none() | st.datetimes(min_value=dt.datetime(1000, 1, 1)),
            st.none() | st.text(max_size=8),
            st.none() | st.integers(-(2**63), 2**63 - 1),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_generated_values_round_trip_through_the_envelope(values):
    columns = (
        _col("id", "int", "int(11)"),
        _col("d", "decimal", "decimal(10,2)", precision=10, scale=2),
        _col("f", "float", "float"),
        _col("db", "double", "double"),
        _col("vb", "varbinary", "varbinary(12)"),
        _col("at", "datetime", "datetime(6)", fsp=6),
        _col("s", "varchar", "varchar(8)"),
        _col("bi", "bigint", "bigint(20)"),
    )
    table = TableSchema("db", "g", columns, ("id",))
    rows = [
        Emitted(table, "c", None, dict(zip(table.column_names, (i,) + v)), f"s{i:04d}", 1)
        for i, v in enumerate(values)
    ]
    envelope = pa.Table.from_batches(
        list(ArrowWriter([table, OTHER]).batches(rows, _origins(rows)))
    )
    _same(envelope, _typed(rows, table), table)


@given(st.lists(st.none() | st.binary(max_size=20), max_size=40), st.integers(0, 5))
@settings(max_examples=100, deadline=None)
def test_base64_decode_on_columns_equals_decoding_each_value(values, skip):
    text = pa.array([None if v is None else base64.b64encode(v).decode() for v in values])
    assert base64_decode(text).to_pylist() == values
    assert base64_decode(text.slice(skip)).to_pylist() == values[skip:]


def test_a_binary_value_that_is_not_base64_is_an_error():
    with pytest.raises(ValueError):
        base64_decode(pa.array(["abc"]))
    with pytest.raises(ValueError):
        base64_decode(pa.array(["ab!c"]))


def test_an_image_with_a_column_the_table_does_not_have_is_an_error():
    """A column added after start-up is not dropped silently."""
    rows = _emitted([("c", RECORDS[0])])
    envelope = _envelope(rows)
    after = json.loads(envelope.column("after")[0].as_py())
    after["new_column"] = 1
    envelope = envelope.set_column(
        envelope.schema.get_field_index("after"), "after", pa.array([json.dumps(after)])
    )
    with pytest.raises(pa.ArrowInvalid):
        EnvelopeImages(TABLE).changes(envelope)


# -- resets (op 't') and the MERGE ----------------------------------------------------


def _changes(*rows, table=OTHER, weights=None, keyed=True) -> pa.Table:
    """A typed batch of table ``OTHER`` (k, n), or another of its shape: rows of (op, k, n,
    seq), with each change's ``_key`` as the source gives it in ``row_key`` (``keyed``)."""
    batch = pa.table(
        {
            "k": pa.array([r[1] for r in rows], pa.string()),
            "n": pa.array([r[2] for r in rows], pa.int32()),
            "_op": pa.array([r[0] for r in rows], pa.string()),
            "_seq": pa.array([r[3] for r in rows], pa.string()),
        }
    )
    if not keyed:
        return batch
    data = pc.invert(pc.equal(batch.column("_op"), "t")).combine_chunks()
    keys = pa.nulls(batch.num_rows, pa.binary())
    if pc.any(data).as_py():
        values = RowKeys(table, weights)([batch.column("k").filter(data)])
        keys = pc.replace_with_mask(keys, data, values)
    return batch.append_column("_key", keys)


def test_after_last_reset_keeps_the_changes_after_the_last_reset():
    batch = _changes(
        ("c", "a", 1, "01"), ("t", None, None, "02"), ("c", "b", 2, "03"),
        ("t", None, None, "05"), ("u", "b", 3, "06"), ("c", "c", 4, "04"), keyed=False,
    )  # fmt: skip
    later, reset = after_last_reset(batch)
    assert reset == "05"
    assert later.to_pylist() == [{"k": "b", "n": 3, "_op": "u", "_seq": "06"}]
    same, none = after_last_reset(batch.slice(0, 1))
    assert none is None and same == batch.slice(0, 1)


def _mirror(tmp_path, name="m", table=OTHER) -> MirrorTable:
    schema = pa.schema([("k", pa.string()), ("n", pa.int32()), ("_seq", pa.string())])
    return MirrorTable(str(tmp_path / name), table, "app", typed_fields(schema))


def _rows(path) -> dict:
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    assert table.column_names[-2:] == ["_seq", "_key"]
    rows = {r["k"]: (r["n"], r["_seq"]) for r in table.to_pylist()}
    assert len(rows) == table.num_rows
    keys = table.column("_key").to_pylist()
    assert len(set(keys)) == len(keys), "two rows of one key"
    return rows


def test_a_reset_deletes_every_older_row_and_later_changes_apply(tmp_path):
    mirror = _mirror(tmp_path)
    mirror.apply(_changes(("c", "a", 1, "10"), ("c", "b", 2, "11"), ("c", "c", 3, "12")), 0)
    assert _rows(tmp_path / "m") == {"a": (1, "10"), "b": (2, "11"), "c": (3, "12")}
    batch = _changes(
        ("u", "a", 5, "20"),  # before the reset: gone with it
        ("c", "x", 6, "21"),  # idem, a key new in this batch
        ("t", None, None, "22"),
        ("c", "b", 7, "23"),  # after it: applied (replaces the older row)
        ("c", "y", 8, "24"),
        ("d", "y", 8, "25"),  # inserted and deleted after the reset
        ("c", "z", 9, "26"),
    )
    outcome = mirror.apply(batch, 1)
    assert outcome.committed
    assert _rows(tmp_path / "m") == {"b": (7, "23"), "z": (9, "26")}


def test_a_batch_of_only_a_reset_empties_the_table_and_the_last_of_two_resets_counts(tmp_path):
    mirror = _mirror(tmp_path)
    mirror.apply(_changes(("c", "a", 1, "10"), ("c", "b", 2, "11")), 0)
    assert mirror.apply(_changes(("t", None, None, "20")), 1).committed
    assert _rows(tmp_path / "m") == {}
    mirror.apply(_changes(("c", "a", 1, "30")), 2)
    batch = _changes(
        ("t", None, None, "40"), ("c", "b", 2, "41"), ("t", None, None, "42"), ("c", "c", 3, "43")
    )
    mirror.apply(batch, 3)
    assert _rows(tmp_path / "m") == {"c": (3, "43")}
    version = deltalake.DeltaTable(str(tmp_path / "m")).version()
    assert not mirror.apply(batch, 3).committed  # a re-run is recognised
    assert deltalake.DeltaTable(str(tmp_path / "m")).version() == version


def _envelope_rows(*rows) -> pa.Table:
    """Envelope rows: (table, op, after-image dict or None, seq)."""
    return pa.table(
        {
            "database": ["db"] * len(rows),
            "table": [r[0] for r in rows],
            "op": [r[1] for r in rows],
            "key": ["{}"] * len(rows),
            "before": pa.array([None] * len(rows), pa.string()),
            "after": [None if r[2] is None else json.dumps(r[2]) for r in rows],
            "_seq": [r[3] for r in rows],
            "_ts_ms": pa.array([1] * len(rows), pa.int64()),
            "row_key": pa.array([_envelope_key(r[0], r[2]) for r in rows], pa.binary()),
        }
    )


def _envelope_key(table: str, image: dict | None) -> bytes | None:
    """The source's ``row_key`` of an envelope row of table ``table`` (the fake server's
    weights for a collated key)."""
    schema = {"a": FIRST, "b": SECOND, "s": CI}.get(table)
    if image is None or schema is None:
        return None
    key = tuple(image[name] for name in schema.primary_key)
    return sort_key(schema, key, lambda _c, v: _Server.weight(v))


FIRST = TableSchema("db", "a", (_col("id", "int", "int"), _col("v", "varchar", "text")), ("id",))
SECOND = TableSchema("db", "b", OTHER.columns, ("k",))


def _small_tables():
    return FIRST, SECOND


def test_several_tables_a_reset_touches_only_its_table(tmp_path):
    first, second = _small_tables()
    mirrors = TablesMirror(str(tmp_path), [second, first], str(tmp_path / "ck"))
    mirrors.create()
    mirrors.apply(
        _envelope_rows(
            ("a", "r", {"id": 1, "v": "x"}, "10"), ("a", "r", {"id": 2, "v": "y"}, "11"),
            ("b", "r", {"k": "p", "n": 1}, "12"),
        ),
        0,
    )  # fmt: skip
    mirrors.apply(
        _envelope_rows(
            ("b", "t", None, "20"), ("a", "u", {"id": 2, "v": "z"}, "21"),
            ("b", "c", {"k": "q", "n": 2}, "22"),
        ),
        1,
    )  # fmt: skip
    a = deltalake.DeltaTable(str(tmp_path / "db.a")).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["v"]) for r in a) == [(1, "x"), (2, "z")]
    assert _rows(tmp_path / "db.b") == {"q": (2, "22")}


def test_several_tables_a_re_run_batch_applies_only_the_tables_not_yet_applied(tmp_path):
    """A crash between two tables' commits: the re-run skips the first, applies the second."""
    first, second = _small_tables()
    mirrors = TablesMirror(str(tmp_path), [first, second], str(tmp_path / "ck"))
    mirrors.create()
    batch = _envelope_rows(
        ("a", "c", {"id": 1, "v": "x"}, "10"), ("b", "c", {"k": "p", "n": 1}, "11")
    )
    only_first = mirrors.mirrors["db.a"]
    only_first.apply(mirrors.images["db.a"].changes(batch.slice(0, 1)), 5)
    versions = {n: deltalake.DeltaTable(m.path).version() for n, m in mirrors.mirrors.items()}
    mirrors.apply(batch, 5)
    after = {n: deltalake.DeltaTable(m.path).version() for n, m in mirrors.mirrors.items()}
    claim_and_write = 2  # the query's first write to a table created empty claims it
    assert after == {"db.a": versions["db.a"], "db.b": versions["db.b"] + claim_and_write}
    mirrors.apply(batch, 5)  # run again: nothing changes
    assert {n: deltalake.DeltaTable(m.path).version() for n, m in mirrors.mirrors.items()} == after
    assert _rows(tmp_path / "db.b") == {"p": (1, "11")}
    assert mirrors.mirrors["db.a"].app_id != mirrors.mirrors["db.b"].app_id


def test_several_tables_a_change_of_a_table_not_mirrored_is_an_error(tmp_path):
    first, second = _small_tables()
    mirrors = TablesMirror(str(tmp_path), [first, second], str(tmp_path / "ck"))
    with pytest.raises(ValueError, match="not mirrored"):
        mirrors.apply(_envelope_rows(("c", "c", {"id": 1}, "10")), 0)


def test_several_tables_a_column_named_like_the_mirrors_own_is_refused(tmp_path):
    first, _ = _small_tables()
    clash = TableSchema("db", "z", (_col("id", "int", "int"), _col("_seq", "int", "int")), ("id",))
    with pytest.raises(ValueError, match="_seq"):
        TablesMirror(str(tmp_path), [first, clash], str(tmp_path / "ck"))


def test_several_tables_a_column_named_key_is_refused(tmp_path):
    first, _ = _small_tables()
    clash = TableSchema("db", "z", (_col("id", "int", "int"), _col("_key", "int", "int")), ("id",))
    with pytest.raises(ValueError, match="_key"):
        TablesMirror(str(tmp_path), [first, clash], str(tmp_path / "ck"))


# -- keys compared the way the server compares them (_key) ------------------------------


class _Server:
    """Stands in for the server's ``WEIGHT_STRING`` under utf8mb4_general_ci (on ASCII:
    case and trailing spaces do not count), behind the real :class:`WeightResolver`."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, list]] = []

    def connect(self):
        return _Connection(self)

    @staticmethod
    def weight(value: str) -> bytes:
        return value.rstrip(" ").upper().encode("utf-16-be")

    def resolver(self) -> WeightResolver:
        return WeightResolver(self.connect)


class _Connection:
    open = True

    def __init__(self, server: _Server) -> None:
        self.server = server

    def cursor(self):
        return _Cursor(self.server)

    def close(self) -> None:
        pass


class _Cursor:
    def __init__(self, server: _Server) -> None:
        self.server, self.row = server, None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def execute(self, query: str, params: list) -> None:
        assert query.count("WEIGHT_STRING(") == len(params)
        assert "COLLATE utf8mb4_general_ci" in query
        self.server.queries.append((query, list(params)))
        self.row = tuple(bytearray(self.server.weight(p)) for p in params)

    def fetchone(self):
        return self.row


def _ci(name, data_type="varchar", column_type="varchar(10)", **kw) -> ColumnSpec:
    return _col(
        name, data_type, column_type, char_length=10, charset="utf8mb4",
        collation="utf8mb4_general_ci", **kw,
    )  # fmt: skip


CI = TableSchema("db", "s", (_ci("k"), _col("n", "int", "int")), ("k",))


def test_key_bytes_of_re_spelled_keys_are_equal_and_latest_changes_keeps_one_per_key():
    """'a', 'A' and 'a ' are one key under utf8mb4_general_ci: one ``_key``, and the batch's
    last change of it (the highest ``_seq``) is the one kept, with its spelling."""
    server = _Server()
    with_keys = _changes(
        ("c", "a", 1, "10"), ("u", "A", 2, "11"), ("c", "b", 3, "12"), ("u", "a ", 4, "13"),
        ("d", "B  ", 3, "14"), ("c", "c", 5, "15"), table=CI, weights=server.resolver(),
    )  # fmt: skip
    batch = with_keys
    key = with_keys.column("_key").to_pylist()
    assert key[0] == key[1] == key[3] and key[2] == key[4]
    assert len(set(key)) == 3
    assert key == [
        sort_key(CI, (k,), lambda _c, v: server.weight(v)) for k in batch["k"].to_pylist()
    ]
    latest = latest_changes(with_keys)
    assert sorted((r["_op"], r["k"], r["_seq"]) for r in latest.to_pylist()) == [
        ("c", "c", "15"), ("d", "B  ", "14"), ("u", "a ", "13"),
    ]  # fmt: skip
    assert len(server.queries) == 1  # the batch's distinct strings in one round trip
    assert sorted(server.queries[0][1]) == ["A", "B  ", "a", "a ", "b", "c"]


def test_latest_changes_groups_by_the_key_bytes_alone():
    """Hand-built ``_key``: rows whose key columns differ are one key when their bytes are
    equal, and rows with equal key columns but other bytes are two."""
    batch = _changes(
        ("c", "x", 1, "01"),
        ("u", "X", 2, "02"),
        ("c", "y", 3, "03"),
        ("u", "y", 4, "04"),
        keyed=False,
    ).append_column("_key", pa.array([b"\x01", b"\x01", b"\x02", b"\x03"], pa.binary()))
    latest = latest_changes(batch)
    assert latest["_seq"].to_pylist() == ["02", "03", "04"]


def test_weights_are_fetched_in_batches_and_cached():
    server = _Server()
    keys = RowKeys(CI, server.resolver())
    values = [f"v{i:04d}" for i in range(1200)]
    batch = [pa.array(values + values, pa.string())]
    first = keys(batch)
    assert len(server.queries) == 3  # 1,200 distinct values, 500 a query
    assert first.to_pylist()[:1200] == first.to_pylist()[1200:]
    upper = [pa.array([v.upper() for v in values], pa.string())]
    assert keys(upper).to_pylist() == first.to_pylist()[:1200]
    assert len(server.queries) == 6
    keys(batch)
    assert len(server.queries) == 6  # all cached


def test_a_key_without_a_string_needs_no_server_and_a_string_key_needs_weights():
    table = TableSchema("db", "i", (_col("id", "int", "int"), _col("n", "int", "int")), ("id",))
    batch = pa.table({"id": pa.array([3, -1], pa.int32()), "n": pa.array([1, 2], pa.int32())})
    assert RowKeys(table)([batch.column("id")]).to_pylist() == [
        sort_key(table, (3,)), sort_key(table, (-1,))
    ]  # fmt: skip
    with pytest.raises(ValueError, match="collation weights"):
        RowKeys(CI)


KEY_COLUMNS = (
    "id", "ti", "flag", "siu", "miu", "iu", "bi", "biu", "d10", "d38", "d65", "c", "vc", "bn",
    "vb", "day", "dtm", "dtm6", "ts", "tm", "tm6", "yr",
)  # fmt: skip


@pytest.mark.parametrize(
    "key",
    [(name,) for name in KEY_COLUMNS]
    + [("bi", "vc", "dtm6", "d10", "c"), ("tm6", "vc"), ("d65", "day", "bn", "ts", "yr")],
)
def test_key_bytes_of_typed_columns_equal_the_sources_sort_key(key):
    """Per key type (and composite keys, on columns or row by row): ``_key`` of the typed
    output, on both roads (single table, envelope), is :func:`sort_key` of the values the
    source read (what the readers compare keys by)."""
    records = [r for r in RECORDS[:3] if "0000-00-00" not in str([r[i] for i in _at(key)])]
    table = TableSchema("db", "t", COLUMNS, key)
    server = _Server()
    rows = _emitted([("c", r) for r in records] + [("d", records[0])])
    rows = [Emitted(table, e.op, e.before, e.after, e.seq, e.ts_ms) for e in rows]
    with localcontext() as context:  # exact DECIMAL units (the default precision is 28)
        context.prec = 100
        want = [
            sort_key(
                table, tuple((e.after or e.before)[k] for k in key), lambda _c, v: server.weight(v)
            )
            for e in rows
        ]
    typed = _typed(rows, table)
    assert RowKeys(table, server.resolver())([typed.column(k) for k in key]).to_pylist() == want
    writer = ArrowWriter([table, OTHER])
    envelope = pa.Table.from_batches(list(writer.batches(rows, _origins(rows))))
    parsed = EnvelopeImages(table).changes(envelope)
    assert RowKeys(table, server.resolver())([parsed.column(k) for k in key]).to_pylist() == want


def _at(key) -> list[int]:
    return [TABLE.column_names.index(k) for k in key]


def test_a_re_spelled_key_replaces_its_row_and_its_spelling(tmp_path):
    """An update that only re-spells a key ('a' to 'A', 'b' to 'b  ') is one ``u`` with the
    new spelling: the Delta table keeps one row, spelled anew; a later delete spelled
    otherwise removes it; the same within one batch and after a reset."""
    server = _Server()
    mirror = _mirror(tmp_path, table=CI)
    weights = server.resolver()

    def _changes(*rows):  # noqa: F811 (the module's, keyed as table CI's)
        return globals()["_changes"](*rows, table=CI, weights=weights)

    mirror.apply(_changes(("r", "a", 1, "10"), ("r", "b", 2, "11"), ("r", "c", 3, "12")), 0)
    mirror.apply(_changes(("u", "A", 4, "20"), ("u", "b  ", 5, "21")), 1)
    assert _rows(tmp_path / "m") == {"A": (4, "20"), "b  ": (5, "21"), "c": (3, "12")}
    batch = _changes(
        ("d", "B", 5, "30"),  # deletes 'b  '
        ("c", "x", 6, "31"),
        ("u", "X", 7, "32"),
        ("u", "x ", 8, "33"),  # one new row
        ("u", "C", 9, "34"),
        ("d", "c ", 9, "35"),
        ("c", "c", 10, "36"),  # deleted, back
    )
    mirror.apply(batch, 2)
    assert _rows(tmp_path / "m") == {"A": (4, "20"), "x ": (8, "33"), "c": (10, "36")}
    mirror.apply(_changes(("u", "a", 11, "40"), ("t", None, None, "41"), ("c", "X", 12, "42")), 3)
    assert _rows(tmp_path / "m") == {"X": (12, "42")}
    # an older change does not replace a newer row, whatever its spelling
    mirror.apply(_changes(("u", "x", 13, "39")), 4)
    assert _rows(tmp_path / "m") == {"X": (12, "42")}


def test_several_tables_re_spelled_keys_are_one_row(tmp_path):
    """The envelope road: a table with a collated string key, re-spelled."""
    first, _ = _small_tables()
    mirrors = TablesMirror(str(tmp_path), [first, CI], str(tmp_path / "ck"))
    mirrors.create()
    mirrors.apply(
        _envelope_rows(
            ("s", "r", {"k": "p", "n": 1}, "10"), ("s", "r", {"k": "q", "n": 2}, "11"),
            ("a", "r", {"id": 1, "v": "x"}, "12"),
        ),
        0,
    )  # fmt: skip
    mirrors.apply(
        _envelope_rows(("s", "u", {"k": "P ", "n": 3}, "20"), ("s", "u", {"k": "Q", "n": 4}, "21")),
        1,
    )
    assert _rows(tmp_path / "db.s") == {"P ": (3, "20"), "Q": (4, "21")}


def test_a_delta_table_without_key_is_refused(tmp_path):
    """A table written by an earlier version (no ``_key``) is refused with what to do,
    before any change is applied to it."""
    legacy = tmp_path / "m"
    deltalake.write_deltalake(
        str(legacy),
        pa.table({"k": ["a"], "n": pa.array([1], pa.int32()), "_seq": ["10"]}),
    )
    mirror = _mirror(tmp_path)
    with pytest.raises(LegacyTableError, match="no _key column.*rebuild it"):
        mirror.check()
    with pytest.raises(LegacyTableError):
        mirror.apply(_changes(("c", "b", 2, "20")), 0)
    assert deltalake.DeltaTable(str(legacy)).version() == 0
    _mirror(tmp_path, "new").check()  # no table yet: nothing to refuse
    first, second = _small_tables()
    deltalake.write_deltalake(
        str(tmp_path / "db.b"), pa.table({"k": ["a"], "n": pa.array([1], pa.int32())})
    )
    mirrors = TablesMirror(str(tmp_path), [first, second], str(tmp_path / "ck"))
    with pytest.raises(LegacyTableError, match="db.b"):
        mirrors.create()
