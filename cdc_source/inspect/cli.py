"""``cdc-mysql inspect``'s command line: flags, the connection options, ``main``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cdc_source.inspect.checkpoint import CheckpointError, read_checkpoint
from cdc_source.inspect.render import render_json, render_text
from cdc_source.inspect.report import build_report
from cdc_source.inspect.server import server_report_or_error

PASSWORD_ENV = "CDC_MYSQL_PASSWORD"

_CONNECTION_FLAGS = {
    "hostname": "hostname",
    "port": "port",
    "username": "username",
    "database_name": "database-name",
    "table_name": "table-name",
    "connect_timeout": "connect.timeout",
}


class _Parser(argparse.ArgumentParser):
    """Keeps a mistyped password flag's value out of the usage error."""

    def __init__(self, *args: Any, secrets: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.secrets = secrets or []

    def error(self, message: str) -> None:  # type: ignore[override]
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):  # a misspelled --password would show its value
            words = message[len(prefix) :].split(" ")
            message = prefix + " ".join(w if w.startswith("-") else "***" for w in words)
        for secret in self.secrets:
            message = message.replace(secret, "***")
        super().error(message)


def _possible_secrets(argv: list[str]) -> list[str]:
    secrets = []
    for i, arg in enumerate(argv):
        if arg.startswith("-") and "pass" in arg.lower():
            if "=" in arg:
                secrets.append(arg.split("=", 1)[1])
            elif i + 1 < len(argv):
                secrets.append(argv[i + 1])
    return [s for s in secrets if s]


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cdc-mysql inspect",
        description=(
            "Show the progress of a cdc-mysql query from its Spark checkpoint: per batch the "
            "phase, frontier, binlog position and offset size, then a summary. With "
            "connection options, also per-table snapshot progress and binlog lag."
        ),
        secrets=_possible_secrets(argv),
    )
    parser.add_argument("checkpoint", help="the query's checkpointLocation (a local directory)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--last", type=int, metavar="N", help="list only the newest N batches (text)"
    )
    parser.add_argument(
        "--source",
        metavar="ID",
        help="source id when the query has several (default: the first with cdc-mysql offsets)",
    )
    server = parser.add_argument_group(
        "server (optional)", f"password from --password or the {PASSWORD_ENV} variable"
    )
    server.add_argument("--hostname")
    server.add_argument("--port")
    server.add_argument("--username")
    server.add_argument("--password", help=f"better: set {PASSWORD_ENV}")
    server.add_argument("--database-name", help="as in the query, to list the captured tables")
    server.add_argument("--table-name", help="as in the query, to list the captured tables")
    server.add_argument("--connect-timeout", metavar="SECONDS")
    return parser


def connection_options(args: argparse.Namespace, env: dict[str, str]) -> dict[str, str] | None:
    """Source options from the flags, or None when no server was named."""
    if not args.hostname:
        return None
    options = {
        name: str(getattr(args, attr))
        for attr, name in _CONNECTION_FLAGS.items()
        if getattr(args, attr) is not None
    }
    password = args.password if args.password is not None else env.get(PASSWORD_ENV)
    if password:
        options["password"] = password
    return options


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        checkpoint = read_checkpoint(args.checkpoint)
        report = build_report(checkpoint, args.source)
    except (CheckpointError, OSError, UnicodeDecodeError) as err:
        print(f"cdc-mysql inspect: {err}", file=sys.stderr)
        return 2
    options = connection_options(args, dict(os.environ))
    if options is not None:
        named = sorted({r.table for r in report.records if r.table is not None})
        server = server_report_or_error(options, report.summary, named)
        report = build_report(checkpoint, report.source_id, server)
    sys.stdout.write(render_json(report) if args.json else render_text(report, args.last))
    if report.server is not None and report.server.error:
        print(f"cdc-mysql inspect: {report.server.error}", file=sys.stderr)
        return 1
    return 0
