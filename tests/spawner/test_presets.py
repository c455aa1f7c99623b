"""Egress presets, pure: what `python`, `node`, `rust` and `go` stand for given what the
devbox's tools are configured with (a mirror stands for itself), what a session's tools are
told, and a config naming no preset refused with its key."""

from __future__ import annotations

import pytest

from app.config.operator_config import ConfigError, parse_config
from app.spawner.network.presets import (
    Registries,
    cargo_sources,
    describe_presets,
    expand_egress,
    goproxy_urls,
    parse_pip_config,
    tool_env,
)

# Stand-in hosts under the reserved `.test` name: what any devbox's tools might name.
MIRRORED = Registries(
    pip_index="https://mirror.test/pypi/simple",
    pip_extra=("https://extra.test:8443/simple", "file:///opt/wheels"),
    npm_registry="https://npm.mirror.test/",
    cargo=("sparse+https://crates.mirror.test/index/",),
    goproxy=("https://goproxy.mirror.test",),
    ca_bundle="/etc/ssl/devbox-ca.pem",
)
DEFAULTS = Registries(
    pip_default="https://index.test/simple", pip_files="files.test", npm_registry="http://n.test"
)


def test_presets_expand_to_the_devboxs_configured_registries() -> None:
    egress = ["python", "node", "rust", "go", "other.test:22", "node"]
    assert expand_egress(egress, MIRRORED) == (
        "mirror.test:443",
        "extra.test:8443",
        "npm.mirror.test:443",
        "crates.mirror.test:443",
        "goproxy.mirror.test:443",
        "other.test:22",
    )


def test_pips_default_index_brings_the_host_its_files_come_from() -> None:
    assert expand_egress(["python", "node"], DEFAULTS) == (
        "index.test:443",
        "files.test:443",
        "n.test:80",
    )
    rows = describe_presets(Registries(missing={"go": "go: not found"}), ["go", "x.test:1"])
    assert rows == [("go", "nothing (go: not found)")]


def test_a_sessions_tools_are_told_the_registries_the_proxy_and_the_ca_bundle() -> None:
    proxy = "http://127.0.0.1:3128"
    env = tool_env(MIRRORED, ["python", "node"], proxy)
    assert env["PIP_INDEX_URL"] == env["UV_DEFAULT_INDEX"] == MIRRORED.pip_index
    assert env["PIP_EXTRA_INDEX_URL"] == "https://extra.test:8443/simple file:///opt/wheels"
    assert env["UV_INDEX"] == "https://extra.test:8443/simple"
    assert env["npm_config_registry"] == "https://npm.mirror.test/"
    assert env["npm_config_proxy"] == env["npm_config_https_proxy"] == proxy
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS"):
        assert env[name] == "/etc/ssl/devbox-ca.pem"
    # Without the presets, nothing of pip's or npm's; pip's default index is never forced.
    assert "PIP_INDEX_URL" not in tool_env(DEFAULTS, ["python"], proxy)
    bare = tool_env(MIRRORED, [], proxy)
    assert "PIP_INDEX_URL" not in bare and "npm_config_registry" not in bare
    assert bare["SSL_CERT_FILE"] == "/etc/ssl/devbox-ca.pem"  # the CA bundle, always


def test_the_tools_own_configuration_is_read() -> None:
    listed = (
        "global.index-url='https://g.test/simple'\n"
        ":env:.index-url='https://env.test/simple'\n"
        "global.cert='/etc/ca.pem'\nnonsense\n"
    )
    assert parse_pip_config(listed) == {
        "index-url": "https://env.test/simple",
        "cert": "/etc/ca.pem",
    }
    cargo = (
        '[source.crates-io]\nreplace-with = "mirror"\n'
        '[source.mirror]\nregistry = "sparse+https://crates.mirror.test/"\n'
        '[registries.own]\nindex = "https://own.test/git/index"\n'
    )
    assert cargo_sources(cargo) == (
        "https://own.test/git/index",
        "sparse+https://crates.mirror.test/",
    )
    assert cargo_sources("not = [toml") == ()
    assert goproxy_urls("https://a.test,https://b.test|direct,off") == (
        "https://a.test",
        "https://b.test",
    )


@pytest.mark.parametrize(
    ("sandbox", "error"),
    [
        ({"egress": ["pyhton"]}, "routing.sandbox.egress[0]: Value error, 'pyhton' is no preset"),
        ({"services": ["10.0.0.5:5432"]}, "routing.sandbox.services[0]"),
        ({"services": ["127.0.0.1:80"]}, "port is 1024 or above"),
        ({"services": ["/top.sock"]}, "no usable unix socket path"),
    ],
)
def test_bad_presets_and_services_name_their_key(sandbox: dict[str, list[str]], error: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"routing": {"sandbox": sandbox}})
    assert error in str(raised.value)
