"""The optional native row decoder. Without a C compiler the build goes on without it and
the pure-Python decoder (reader/row_decoder_py.py) is used, with the same output."""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    def run(self):
        try:
            super().run()
        except Exception as err:  # no compiler or no Python headers
            if os.environ.get("CDC_MYSQL_REQUIRE_NATIVE"):
                raise
            print(f"cdc-mysql: native row decoder not built ({err}); using pure Python")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as err:
            if os.environ.get("CDC_MYSQL_REQUIRE_NATIVE"):
                raise
            print(f"cdc-mysql: native row decoder not built ({err}); using pure Python")


setup(
    ext_modules=[
        Extension(
            "reader._rowdecoder",
            sources=["reader/_rowdecoder.c"],
            extra_compile_args=[
                "-O2",
                "-std=c11",
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
                "-Wno-missing-field-initializers",
                "-Wno-cast-function-type",
            ],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
