"""`the-loop models list|check`: does each declared model and effort level run on its harness?

A probe is a one-shot run with the same base arguments a session on that harness gets
(`claude -p <fixed prompt> <base args> <fragment>`, `codex exec … <base args> <fragment> --
<fixed prompt>`, no deny token). Its verdict is `ok`
(exit 0, nothing refused), `refused` (the harness rejected the fragment or the argv) or
`unknown` (it could not tell: not logged in, no network, timeout). Verdicts are cached for
a bounded time, keyed by the full argv probed, so a changed config is probed afresh.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from app.config import OperatorConfig, models_for
from app.files import write_json
from app.spawner.argv import adapter_for, effort_fragment, model_fragment, probe_argv
from app.spawner.session.tmux import without_secrets

DEFAULT_TTL = 6 * 3600.0
PROBE_TIMEOUT = 90.0
# What a harness prints when it will not run a fragment or an argv as given.
REFUSALS = (
    "Unknown --effort value",
    "was read as a value of",
    "unknown option",
    "Permission deny rule",
    "Input must be provided",
    "issue with the selected model",
    "may not exist or you may not have access",
    "model_not_found",
    "not_found_error",
    # …and Codex CLI
    "unexpected argument",
    "invalid value",
    "Error loading configuration",
    "does not exist or you do not have access",
)


class Verdict(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    UNKNOWN = "unknown"


class ProbeKind(StrEnum):
    MODEL = "model"
    EFFORT = "effort"


@dataclass(frozen=True)
class Probe:
    harness: str
    kind: ProbeKind
    name: str
    argv: tuple[str, ...]

    @property
    def token(self) -> str:
        """The checklist row this probe decides (`model-opus`, `effort-max`)."""
        return f"{self.kind.value}-{self.name}"


@dataclass(frozen=True)
class Result:
    probe: Probe
    verdict: Verdict
    detail: str
    cached: bool = False


def plan_probes(config: OperatorConfig, harnesses: Iterable[str]) -> list[Probe]:
    """Every declared model (offered on the harness) and effort level, per harness."""
    probes: list[Probe] = []
    for harness in harnesses:
        adapter = adapter_for(config, harness)
        for model in models_for(config, harness):
            argv = probe_argv(adapter, model_fragment(model))
            probes.append(Probe(harness, ProbeKind.MODEL, model.name, tuple(argv)))
        for effort in config.effort:
            argv = probe_argv(adapter, effort_fragment(effort, harness))
            probes.append(Probe(harness, ProbeKind.EFFORT, effort.name, tuple(argv)))
    return probes


def judge(returncode: int | None, output: str) -> tuple[Verdict, str]:
    """A verdict from what the harness printed (pure)."""
    for marker in REFUSALS:
        if marker in output:
            line = next((ln for ln in output.splitlines() if marker in ln), marker)
            return Verdict.REFUSED, line.strip()[:300]
    if returncode == 0:
        return Verdict.OK, ""
    last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
    detail = "timed out" if returncode is None else (last[:300] or f"exit {returncode}")
    return Verdict.UNKNOWN, detail


def run_probe(
    argv: Sequence[str], env: Mapping[str, str], timeout: float = PROBE_TIMEOUT
) -> tuple[int | None, str]:
    """Run one probe with the App's secrets removed from its environment."""
    try:
        proc = subprocess.run(
            list(argv),
            env=without_secrets(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, ""
    except OSError as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout + proc.stderr


class VerdictCache:
    """Verdicts by full argv, each valid for `ttl` seconds (`models-cache.json`)."""

    def __init__(
        self, path: Path, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.time
    ) -> None:
        self.path, self.ttl, self.clock = path, ttl, clock

    @staticmethod
    def key(argv: Sequence[str]) -> str:
        return json.dumps(list(argv))

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, argv: Sequence[str]) -> tuple[Verdict, str] | None:
        entry = self._load().get(self.key(argv))
        if not isinstance(entry, dict) or self.clock() - float(entry.get("at", 0)) > self.ttl:
            return None
        try:
            return Verdict(entry["verdict"]), str(entry.get("detail", ""))
        except (KeyError, ValueError):
            return None

    def put_many(self, results: Iterable[Result]) -> None:
        data = self._load()
        now = self.clock()
        data = {k: v for k, v in data.items() if now - float(v.get("at", 0)) <= self.ttl}
        for r in results:
            data[self.key(r.probe.argv)] = {
                "verdict": r.verdict.value,
                "detail": r.detail,
                "at": now,
            }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json(self.path, data, 0o600)


def check(
    probes: Sequence[Probe],
    cache: VerdictCache,
    env: Mapping[str, str],
    *,
    fresh: bool = False,
    workers: int = 4,
    timeout: float = PROBE_TIMEOUT,
) -> list[Result]:
    """Verdicts for `probes`: cached ones unless `fresh`, the rest probed concurrently."""
    known: dict[Probe, Result] = {}
    if not fresh:
        for probe in probes:
            hit = cache.get(probe.argv)
            if hit is not None:
                known[probe] = Result(probe, hit[0], hit[1], cached=True)
    todo = [p for p in probes if p not in known]

    def one(probe: Probe) -> Result:
        return Result(probe, *judge(*run_probe(probe.argv, env, timeout)))

    with ThreadPoolExecutor(max(1, workers)) as pool:
        probed = list(pool.map(one, todo))
    cache.put_many(probed)
    known.update({r.probe: r for r in probed})
    return [known[p] for p in probes]


def cached_results(probes: Sequence[Probe], cache: VerdictCache) -> list[Result | None]:
    """What the cache says about each probe, without probing (`models list`)."""
    out: list[Result | None] = []
    for probe in probes:
        hit = cache.get(probe.argv)
        out.append(Result(probe, hit[0], hit[1], cached=True) if hit else None)
    return out


def refused_tokens(probes: Sequence[Probe], cache: VerdictCache) -> frozenset[str]:
    """Row tokens whose current argv the cache says was refused (`model-opus` …)."""
    return frozenset(
        r.probe.token
        for r in cached_results(probes, cache)
        if r is not None and r.verdict is Verdict.REFUSED
    )
