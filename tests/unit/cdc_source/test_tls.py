"""TLS options: validation, the arguments each client gets, the errors' wording and
their classification (a TLS failure is never retried)."""

from __future__ import annotations

import pickle
import ssl

import pymysql
import pytest

from cdc_source import mysql_client, tls
from cdc_source.mysql_client import SourceConnectionError, connect
from cdc_source.options import OptionError, parse_options
from cdc_source.retry import is_transient
from tests.support.server_answers import error

BASE = {
    "hostname": "db.example.com",
    "username": "cdc",
    "password": "s3cret-Pa55",
    "database-name": "shop",
    "table-name": r"shop\.orders",
}


@pytest.fixture
def pem(tmp_path):
    """Paths of files that exist (their content matters only where a context is built)."""
    paths = {}
    for name in ("ca", "cert", "key"):
        path = tmp_path / f"{name}.pem"
        path.write_text("not a certificate\n")
        paths[name] = str(path)
    return paths


def _parse(**changes):
    return parse_options({**BASE, **{k.replace("_", "-"): v for k, v in changes.items()}})


def test_the_default_is_preferred_but_none_on_a_loopback_host_unless_set():
    assert _parse().ssl_mode == "preferred"
    for host in ("localhost", "127.0.0.1", "127.1.2.3", "::1"):
        assert _parse(hostname=host).ssl_mode == "disabled"
        assert _parse(hostname=host, ssl_mode="preferred").ssl_mode == "preferred"


@pytest.mark.parametrize(
    "raw, mode",
    [
        ("disabled", "disabled"),
        ("PREFERRED", "preferred"),
        ("required", "required"),
        ("VERIFY_IDENTITY", "verify-identity"),
        (" verify-ca ", "verify-ca"),
    ],
)
def test_modes_are_read_as_mysql_spells_them_too(raw, mode, pem):
    extra = {"ssl_ca": pem["ca"]} if mode.startswith("verify") else {}
    assert _parse(ssl_mode=raw, **extra).ssl_mode == mode


def test_a_bad_mode_names_the_option_and_the_modes():
    with pytest.raises(OptionError, match="'ssl-mode' must be one of disabled, preferred, requ"):
        _parse(ssl_mode="on")


@pytest.mark.parametrize("mode", ["verify-ca", "verify-identity"])
def test_verifying_without_a_ca_is_refused(mode):
    with pytest.raises(OptionError, match="set 'ssl-ca'"):
        _parse(ssl_mode=mode)


@pytest.mark.parametrize("mode", ["disabled", "preferred", "required"])
def test_a_ca_with_a_mode_that_checks_nothing_is_refused(mode, pem):
    with pytest.raises(OptionError, match=f"'ssl-ca' is set, but ssl-mode={mode} checks no"):
        _parse(ssl_mode=mode, ssl_ca=pem["ca"])


def test_certificate_and_key_go_together_and_need_a_mode_that_requires_tls(pem):
    with pytest.raises(OptionError, match="'ssl-cert' and 'ssl-key' go together"):
        _parse(ssl_mode="required", ssl_cert=pem["cert"])
    with pytest.raises(OptionError, match="'ssl-cert' and 'ssl-key' go together"):
        _parse(ssl_mode="required", ssl_key=pem["key"])
    with pytest.raises(OptionError, match="ssl-mode=preferred may connect without TLS"):
        _parse(ssl_cert=pem["cert"], ssl_key=pem["key"])
    parsed = _parse(ssl_mode="required", ssl_cert=pem["cert"], ssl_key=pem["key"])
    assert (parsed.ssl_cert, parsed.ssl_key) == (pem["cert"], pem["key"])


def test_a_missing_file_is_named_with_the_executors_in_mind(tmp_path):
    missing = str(tmp_path / "nowhere.pem")
    with pytest.raises(OptionError, match="option 'ssl-ca': no file .*every executor"):
        _parse(ssl_mode="verify-ca", ssl_ca=missing)


def test_connection_kwargs_carry_the_tls_settings_as_picklable_strings(pem):
    parsed = _parse(
        ssl_mode="verify-identity", ssl_ca=pem["ca"], ssl_cert=pem["cert"], ssl_key=pem["key"]
    )
    kwargs = parsed.connection_kwargs()
    assert {k: kwargs[k] for k in tls.KEYS} == {
        "ssl_mode": "verify-identity",
        "ssl_ca": pem["ca"],
        "ssl_cert": pem["cert"],
        "ssl_key": pem["key"],
    }
    assert pickle.loads(pickle.dumps(parsed)).connection_kwargs() == kwargs
    assert "s3cret" not in repr(parsed)
    assert tls.split(_parse().connection_kwargs())[1] == {"ssl_mode": "preferred"}
    assert tls.split({"host": "h"})[1] == {"ssl_mode": "preferred"}  # older kwargs


def test_pymysql_arguments_per_mode():
    assert tls.pymysql_arguments({"ssl_mode": "disabled"}) == {"ssl_disabled": True}
    assert tls.pymysql_arguments({"ssl_mode": "preferred"}) == {}  # PyMySQL's own "if offered"
    required = tls.pymysql_arguments({"ssl_mode": "required"})["ssl"]
    assert isinstance(required, ssl.SSLContext)
    assert required.verify_mode == ssl.CERT_NONE and not required.check_hostname
    assert tls.pymysql_arguments({"ssl_mode": "required"})["ssl"] is required  # cached


def test_pymysql_verifying_contexts(tmp_path):
    from tests.support.certs import make_tls_files

    files = make_tls_files(tmp_path)
    ca = tls.pymysql_arguments({"ssl_mode": "verify-ca", "ssl_ca": str(files.ca)})["ssl"]
    assert ca.verify_mode == ssl.CERT_REQUIRED and not ca.check_hostname
    identity = tls.pymysql_arguments(
        {
            "ssl_mode": "verify-identity",
            "ssl_ca": str(files.ca),
            "ssl_cert": str(files.client_cert),
            "ssl_key": str(files.client_key),
        }
    )["ssl"]
    assert identity.verify_mode == ssl.CERT_REQUIRED and identity.check_hostname


def test_unusable_files_are_a_clear_permanent_error(pem, tmp_path):
    settings = {"ssl_mode": "verify-ca", "ssl_ca": pem["ca"]}
    with pytest.raises(tls.TlsSetupError, match="cannot use the TLS files 'ssl-ca'"):
        tls.pymysql_arguments(settings)
    gone = {"ssl_mode": "verify-ca", "ssl_ca": str(tmp_path / "gone.pem")}
    with pytest.raises(tls.TlsSetupError, match="'ssl-ca' names .* on the driver and on every"):
        tls.pymysql_arguments(gone)
    kwargs = {"host": "h", "port": 1, "user": "u", "password": "pw-secret", **gone}
    with pytest.raises(SourceConnectionError, match="cannot be read") as caught:
        connect(kwargs)
    assert caught.value.transient is False
    assert "pw-secret" not in str(caught.value)


@pytest.mark.parametrize(
    "mode, files, expected",
    [
        ("disabled", {}, {"ssl_mode": "DISABLED"}),
        ("preferred", {}, {"ssl": {"cipher": ""}}),
        ("required", {}, {"ssl": {"cipher": ""}}),
        ("verify-ca", {"ssl_ca": "/ca"}, {"ssl": {"cipher": "", "ca": "/ca"}}),
        (
            "verify-identity",
            {"ssl_ca": "/ca", "ssl_cert": "/c", "ssl_key": "/k"},
            {
                "ssl": {"cipher": "", "ca": "/ca", "cert": "/c", "key": "/k"},
                "ssl_mode": "VERIFY_IDENTITY",
            },
        ),
    ],
)
def test_mysqlclient_arguments_on_mariadb_connector_c(mode, files, expected):
    assert tls.mysqlclient_arguments({"ssl_mode": mode, **files}, "3.3.20") == expected


def test_mysqlclient_arguments_on_libmysqlclient():
    assert tls.mysqlclient_arguments({"ssl_mode": "preferred"}, "8.0.36") == {
        "ssl_mode": "PREFERRED"
    }
    assert tls.mysqlclient_arguments({"ssl_mode": "verify-ca", "ssl_ca": "/ca"}, "8.4.0") == {
        "ssl_mode": "VERIFY_CA",
        "ssl": {"ca": "/ca"},
    }
    assert tls.is_libmariadb("3.3.20") and tls.is_libmariadb("10.11.6")
    assert not tls.is_libmariadb("8.0.36") and not tls.is_libmariadb("5.7.44")


def _recorded(flavour: str, name: str) -> tuple:
    err = error(flavour, name)
    return (err.args[0], err.args[1])


# Errors as the clients raised them against the recorded servers
# (tests/data/server_answers/, python -m tests.support.record_server_answers; PyMySQL and
# mysqlclient on MariaDB Connector/C, versions under "clients" there).
VERIFY = _recorded("mysql-9.7", "pymysql: unknown CA")
NAME = _recorded("mysql-9.7", "pymysql: host name mismatch")
NO_TLS = _recorded("mariadb-10.11", "pymysql: server without TLS")
C_VERIFY = _recorded("mysql-9.7", "mysqlclient: unknown CA")
C_NO_TLS = _recorded("mariadb-10.11", "mysqlclient verify-identity: server without TLS")
REFUSED = _recorded("mysql-9.7", "connection refused")
INSECURE = _recorded("mysql-9.7", "insecure transport")
DENIED = _recorded("mysql-9.7", "access denied")
# Not recorded: Connector/C checks the host name only over TCP, and it takes 'localhost'
# as its default Unix socket. The text is the library's own (the message table of
# libmariadb.so.3, MariaDB Connector/C 3.3: "Validation of SSL server certificate failed").
C_NAME = (2026, "TLS/SSL error: Validation of SSL server certificate failed")


@pytest.mark.parametrize(
    "error, kind",
    [
        (VERIFY, "verify"),
        (NAME, "name"),
        (NO_TLS, "no-tls"),
        (C_VERIFY, "verify"),
        (C_NAME, "name"),
        (C_NO_TLS, "no-tls"),
        (REFUSED, None),
    ],
)
def test_tls_failures_are_permanent_and_refusals_stay_transient(error, kind):
    assert tls.failure_kind(error[1]) == kind
    assert is_transient(pymysql.err.OperationalError(*error)) is (kind is None)


def _explain(error, **settings):
    settings = {"ssl_mode": "verify-identity", "ssl_ca": "/etc/ca.pem", **settings}
    return tls.explain(error[0], error[1], settings, "db", 3306, "cdc")


def test_each_failure_says_what_to_change():
    assert (
        "could not be verified against ssl-ca '/etc/ca.pem' (self-signed certificate in "
        "certificate chain): set 'ssl-ca'" in _explain(VERIFY)
    )
    assert "not for the host name 'db'" in _explain(NAME)
    assert "ssl-mode=verify-ca" in _explain(C_NAME)
    assert "ssl-mode=required needs TLS, but the server at db:3306 does not offer it" in (
        _explain(NO_TLS, ssl_mode="required")
    )
    assert "require_secure_transport=ON" in _explain(INSECURE, ssl_mode="preferred")
    assert "REQUIRE SSL or X509" in _explain(DENIED, ssl_mode="disabled")
    assert "set 'ssl-cert' and 'ssl-key'" in _explain(DENIED)
    # Client texts not recorded (no server of ours set off these paths): PyMySQL's own
    # (pymysql/_auth.py, the 'cryptography' check; pymysql/connections.py,
    # "Authentication plugin '%s' not configured"), and Connector/C's 2061 for
    # caching_sha2_password without TLS (MySQL client error reference, CR_AUTH_PLUGIN_ERR).
    assert "pip install 'pymysql[rsa]'" in _explain(
        (None, "'cryptography' package is required for sha256_password or caching_sha2_password")
    )
    assert "set ssl-mode=required" in _explain(
        (
            2061,
            "Authentication plugin 'caching_sha2_password' reported error: Authentication "
            "requires secure connection.",
        )
    )
    assert "authentication plugin" in _explain(
        (2059, "Authentication plugin 'dialog' not configured")
    )
    assert _explain(REFUSED) is None


def test_connect_maps_a_missing_cryptography_to_a_clear_error(monkeypatch):
    def refuse(**kwargs):
        raise RuntimeError(
            "'cryptography' package is required for sha256_password or "
            "caching_sha2_password auth methods"
        )

    monkeypatch.setattr(mysql_client, "Connection", refuse)
    kwargs = {"host": "db", "port": 3306, "user": "cdc", "password": "pw-secret"}
    with pytest.raises(SourceConnectionError, match="needs the Python package 'cryptography'"):
        connect(kwargs)


def test_connect_refuses_an_unencrypted_connection_where_tls_is_required(monkeypatch):
    closed = []

    class Plain:
        _sock = object()

        def close(self):
            closed.append(True)

    monkeypatch.setattr(mysql_client, "Connection", lambda **kwargs: Plain())
    kwargs = {"host": "db", "port": 3306, "user": "cdc", "password": "pw", "ssl_mode": "required"}
    with pytest.raises(SourceConnectionError, match="needs TLS, but the server at db:3306"):
        connect(kwargs)
    assert closed == [True]
    kwargs["ssl_mode"] = "preferred"
    assert isinstance(connect(kwargs), Plain)


def test_the_commands_take_the_tls_options():
    from cdc_source.check_command import _parser, gather_options
    from cdc_source.inspect.cli import build_parser, connection_options

    argv = ["--hostname", "db", "--ssl-mode", "verify-identity", "--ssl-ca", "/etc/ca.pem"]
    check_args = _parser().parse_args(argv + ["--ssl-cert", "/c.pem", "--ssl-key", "/k.pem"])
    assert {
        k: v for k, v in gather_options(check_args, environ={}).items() if k.startswith("ssl")
    } == {
        "ssl-mode": "verify-identity",
        "ssl-ca": "/etc/ca.pem",
        "ssl-cert": "/c.pem",
        "ssl-key": "/k.pem",
    }
    inspect_argv = ["checkpoint", *argv, "--ssl-cert", "/c.pem", "--ssl-key", "/k.pem"]
    options = connection_options(build_parser(inspect_argv).parse_args(inspect_argv), {})
    assert {k: v for k, v in options.items() if k.startswith("ssl")} == {
        "ssl-mode": "verify-identity",
        "ssl-ca": "/etc/ca.pem",
        "ssl-cert": "/c.pem",
        "ssl-key": "/k.pem",
    }


def test_connections_without_tls_settings_share_one_unverifying_context():
    Connection = mysql_client.Connection
    first, second = Connection(defer_connect=True), Connection(defer_connect=True)
    assert first.ctx is second.ctx and not first._ssl_required  # TLS if offered
    assert first.ctx.verify_mode == ssl.CERT_NONE and not first.ctx.check_hostname
    own = ssl.create_default_context()
    assert Connection(defer_connect=True, ssl=own).ctx is own
    assert not Connection(defer_connect=True, ssl_disabled=True).ssl
