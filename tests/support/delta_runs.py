"""What the lake sink's integration tests share: a query run as a user's is (a child
process, :mod:`tests.support.delta_runner`, the source's options read back from the
stream's DataFrame, the password in the environment), an admin connection, and the
slices a Delta table's log says were applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest

from cdc_source.delta.transactions import SLICE_LIMIT
from tests.support.server import suite_flavour

ROOT = Path(__file__).resolve().parents[2]
# What the writer logs for a slice it applied: merged, or (snapshot reads alone) appended.
APPLIED = r"(\d+ key\(s\) merged|\d+ row\(s\) read by the snapshot appended)"

# How the sink recovers from a crash is the sink's own (application transactions, slices):
# no server takes part in it, so those tests run on the MariaDB leg, and the MySQL leg
# runs the modes test, whose keys, collations and changes are the server's.
SINK_ONLY = pytest.mark.skipif(
    suite_flavour() == "mysql", reason="the sink's crash recovery: the MariaDB leg runs it"
)


def run_delta_query(
    server, database, checkpoint, table_path, *extra, env=None, tables=None, mode="mirror"
):
    info = server.info
    lakes = table_path if isinstance(table_path, list) else [f"{mode}={table_path}"]
    return subprocess.run(
        [
            sys.executable,
            "-m", "tests.support.delta_runner",
            "--hostname", info.host,
            "--port", str(info.port),
            "--username", info.user,
            "--database-name", database,
            "--table-name", tables or rf"{database}\.t",
            "--checkpoint", str(checkpoint),
            *[arg for lake in lakes for arg in ("--lake", str(lake))],
            "--option", "scan.incremental.snapshot.chunk.size=500",
            "--option", "scan.snapshot.chunks-per-batch=2",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "CDC_MYSQL_PASSWORD": info.password,
            **(env or {}),
        },
    )  # fmt: skip


def admin_connection(server, database):
    return pymysql.connect(
        host=server.info.host,
        port=server.info.port,
        user=server.info.admin_user,
        password=server.info.admin_password,
        database=database,
        autocommit=True,
        charset="utf8mb4",
        init_command="SET time_zone = '+00:00'",
    )


def applied_slices(path: Path) -> list[tuple[int, int]]:
    """The (batch id, slice) of the commits in a Delta table's log, in commit order (a
    batch's last slice as ``SLICE_LIMIT - 1``)."""
    applied = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                applied.append(divmod(action["txn"]["version"], SLICE_LIMIT))
    return applied


def applied_batches(path: Path) -> list[int]:
    """The batch ids of the commits in a Delta table's log, in commit order."""
    return [batch for batch, _ in applied_slices(path)]
