"""docker-compose.yml offers MySQL 8.0 and 8.4 set up the way the preflight requires, and
its header says truly how to start each, stream from it and run the suite on it.

Read structurally from the text (PyYAML is not a dependency): service names at two
spaces under ``services:``, their ``command:`` options, image, host port and the
``cdc`` account's SQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cdc_source.preflight import REQUIRED_SETTINGS

ROOT = Path(__file__).resolve().parents[3]
TEXT = (ROOT / "docker-compose.yml").read_text()
HEADER = TEXT[: TEXT.index("\nx-cdc-mysql:")]
BODY = "\n".join(line for line in TEXT.splitlines() if not line.lstrip().startswith("#"))

SERVICES = {"mysql80": ("mysql:8.0", 3306), "mysql84": ("mysql:8.4", 3307)}

# The preflight's settings as server options, plus the GTIDs that snapshot visibility
# (gtid-wait) and fail-over need on MySQL.
REQUIRED_OPTIONS = {
    **{f"--{name.replace('_', '-')}": value for name, value, _ in REQUIRED_SETTINGS},
    "--gtid-mode": "ON",
    "--enforce-gtid-consistency": "ON",
}


def _top_level_block(name: str) -> str:
    match = re.search(rf"^{name}:.*\n((?:(?:[ #].*)?\n)*)", BODY + "\n", re.M)
    assert match, f"docker-compose.yml has no top-level {name}:"
    return match.group(1)


def _services() -> dict[str, str]:
    block = _top_level_block("services")
    parts = re.split(r"^  ([A-Za-z0-9_-]+):\n", block, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _command(service: str) -> dict[str, str | None]:
    match = re.search(r"^    command:\n((?:      - .*\n)+)", _services()[service], re.M)
    assert match, f"{service} has no command list"
    options = {}
    for item in re.findall(r"^      - (\S+)", match.group(1), re.M):
        name, _, value = item.partition("=")
        options[name] = value or None
    return options


def _host_port(service: str) -> int:
    match = re.search(r'"127\.0\.0\.1:\$\{(\w+):-(\d+)\}:3306"', _services()[service])
    assert match, f"{service} maps no host port on 127.0.0.1"
    return int(match.group(2))


def test_the_file_offers_mysql_80_and_84_on_their_own_ports():
    services = _services()
    assert set(services) == set(SERVICES)
    for name, (image, port) in SERVICES.items():
        assert re.search(rf"^    image: {re.escape(image)}$", services[name], re.M)
        assert _host_port(name) == port
        assert "<<: *cdc-mysql" in services[name]  # root password, cdc account, healthcheck


@pytest.mark.parametrize("service", list(SERVICES))
def test_each_service_has_the_binlog_settings_the_preflight_requires(service):
    options = _command(service)
    for option, wanted in REQUIRED_OPTIONS.items():
        assert option in options, f"{service} lacks {option}"
        if option == "--log-bin":
            continue  # its value names the binlog files; the option turns log_bin ON
        assert (options[option] or "").upper() == wanted, f"{service}: {option}"
    # Removed from MySQL 8.4: the server would refuse to start.
    assert "--default-authentication-plugin" not in options
    assert "--expire-logs-days" not in options


def test_the_cdc_account_uses_caching_sha2_with_exactly_the_privileges_the_source_needs():
    assert "mysql_native_password" not in BODY
    configs = _top_level_block("configs")
    assert re.search(
        r"CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED WITH caching_sha2_password BY", configs
    )
    grants = re.findall(r"GRANT (.+) ON \*\.\* TO 'cdc'@'%'", configs)
    assert [set(p.strip() for p in g.split(",")) for g in grants] == [
        {"SELECT", "RELOAD", "REPLICATION SLAVE", "REPLICATION CLIENT"}
    ]
    anchor = _top_level_block("x-cdc-mysql")
    assert "source: cdc-user" in anchor and "/docker-entrypoint-initdb.d/" in anchor


@pytest.mark.parametrize("service", list(SERVICES))
def test_the_header_and_contributing_guide_say_how_to_start_and_test_each_service(service):
    port = _host_port(service)
    password = re.search(r"MYSQL_ROOT_PASSWORD: (\S+)", _top_level_block("x-cdc-mysql"))
    url = f"CDC_MYSQL_TEST_URL=mysql://root:{password.group(1)}@127.0.0.1:{port}"
    suite = f"{url} python -m pytest -q tests"
    assert re.search(rf"docker compose up -d --wait {service}\b.*:{port}\b", HEADER)
    assert suite in HEADER
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    assert f"docker compose up -d --wait {service}" in guide
    assert suite in guide
