"""Certificates for a TLS test server, made with ``cryptography``: a CA, a server
certificate for 127.0.0.1 signed by it, a client certificate, and a second CA that signed
nothing here (a wrong CA for the verification tests)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed none of the above


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(subject: str, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
    )


def _ca(common_name: str):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(common_name, _name(common_name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(common_name: str, ca_key, ca_cert, names: list, usage) -> tuple:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(common_name, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("cdc-mysql test CA")
    _, other_cert = _ca("cdc-mysql other CA")
    # For 127.0.0.1 only: connecting by the name 'localhost' is a host name mismatch.
    server_key, server_cert = _leaf(
        "cdc-mysql test server",
        ca_key,
        ca_cert,
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
        ExtendedKeyUsageOID.SERVER_AUTH,
    )
    client_key, client_cert = _leaf(
        "cdc-client", ca_key, ca_cert, [], ExtendedKeyUsageOID.CLIENT_AUTH
    )
    files = TlsFiles(
        ca=directory / "ca.pem",
        server_cert=directory / "server-cert.pem",
        server_key=directory / "server-key.pem",
        client_cert=directory / "client-cert.pem",
        client_key=directory / "client-key.pem",
        other_ca=directory / "other-ca.pem",
    )
    _write_cert(ca_cert, files.ca)
    _write_cert(other_cert, files.other_ca)
    _write_cert(server_cert, files.server_cert)
    _write_key(server_key, files.server_key)
    _write_cert(client_cert, files.client_cert)
    _write_key(client_key, files.client_key)
    return files


def server_args(files: TlsFiles) -> tuple[str, ...]:
    return (
        f"--ssl-ca={files.ca}",
        f"--ssl-cert={files.server_cert}",
        f"--ssl-key={files.server_key}",
    )
