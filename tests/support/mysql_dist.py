"""MySQL 9.7 for the test suite's MySQL flavour, unpacked from Debian's packages.

MySQL server binaries are not in Debian 12 (MariaDB is), and unstable's ``mysql-server-core``
(9.7, an LTS series) needs a newer glibc and libstdc++ than the machine has. So nothing is
installed: the packages and their dependency closure (glibc and libstdc++ included, perl
left out) are downloaded from unstable with a private apt configuration (its own sources
list, package lists, cache and an empty dpkg status: the system's apt state is not
touched), unpacked with ``dpkg -x`` into one cache directory, and every binary is run
through that tree's own dynamic loader (:class:`cdc_source.embedded_mysql.UnpackedMySQL`).

The archive is the one the machine's own apt sources name for its Debian release
(``CDC_MYSQL_DIST_MIRROR`` overrides it). The tree is kept in ``CDC_MYSQL_DIST_DIR``, by
default ``~/.cache/cdc-mysql/mysql-9.7``; a run that finds it complete uses it.

    python -m tests.support.mysql_dist     # fetches when missing, prints the tree's path
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cdc_source.embedded_mysql import UnpackedMySQL

SERIES = "9.7"
ROOT_PACKAGES = ("mysql-server-core", "mysql-client-core")
DIR_ENV = "CDC_MYSQL_DIST_DIR"
MIRROR_ENV = "CDC_MYSQL_DIST_MIRROR"
SUITE = "unstable"
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
COMPLETE_MARK = ".complete"  # written last: a tree without it is an interrupted fetch


class MySQLDistError(RuntimeError):
    """MySQL could not be fetched or unpacked."""


def cache_dir() -> Path:
    explicit = os.environ.get(DIR_ENV)
    if explicit:
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "cdc-mysql" / f"mysql-{SERIES}"


def is_perl(name: str) -> bool:
    """perl and its libraries: the server's helper scripts want them, mysqld does not."""
    return name in ("perl", "perl-base") or name.startswith(("perl-modules", "libperl"))


def ensure(directory: Path | None = None, log=None) -> UnpackedMySQL:
    """The unpacked MySQL tree, fetched first when missing (one fetch at a time: parallel
    test processes wait for the first one's)."""
    root = directory or cache_dir()
    if (root / COMPLETE_MARK).exists():
        return UnpackedMySQL(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / COMPLETE_MARK).exists():
            _fetch(root, log or (lambda message: print(message, file=sys.stderr)))
    return UnpackedMySQL(root)


def _fetch(root: Path, log) -> None:
    mirror = os.environ.get(MIRROR_ENV) or debian_mirror()
    work = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    try:
        apt = PrivateApt(work / "apt", mirror)
        log(f"mysql_dist: reading {mirror} {SUITE} (private apt state in {work})")
        apt.update()
        version = apt.candidate(ROOT_PACKAGES[0])
        if not version.startswith(f"{SERIES}."):
            raise MySQLDistError(
                f"{SUITE} carries {ROOT_PACKAGES[0]} {version}, not {SERIES}.x; the test "
                f"flavour is MySQL {SERIES}"
            )
        packages = apt.closure(ROOT_PACKAGES)
        log(f"mysql_dist: downloading {ROOT_PACKAGES[0]} {version} and {len(packages) - 1} more")
        debs = apt.download(packages, work / "debs")
        tree = work / "tree"
        for deb in debs:
            subprocess.run(["dpkg", "-x", str(deb), str(tree)], check=True)
        mysql = UnpackedMySQL(tree)
        found = mysql.version()  # the tree runs, through its own loader
        (tree / COMPLETE_MARK).write_text(f"{found}\n" + "".join(f"{d.name}\n" for d in debs))
        if root.exists():  # an interrupted fetch's remains
            shutil.rmtree(root)
        tree.rename(root)
        log(f"mysql_dist: {found} in {root}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


class PrivateApt:
    """apt-get and apt-cache on a sources list, lists, cache and dpkg status of their own."""

    def __init__(self, directory: Path, mirror: str) -> None:
        self.dir = directory
        for sub in ("lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"):
            (directory / sub).mkdir(parents=True, exist_ok=True)
        (directory / "status").write_text("")
        signed_by = f" [signed-by={DEFAULT_KEYRING}]" if Path(DEFAULT_KEYRING).exists() else ""
        (directory / "sources.list").write_text(f"deb{signed_by} {mirror} {SUITE} main\n")
        settings = {
            "Dir::State": directory,
            "Dir::State::Lists": directory / "lists",
            "Dir::State::status": directory / "status",
            "Dir::Cache": directory / "cache",
            "Dir::Etc::sourcelist": directory / "sources.list",
            "Dir::Etc::sourceparts": directory / "sources.list.d",
            "Dir::Etc::preferences": directory / "preferences",
            "Dir::Etc::preferencesparts": directory / "preferences.d",
            "APT::Architectures": "amd64",
            "Acquire::Languages": "none",
        }
        self.options = [arg for key, value in settings.items() for arg in ("-o", f"{key}={value}")]

    def _run(self, tool: str, *args: str, cwd: Path | None = None) -> str:
        result = subprocess.run(
            [tool, *self.options, *args], capture_output=True, text=True, cwd=cwd
        )
        if result.returncode != 0:
            raise MySQLDistError(f"{tool} {' '.join(args)} failed: {result.stderr[-2000:]}")
        return result.stdout

    def update(self) -> None:
        self._run("apt-get", "update")

    def candidate(self, package: str) -> str:
        policy = self._run("apt-cache", "policy", package)
        match = re.search(r"^\s*Candidate:\s*(\S+)", policy, re.M)
        if not match or match.group(1) == "(none)":
            raise MySQLDistError(f"{SUITE} has no {package}")
        return match.group(1)

    def closure(self, roots: tuple[str, ...]) -> list[str]:
        """What installing ``roots`` on an empty system would install (apt's resolver picks
        among alternatives), less perl and whatever only perl needed."""
        simulated = self._run("apt-get", "-s", "--no-install-recommends", "install", *roots)
        chosen = {line.split()[1] for line in simulated.splitlines() if line.startswith("Inst ")}
        edges = self._depends(sorted(chosen))
        keep: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            if name in keep or is_perl(name):
                continue
            keep.add(name)
            todo.extend(dep for dep in edges.get(name, ()) if dep in chosen)
        return sorted(keep)

    def _depends(self, packages: list[str]) -> dict[str, set[str]]:
        """Every package each of ``packages`` names in a Depends or Pre-Depends, with the
        packages that provide a virtual one."""
        out = self._run(
            "apt-cache", "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
            "--no-breaks", "--no-replaces", "--no-enhances", *packages,
        )  # fmt: skip
        edges: dict[str, set[str]] = {}
        current: set[str] = set()
        for line in out.splitlines():
            if not line.startswith(" "):
                current = edges.setdefault(line.strip(), set())
                continue
            name = line.split(":", 1)[1] if "Depends:" in line else line
            current.add(name.strip().strip("<>").split(":")[0])
        return edges

    def download(self, packages: list[str], directory: Path) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        self._run("apt-get", "download", *packages, cwd=directory)
        debs = sorted(directory.glob("*.deb"))
        if len(debs) != len(packages):
            raise MySQLDistError(f"asked apt for {len(packages)} packages, got {len(debs)}")
        return debs


def debian_mirror(apt_etc: Path = Path("/etc/apt")) -> str:
    """The archive the machine's apt sources use for its own Debian release (not its
    security archive, nor a third party's repository): the first ``deb`` source, one-line
    or deb822, of the release's codename with the ``main`` component."""
    codename = _os_release().get("VERSION_CODENAME", "")
    for types, uris, suites, components in _apt_sources(apt_etc):
        if "deb" in types and codename in suites and "main" in components and uris:
            return uris[0].rstrip("/")
    raise MySQLDistError(
        f"no Debian archive for '{codename}' in {apt_etc}/sources.list(.d); set {MIRROR_ENV} "
        f"to a Debian mirror's URL"
    )


def _os_release() -> dict[str, str]:
    fields = {}
    for line in Path("/etc/os-release").read_text().splitlines():
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip().strip('"')
    return fields


def _apt_sources(apt_etc: Path):
    """(types, uris, suites, components) of every enabled source, in apt's order."""
    one_line = [apt_etc / "sources.list", *sorted((apt_etc / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(line) >= 3:
                yield [line[0]], [line[1]], [line[2]], line[3:]
    for path in sorted((apt_etc / "sources.list.d").glob("*.sources")):
        if path.is_file():
            for paragraph in re.split(r"\n\s*\n", path.read_text()):
                fields = _deb822_fields(paragraph)
                if fields and fields.get("enabled", "yes").lower() != "no":
                    yield tuple(
                        fields.get(key, "").split()
                        for key in ("types", "uris", "suites", "components")
                    )


def _deb822_fields(paragraph: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = None
    for line in paragraph.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line[0] in " \t" and key:  # a continuation line
            fields[key] += " " + line.strip()
        else:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            fields[key] = value.strip()
    return fields


def main() -> int:
    try:
        mysql = ensure()
    except MySQLDistError as exc:
        print(f"mysql_dist: {exc}", file=sys.stderr)
        return 1
    print(mysql.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
