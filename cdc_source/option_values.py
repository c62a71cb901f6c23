"""How each option's text becomes its value: one parser per kind of value, called with
the text and the option's key (which every error names). Used by the declarations in
:mod:`cdc_source.option_table`."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cdc_source.chunk_key import OPTION as CHUNK_KEY_OPTION
from cdc_source.chunk_key import ChunkKeyColumns, ChunkKeyRule

log = logging.getLogger("cdc_mysql")


class OptionError(ValueError):
    """An option is missing, unknown or has a bad value."""


def text(raw: str, key: str) -> str:
    return raw


def positive(raw: str, key: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{key}' must be a positive integer, got '{raw}'") from None
    if value <= 0:
        raise OptionError(f"option '{key}' must be a positive integer, got '{raw}'")
    return value


def port(raw: str, key: str) -> int:
    value = positive(raw, key)
    if value > 65535:
        raise OptionError(f"option '{key}' must be between 1 and 65535, got '{value}'")
    return value


def non_negative(raw: str, key: str) -> int:
    if not raw.strip().isdigit():
        raise OptionError(f"option '{key}' must be an integer >= 0, got '{raw}'")
    return int(raw)


def boolean(raw: str, key: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option '{key}' must be true or false, got '{raw}'")
    return value == "true"


def choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    """A parser of one of ``choices`` (case and surrounding spaces ignored)."""

    def parse(raw: str, key: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise OptionError(f"option '{key}' must be one of {', '.join(choices)}, got '{raw}'")
        return value

    return parse


def regex(raw: str, key: str) -> str:
    try:
        re.compile(raw)
    except re.error as err:
        raise OptionError(f"option '{key}' is not a valid regular expression: {err}") from None
    return raw


# Flink's Duration syntax (org.apache.flink.util.TimeUtils.parseDuration): a number, optional
# spaces, a unit from this table (Flink reads a bare number as milliseconds; here it stays
# seconds, as these options always were).
_DURATION_UNITS: dict[str, float] = {
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("h", "hour", "hours"), 3600.0),
    **dict.fromkeys(("min", "m", "minute", "minutes"), 60.0),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("us", "\u00b5s", "micro", "micros", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1e-9),
}


def parse_duration_seconds(name: str, raw: str) -> float:
    """Seconds of a duration option: ``30``, ``30s``, ``1min``, ``500ms``, ``2 h``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([^\d\s.]*)\s*", raw)
    unit = match.group(2).lower() if match else ""
    if not match or (unit and unit not in _DURATION_UNITS):
        raise OptionError(
            f"option '{name}' must be a duration such as '30s', '1min', '500ms' or '2 h' (a "
            f"bare number is seconds; units: d, h, min, s, ms, us, ns), got '{raw}'"
        )
    return float(match.group(1)) * (_DURATION_UNITS[unit] if unit else 1.0)


def whole_seconds(raw: str, key: str) -> int:
    """A duration for a client that takes whole seconds (PyMySQL's and mysqlclient's
    ``connect_timeout``, ``WAIT_FOR_EXECUTED_GTID_SET``): a fraction is rounded up, and
    the log says so."""
    seconds = parse_duration_seconds(key, raw)
    if seconds <= 0:
        raise OptionError(f"option '{key}' must be a duration above zero, got '{raw}'")
    whole = math.ceil(seconds - 1e-9)
    if whole != seconds:
        log.warning("option '%s' is %s: rounded up to %d s (whole seconds)", key, raw, whole)
    return whole


_UTC_NAMES = {"utc", "z", "gmt", "etc/utc", "etc/gmt", "etc/uct", "uct", "zulu", "etc/zulu"}


def _check_time_zone(raw: str) -> None:
    """Flink CDC's ``server-time-zone`` is the session zone MySQL TIMESTAMP values are
    converted to local date-times in (Flink CDC docs, MySQL connector options: "It
    controls how the TIMESTAMP type in MYSQL converted to STRING"). This source reads a
    TIMESTAMP as the exact instant it stores (Spark ``timestamp``; every session runs
    in UTC, and the binlog holds seconds since the epoch), so no zone changes a value:
    rather than accept a zone and ignore it, anything but UTC is refused with the reason
    (tests/integration/test_flink_options.py shows the values do not depend on zones)."""
    text = raw.strip()
    if text.lower() in _UTC_NAMES or re.fullmatch(r"(?:UTC|GMT)?[+-]0?0(?::?00)?", text, re.I):
        return
    if not re.fullmatch(r"[+-](0\d|1[0-4]):[0-5]\d", text):
        try:
            ZoneInfo(text)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise OptionError(
                f"option 'server-time-zone' must be an IANA zone such as 'Europe/Berlin' or "
                f"an offset such as '+02:00', got '{raw}'"
            ) from None
    raise OptionError(
        f"option 'server-time-zone' is '{raw}', but only UTC is accepted: in Flink CDC it is "
        "the zone MySQL TIMESTAMP values are converted to local date-times in, while this "
        "source reads a TIMESTAMP as the exact instant it stores (a Spark timestamp), "
        "whatever the server's time_zone, so another zone would change nothing. Remove the "
        "option (or set it to UTC) and show the values in a zone with Spark's "
        "spark.sql.session.timeZone; DATETIME values are the wall-clock values as stored"
    )


def parse_chunk_key_columns(raw: str | None) -> ChunkKeyColumns | None:
    """``scan.incremental.snapshot.chunk.key-column`` (cdc_source.chunk_key: both of
    Flink CDC's spellings)."""
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    if ":" not in raw:
        if ";" in raw or "," in raw:
            raise OptionError(
                f"option '{CHUNK_KEY_OPTION}' is '{raw}': a single column name, or "
                "'<db.table regex>:<column>;...' for several tables"
            )
        return ChunkKeyColumns((ChunkKeyRule(None, raw),))
    rules = []
    for entry in raw.split(";"):
        entry = entry.strip()
        if not entry:
            continue  # Flink's examples end with ';'
        pattern, sep, column = entry.rpartition(":")
        pattern, column = pattern.strip(), column.strip()
        if not sep or not pattern or not column:
            raise OptionError(
                f"option '{CHUNK_KEY_OPTION}' entry '{entry}' is not "
                "'<db.table regex>:<column>' (entries are separated by ';')"
            )
        try:
            re.compile(pattern)
        except re.error as err:
            raise OptionError(
                f"option '{CHUNK_KEY_OPTION}' entry '{entry}': '{pattern}' is not a valid "
                f"regular expression: {err}"
            ) from None
        rules.append(ChunkKeyRule(pattern, column))
    if not rules:
        raise OptionError(f"option '{CHUNK_KEY_OPTION}' is '{raw}': it names no column")
    return ChunkKeyColumns(tuple(rules))


def utc_zone(raw: str, key: str) -> str:
    _check_time_zone(raw)
    return raw


def chunk_keys(raw: str, key: str) -> ChunkKeyColumns | None:
    return parse_chunk_key_columns(raw)


def names_among(names: tuple[str, ...]) -> Callable[[str, str], tuple[str, ...]]:
    """A parser of a comma-separated list of some of ``names``, each at most once, in the
    order given."""

    def parse(raw: str, key: str) -> tuple[str, ...]:
        if not raw.strip():
            return ()
        given = tuple(name.strip().lower() for name in raw.split(","))
        unknown = [name for name in given if name not in names]
        if unknown:
            raise OptionError(
                f"option '{key}' has unknown name(s) {', '.join(repr(u) for u in unknown)}; "
                f"valid names are: {', '.join(names)}"
            )
        repeated = sorted({name for name in given if given.count(name) > 1})
        if repeated:
            raise OptionError(f"option '{key}' names {', '.join(repeated)} more than once")
        return given

    return parse
