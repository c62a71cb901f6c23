"""A built (non-editable) install carries every module of the package as a package: the
tests run on an editable install, which would not notice a subpackage missing from the
build (setuptools still copies an unlisted subpackage "as data", with a deprecation
warning, until it stops doing so)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_built_package_has_every_module_of_the_source_tree(tmp_path):
    result = subprocess.run(
        [sys.executable, "setup.py", "build_py", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    assert "as data is deprecated" not in result.stderr + result.stdout
    built = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py")}
    tree = {
        p.relative_to(ROOT).as_posix()
        for top in ("cdc_source", "coordinator", "reader")
        for p in (ROOT / top).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert tree - built == set()
    assert "pyspark_cdc_mysql.py" in built
