from __future__ import annotations

import os
import sys

import pytest

from tests.support.server import TEST_URL_ENV, TestServer, suite_flavour


@pytest.fixture(scope="session")
def server():
    test_server = TestServer()
    yield test_server
    test_server.stop()


@pytest.fixture(scope="module")
def killable_server():
    """A throwaway server of the module's own, which its tests may kill and restart."""
    if os.environ.get(TEST_URL_ENV):
        pytest.skip("killing the server needs the embedded one, not CDC_MYSQL_TEST_URL")
    test_server = TestServer()
    yield test_server
    test_server.stop()


def _decoders() -> list[str]:
    """The row decoders built here, the first one only on the MySQL flavour: its leg checks
    the server, and the two decoders' equivalence is the MariaDB leg's (and the unit
    tests') to prove."""
    from reader.row_decoding import native_available

    decoders = ["native", "python"] if native_available() else ["python"]
    return decoders[:1] if suite_flavour() == "mysql" else decoders


def pytest_collection_modifyitems(config, items):
    """A module with ``ONE_DECODER = True`` (what it tests does not depend on the row
    decoder, e.g. fault handling), or a test marked ``one_decoder``, runs with the first
    decoder only, not once per decoder."""
    first = _decoders()[0]
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        decoder = callspec.params.get("binlog_decoder") if callspec else None
        one = getattr(item.module, "ONE_DECODER", False) or item.get_closest_marker("one_decoder")
        (drop if one and decoder not in (None, first) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session", params=_decoders(), autouse=True)
def binlog_decoder(request, server):
    """The whole integration suite runs once per row decoder built here (the C extension
    and its pure-Python twin), so both carry the same guarantees."""
    server.decoder = request.param
    yield request.param
    server.decoder = None


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    state_dir = tmp_path_factory.mktemp("coordinator-state")
    os.environ["CDC_MYSQL_STATE_DIR"] = str(state_dir)
    session = (
        SparkSession.builder.master("local[2,4]")  # tasks retried as on a cluster
        .appName("cdc-mysql-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stopTimeout", "60s")
        # Under the default trigger Spark asks a source with nothing new every 10 ms, and an
        # idle query costs a good part of a core (bench/README.md has the figures). The
        # tests' queries spend much of their time idle, waiting on writers, restarts and
        # faults, beside the other worker's on two cores. Asking every 100 ms changes no
        # batch's content, only how soon an idle query sees new changes.
        .config("spark.sql.streaming.pollingDelay", "100ms")
        # A Python process Spark starts has this long to send its secret once connected
        # (15 s by default). Two test legs side by side keep both cores busy, and a starved
        # process once took longer: the query failed with "Python worker failed to connect
        # back" before the test's own code ran.
        .config("spark.python.authenticate.socketTimeout", "60s")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
