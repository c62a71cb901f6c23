"""``cdc-mysql inspect``'s command line: flags, the connection options, ``main``
(the report once, or ``--watch``'s live view)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from cdc_source.inspect import watch
from cdc_source.inspect.checkpoint import read_checkpoint
from cdc_source.inspect.render import render_json, render_text
from cdc_source.inspect.report import Report, build_report
from cdc_source.inspect.server import server_report_or_error

PASSWORD_ENV = "CDC_MYSQL_PASSWORD"

_CONNECTION_FLAGS = {
    "hostname": "hostname",
    "port": "port",
    "username": "username",
    "database_name": "database-name",
    "table_name": "table-name",
    "connect_timeout": "connect.timeout",
    "ssl_mode": "ssl-mode",
    "ssl_ca": "ssl-ca",
    "ssl_cert": "ssl-cert",
    "ssl_key": "ssl-key",
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
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (with --watch: one object a line per refresh)",
    )
    parser.add_argument(
        "--last", type=int, metavar="N", help="list only the newest N batches (text)"
    )
    parser.add_argument(
        "--source",
        metavar="ID",
        help="source id when the query has several (default: the first with cdc-mysql offsets)",
    )
    live = parser.add_argument_group(
        "live view",
        "redraw phase, frontier, rates, lag, batches in flight and offset sizes while a "
        "query runs (the screen is cleared on a terminal; piped, frames are separated by a "
        "line; with --json one object a line)",
    )
    live.add_argument(
        "--watch",
        nargs="?",
        const=watch.DEFAULT_INTERVAL,
        type=float,
        metavar="SECONDS",
        help=f"refresh every SECONDS (default {watch.DEFAULT_INTERVAL:g}) until Ctrl-C",
    )
    live.add_argument(
        "--interval", type=float, metavar="SECONDS", help="with --watch: refresh every SECONDS"
    )
    live.add_argument("--count", type=int, metavar="N", help="stop after N refreshes")
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
    server.add_argument("--ssl-mode", help="as in the query (disabled ... verify-identity)")
    for name in ("ca", "cert", "key"):
        server.add_argument(f"--ssl-{name}", metavar="FILE", help="as in the query")
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


def read_report(location: str, source: str | None, options: dict[str, str] | None) -> Report:
    """The checkpoint's report and, with connection options, the server's side of it.

    Raises CheckpointError, OSError or UnicodeDecodeError for an unreadable checkpoint;
    a server error is carried in the report's ``server``.
    """
    checkpoint = read_checkpoint(location)
    report = build_report(checkpoint, source)
    if options is None:
        return report
    named = sorted({r.table for r in report.records if r.table is not None})
    server = server_report_or_error(options, report.summary, named)
    return build_report(checkpoint, report.source_id, server)


def _watch_interval(parser: argparse.ArgumentParser, args: argparse.Namespace) -> float | None:
    """The refresh interval of --watch, or None without --watch; refuses flags that only
    mean something with --watch or only without it."""
    if args.watch is None:
        if args.interval is not None or args.count is not None:
            parser.error("--interval and --count go with --watch")
        return None
    if args.last is not None:
        parser.error("--last lists batches; the --watch view has no batch list")
    if args.count is not None and args.count < 1:
        parser.error(f"--count {args.count}: must be 1 or more")
    interval = args.interval if args.interval is not None else args.watch
    if not (interval > 0 and math.isfinite(interval)):
        parser.error(f"--watch/--interval {interval:g}: the interval must be more than 0 s")
    return interval


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    interval = _watch_interval(parser, args)
    options = connection_options(args, dict(os.environ))
    try:
        if interval is not None:
            return watch.run(
                lambda: read_report(args.checkpoint, args.source, options),
                _write,
                interval=interval,
                count=args.count,
                as_json=args.json,
                terminal=sys.stdout.isatty(),
            )
        report = read_report(args.checkpoint, args.source, options)
    except watch.READ_ERRORS as err:
        print(f"cdc-mysql inspect: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(render_json(report) if args.json else render_text(report, args.last))
    if report.server is not None and report.server.error:
        print(f"cdc-mysql inspect: {report.server.error}", file=sys.stderr)
        return 1
    return 0
