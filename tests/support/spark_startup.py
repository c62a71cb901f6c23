"""Spark as the test suite starts it: the same Spark, started for less CPU.

The suite starts many JVMs (its sessions, and every lake, quickstart and cluster run in a
child process) and many Python processes of Spark's (a data source's lookup, creation,
planning and reading, and a streaming source's runner, one per query). A pip-installed
Spark spends most of a JVM's start, and much of each such Python process's, on work that
is the same every time. Three causes, three remedies:

- **The JVM's start.** Most of its CPU is loading and verifying Spark's classes and
  compiling them with the optimising JIT. A class data sharing archive of the classes a
  session loads (recorded once per Java and Spark, ``-XX:ArchiveClassesAtExit``, then
  ``-XX:SharedArchiveFile``) and the quick JIT only (``-XX:TieredStopAtLevel=1``: the
  tests move little data) leave the JVM little of that to do again.
- **Python's.** Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python
  processes' path, and Python caches no bytecode for a zip: each process compiles
  pyspark from source. A Spark home of links to the installed pyspark's ``bin``,
  ``jars`` and ``sbin``, without that zip, makes them import the installed pyspark, the
  same files, with its bytecode cache.
- **The project's own modules.** Where ``PYTHONDONTWRITEBYTECODE`` is set (CI machines,
  many containers) no process writes their bytecode cache, and each of Spark's Python
  processes compiles the source's modules again. :func:`compile_project` writes the
  cache once, before any starts (Python reads a cache even where it writes none).

None of them changes what Spark does with the source. The first two are off when
``SPARK_HOME`` is already set (a Spark of the user's) or ``CDC_MYSQL_TEST_PLAIN_SPARK=1``.
The home and the archive are kept in ``~/.cache/cdc-mysql/spark-startup``, per Java and
pyspark version.

    python -m tests.support.spark_startup ARCHIVE   # records ARCHIVE (called by prepare)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PLAIN_ENV = "CDC_MYSQL_TEST_PLAIN_SPARK"
PROJECT_PACKAGES = ("cdc_source", "coordinator", "reader")
QUICK_JIT = "-XX:TieredStopAtLevel=1"
HOME_PARTS = ("bin", "jars", "sbin")
RECORD_SECONDS = 300


def prepare(environ=os.environ) -> str:
    """Sets ``SPARK_HOME`` and ``PYSPARK_SUBMIT_ARGS`` in ``environ`` (inherited by every
    Spark the suite starts, in this process or a child) and says what it did."""
    if environ.get(PLAIN_ENV) == "1" or environ.get("SPARK_HOME"):
        return "Spark as installed (SPARK_HOME set, or CDC_MYSQL_TEST_PLAIN_SPARK=1)"
    java = _java(environ)
    if java is None:
        return "Spark as installed (no java found)"
    import pyspark

    installed = Path(pyspark.__file__).resolve().parent
    key = hashlib.sha256(f"{installed}\n{pyspark.__version__}\n{java}".encode()).hexdigest()
    place = _cache_root(environ) / key[:16]
    place.mkdir(parents=True, exist_ok=True)
    with open(place / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other leg of CI may be preparing it too
        home = _linked_home(installed, place / "home")
        archive = place / "classes.jsa"
        if not archive.exists() and not (place / "no-archive").exists():
            _record(archive, home, environ)
    options = [QUICK_JIT]
    if archive.exists():
        options.append(f"-XX:SharedArchiveFile={archive}")
    environ["SPARK_HOME"] = str(home)
    environ["PYSPARK_SUBMIT_ARGS"] = submit_args(" ".join(options))
    archived = "with" if archive.exists() else "without"
    return f"Spark home {home} (pyspark's bytecode cached), quick JIT, {archived} class archive"


def compile_project(root: Path) -> str:
    """Writes the bytecode cache of the project's packages under ``root`` (kept, like
    Python's own, in ``__pycache__`` beside each module, and rewritten only for a module
    changed since) and says so."""
    import compileall

    targets = [root / name for name in PROJECT_PACKAGES]
    for target in targets:
        compileall.compile_dir(target, quiet=1)
    return f"bytecode of {', '.join(PROJECT_PACKAGES)} cached"


def submit_args(driver_options: str) -> str:
    """``PYSPARK_SUBMIT_ARGS`` giving the driver ``driver_options`` and executors the
    quick JIT (a cluster's executors have another class path: no archive)."""
    return " ".join(
        [
            "--conf", shlex.quote(f"spark.driver.extraJavaOptions={driver_options}"),
            "--conf", shlex.quote(f"spark.executor.extraJavaOptions={QUICK_JIT}"),
            "pyspark-shell",
        ]
    )  # fmt: skip


def _java(environ) -> str | None:
    """The java Spark's launcher runs, by its real path and version."""
    java_home = environ.get("JAVA_HOME")
    path = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not path or not os.path.exists(path):
        return None
    version = subprocess.run([path, "-version"], capture_output=True, text=True).stderr
    return f"{os.path.realpath(path)}\n{version}"


def _cache_root(environ) -> Path:
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "cdc-mysql" / "spark-startup"


def _linked_home(installed: Path, home: Path) -> Path:
    """A Spark home of links to ``installed``'s launch scripts and jars, no ``python``."""
    home.mkdir(exist_ok=True)
    for part in HOME_PARTS:
        link, target = home / part, installed / part
        if target.exists() and not link.exists():
            link.symlink_to(target)
    return home


def _record(archive: Path, home: Path, environ) -> None:
    """Runs one small session (this module's ``main``) that writes the archive at exit;
    a failure leaves a marker, and the suite runs without an archive."""
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = dict(environ)
    env["SPARK_HOME"] = str(home)
    env["PYSPARK_SUBMIT_ARGS"] = submit_args(f"{QUICK_JIT} -XX:ArchiveClassesAtExit={partial}")
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.spark_startup", str(partial)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=RECORD_SECONDS,
        )
    except subprocess.TimeoutExpired:
        done = None
    if done is not None and done.returncode == 0 and partial.exists():
        partial.rename(archive)
    else:
        partial.unlink(missing_ok=True)
        (archive.parent / "no-archive").write_text(done.stderr[-4000:] if done else "timeout")


def main() -> int:
    """A session that loads what the suite's sessions load: a job, a Python data source
    read in batch and as a stream, so that their classes are in the archive."""
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )

    class Reader(DataSourceReader):
        def read(self, partition):
            yield (1,)

    class StreamReader(DataSourceStreamReader):
        def initialOffset(self):
            return {"at": 0}

        def latestOffset(self, start=None, limit=None):
            return {"at": 1}

        def partitions(self, start, end):
            return [InputPartition(0)] if start["at"] < end["at"] else []

        def read(self, partition):
            yield (1,)

    class Startup(DataSource):
        @classmethod
        def name(cls):
            return "startup"

        def schema(self):
            return "x int"

        def reader(self, schema):
            return Reader()

        def streamReader(self, schema):
            return StreamReader()

    checkpoint = tempfile.mkdtemp(prefix="spark-startup-")
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    spark = spark.getOrCreate()
    spark.dataSource.register(Startup)
    spark.range(10).count()
    spark.read.format("startup").load().count()
    query = (
        spark.readStream.format("startup")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    jvm = spark.sparkContext._gateway.proc  # pyspark's child: it exits when stdin closes
    spark.stop()
    jvm.stdin.close()
    jvm.wait(timeout=RECORD_SECONDS)  # the JVM writes the archive as it exits
    shutil.rmtree(checkpoint, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
