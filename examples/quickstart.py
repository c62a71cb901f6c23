"""Quickstart: capture a live MySQL/MariaDB table with Spark, exactly once.

    python examples/quickstart.py [--rows 30000] [--seconds 30] [--out DIR]

(the same as ``python -m cdc_source quickstart``). It starts a throwaway local MariaDB,
creates ``shop.orders``, changes it from a writer thread while Spark streams it into a
parquet folder, then checks that replaying the change log gives back the table.

The user-facing code is two short functions in ``cdc_source/quickstart.py``:
``start_capture`` (``spark.readStream.format("cdc-mysql")`` into a parquet sink) and
``replay`` (per key the latest ``_seq``, deletes dropped); the rest of that module is
the demo's scaffolding (server, data, writer, progress printing, verification).
"""

import sys

from cdc_source import quickstart

if __name__ == "__main__":
    sys.exit(quickstart.main(sys.argv[1:]))
