"""The App served over TLS with a certificate from a private CA, as an operator runs it behind
their own CA: under this machine's host name (a name, not loopback, so a session in a closed
network has no relay to it and goes through the spawner's allow-listing proxy) or under
`127.0.0.1` (relayed into the session's network, TLS and all). A spawner trusts it the way
an operator trusts a private CA: `SSL_CERT_FILE` in its environment names the CA's
certificate, kept in a directory of its own that nothing else exposes, or `SSL_CERT_DIR`
names a directory holding it alone under its subject hash (`hashed_ca_dir`)."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from werkzeug.serving import make_server

from app.spawner.context import SpawnerContext
from app.spawner.network.netplan import LOOPBACK_NAMES
from app.spawner.session.tmux import TmuxRunner
from tests.jobs_support import standin_context
from tests.spawner_support import TEST_PASS_ENV, StandIn
from tests.spawnerapi_support import Api, serve_api

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PrivateCa:
    """A CA's certificate (what a client is told to trust) and a server certificate it
    issued, with the server's key."""

    ca: Path
    cert: Path
    key: Path


def _alt(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def private_ca(folder: Path, names: tuple[str, ...]) -> PrivateCa:
    """A private CA and a server certificate it issued for `names` (host names or IP
    addresses), written into `folder`. Only the CA's certificate is ever handed to a client:
    every client that verifies has to build the chain, as it would for an operator's CA."""
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(hours=2))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "the-loop test private CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName([_alt(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    made = PrivateCa(folder / "ca.pem", folder / "server.pem", folder / "server-key.pem")
    made.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    made.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    made.key.write_bytes(_pem_key(key))
    return made


@dataclass
class TlsApp:
    api: Api
    url: str  # https://<host name>:<port>
    host: str
    ca: Path  # the private CA's certificate: what a spawner trusts
    relayed: bool  # on loopback: relayed into the session's network, not proxied


def host_name() -> tuple[str, str]:
    """This machine's host name and the address it resolves to here (a test by name is
    skipped, saying why, where the name does not resolve)."""
    name = socket.gethostname().lower()
    if name in LOOPBACK_NAMES:
        pytest.fail(f"the host name {name!r} is a loopback name: the App would be relayed")
    try:
        address = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0]
    except OSError as exc:  # the machine's setup, not the code: said, not failed
        pytest.skip(
            f"this machine's host name {name!r} does not resolve here ({exc}), so an App by "
            "name (through the egress proxy) cannot be served: add it to /etc/hosts"
        )
    return name, str(address)


@pytest.fixture(params=["host-name", "loopback"])
def tls_app(
    request: pytest.FixtureRequest, tmp_path: Path, app_private_key: str
) -> Iterator[TlsApp]:
    """The App over TLS under the host name (or 127.0.0.1), its certificate issued by a
    private CA whose certificate lies apart from everything else."""
    relayed = request.param == "loopback"
    name, address = ("127.0.0.1", "127.0.0.1") if relayed else host_name()
    certs = tmp_path / "certs"
    certs.mkdir()
    made = private_ca(certs, (name, address))
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(made.cert, made.key)
    (tmp_path / "app").mkdir()
    apps = serve_api("sqlite", tmp_path / "app", app_private_key)
    api = next(apps)
    server = make_server(address, 0, api.flask, threaded=True, ssl_context=serving)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield TlsApp(api, f"https://{name}:{server.server_port}", name, made.ca, relayed)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        next(apps, None)  # serve_api's own teardown: its workers stop, its servers close


def hashed_ca_dir(ca: Path, folder: Path) -> Path:
    """`folder`, made to hold the CA's certificate `ca` alone, linked under its subject hash
    (`openssl rehash`) as OpenSSL looks a directory's certificates up (`SSL_CERT_DIR`)."""
    folder.mkdir()
    shutil.copyfile(ca, folder / "private-ca.pem")
    subprocess.run(["openssl", "rehash", str(folder)], check=True, capture_output=True)
    assert any(p.name.endswith(".0") and p.is_symlink() for p in folder.iterdir()), folder
    return folder


def trusting_env(home: Path, ca: Path, **extra: str) -> dict[str, str]:
    """A spawner's environment that trusts the private CA `ca` through `SSL_CERT_FILE` only,
    or `SSL_CERT_DIR` only when `ca` is a hashed directory (no variable of git's own), with
    this tree's code for its sessions' `the-loop`."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        ("SSL_CERT_DIR" if ca.is_dir() else "SSL_CERT_FILE"): str(ca),
        "GIT_CONFIG_NOSYSTEM": "1",
        **extra,
    }


@contextmanager
def tls_spawner(
    tmp_path: Path, app: TlsApp, standin: StandIn, ca: Path | None = None, **env: str
) -> Iterator[SpawnerContext]:
    """A spawner for `app` whose environment trusts its CA (`ca`: the CA's certificate, by
    default, or a hashed directory holding it), its sessions running `standin` in
    bubblewrap, each in a closed network of its own; its tmux and networks end after."""
    home = tmp_path / "devbox-home"
    home.mkdir()
    trusted = trusting_env(home, ca or app.ca, **env)
    runner = TmuxRunner(f"the-loop-tls-{uuid.uuid4().hex[:8]}", env=trusted, pass_env=TEST_PASS_ENV)
    ctx = standin_context(
        tmp_path, standin, runner, home, app_url=app.url, env=trusted, ready_timeout=60
    )
    try:
        yield ctx
    finally:
        if ctx.networks is not None:
            ctx.networks.stop()
        runner.kill_server()


def comments_saying(api: Api, number: int, text: str) -> list[dict[str, Any]]:
    """The comments on issue `number` that start with `text`: a session's own, apart from
    the App's progress comment, which the App posts a couple of seconds after the item's
    row is written (its status and frozen choice are what that comment shows)."""
    return [c for c in api.fake.issue_comments(api.repo, number) if c["body"].startswith(text)]
