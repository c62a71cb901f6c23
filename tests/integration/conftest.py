from __future__ import annotations

import os
import sys

import pytest

from tests.integration.server import TestServer


@pytest.fixture(scope="session")
def server():
    test_server = TestServer()
    yield test_server
    test_server.stop()


def _decoders() -> list[str]:
    from reader.row_decoding import native_available

    return ["native", "python"] if native_available() else ["python"]


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
        SparkSession.builder.master("local[2]")
        .appName("cdc-mysql-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stopTimeout", "60s")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
