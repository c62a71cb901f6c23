"""A bounded fuzzing run (atheris) over the C row decoder, the event framing and the
binary JSON decoder, in a child process: bad bytes must end in a decoding error, never a
crash or another exception."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TARGET = Path(__file__).resolve().parents[2] / "fuzz" / "fuzz_binlog.py"
SECONDS = int(os.environ.get("CDC_MYSQL_FUZZ_SECONDS", "8"))


def test_fuzzing_the_decoders_finds_no_crash(tmp_path):
    pytest.importorskip("atheris")
    result = subprocess.run(
        [
            sys.executable,
            str(TARGET),
            f"-max_total_time={SECONDS}",
            "-rss_limit_mb=2048",
            f"-artifact_prefix={tmp_path}/",
        ],
        capture_output=True,
        text=True,
        cwd=TARGET.parents[2],
        timeout=SECONDS + 120,
    )
    tail = (result.stdout + result.stderr)[-3000:]
    assert result.returncode == 0, tail
    assert "Done" in tail, tail
