"""The server answers recorded by ``python -m tests.support.record_server_answers``
(``tests/data/server_answers/``), read back for the unit tests: a connection that replays
a real server's answers, and its recorded errors as the client raised them."""

from __future__ import annotations

import json
from decimal import Decimal
from functools import cache
from pathlib import Path

import pymysql

from cdc_source.catalog import _COLLATIONS_SQL

# The collations the key-order tests name, each flavour's own and the other's, and the
# two collation queries recorded (the discovery's, and every collation's pad attribute).
PAD_COLLATIONS = (
    "utf8mb4_0900_ai_ci",
    "utf8mb4_0900_bin",
    "utf8mb4_bin",
    "utf8mb4_general_ci",
    "utf8mb4_nopad_bin",
    "utf8mb4_unicode_nopad_ci",
    "utf8mb4_uca1400_ai_ci",
    "utf8mb4_uca1400_nopad_ai_ci",
)
COLLATIONS_DISCOVERY = _COLLATIONS_SQL.format(", ".join(f"'{name}'" for name in PAD_COLLATIONS))
ALL_PAD_ATTRIBUTES = "SELECT COLLATION_NAME, PAD_ATTRIBUTE FROM information_schema.COLLATIONS"

DIRECTORY = Path(__file__).resolve().parents[1] / "data" / "server_answers"
FLAVOURS = ("mariadb-10.11", "mysql-9.7")


@cache
def load(flavour: str) -> dict:
    return json.loads((DIRECTORY / f"{flavour}.json").read_text())


def value_of(value):
    """A recorded value as the client handed it over."""
    if isinstance(value, dict) and "decimal" in value:
        return Decimal(value["decimal"])
    if isinstance(value, dict) and "hex" in value:
        return bytes.fromhex(value["hex"])
    return value


def error(flavour: str, name: str) -> Exception:
    """A recorded error as the client raised it (PyMySQL's or MySQLdb's class)."""
    return exception(load(flavour)["errors"][name])


def exception(recorded: dict) -> Exception:
    if recorded["module"].startswith("MySQLdb"):
        import MySQLdb

        cls = getattr(MySQLdb, recorded["class"])
    else:
        cls = getattr(pymysql.err, recorded["class"])
    return cls(recorded["code"], recorded["message"])


def answer(flavour: str, query: str, setting: str = "default") -> dict:
    """The recorded answer to ``query`` under ``setting`` (the query's default answer
    where the setting did not ask it again)."""
    answers = load(flavour)["answers"]
    return answers[setting].get(query) or answers["default"][query]


def rows(flavour: str, query: str, setting: str = "default") -> list[tuple]:
    recorded = answer(flavour, query, setting)
    return [tuple(value_of(v) for v in row) for row in recorded["rows"]]


class RecordedServer:
    """A DB-API connection that answers each query as the recorded server did, under
    one setting; a query it was never asked is a test error, not a server's answer."""

    def __init__(self, flavour: str, setting: str = "default") -> None:
        self.flavour, self.setting = flavour, setting
        self.ran: list[str] = []
        self.description = None
        self._rows: list[tuple] = []

    def get_server_info(self) -> str:
        return rows(self.flavour, "SELECT VERSION()")[0][0]

    def cursor(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def close(self) -> None:
        return None

    def execute(self, query: str, params=None) -> None:
        if params is not None:
            query = query % tuple(pymysql.converters.escape_item(p, "utf8") for p in params)
        self.ran.append(query)
        recorded = answer(self.flavour, query, self.setting)
        if "error" in recorded:
            raise exception(recorded["error"])
        self.description = tuple(
            (name, 253, None, None, None, None, True) for name in recorded["columns"]
        )
        self._rows = [tuple(value_of(v) for v in row) for row in recorded["rows"]]

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def fetchall(self):
        return list(self._rows)
