"""The embedded server's own guarantees: a kept server (``keep_dir``) outlives ``stop()``
and a new server on the same directory starts on the data the first one wrote, with the
CDC account still usable; a server whose chosen port another process took starts on
another port."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from tests.support.server import TEST_URL_ENV, embedded_server

ONE_DECODER = True  # no binlog is decoded here

pytestmark = pytest.mark.skipif(
    bool(os.environ.get(TEST_URL_ENV)),
    reason="keep_dir is the embedded server's, not an external one's",
)


def _write_row(info) -> None:
    with info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE kept")
        cur.execute("CREATE TABLE kept.t (id INT PRIMARY KEY, v VARCHAR(16))")
        cur.execute("INSERT INTO kept.t VALUES (1, 'survives')")


def _read_rows(info) -> list[tuple]:
    with info.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT id, v FROM kept.t")
        return [tuple(row) for row in cur.fetchall()]


def _cdc_user_can_read(info) -> list[tuple]:
    import pymysql

    conn = pymysql.connect(host=info.host, port=info.port, user=info.user, password=info.password)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT v FROM kept.t")
            return [tuple(row) for row in cur.fetchall()]
    finally:
        conn.close()


@pytest.fixture
def short_dir():
    """A directory with a short path: a server's socket path must stay under 108 bytes,
    which pytest's own temporary paths (under xdist) can pass."""
    path = Path(tempfile.mkdtemp(prefix="cdc-kept-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_kept_directory_survives_stop_and_serves_its_data_to_the_next_server(short_dir):
    kept = short_dir / "server"
    first = embedded_server(keep_dir=kept)
    try:
        _write_row(first.start())
    finally:
        first.stop()
    assert (kept / "data").is_dir()

    second = embedded_server(keep_dir=kept)
    try:
        info = second.start()
        assert _read_rows(info) == [(1, "survives")]
        assert _cdc_user_can_read(info) == [("survives",)]
    finally:
        second.stop()
    assert (kept / "data").is_dir()


def test_a_throwaway_server_still_removes_its_directory(short_dir):
    server = embedded_server(base_dir=str(short_dir))
    server.start()
    base = server.base_dir
    server.stop()
    assert not base.exists()


def test_a_server_whose_port_is_taken_before_it_binds_starts_on_another_port(short_dir):
    server = embedded_server(base_dir=str(short_dir))
    taken = server.port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            info = server.start()
            assert info.port == server.port != taken
            error_log = server.error_log.read_text(errors="replace")
            assert f"port: {taken}" in error_log and "Address already in use" in error_log
            with info.admin_connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT 1")
                assert cur.fetchone() == (1,)
        finally:
            server.stop()
