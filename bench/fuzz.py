"""Fuzzes the native code with coverage feedback and sanitizers, every target for a given
time: ``python bench/fuzz.py --seconds 60`` (``--targets rows,split`` for some).

It builds the four extensions (``reader/_rowdecoder.c``, ``reader/_textscan.c``,
``reader/_textvalues.c``, ``cdc_source/binlog/_framing.c``) with clang,
``-fsanitize=fuzzer-no-link,address,undefined``
(coverage counters, AddressSanitizer, UndefinedBehaviorSanitizer, any report fatal), into a
throwaway directory beside copies of the packages, and runs each target of
``tests/fuzz/native_targets.py`` in its own process with atheris' AddressSanitizer and
libFuzzer runtime preloaded (atheris' documented mode for native extensions) and
``PYTHONMALLOC=malloc``, so every Python buffer handed to the C code is one the sanitizer
watches. Seeds: ``tests/data/fuzz_seeds/<target>`` (real events and result sets, see
``tests/fuzz/make_seeds.py``) and the inputs of past findings under ``regressions/``.

Prints per target: seconds, CPU seconds, executions, edges covered (libFuzzer's ``cov``:
instrumented edges of the C code; of the Python module for ``json``), of how many the loaded native
modules have (they count the sanitizers' check branches too, which a correct program never
takes, so the ratio is no coverage percentage), and findings, whose inputs are kept in the
throwaway directory (printed).
Exits 1 when any target found something. Needs clang (``apt-get install clang``) and
atheris.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "tests" / "data" / "fuzz_seeds"
RUNNER = ROOT / "tests" / "fuzz" / "run_target.py"
TARGETS = ("rows", "split", "count", "plain", "json", "textscan", "statement", "values")
EXTENSIONS = {
    "cdc_source/binlog/_framing": [],
    "reader/_rowdecoder": [],
    "reader/_textscan": ["libmariadb"],
    "reader/_textvalues": [],
}
SANITIZE = [
    "-fsanitize=fuzzer-no-link,address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-g",
    "-O1",
    "-std=c11",
]
ENV = {
    "PYTHONMALLOC": "malloc",
    "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


def _pkg_config(package: str) -> list[str]:
    out = subprocess.run(
        ["pkg-config", "--cflags", "--libs", package], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def build(into: Path) -> None:
    """The packages' Python files and the sanitizer builds of their extensions."""
    ignore = shutil.ignore_patterns("*.so", "__pycache__")
    for package in ("cdc_source", "reader"):
        shutil.copytree(ROOT / package, into / package, ignore=ignore)
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name, packages in EXTENSIONS.items():
        flags = [arg for package in packages for arg in _pkg_config(package)]
        command = ["clang", "-shared", "-fPIC", *SANITIZE, f"-I{include}"]
        command += [str(ROOT / f"{name}.c"), "-o", str(into / f"{name}{suffix}"), *flags]
        subprocess.run(command, check=True)


def preload() -> str:
    import atheris

    path = Path(atheris.path()) / "asan_with_fuzzer.so"
    if not path.is_file():
        raise SystemExit(f"atheris has no {path.name}: reinstall atheris from source")
    return str(path)


def _children_cpu() -> float:
    """CPU seconds of this process's finished children: a target's own share of the
    machine, which its wall time overstates on a loaded one."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_target(target: str, seconds: int, build_dir: Path, work: Path) -> dict:
    corpus = work / "corpus" / target
    findings = work / "findings" / target
    corpus.mkdir(parents=True)
    findings.mkdir(parents=True)
    seeds = [SEEDS / target, SEEDS / "regressions" / target]
    command = [sys.executable, str(RUNNER), target, f"-max_total_time={seconds}"]
    command += ["-print_final_stats=1", "-rss_limit_mb=2048", "-timeout=20", "-max_len=8192"]
    command += [f"-artifact_prefix={findings}/", str(corpus)]
    command += [str(s) for s in seeds if s.is_dir()]
    env = dict(os.environ, **ENV, LD_PRELOAD=preload())
    env["PYTHONPATH"] = os.pathsep.join([str(build_dir), str(ROOT)])
    started = time.monotonic()
    cpu_before = _children_cpu()
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=work)
    cpu = _children_cpu() - cpu_before
    output = result.stdout + result.stderr
    (work / f"{target}.log").write_text(output)
    executions = re.findall(r"stat::number_of_executed_units: (\d+)", output)
    coverage = re.findall(r"\bcov: (\d+)", output)
    counters = re.findall(r"Loaded 1 modules +\((\d+) inline 8-bit counters\)", output)
    found = sorted(p.name for p in findings.iterdir())
    if result.returncode != 0 and not found:
        found = [f"exit status {result.returncode}, see {work / f'{target}.log'}"]
    return {
        "target": target,
        "seconds": round(time.monotonic() - started),
        "cpu_seconds": round(cpu),
        "executions": int(executions[-1]) if executions else 0,
        "edges": int(coverage[-1]) if coverage else 0,
        "of": sum(int(n) for n in counters) or "-",
        "findings": found,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="per target")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
    if shutil.which("clang") is None:
        raise SystemExit("bench/fuzz.py needs clang: apt-get install clang")
    work = args.keep or Path(tempfile.mkdtemp(prefix="cdc-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    build_dir = work / "build"
    build(build_dir)
    results = [run_target(t, args.seconds, build_dir, work) for t in args.targets.split(",")]
    print(
        f"{'target':<10} {'seconds':>7} {'cpu s':>6} {'executions':>11} {'edges':>6} {'of':>5}"
        "  findings"
    )
    for r in results:
        found = ", ".join(r["findings"]) or "none"
        figures = (
            f"{r['seconds']:>7} {r['cpu_seconds']:>6} {r['executions']:>11} {r['edges']:>6} "
            f"{r['of']:>5}"
        )
        print(f"{r['target']:<10} {figures}  {found}")
    if any(r["findings"] for r in results):
        print(f"inputs and logs of the findings: {work}")
        return 1
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
