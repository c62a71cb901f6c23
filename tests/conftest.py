import logging
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hypothesis import settings  # noqa: E402

# No timing thresholds in tests: hypothesis' per-example deadline fails a correct example
# on a loaded machine (CI runs the suite beside servers and Spark).
settings.register_profile("cdc-mysql", deadline=None)
settings.load_profile("cdc-mysql")


def pytest_configure(config) -> None:
    """Once, in the process that starts the others (xdist's workers inherit the
    environment and the files): Spark and its Python processes started for less CPU
    (tests/support/spark_startup.py)."""
    if not hasattr(config, "workerinput"):
        from tests.support import spark_startup

        root = Path(__file__).resolve().parents[1]
        config.spark_startup = "; ".join(
            [spark_startup.prepare(os.environ), spark_startup.compile_project(root)]
        )


def pytest_report_header(config) -> list[str]:
    """Which server the integration tests run on (tests/support/server.py), and how
    Spark starts."""
    if os.environ.get("CDC_MYSQL_TEST_URL"):
        server = "integration server: external (CDC_MYSQL_TEST_URL)"
    else:
        flavour = os.environ.get("CDC_MYSQL_TEST_FLAVOUR") or "mariadb"
        server = f"integration server: throwaway {flavour} (CDC_MYSQL_TEST_FLAVOUR)"
    return [server, f"spark: {getattr(config, 'spark_startup', 'as installed')}"]


def pytest_xdist_auto_num_workers(config) -> int:
    """The integration tests mostly wait (on servers, Spark's scheduling, injected
    faults): two processes, each with its own throwaway server and SparkSession, halve
    the suite's time even on two cores. Against an external server
    (``CDC_MYSQL_TEST_URL``) the processes would share its databases: one."""
    return 1 if os.environ.get("CDC_MYSQL_TEST_URL") else 2


@pytest.fixture(autouse=True)
def _source_logger_as_found():
    """The source configures its ``cdc_mysql`` logger once per process (its own handler,
    no propagation), as it does in Spark's Python workers. A test that runs the source in
    the suite's process must not leave that behind: ``caplog`` in a later test of the
    same worker would see nothing."""
    source_log = logging.getLogger("cdc_mysql")
    handlers, level, propagate = list(source_log.handlers), source_log.level, source_log.propagate
    yield
    for handler in source_log.handlers:
        if handler not in handlers:
            source_log.removeHandler(handler)
            handler.close()
    source_log.setLevel(level)
    source_log.propagate = propagate
