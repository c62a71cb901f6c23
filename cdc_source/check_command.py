"""``cdc-mysql check``: the source's requirements on a server, OK / WARN / FAIL with the fix.

    cdc-mysql check --hostname db.example.com --username cdc \\
        --database-name shop --table-name 'shop\\..*'
    cdc-mysql check --properties cdc.properties --json

Options are the source's, as flags of the same names (``--scan.snapshot.parallelism 4``)
or as ``name=value`` lines of a properties file (flags win). The password is never a
flag (it would show in the process list): the file's ``password``, else the environment
variable named by ``--password-env`` (default ``CDC_MYSQL_PASSWORD``), else a prompt when
the input is a terminal. Exit status: 0 when nothing FAILs, 1 when something does, 2 for
bad usage.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path

from cdc_source.findings import FAIL, OK, WARN, Finding
from cdc_source.options import OPTION_DOCS, OptionError, parse_options
from cdc_source.requirements import check_tls, run_checks

PASSWORD_ENV = "CDC_MYSQL_PASSWORD"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-mysql check",
        description="Check a server and its tables against every requirement of the source.",
    )
    parser.add_argument("--properties", help="a file of name=value lines (the source's options)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument(
        "--password-env",
        default=PASSWORD_ENV,
        help="environment variable holding the password (default %(default)s)",
    )
    for name, doc in OPTION_DOCS.items():
        # A key that carries parameters (column.mask.with.<n>.chars) is no flag: it is
        # given in the properties file.
        if name != "password" and "<" not in name:
            parser.add_argument(f"--{name}", dest=name, metavar="VALUE", help=doc)
    return parser


def read_properties(path: str) -> dict[str, str]:
    """``name=value`` lines; blank lines and lines starting with ``#`` are skipped."""
    options = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise OptionError(f"{path}:{number}: expected name=value, got {line!r}")
        options[name.strip().lower()] = value.strip()
    return options


def gather_options(args: argparse.Namespace, environ=os.environ, ask=None) -> dict[str, str]:
    options = read_properties(args.properties) if args.properties else {}
    for name in OPTION_DOCS:
        value = getattr(args, name, None)
        if value is not None:
            options[name] = value
    if "password" not in options:
        if args.password_env in environ:
            options["password"] = environ[args.password_env]
        elif ask is not None:
            options["password"] = ask()
    return options


def _prompt() -> str | None:
    return getpass.getpass("password: ") if sys.stdin.isatty() else None


def render(target: str, findings: list[Finding]) -> str:
    width = max(len(f.requirement) for f in findings)
    lines = [f"cdc-mysql check: {target}"]
    for finding in findings:
        lines.append(f"{finding.status:<4}  {finding.requirement:<{width}}  {finding.detail}")
        if finding.fix:
            lines.append(f"{'':<4}  {'':<{width}}  fix: {finding.fix}")
    counts = {status: sum(f.status == status for f in findings) for status in (FAIL, WARN, OK)}
    lines.append(", ".join(f"{n} {status}" for status, n in counts.items()))
    return "\n".join(lines)


def check(options: dict[str, str]) -> tuple[str, list[Finding]]:
    """The findings for these source options (raises OptionError for bad options)."""
    from cdc_source.mysql_client import SourceConnectionError, connect

    parsed = parse_options(options)
    kwargs = parsed.connection_kwargs()
    target = (
        f"{parsed.username}@{parsed.hostname}:{parsed.port}, database-name "
        f"'{parsed.database_pattern}', table-name '{parsed.table_pattern}'"
    )
    try:
        conn = connect(kwargs)
    except SourceConnectionError as err:
        return target, [Finding("connection", FAIL, str(err), "check the server and account")]
    try:
        return target, [
            Finding("connection", OK, "connected"),
            check_tls(conn, parsed),
            *run_checks(conn, lambda: connect(kwargs), parsed),
        ]
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        target, findings = check(gather_options(args, ask=_prompt))
    except OptionError as err:
        print(f"cdc-mysql check: {err}", file=sys.stderr)
        return 2
    failed = any(f.status == FAIL for f in findings)
    if args.json:
        print(
            json.dumps(
                {
                    "target": target,
                    "ok": not failed,
                    "findings": [f.to_json() for f in findings],
                },
                indent=2,
            )
        )
    else:
        print(render(target, findings))
    return 1 if failed else 0
