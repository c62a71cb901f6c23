"""The ``cdc-mysql`` command line (also ``python -m cdc_source``).

cdc-mysql quickstart [--rows N] [--seconds S] [--out DIR]   capture a demo table end to end
cdc-mysql inspect CHECKPOINT [...]                           what a checkpoint holds
cdc-mysql check --hostname H --username U ... [--json]       the server against every requirement
cdc-mysql signal CHECKPOINT snapshot db.t [--where COND]     re-read a table next to the stream
"""

from __future__ import annotations

import sys

USAGE = """usage: cdc-mysql {quickstart,inspect,check,signal} [options]

commands:
  quickstart   start a throwaway local server, stream a live demo table into a parquet
               folder with Spark, and verify the change log reproduces the table
  inspect      show what a query's checkpoint holds (offsets, phase, progress)
  check        check a server and its tables against every requirement of the source
               (OK / WARN / FAIL with the fix; exit status 1 on a FAIL)
  signal       ask a running query to re-read tables next to its stream (a snapshot on
               demand, optionally of the rows matching a condition), or to stop that

'cdc-mysql COMMAND --help' describes a command's options."""

COMMANDS = ("quickstart", "inspect", "check", "signal")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(USAGE, file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if args[0] in ("-V", "--version"):
        from cdc_source import __version__

        print(f"cdc-mysql {__version__}")
        return 0
    command, rest = args[0], args[1:]
    if command == "quickstart":
        from cdc_source.quickstart import main as quickstart_main

        return _exit_code(quickstart_main(rest))
    if command == "inspect":
        from cdc_source.inspect import main as inspect_main

        return _exit_code(inspect_main(rest))
    if command == "check":
        from cdc_source.check_command import main as check_main

        return _exit_code(check_main(rest))
    if command == "signal":
        from cdc_source.signal_command import main as signal_main

        return _exit_code(signal_main(rest))
    print(f"cdc-mysql: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def _exit_code(result) -> int:
    return 0 if result is None else int(result)


if __name__ == "__main__":
    sys.exit(main())
