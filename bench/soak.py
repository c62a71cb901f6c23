"""A 30-minute soak: steady writes, a fault every few minutes, memory and offsets sampled,
an exact rebuild at the end. Measurement only; the suite runs a 5-minute version.

    python bench/soak.py                       # 30 minutes, a fault every 3 minutes
    python bench/soak.py --minutes 10 --fault-every 60

Faults in turn: the server SIGKILLed and restarted, every source connection reset, every
Spark Python worker killed. Spark runs on local[2,4] (a failed task is retried, as on a
cluster). Prints one line per sample and a summary; results also go to
bench/results/soak-<time>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.server import TestServer  # noqa: E402
from tests.integration.soak import run_soak  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--fault-every", type=float, default=180.0, help="seconds")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--writes-per-second", type=float, default=200.0)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="cdc-mysql-soak-"))
    state_dir = work / "state"
    state_dir.mkdir()
    os.environ["CDC_MYSQL_STATE_DIR"] = str(state_dir)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("cdc-mysql-soak")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    server = TestServer()
    try:
        report = run_soak(
            spark,
            server,
            work,
            state_dir,
            args.minutes * 60,
            args.fault_every,
            rows=args.rows,
            writes_per_second=args.writes_per_second,
        )
    finally:
        server.stop()
        spark.stop()
    results = REPO / "bench" / "results"
    results.mkdir(exist_ok=True)
    name = results / f"soak-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    name.write_text(json.dumps(asdict(report), indent=1))
    print(f"written {name}")
    return 0 if report.still_running else 1


if __name__ == "__main__":
    sys.exit(main())
