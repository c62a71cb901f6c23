"""``cdc-mysql signal``: asks a running query for a snapshot on demand, or to stop one,
without writing to the server (docs/usage.md, 'Snapshots on demand').

    cdc-mysql signal CHECKPOINT snapshot db.t [db.t2 ...] [--where CONDITION]
    cdc-mysql signal CHECKPOINT stop-snapshot [db.t ...]
    cdc-mysql signal CHECKPOINT list

The request is a small file in ``CHECKPOINT/signals`` (the query's ``signal.directory``),
taken by the query at its next batch, once (the offset remembers the last file taken),
and deleted once that batch is committed; a driver restart finds it again if it was not.
"""

from __future__ import annotations

import argparse
import os
import sys

from cdc_source.rereads import (
    SNAPSHOT,
    STOP,
    Request,
    RequestError,
    check_condition,
    check_table,
    read_request_file,
    request_files,
    signals_folder,
    write_request_file,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-mysql signal",
        description=(
            "Ask a running query (option signal.directory=CHECKPOINT) to re-read tables "
            "next to its stream ('snapshot'), or to stop its re-reads ('stop-snapshot'). "
            "The query takes the request at its next micro-batch."
        ),
    )
    parser.add_argument("checkpoint", help="the query's checkpoint location")
    parser.add_argument("action", choices=("snapshot", "stop-snapshot", "list"))
    parser.add_argument("tables", nargs="*", help="db.table names")
    parser.add_argument(
        "--where",
        default=None,
        help="re-read only the rows matching this SQL condition (one expression, no ';')",
    )
    return parser


def last_file_taken(checkpoint: str) -> str:
    """The last request file the query's logged offsets took ('' when none or unknown)."""
    from cdc_source.inspect.checkpoint import CheckpointError, read_checkpoint
    from cdc_source.inspect.records import batch_records

    try:
        records = batch_records(read_checkpoint(checkpoint))
    except (CheckpointError, ValueError, OSError):
        return ""
    files = [r.offset.rereads.file for r in records if r.offset is not None]
    return max(files, default="")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.action == "list":
        for name in request_files(args.checkpoint, after=last_file_taken(args.checkpoint)):
            try:
                print(f"{name}  {read_request_file(args.checkpoint, name)}")
            except (OSError, RequestError) as err:
                print(f"{name}  unreadable: {err}")
        return 0
    try:
        tables = tuple(dict.fromkeys(check_table(t) for t in args.tables))
        if args.action == "snapshot":
            if not tables:
                raise RequestError("name the tables to re-read (db.table ...)")
            condition = check_condition(args.where)
            conditions = tuple((t, condition) for t in tables) if condition else ()
            request = Request(SNAPSHOT, tables, conditions)
        else:
            if args.where is not None:
                raise RequestError("--where is for 'snapshot'")
            request = Request(STOP, tables)
    except RequestError as err:
        print(f"cdc-mysql signal: {err}", file=sys.stderr)
        return 2
    if not os.path.isdir(args.checkpoint):
        print(f"cdc-mysql signal: no folder {args.checkpoint}", file=sys.stderr)
        return 2
    name = write_request_file(args.checkpoint, request, after=last_file_taken(args.checkpoint))
    print(
        f"request {os.path.join(signals_folder(args.checkpoint), name)} written: the query "
        "takes it at its next batch (it needs signal.directory set to this folder)"
    )
    return 0
