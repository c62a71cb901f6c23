"""The chaos soak: a capture under a steady writer for a given time, with every fault the
suite knows struck at random (seeded) moments, on MariaDB or MySQL 9.7; at the end the
table rebuilt from the output must equal ``SELECT *``. Measurement only.

    python bench/soak.py                                  # 30 minutes on MariaDB
    python bench/soak.py --server mysql --minutes 30 --fault-every 120 --seed 7

It prints the RSS of the driver's source process, the Python workers, the JVM and the
server every sample, each fault as it strikes and the lag it caused (how long the stream
took to commit past the binlog head of that moment), and a summary; the results go to
``bench/results/soak-<time>.json``. The faults, the sampling and the exact check are
``tests/support/soak.py``'s, the same the suite's short soak runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    parser.add_argument("--server", choices=("mariadb", "mysql"), default="mariadb")
    args, rest = parser.parse_known_args(argv)
    from tests.support.server import FLAVOUR_ENV

    os.environ[FLAVOUR_ENV] = args.server
    from tests.support import soak

    return soak.main(rest)


if __name__ == "__main__":
    sys.exit(main())
