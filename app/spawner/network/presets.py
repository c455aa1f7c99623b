"""What `routing.sandbox.egress`'s presets stand for on this devbox, and what a session's
tools need in their environment to use them through the egress proxy. Pure: the facts
(`Registries`) are read by `registries`, from the devbox's own tool configuration.

A preset names an ecosystem, never a host: `python` is the index (or indexes) pip is
configured with — its `index-url` and `extra-index-url`, or pip's own default index when
none is set — and the host that index serves its files from (for pip's default index, the
one pip itself names as its file storage; for a configured index, its own host: an index
serving files from elsewhere needs that host listed as `host:port` too); `node` is npm's
configured `registry` (its tarballs come from the same host); `rust` is cargo's configured
registries and source replacement; `go` is `GOPROXY`'s hosts. A devbox behind a mirror so
gets its mirror. `file://` indexes and `direct`/`off` entries stand for no host.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from app.config import EGRESS_PRESETS

# Where a session's tools are told the devbox's CA bundle.
CA_NAMES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS")


@dataclass(frozen=True)
class Registries:
    """The devbox's package registries, as its tools are configured (URLs, in order)."""

    pip_index: str = ""  # pip's configured `index-url` ("" when it uses its default)
    pip_default: str = ""  # pip's own default index, when `pip_index` is ""
    pip_files: str = ""  # the host pip's default index serves files from
    pip_extra: tuple[str, ...] = ()  # `extra-index-url`s
    npm_registry: str = ""
    cargo: tuple[str, ...] = ()  # cargo's registries' and replaced sources' index URLs
    goproxy: tuple[str, ...] = ()
    ca_bundle: str = ""  # the devbox's CA bundle its tools are told of ("" when none)
    missing: dict[str, str] = field(default_factory=dict)  # preset → why nothing was read


def _address(url: str) -> str | None:
    """`host:port` of an http(s) URL (a cargo `sparse+` one too); None for others."""
    url = url.removeprefix("sparse+").removeprefix("registry+")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port or (443 if parts.scheme == 'https' else 80)}"


def preset_urls(registries: Registries, preset: str) -> tuple[str, ...]:
    """The URLs (or bare hosts, for pip's file storage) a preset stands for."""
    if preset == "python":
        index = registries.pip_index or registries.pip_default
        files = (f"https://{registries.pip_files}/",) if registries.pip_files else ()
        return tuple(u for u in (index, *registries.pip_extra, *files) if u)
    if preset == "node":
        return (registries.npm_registry,) if registries.npm_registry else ()
    if preset == "rust":
        return registries.cargo
    if preset == "go":
        return registries.goproxy
    raise ValueError(f"{preset!r} is no egress preset (one of {', '.join(EGRESS_PRESETS)})")


def expand_preset(registries: Registries, preset: str) -> tuple[str, ...]:
    """The `host:port`s a preset stands for on this devbox, in order, once each."""
    found = (_address(u) for u in preset_urls(registries, preset))
    return tuple(dict.fromkeys(a for a in found if a))


def expand_egress(entries: Iterable[str], registries: Registries) -> tuple[str, ...]:
    """`routing.sandbox.egress` as the proxy keeps it: presets replaced by their hosts."""
    out: list[str] = []
    for entry in entries:
        out += expand_preset(registries, entry) if entry in EGRESS_PRESETS else [entry]
    return tuple(dict.fromkeys(out))


def tool_env(registries: Registries, presets: Iterable[str], proxy: str) -> dict[str, str]:
    """What a session's package tools need to use the devbox's registries through the proxy
    at `proxy`, with no configuration of their own: the indexes pip (and uv) and npm (and
    pnpm) are configured with on the devbox, the proxy in npm's words, and the devbox's CA
    bundle in every tool's. Only for the presets `presets` names."""
    chosen = set(presets)
    env: dict[str, str] = {}
    if "python" in chosen:
        if registries.pip_index:
            env["PIP_INDEX_URL"] = env["UV_DEFAULT_INDEX"] = registries.pip_index
        if registries.pip_extra:
            env["PIP_EXTRA_INDEX_URL"] = " ".join(registries.pip_extra)
            served = [u for u in registries.pip_extra if _address(u)]
            if served:  # uv takes only served indexes, no `file://` ones
                env["UV_INDEX"] = " ".join(served)
    if "node" in chosen:
        if registries.npm_registry:
            env["npm_config_registry"] = registries.npm_registry
        env["npm_config_proxy"] = env["npm_config_https_proxy"] = proxy
    if registries.ca_bundle:
        for name in CA_NAMES:
            env[name] = registries.ca_bundle
    return env


def parse_pip_config(text: str) -> dict[str, str]:
    """`pip config list`'s lines (`section.key='value'`) → {key: value}; the most specific
    section (`:env:`, then `install`/`download`, then `global`) wins."""
    rank = {":env:": 3, "install": 2, "download": 2, "global": 1}
    best: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        section, dot, key = name.strip().rpartition(".")
        if not sep or not dot:
            continue
        level = rank.get(section, 0)
        if key not in best or level >= best[key][0]:
            best[key] = (level, value.strip().strip("'\""))
    return {key: value for key, (_, value) in best.items()}


def cargo_sources(text: str) -> tuple[str, ...]:
    """The index URLs a cargo `config.toml` names: its `[registries.*]` and the sources
    `[source.*]` replace `crates-io` with (the default registry's own host, cargo's built-in,
    is no configuration; list it as `host:port` when nothing replaces it)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return ()
    urls: list[str] = []
    tables: list[Mapping[str, object]] = []
    for kind in ("registries", "source"):
        section = data.get(kind)
        if isinstance(section, dict):
            tables += [t for t in section.values() if isinstance(t, dict)]
    for table in tables:
        for key in ("index", "registry"):
            value = table.get(key)
            if isinstance(value, str):
                urls.append(value)
    return tuple(dict.fromkeys(urls))


def goproxy_urls(value: str) -> tuple[str, ...]:
    """`GOPROXY`'s URLs (comma- or pipe-separated; `direct` and `off` name no host)."""
    words = value.replace("|", ",").split(",")
    return tuple(w.strip() for w in words if w.strip() and w.strip() not in ("direct", "off"))


def describe_presets(registries: Registries, entries: Iterable[str]) -> list[tuple[str, str]]:
    """(preset, what it expands to here — or why nothing) for each preset in `entries`."""
    rows: list[tuple[str, str]] = []
    for preset in dict.fromkeys(e for e in entries if e in EGRESS_PRESETS):
        hosts = expand_preset(registries, preset)
        why = registries.missing.get(preset, "its tool names no registry")
        rows.append((preset, ", ".join(hosts) if hosts else f"nothing ({why})"))
    return rows
