import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hypothesis import settings  # noqa: E402

# No timing thresholds in tests: hypothesis' per-example deadline fails a correct example
# on a loaded machine (CI runs the suite beside servers and Spark).
settings.register_profile("cdc-mysql", deadline=None)
settings.load_profile("cdc-mysql")


def pytest_report_header(config) -> str:
    """Which server the integration tests run on (tests/support/server.py)."""
    if os.environ.get("CDC_MYSQL_TEST_URL"):
        return "integration server: external (CDC_MYSQL_TEST_URL)"
    flavour = os.environ.get("CDC_MYSQL_TEST_FLAVOUR") or "mariadb"
    return f"integration server: throwaway {flavour} (CDC_MYSQL_TEST_FLAVOUR)"


def pytest_xdist_auto_num_workers(config) -> int:
    """The integration tests mostly wait (on servers, Spark's scheduling, injected
    faults): two processes, each with its own throwaway server and SparkSession, halve
    the suite's time even on two cores. Against an external server
    (``CDC_MYSQL_TEST_URL``) the processes would share its databases: one."""
    return 1 if os.environ.get("CDC_MYSQL_TEST_URL") else 2
