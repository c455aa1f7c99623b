"""The App's CA in a checkout's git config: which bundle the spawner's environment names
(`app_trust`, pure), the real path the sandbox shows it at (`trusted_by_variable`), and the
settings as the real git reads them back after a relaunch at another App URL."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from app.spawner.confine.isolation import trusted_by_variable
from app.spawner.workspace.hostgit import HostGit
from app.spawner.workspace.workbranch import CA_KEYS_REMOVED, app_trust, configure_push
from tests.spawner_support import bare_repository, git

BUNDLE = Path("/srv/ca/bundle.pem")
OTHER = Path("/srv/ca/other.pem")
CERTS = Path("/srv/ca/certs")


@pytest.mark.parametrize(
    ("trusted", "expected"),
    [
        ({"SSL_CERT_FILE": BUNDLE}, [("http.https://loop.example:8443/.sslCAInfo", str(BUNDLE))]),
        # The first bundle file named wins; a directory only when no file is named.
        (
            {"REQUESTS_CA_BUNDLE": OTHER, "SSL_CERT_FILE": BUNDLE, "SSL_CERT_DIR": CERTS},
            [("http.https://loop.example:8443/.sslCAInfo", str(BUNDLE))],
        ),
        ({"SSL_CERT_DIR": CERTS}, [("http.https://loop.example:8443/.sslCAPath", str(CERTS))]),
        # Git reads its own variables, which the session inherits: nothing to add.
        ({"GIT_SSL_CAINFO": OTHER, "SSL_CERT_FILE": BUNDLE}, []),
        ({"GIT_SSL_CAPATH": CERTS, "SSL_CERT_FILE": BUNDLE}, []),
        # Only for Node, which git never reads.
        ({"NODE_EXTRA_CA_CERTS": BUNDLE}, []),
        ({}, []),
    ],
)
def test_the_app_is_trusted_with_the_bundle_the_spawner_trusts(
    trusted: dict[str, Path], expected: list[tuple[str, str]]
) -> None:
    assert app_trust("https://loop.example:8443/", trusted) == expected


def test_an_app_on_plain_http_needs_no_ca() -> None:
    assert app_trust("http://127.0.0.1:8000", {"SSL_CERT_FILE": BUNDLE}) == []


def test_a_bundle_is_named_where_the_sandbox_shows_it(tmp_path: Path) -> None:
    real = tmp_path / "ca" / "bundle.pem"
    real.parent.mkdir()
    real.write_text("a certificate\n")
    (tmp_path / "link.pem").symlink_to(real)
    env = {
        "SSL_CERT_FILE": str(tmp_path / "link.pem"),
        "CURL_CA_BUNDLE": str(tmp_path / "missing.pem"),
        "SSL_CERT_DIR": "",
        "PATH": "/usr/bin",
    }
    assert trusted_by_variable(env) == {"SSL_CERT_FILE": real.resolve()}


def _local_ca_settings(work: Path, env: dict[str, str]) -> str:
    listed = subprocess.run(
        ["git", "-C", str(work), "config", "--local", "--get-regexp", "sslca"],
        env=env,
        capture_output=True,
        text=True,
    )
    return listed.stdout


def test_a_relaunch_leaves_only_its_own_app_trusted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    work = tmp_path / "work"
    git("clone", "-q", str(bare_repository(tmp_path)), str(work), cwd=tmp_path)
    first, second = "https://127.0.0.1:40001", "https://loop.example:8443"
    trusted = {"SSL_CERT_FILE": BUNDLE}
    configure_push(work, HostGit(env), f"{first}/git/o/r.git", trust=app_trust(first, trusted))
    assert _local_ca_settings(work, env) == f"http.{first}/.sslcainfo {BUNDLE}\n"
    # Relaunched with the App elsewhere (a new relay port, a new name): the old URL's setting
    # goes, whatever case git keeps it in.
    configure_push(work, HostGit(env), f"{second}/git/o/r.git", trust=app_trust(second, trusted))
    assert _local_ca_settings(work, env) == f"http.{second}/.sslcainfo {BUNDLE}\n"
    # git applies it to the gateway's URL, and to no other host.
    urls = {"gateway": f"{second}/git/o/r.git", "elsewhere": "https://github.com/o/r.git"}
    shown = {
        name: subprocess.run(
            ["git", "-C", str(work), "config", "--get-urlmatch", "http.sslCAInfo", url],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        for name, url in urls.items()
    }
    assert shown == {"gateway": f"{BUNDLE}\n", "elsewhere": ""}
    # An App on http: nothing of the kind is left.
    configure_push(work, HostGit(env), "http://127.0.0.1:8000/git/o/r.git")
    assert _local_ca_settings(work, env) == ""
    # What the session wrote there itself (the config is its writing) costs the spawner a
    # bounded number of git runs (what lies past the bound stays), and the App's own key is
    # set whatever it planted: here, past the bound, that key given twice, which a plain
    # `git config` would refuse to overwrite.
    planted = f"{work}/.git/config"
    for port in range(CA_KEYS_REMOVED + 1):
        key = f"http.https://127.0.0.1:{50000 + port}/.sslCAInfo"
        git("config", "--file", planted, key, "/planted/ca.pem", cwd=work)
    for value in ("/planted/one.pem", "/planted/two.pem"):
        git("config", "--file", planted, "--add", f"http.{second}/.sslCAInfo", value, cwd=work)
    configure_push(work, HostGit(env), f"{second}/git/o/r.git", trust=app_trust(second, trusted))
    assert set(_local_ca_settings(work, env).splitlines()) == {
        f"http.https://127.0.0.1:{50000 + CA_KEYS_REMOVED}/.sslcainfo /planted/ca.pem",
        f"http.{second}/.sslcainfo {BUNDLE}",
    }
