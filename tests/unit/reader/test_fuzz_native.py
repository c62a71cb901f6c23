"""The native fuzz targets (``tests/fuzz/native_targets.py``): their seeds and the inputs
of past findings replayed through the extensions as built, each finding's fix checked by
its outcome, and a short run of ``bench/fuzz.py`` (sanitizer build, every target) that
must find nothing."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cdc_source.binlog import framing
from reader import native_columns, row_decoding
from tests.fuzz import native_targets as t

ROOT = Path(__file__).resolve().parents[3]
SEEDS = ROOT / "tests" / "data" / "fuzz_seeds"
REGRESSIONS = SEEDS / "regressions"


def _textscan_available(scan: str = "TextScan") -> bool:
    try:
        import MySQLdb  # noqa: F401

        from reader import _textscan
    except ImportError:
        return False
    return hasattr(_textscan, scan)


AVAILABLE = {
    "rows": row_decoding.native_available(),
    "split": framing.native_available(),
    "count": framing.native_available(),
    "plain": framing.native_available(),
    "json": True,
    "textscan": _textscan_available(),
    "statement": _textscan_available("StatementScan"),
    "values": native_columns.native_available(),
}


@pytest.mark.parametrize("target", sorted(t.TARGETS))
def test_every_seed_and_past_finding_ends_in_a_result_or_a_decoding_error(target):
    if not AVAILABLE[target]:
        pytest.skip(f"the extension under the {target} target is not built here")
    inputs = sorted((SEEDS / target).iterdir())
    assert inputs, f"no seeds for {target}: run python -m tests.fuzz.make_seeds"
    if (REGRESSIONS / target).is_dir():
        inputs += sorted((REGRESSIONS / target).iterdir())
    for path in inputs:
        t.TARGETS[target](path.read_bytes())


def test_the_rows_seeds_are_rows_events_the_decoder_reads_whole():
    """The rows seeds are real rows events with their tables' plans: the Python decoder
    reads rows from every one (the fuzzer starts from valid images)."""
    decoded = 0
    for path in sorted((SEEDS / "rows").iterdir()):
        plan, kind, partial, json_count, body = t.parse_rows_input(path.read_bytes())
        sink = row_decoding.RowSink(plan, json_count, decoder="python")
        decoded += sink.decode(body, 0, len(body), kind, partial) > 0
    assert decoded == len(list((SEEDS / "rows").iterdir()))


@pytest.mark.skipif(not AVAILABLE["textscan"], reason="reader._textscan is not built here")
def test_an_empty_value_at_the_start_of_a_fetch_is_an_empty_string():
    """Finding: the first value of a column in a fetch being empty, its buffer was
    still NULL and was offset and copied into (undefined behaviour, UBSan)."""
    import MySQLdb

    from reader import _textscan
    from tests.fuzz import fake_server

    data = (REGRESSIONS / "textscan" / "empty-value-first-in-fetch").read_bytes()
    fake_server.scan(t.parse_textscan_input(data))  # starts the server
    fake_server._server.answer = t.parse_textscan_input(data)
    conn = MySQLdb.connect(unix_socket=fake_server._server.path, user="fuzz")
    try:
        scan = _textscan.TextScan(conn)
        assert scan.execute(fake_server.QUERY) == 1
        rows, [(validity, offsets, values, ascii)] = scan.fetch(10, 1 << 16, b"\x01")
    finally:
        conn.close()
    assert (rows, validity, bytes(offsets), bytes(values), ascii) == (
        1,
        None,
        bytes(8),
        b"",
        True,
    )


def test_a_short_sanitizer_run_of_every_target_finds_nothing(tmp_path):
    missing = [
        what
        for what, present in (
            ("atheris", importlib.util.find_spec("atheris") is not None),
            ("clang", shutil.which("clang") is not None),
        )
        if not present
    ]
    if missing and os.environ.get("CDC_MYSQL_REQUIRE_NATIVE"):
        pytest.fail(f"CI runs the sanitizer build, which needs {' and '.join(missing)}")
    if missing:
        pytest.skip(f"the sanitizer build needs {' and '.join(missing)} (apt-get install clang)")
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fuzz.py"), "--seconds", "4"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    lines = [line.split() for line in result.stdout.splitlines()[1:] if line.strip()]
    assert sorted(line[0] for line in lines) == sorted(t.TARGETS), output
    for _target, _seconds, _cpu, executions, edges, _of, findings in lines:
        assert int(executions) > 0 and int(edges) > 0 and findings == "none", output


@pytest.mark.parametrize("name", ["containers-sharing-elements", "containers-sharing-elements-2"])
def test_json_whose_containers_share_elements_is_refused_at_once(name):
    """Finding (json target, a 'slow unit' of 10-15 s under the sanitizers): containers
    pointing into each other had elements decoded again and again, the work doubling per
    level; the decoder now stops once a document decodes to more than its bytes hold."""
    from reader.json_binary import JsonBinaryError, decode

    with pytest.raises(JsonBinaryError, match="more than its bytes hold"):
        decode((REGRESSIONS / "json" / name).read_bytes())
