"""TLS for every connection the source opens, and the clear errors of TLS and
authentication failures.

``ssl-mode`` has the MySQL client's meaning: ``disabled`` (never TLS), ``preferred`` (TLS
when the server offers it, else unencrypted), ``required`` (TLS or fail; the certificate
is not checked), ``verify-ca`` (also check the server's certificate chain against
``ssl-ca``), ``verify-identity`` (also check that the certificate is for ``hostname``).
``ssl-cert``/``ssl-key`` present a client certificate (accounts ``REQUIRE X509``).

The settings travel inside the connection arguments (:meth:`SourceOptions.connection_kwargs`
: the keys :data:`KEYS`, plain strings, so a task's arguments pickle) and are mapped here
onto each client: PyMySQL (the driver, binlog dumps, the PyMySQL snapshot client) and
mysqlclient (the snapshot's C client and the native reader on its connection). Every mode
that requires TLS is also checked on the open connection, so a client library that
silently falls back to an unencrypted connection cannot weaken it.

Nothing here puts the password into a message: they are built from host, port, user,
the mode and the TLS file paths only.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading

SSL_MODES = ("disabled", "preferred", "required", "verify-ca", "verify-identity")
VERIFYING = ("verify-ca", "verify-identity")
REQUIRING = ("required", *VERIFYING)
KEYS = ("ssl_mode", "ssl_ca", "ssl_cert", "ssl_key")
FILE_OPTIONS = {"ssl_ca": "ssl-ca", "ssl_cert": "ssl-cert", "ssl_key": "ssl-key"}


class TlsSetupError(RuntimeError):
    """A TLS file cannot be used on this machine (the connection was never tried)."""

    transient = False


def split(connection_kwargs: dict) -> tuple[dict, dict]:
    """(the arguments without the TLS settings, the TLS settings)"""
    rest = {k: v for k, v in connection_kwargs.items() if k not in KEYS}
    settings = {k: connection_kwargs[k] for k in KEYS if connection_kwargs.get(k)}
    settings.setdefault("ssl_mode", "preferred")
    return rest, settings


def check_files(settings: dict) -> None:
    """Each TLS file named is readable here: on an executor a missing file would
    otherwise surface as the client library's terse error."""
    for key, option in FILE_OPTIONS.items():
        path = settings.get(key)
        if path and not os.access(path, os.R_OK):
            raise TlsSetupError(
                f"option '{option}' names '{path}', which cannot be read on "
                f"{socket.gethostname()}: TLS files must be at the same path on the driver "
                "and on every executor"
            )


# -- PyMySQL ---------------------------------------------------------------------------

_contexts: dict[tuple, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def _mtime(path: str | None) -> float | None:
    try:
        return os.stat(path).st_mtime if path else None
    except OSError:
        return None


def _context(mode: str, ca: str | None, cert: str | None, key: str | None) -> ssl.SSLContext:
    """One SSL context per settings (and file versions) per process: building one reads
    the CA file and the client certificate, which a connection per task need not repeat.
    A rotated file (a new modification time) builds a new one."""
    cache_key = (mode, ca, cert, key, _mtime(ca), _mtime(cert), _mtime(key))
    with _contexts_lock:
        context = _contexts.get(cache_key)
    if context is not None:
        return context
    check_files({"ssl_ca": ca, "ssl_cert": cert, "ssl_key": key})
    try:
        if mode in VERIFYING:
            context = ssl.create_default_context(cafile=ca)
            context.check_hostname = mode == "verify-identity"
            context.verify_mode = ssl.CERT_REQUIRED
        else:  # required: encrypted, nothing checked (and no system CA store to load)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        # As PyMySQL does: the servers' self-made certificates fail X.509 strict checks.
        context.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
        if cert:
            context.load_cert_chain(cert, keyfile=key)
    except (OSError, ssl.SSLError, ValueError) as err:
        files = ", ".join(f"'{FILE_OPTIONS[k]}' ({p})" for k, p in _named(ca, cert, key))
        raise TlsSetupError(f"cannot use the TLS files {files}: {err}") from None
    with _contexts_lock:
        _contexts[cache_key] = context
    return context


def _named(ca, cert, key) -> list[tuple[str, str]]:
    return [(k, p) for k, p in (("ssl_ca", ca), ("ssl_cert", cert), ("ssl_key", key)) if p]


def pymysql_arguments(settings: dict) -> dict:
    """PyMySQL's arguments for these TLS settings (PyMySQL >= 1.2: without TLS arguments
    it uses TLS when the server offers it, which is ``preferred``; with an SSL context it
    requires TLS)."""
    mode = settings["ssl_mode"]
    if mode == "disabled":
        return {"ssl_disabled": True}
    if mode == "preferred":
        return {}
    return {
        "ssl": _context(
            mode, settings.get("ssl_ca"), settings.get("ssl_cert"), settings.get("ssl_key")
        )
    }


def pymysql_encrypted(conn) -> bool:
    return isinstance(getattr(conn, "_sock", None), ssl.SSLSocket)


# -- mysqlclient -----------------------------------------------------------------------


def is_libmariadb(client_info: str) -> bool:
    """Whether mysqlclient is linked with MariaDB Connector/C (3.x, or 10.x and later
    when bundled with a MariaDB server) rather than MySQL's libmysqlclient (5.x-9.x)."""
    try:
        major = int(client_info.split(".")[0])
    except ValueError:
        return "maria" in client_info.lower()
    return not 5 <= major <= 9


def mysqlclient_arguments(settings: dict, client_info: str) -> dict:
    """mysqlclient's arguments for these TLS settings.

    With libmysqlclient ``ssl_mode`` has the same five values. MariaDB Connector/C has no
    such option, and mysqlclient maps only part of it (measured with Connector/C 3.3):
    TLS is tried when any ``ssl`` entry is set (an empty cipher list sets one without
    changing anything) and silently not used when the server has none, even for
    ``ssl_mode='REQUIRED'``; a CA checks the chain but not the name; ``VERIFY_CA`` checks
    the name too. So ``verify-ca`` passes the CA alone, and every requiring mode is
    checked on the open connection (:func:`session_cipher`)."""
    mode = settings["ssl_mode"]
    files = {
        name: settings[key]
        for key, name in (("ssl_ca", "ca"), ("ssl_cert", "cert"), ("ssl_key", "key"))
        if settings.get(key)
    }
    if mode == "disabled":
        return {"ssl_mode": "DISABLED"}
    if not is_libmariadb(client_info):
        arguments = {"ssl_mode": mode.upper().replace("-", "_")}
        if files:
            arguments["ssl"] = files
        return arguments
    arguments = {"ssl": {"cipher": "", **files}}
    if mode == "verify-identity":
        arguments["ssl_mode"] = "VERIFY_IDENTITY"
    return arguments


# -- both ------------------------------------------------------------------------------


def session_cipher(conn) -> str:
    """The TLS cipher of this connection's session ('' when unencrypted), as the server
    reports it; works on any client's connection."""
    cur = conn.cursor()
    try:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        row = cur.fetchone()
    finally:
        cur.close()
    value = row[1] if row else ""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value or "")


def not_encrypted_message(mode: str, host: str, port) -> str:
    return (
        f"ssl-mode={mode} needs TLS, but the server at {host}:{port} does not offer it: "
        "enable TLS on the server (its ssl_cert and ssl_key settings), or set "
        "ssl-mode=preferred to connect unencrypted"
    )


# Lower-cased fragments of the errors a TLS handshake ends with when it can never succeed
# as configured (PyMySQL: Python's ssl module inside error 2003; Connector/C: 2026
# "TLS/SSL error: ..."). A dropped connection during a handshake says none of these.
_VERIFY_FAILED = (
    "certificate verify failed",
    "certificate_verify_failed",
    "validation of ssl server certificate failed",
    "self-signed certificate",
    "self signed certificate",
    "unable to get local issuer certificate",
    "certificate has expired",
    "certificate is not yet valid",
    "unable to verify the first certificate",
)
_NAME_MISMATCH = ("hostname mismatch", "ip address mismatch", "doesn't match", "not valid for")
_NO_TLS = ("ssl is required", "tls is required", "does not support it", "doesn't support it")


def failure_kind(message: str) -> str | None:
    """'name', 'verify' or 'no-tls' for a TLS failure no retry can mend, else None."""
    text = message.lower()
    if any(f in text for f in _NAME_MISMATCH) and ("certificate" in text or "ssl" in text):
        return "name"
    if "validation of ssl server certificate failed" in text:
        return "name"  # Connector/C's words for a name that is not the certificate's
    if any(f in text for f in _VERIFY_FAILED):
        return "verify"
    if any(f in text for f in _NO_TLS) and ("ssl" in text or "tls" in text):
        return "no-tls"
    if "tls/ssl error: no such file" in text:
        return "file"
    return None


def explain(code, message: str, settings: dict, host: str, port, user: str) -> str | None:
    """What to change, for a connection refused by TLS or authentication; None for any
    other failure. Permanent: none of these is mended by waiting."""
    mode = settings.get("ssl_mode", "preferred")
    ca = settings.get("ssl_ca")
    kind = failure_kind(message)
    if kind == "name":
        return (
            f"TLS: the certificate of the server at {host}:{port} is not for the host name "
            f"'{host}' ({_reason(message)}): set 'hostname' to a name or address the "
            "certificate lists, or use ssl-mode=verify-ca, which checks the certificate's "
            "CA but not its name"
        )
    if kind == "verify":
        return (
            f"TLS: the certificate of the server at {host}:{port} could not be verified "
            f"against ssl-ca '{ca}' ({_reason(message)}): set 'ssl-ca' to the certificate "
            "(PEM) of the CA that signed the server's certificate; for a cloud database "
            "that is its provider's CA bundle (Amazon RDS: the region's bundle)"
        )
    if kind == "no-tls":
        return not_encrypted_message(mode, host, port)
    if kind == "file":
        files = ", ".join(f"'{FILE_OPTIONS[k]}'" for k in FILE_OPTIONS if settings.get(k))
        return (
            f"TLS: a file of {files} cannot be read on {socket.gethostname()} "
            f"({_reason(message)}): TLS files must be at the same path on the driver and "
            "on every executor"
        )
    if code == 3159:  # MySQL's ER_SECURE_TRANSPORT_REQUIRED
        return (
            f"the server at {host}:{port} accepts only encrypted connections "
            f"(require_secure_transport=ON) and this one is not (ssl-mode={mode}): set "
            "ssl-mode=verify-identity with ssl-ca (or at least ssl-mode=required)"
        )
    if code == 1045:
        where = f"{user}@{host}:{port}"
        if mode in ("disabled", "preferred"):
            hint = (
                f"; if the account requires TLS (REQUIRE SSL or X509) or the server "
                f"accepts only encrypted connections (require_secure_transport), note that "
                f"ssl-mode={mode} may connect unencrypted: set ssl-mode=required or stronger "
                "(and 'ssl-cert'/'ssl-key' for REQUIRE X509)"
            )
        elif not settings.get("ssl_cert"):
            hint = (
                "; if the account is created REQUIRE X509 (or ISSUER/SUBJECT), it also needs "
                "a client certificate: set 'ssl-cert' and 'ssl-key'"
            )
        else:
            hint = (
                "; if the account is created REQUIRE ISSUER or SUBJECT, check that "
                "'ssl-cert' is the certificate it names"
            )
        return f"the server refused the account {where}: check 'username' and 'password'{hint}"
    lowered = message.lower()
    if "cryptography" in lowered and "required" in lowered:
        return (
            f"the account {user}@{host}:{port} authenticates with caching_sha2_password or "
            "sha256_password, which over an unencrypted connection needs the Python package "
            "'cryptography' on the driver and on every executor: pip install "
            "'pymysql[rsa]' (a dependency of cdc-mysql), or set ssl-mode=required or "
            "stronger so the password is sent over TLS"
        )
    if "pynacl" in lowered:
        return (
            f"the account {user}@{host}:{port} authenticates with ed25519, which needs the "
            "Python package 'pynacl' on the driver and on every executor: pip install "
            "pynacl, or give the account another authentication plugin"
        )
    if code == 2061 or "public key" in lowered or "caching sha2" in lowered:
        return (
            f"the account {user}@{host}:{port} authenticates with caching_sha2_password, "
            f"whose full authentication needs TLS or the server's RSA public key "
            f"({_reason(message)}): set ssl-mode=required or stronger"
        )
    if code == 2059:
        return (
            f"the client cannot use the authentication plugin of the account "
            f"{user}@{host}:{port} ({_reason(message)}): use an account with "
            "caching_sha2_password or mysql_native_password (for mysqlclient, its client "
            "library's plugins must be installed, or set scan.snapshot.client=pymysql)"
        )
    return None


def _reason(message: str) -> str:
    """The interesting part of a TLS error message."""
    for marker in ("certificate verify failed: ", "TLS/SSL error: "):
        if marker in message:
            return message.split(marker, 1)[1].split(" (_ssl.c")[0].rstrip(")")
    return message
