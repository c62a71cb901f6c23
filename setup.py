"""The optional native code, three extensions:

- ``cdc_source.binlog._framing``: the dump stream split into events and a rows event's
  rows counted, for the driver and the executors. Needs a C compiler and Python's
  headers. Without it the Python twins in cdc_source/binlog give the same events.
- ``reader._rowdecoder``: the binlog row decoder. Needs a C compiler and Python's headers.
  Without it the pure-Python decoder (reader/row_decoder_py.py) gives the same output.
- ``reader._textscan``: the snapshot's columnar reader over mysqlclient's connection. Also
  needs libmariadb's headers (``libmariadb-dev``, found by ``pkg-config``), as mysqlclient
  does. Without it snapshots are read with mysqlclient's or PyMySQL's cursors, with the
  same output.

A failed build leaves the package installed without that extension, unless
``CDC_MYSQL_REQUIRE_NATIVE`` is set (CI), where it is an error.
"""

import os
import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

WARNINGS = [
    "-O2",
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
    "-Wno-cast-function-type",
]


def _required() -> bool:
    return bool(os.environ.get("CDC_MYSQL_REQUIRE_NATIVE"))


class OptionalBuildExt(build_ext):
    def run(self):
        try:
            super().run()
        except Exception as err:  # no compiler or no Python headers
            if _required():
                raise
            print(f"cdc-mysql: native extensions not built ({err}); using pure Python")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as err:
            if _required():
                raise
            print(f"cdc-mysql: {ext.name} not built ({err}); using the Python path instead")


def _client_library_flags() -> tuple[list[str], list[str]] | None:
    """Compile and link flags of libmariadb (or libmysqlclient), from pkg-config."""
    for package in ("libmariadb", "mysqlclient"):
        try:
            cflags = subprocess.run(
                ["pkg-config", "--cflags", package], capture_output=True, text=True, check=True
            ).stdout
            libs = subprocess.run(
                ["pkg-config", "--libs", package], capture_output=True, text=True, check=True
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
        return shlex.split(cflags), shlex.split(libs)
    return None


def _extensions() -> list[Extension]:
    extensions = [
        Extension(
            "cdc_source.binlog._framing",
            sources=["cdc_source/binlog/_framing.c"],
            extra_compile_args=WARNINGS,
        ),
        Extension(
            "reader._rowdecoder",
            sources=["reader/_rowdecoder.c"],
            extra_compile_args=WARNINGS,
        ),
        Extension(
            "reader._textvalues",
            sources=["reader/_textvalues.c"],
            extra_compile_args=WARNINGS,
        ),
    ]
    client = _client_library_flags()
    if client is None:
        if _required():
            raise SystemExit("cdc-mysql: libmariadb-dev (pkg-config libmariadb) is required")
        print("cdc-mysql: libmariadb headers not found; reader._textscan not built")
    else:
        cflags, libs = client
        extensions.append(
            Extension(
                "reader._textscan",
                sources=["reader/_textscan.c"],
                extra_compile_args=WARNINGS + cflags,
                extra_link_args=libs,
            )
        )
    return extensions


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
