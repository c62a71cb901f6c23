"""Column control: the column options are read and checked before anything connects, the
masks keep their promises for any value, and the output schema follows the choices."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import IntegerType, StringType

from cdc_source.catalog import ColumnSpec, TableSchema
from cdc_source.column_masks import HASH, MASK, TRUNCATE, Mask
from cdc_source.options import OptionError, parse_options
from cdc_source.output_schema import output_schema

BASE = {
    "hostname": "db",
    "username": "cdc",
    "password": "pw",
    "database-name": "shop",
    "table-name": "shop.customers",
}
SALT_KEY = "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K"


def _text(name: str) -> ColumnSpec:
    return ColumnSpec(name, "varchar", "varchar(40)", True, char_length=40, charset="utf8mb4")


TABLE = TableSchema(
    "shop",
    "customers",
    (
        ColumnSpec("id", "int", "int(11)", False),
        _text("email"),
        _text("phone"),
        _text("note"),
        _text("ssn"),
        ColumnSpec("age", "int", "int(11)", True),
    ),
    ("id",),
)


def _options(**columns: str):
    return parse_options({**BASE, **columns})


def test_the_column_options_are_read_with_their_keys_parameters():
    options = _options(
        **{
            "column.exclude.list": r"shop\.customers\.ssn",
            SALT_KEY: r"shop\.customers\.email",
            "column.mask.with.6.chars": r"shop\.customers\.phone",
            "column.truncate.to.3.chars": r"shop\.customers\.note",
        }
    )
    policy = options.columns
    assert policy.exclude == (r"shop\.customers\.ssn",)
    assert policy.excluded(TABLE, "SSN") and not policy.excluded(TABLE, "email")
    email = policy.mask(TABLE, "email")
    assert (email.kind, email.algorithm) == (HASH, "sha256")
    assert email.salt == "czqma0cb5k"  # Spark lower-cases keys: the salt is read so
    assert policy.mask(TABLE, "phone") == Mask(MASK, length=6)
    assert policy.mask(TABLE, "note") == Mask(TRUNCATE, length=3)
    assert policy.mask(TABLE, "id") is None
    policy.check([TABLE])


def test_the_salt_reaches_no_repr_and_no_error():
    options = _options(**{SALT_KEY: r"shop\.customers\.email"})
    assert "czqma0cb5k" not in repr(options).lower()
    with pytest.raises(OptionError) as err:
        parse_options({**BASE, "column.mask.hash.SHA-256.with.sal.CzQMA0cB5K": "x"})
    assert "czqma0cb5k" not in str(err.value).lower()
    with pytest.raises(OptionError) as err:
        _options(**{SALT_KEY: r"shop\.customers\.id"}).columns.check([TABLE])
    assert "czqma0cb5k" not in str(err.value).lower() and "shop.customers.id" in str(err.value)
    with pytest.raises(OptionError) as err:
        parse_options({**BASE, "column.mask.hash.NOPE.with.salt.CzQMA0cB5K": "x"})
    assert "czqma0cb5k" not in str(err.value).lower()


def test_a_salt_given_by_the_secret_option_keeps_its_case_and_is_needed():
    options = _options(
        **{"column.mask.hash.SHA-512": r".*\.email", "column.mask.hash.secret": "PePPer"}
    )
    mask = options.columns.mask(TABLE, "email")
    assert (mask.algorithm, mask.salt, mask.option) == (
        "sha512",
        "PePPer",
        "column.mask.hash.sha512",
    )
    assert "PePPer" not in repr(options)
    with pytest.raises(OptionError, match="'column.mask.hash.secret', which is not set"):
        _options(**{"column.mask.hash.SHA-512": r".*\.email"})


def test_include_and_exclude_lists_together_are_refused_naming_both():
    with pytest.raises(OptionError, match="column.include.list.*column.exclude.list"):
        _options(**{"column.include.list": "a", "column.exclude.list": "b"})


@pytest.mark.parametrize("option", ["column.exclude.list", "column.include.list"])
def test_a_key_column_left_out_is_refused_naming_it_and_the_option(option):
    pattern = r"shop\.customers\.id" if option == "column.exclude.list" else r".*\.email"
    policy = _options(**{option: pattern}).columns
    with pytest.raises(OptionError, match=rf"'{option}'.*shop\.customers\.id, a key column"):
        policy.check([TABLE])


def test_a_chunk_key_column_counts_as_a_key():
    keyed = TableSchema("shop", "customers", TABLE.columns, ("email",), key_indexes=("u",))
    policy = _options(**{"column.exclude.list": r".*\.email"}).columns
    with pytest.raises(OptionError, match=r"shop\.customers\.email, a key column"):
        policy.check([keyed])


@pytest.mark.parametrize(
    "key", [SALT_KEY, "column.mask.with.4.chars", "column.truncate.to.4.chars"]
)
def test_a_masked_or_hashed_key_column_is_refused(key):
    policy = _options(**{key: r"shop\.customers\.(id|email)"}).columns
    with pytest.raises(OptionError, match=r"masks shop\.customers\.id, a key column"):
        policy.check([TABLE])


def test_a_mask_of_a_column_that_holds_no_text_is_refused_but_a_hash_is_not():
    with pytest.raises(OptionError, match=r"shop\.customers\.age, a int\(11\) column"):
        _options(**{"column.mask.with.4.chars": r".*\.age"}).columns.check([TABLE])
    _options(**{SALT_KEY: r".*\.age"}).columns.check([TABLE])


def test_a_column_two_masks_match_is_refused():
    policy = _options(
        **{"column.mask.with.4.chars": r".*\.note", "column.truncate.to.2.chars": r".*\.note"}
    ).columns
    with pytest.raises(OptionError, match="both match shop.customers.note"):
        policy.check([TABLE])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("column.exclude.list", "shop\\.(", "is not a regular expression"),
        ("column.exclude.list", " , ", "names no regular expression"),
        ("column.mask.with.0.chars", ".*", "whole number >= 1, got '0'"),
        ("column.mask.with.x.chars", ".*", "whole number >= 1, got 'x'"),
        ("column.truncate.to.-2.chars", ".*", "whole number >= 1, got '-2'"),
        ("column.mask.hash.md4x.with.salt.s", ".*", "no hash algorithm 'md4x'"),
    ],
)
def test_a_malformed_column_option_is_refused(key, value, message):
    with pytest.raises(OptionError, match=message):
        _options(**{key: value})


def test_a_pattern_that_matches_no_column_is_reported_not_refused():
    policy = _options(
        **{"column.exclude.list": r".*\.ssn, .*\.sssn", "column.mask.with.3.chars": "nope"}
    ).columns
    policy.check([TABLE])
    assert policy.unmatched([TABLE]) == [
        r"'.*\.sssn' of option 'column.exclude.list'",
        "'nope' of option 'column.mask.with.3.chars'",
    ]


def test_the_typed_schema_drops_excluded_columns_and_types_a_hash_as_a_string():
    columns = _options(**{"column.exclude.list": r".*\.(ssn|note)", SALT_KEY: r".*\.age"}).columns
    schema = output_schema([TABLE], (), columns)
    fields = {f.name: f.dataType for f in schema.fields}
    assert list(fields)[:4] == ["id", "email", "phone", "age"]
    assert fields["age"] == StringType() and fields["id"] == IntegerType()
    included = _options(**{"column.include.list": r".*\.(id|phone)"}).columns
    assert [f.name for f in output_schema([TABLE], (), included).fields][:3] == [
        "id",
        "phone",
        "_op",
    ]


def test_an_unmatched_hash_pattern_is_reported_by_its_option_without_the_salt():
    (line,) = _options(**{SALT_KEY: "nothing"}).columns.unmatched([TABLE])
    assert "column.mask.hash.sha256.with.salt.<salt>" in line
    assert "czqma0cb5k" not in line.lower()


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_a_mask_is_n_stars_whatever_the_value(value, n):
    assert Mask(MASK, length=n).value(value) == "*" * n
    assert Mask(MASK, length=n).value(None) is None


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_a_truncation_is_never_longer_than_n_and_is_the_values_start(value, n):
    cut = Mask(TRUNCATE, length=n).value(value)
    assert len(cut) <= n and value.startswith(cut)
    assert cut == value if len(value) <= n else len(cut) == n


@given(st.text(), st.text(min_size=1), st.text(min_size=1))
def test_a_hash_is_deterministic_and_salted(value, salt, other_salt):
    mask = Mask(HASH, algorithm="sha256", salt=salt)
    expected = hashlib.sha256((salt + value).encode("utf-8")).hexdigest()
    assert mask.value(value) == mask.value(value) == expected
    if other_salt != salt:
        assert Mask(HASH, algorithm="sha256", salt=other_salt).value(value) != expected
    assert mask.value(None) is None


@given(st.lists(st.one_of(st.none(), st.text()), max_size=20), st.integers(1, 10))
def test_a_masked_column_equals_its_values_masked_one_by_one(values, n):
    import pyarrow as pa

    array = pa.array(values, pa.string())
    for mask in (
        Mask(MASK, length=n),
        Mask(TRUNCATE, length=n),
        Mask(HASH, algorithm="sha1", salt="s"),
    ):
        assert mask.column(array).to_pylist() == [mask.value(v) for v in values]
