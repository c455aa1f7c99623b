"""Read the devbox's package registries from its own tools' configuration (the I/O half of
`presets`): `pip config list` and pip's own default index, `npm config get registry`,
cargo's `config.toml`, `go env GOPROXY` (or `GOPROXY`). Each tool is asked once per
environment, with a time limit; a tool that is missing or fails leaves its preset empty,
and why, for `the-loop doctor` to say."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping
from pathlib import Path

from app.spawner.network.presets import (
    Registries,
    cargo_sources,
    goproxy_urls,
    parse_pip_config,
)

TIMEOUT = 30.0
# pip's own default index and the host it serves files from, as the devbox's pip names them.
_PIP_DEFAULT = (
    "from pip._internal.models.index import PyPI\n"
    "print(PyPI.simple_url)\nprint(PyPI.file_storage_domain)\n"
)


def _run(argv: list[str], env: Mapping[str, str]) -> tuple[str, str]:
    """(stdout, "") of `argv`, or ("", why it gave nothing)."""
    try:
        done = subprocess.run(
            argv, env=dict(env), capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"{argv[0]}: {exc}"
    if done.returncode != 0:
        return "", f"{' '.join(argv[:3])} exited {done.returncode}"
    return done.stdout, ""


def _ca_bundle(env: Mapping[str, str], pip: Mapping[str, str]) -> str:
    for value in (
        pip.get("cert", ""),
        env.get("SSL_CERT_FILE", ""),
        env.get("REQUESTS_CA_BUNDLE", ""),
        env.get("NODE_EXTRA_CA_CERTS", ""),
    ):
        if value and Path(value).is_file():
            return value
    return ""


def read_registries(env: Mapping[str, str]) -> Registries:
    """The registries the devbox's tools are configured with, in `env` (its PATH, HOME, …)."""
    return _cached(tuple(sorted(env.items())))


@functools.lru_cache(maxsize=8)
def _cached(items: tuple[tuple[str, str], ...]) -> Registries:
    env = dict(items)
    missing: dict[str, str] = {}
    text, why = _run(["python3", "-m", "pip", "config", "list"], env)
    pip = parse_pip_config(text) if not why else {}
    index = env.get("PIP_INDEX_URL") or pip.get("index-url", "")
    extra = env.get("PIP_EXTRA_INDEX_URL") or pip.get("extra-index-url", "")
    default = files = ""
    if not index:
        text, why = _run(["python3", "-c", _PIP_DEFAULT], env)
        default, _, files = text.strip().partition("\n")
    if why:
        missing["python"] = why
    npm, why = _run(["npm", "config", "get", "registry"], env)
    if why:
        missing["node"] = why
    home = Path(env.get("CARGO_HOME") or Path(env.get("HOME", "/nonexistent")) / ".cargo")
    cargo: tuple[str, ...] = ()
    for name in ("config.toml", "config"):
        if (home / name).is_file():
            cargo = cargo_sources((home / name).read_text(errors="replace"))
            break
    if not cargo:
        missing["rust"] = f"no registry or source replacement in {home}/config.toml"
    goproxy = env.get("GOPROXY", "")
    if not goproxy:
        goproxy, why = _run(["go", "env", "GOPROXY"], env)
        if why:
            missing["go"] = why
    return Registries(
        pip_index=index.strip(),
        pip_default=default.strip(),
        pip_files=files.strip(),
        pip_extra=tuple(extra.split()),
        npm_registry=npm.strip() if npm.strip() not in ("", "undefined") else "",
        cargo=cargo,
        goproxy=goproxy_urls(goproxy.strip()),
        ca_bundle=_ca_bundle(env, pip),
        missing=missing,
    )
