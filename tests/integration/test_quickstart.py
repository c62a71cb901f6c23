"""The README's first command: the quickstart captures a live table end to end on its own
throwaway server and verifies the change log; it prints one line per batch, without the
source's INFO planning lines. Run in a child process: it starts and stops its own Spark."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.server import suite_flavour

ONE_DECODER = True  # the quickstart picks its own decoder (the default)

# The quickstart starts the machine's MariaDB whatever the suite's flavour: the MariaDB leg
# runs it.
pytestmark = pytest.mark.skipif(
    suite_flavour() == "mysql", reason="the quickstart's own server is MariaDB"
)


def test_the_quickstart_verifies_its_capture_with_one_line_per_batch(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_source",
            "quickstart",
            "--rows",
            "3000",
            "--seconds",
            "4",
            "--out",
            str(tmp_path / "qs"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "verification OK" in done.stdout
    batch_lines = re.findall(r"^  batch +\d+ ", done.stdout, re.M)
    assert len(batch_lines) >= 3
    assert "planned batch" not in output, "the source's INFO lines doubled the batch lines"


def test_the_quickstart_keeps_a_delta_table_equal_to_the_table(tmp_path):
    """``--delta mirror``: the stream goes into a Delta table through ``cdc_source.delta``,
    and the table Spark reads back from it equals ``SELECT *`` after the writer's changes."""
    done = subprocess.run(
        [
            sys.executable, "-m", "cdc_source", "quickstart", "--rows", "2000", "--seconds", "3",
            "--delta", "mirror", "--out", str(tmp_path / "qs"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "into a Delta table (mirror)" in done.stdout
    assert "verification OK: the Delta table (mirror)" in done.stdout
    assert (tmp_path / "qs" / "orders" / "_delta_log").is_dir()
