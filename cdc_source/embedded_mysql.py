"""A MySQL unpacked from Debian packages into a directory of its own, and how the throwaway
server (:mod:`cdc_source.embedded_server`) runs it.

The tree holds its own glibc and libstdc++ (the machine's may be older than its binaries
need), so every binary runs through the tree's dynamic loader with the tree's library
directories: ``<root>/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path ...
<root>/usr/sbin/mysqld``. ``tests/support/mysql_dist.py`` fetches such a tree.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

MULTIARCH = "x86_64-linux-gnu"
LOADER = "ld-linux-x86-64.so.2"


class UnpackedMySQL:
    """The binaries and data files of a MySQL tree unpacked under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def lib_dirs(self) -> list[Path]:
        candidates = [self.root / "usr/lib" / MULTIARCH, self.root / "lib" / MULTIARCH]
        return [path for path in candidates if path.is_dir()]

    @property
    def loader(self) -> Path:
        for directory in self.lib_dirs:
            if (directory / LOADER).exists():
                return directory / LOADER
        raise FileNotFoundError(f"no {LOADER} under {self.root}")

    def command(self, binary: str) -> list[str]:
        """The argv that runs ``binary`` (a path inside the tree, e.g. ``usr/bin/mysqlbinlog``)
        on the tree's own libraries."""
        libraries = ":".join(str(path) for path in self.lib_dirs)
        return [str(self.loader), "--library-path", libraries, str(self.root / binary)]

    def mysqld(self) -> list[str]:
        return self.command("usr/sbin/mysqld")

    def server_paths_args(self) -> list[str]:
        """Where the server finds its own files: Debian builds them in as absolute /usr
        paths, which are the machine's (or missing), not the tree's."""
        share = self.root / "usr/share/mysql"
        return [
            f"--basedir={self.root / 'usr'}",
            f"--lc-messages-dir={share}",
            f"--character-sets-dir={share / 'charsets'}",
            f"--plugin-dir={self.root / 'usr/lib/mysql/plugin'}",
        ]

    def version(self) -> str:
        result = subprocess.run(
            [*self.mysqld(), "--no-defaults", "--version"], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(f"{self.root}: mysqld --version failed: {result.stderr[-2000:]}")
        out = result.stdout.strip()  # "<path>/mysqld  Ver 9.7.4-2 for Linux on x86_64 (...)"
        return out[out.find("Ver ") :] if "Ver " in out else out

    def __repr__(self) -> str:
        return f"UnpackedMySQL({str(self.root)!r})"
