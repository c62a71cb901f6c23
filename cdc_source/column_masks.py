"""The masks of column control (Debezium's ``column.mask.*`` and ``column.truncate.*``):
what a masked value becomes, for one value and for a whole Arrow column. Both forms give
the same output, so a row masked on the per-row road (the envelope, a binlog image that
restores a snapshot row) equals the same row masked on the columnar one (typed output).

NULL stays NULL under every mask: a mask hides a value, and there is none.

Arrow is imported by the columnar form only: the options import this module in processes
that never touch a column (:mod:`cdc_source.datasource`)."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

HASH = "hash"
MASK = "mask"
TRUNCATE = "truncate"
MASK_CHAR = "*"


def hash_algorithm(name: str) -> str | None:
    """hashlib's name of the algorithm Debezium calls ``name`` (Java's names, such as
    SHA-256, read lower-cased: Spark lower-cases option keys), or None when hashlib does
    not guarantee it. Extendable-output SHAKE is left out: it has no fixed length."""
    spelled = name.strip().lower()
    guaranteed = {a for a in hashlib.algorithms_guaranteed if not a.startswith("shake")}
    for candidate in (spelled, spelled.replace("-", ""), spelled.replace("-", "_")):
        if candidate in guaranteed:
            return candidate
    return None


def value_text(value: Any) -> bytes:
    """The bytes a value is hashed as: a string's UTF-8, a binary value's own bytes, and
    any other value's text as the envelope's JSON writes it (a boolean ``true``, a number
    in its digits, a date or timestamp in ISO 8601), UTF-8."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat().encode("ascii")
    if isinstance(value, (int, float, Decimal)):
        return str(value).encode("ascii")
    raise TypeError(f"no text for a {type(value).__name__} value")


@dataclass(frozen=True)
class Mask:
    """One mask: ``kind`` is :data:`HASH` (``algorithm``, ``salt``), :data:`MASK` or
    :data:`TRUNCATE` (``length``). The salt is a secret: kept out of ``repr``, and
    :attr:`option` names the option without it. ``salt_in_key``: given in the option's
    key (Debezium's form), else by ``column.mask.hash.secret``."""

    kind: str
    length: int = 0
    algorithm: str = ""
    salt: str = field(default="", repr=False)
    salt_in_key: bool = True

    @property
    def option(self) -> str:
        """The option's key as a message may show it (the salt left out)."""
        if self.kind == HASH and self.salt_in_key:
            return f"column.mask.hash.{self.algorithm}.with.salt.<salt>"
        if self.kind == HASH:
            return f"column.mask.hash.{self.algorithm}"
        if self.kind == MASK:
            return f"column.mask.with.{self.length}.chars"
        return f"column.truncate.to.{self.length}.chars"

    @property
    def makes_string(self) -> bool:
        """Whether the masked column is a string whatever its type (a hash is hex text)."""
        return self.kind == HASH

    def value(self, value: Any) -> Any:
        """``value`` (canonical, as the output would hold it) masked."""
        if value is None:
            return None
        if self.kind == HASH:
            digest = hashlib.new(self.algorithm, self.salt.encode("utf-8"))
            digest.update(value_text(value))
            return digest.hexdigest()
        if self.kind == MASK:
            return MASK_CHAR * self.length
        return value[: self.length]

    def column(self, values: pa.Array) -> pa.Array:
        """An Arrow column of canonical values masked (a string column)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.kind == MASK:
            stars = pa.scalar(MASK_CHAR * self.length, pa.string())
            return pc.if_else(pc.is_null(values), pa.scalar(None, pa.string()), stars)
        if self.kind == TRUNCATE:
            return pc.utf8_slice_codeunits(values.cast(pa.string()), 0, self.length)
        if pa.types.is_timestamp(values.type) and values.type.tz is not None:
            values = values.cast(pa.timestamp(values.type.unit))
        return pa.array([self.value(v) for v in values.to_pylist()], pa.string())
