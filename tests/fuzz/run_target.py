"""Runs one target of :mod:`tests.fuzz.native_targets` under atheris' libFuzzer:
``python tests/fuzz/run_target.py <target> [libFuzzer options and corpus directories]``.

``bench/fuzz.py`` runs it over a sanitizer build of the extensions, with atheris'
AddressSanitizer runtime preloaded, so libFuzzer's coverage (``cov:``) counts the edges
of the C code; run directly it fuzzes whatever build Python imports, without that
feedback. The modules under test are imported before fuzzing starts, so their coverage
counters are registered; Python modules (binary JSON) are instrumented by atheris.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import atheris

sys.path.append(str(Path(__file__).resolve().parents[2]))  # after PYTHONPATH: a build there wins

from tests.fuzz import native_targets  # noqa: E402

NATIVE_MODULES = {
    "rows": ["reader._rowdecoder"],
    "split": ["cdc_source.binlog._framing"],
    "count": ["cdc_source.binlog._framing"],
    "textscan": ["reader._textscan", "MySQLdb"],
    "values": ["reader._textvalues"],
}


def main() -> None:
    target = sys.argv[1]
    python_modules = native_targets.PYTHON_TARGETS.get(target)
    if python_modules:
        with atheris.instrument_imports(include=python_modules):
            for module in python_modules:
                importlib.import_module(module)
    for module in NATIVE_MODULES.get(target, []):
        importlib.import_module(module)
    atheris.Setup([sys.argv[0], *sys.argv[2:]], native_targets.TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
