"""`the-loop doctor`'s checks of what a closed network's session can use: what each egress
preset expands to on this devbox, and whether each relayed service answers. Pure: the facts
come from `registries` and a connection tried by the doctor."""

from __future__ import annotations

from collections.abc import Mapping

from app.config import Sandbox
from app.spawner.devbox_checks import Check, Level
from app.spawner.network.presets import Registries, describe_presets, expand_preset


def check_presets(sandbox: Sandbox, registries: Registries) -> list[Check]:
    """One check per preset in `routing.sandbox.egress`: the hosts it lets through here; a
    preset that stands for nothing is a warning (its tool is missing or names no registry)."""
    checks: list[Check] = []
    for preset, detail in describe_presets(registries, sandbox.egress):
        name = f"egress preset {preset}"
        if expand_preset(registries, preset):
            checks.append(Check(name, Level.OK, detail))
        else:
            fix = f"configure the devbox's {preset} tooling, or list host:port in egress"
            checks.append(Check(name, Level.WARN, detail, fix))
    return checks


def check_services(answers: Mapping[str, str]) -> list[Check]:
    """One check per `routing.sandbox.services` entry: `answers` maps it to "" when a
    connection to it succeeded, else to why not."""
    checks: list[Check] = []
    for service, error in answers.items():
        name = f"service {service}"
        if not error:
            checks.append(Check(name, Level.OK, "answers; relayed into closed-network sessions"))
        else:
            fix = "start it on the devbox, or drop it from routing.sandbox.services"
            checks.append(Check(name, Level.WARN, f"does not answer: {error}", fix))
    return checks
