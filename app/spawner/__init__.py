"""The devbox agent: claims jobs from the App and runs Claude Code sessions in tmux.

Pure parts (argv building, trust-file editing, screen classification, drift) sit beside thin
I/O parts (tmux runner, git checkout, registry file, HTTP client, the claim loop).
"""

from app.spawner import devbox_checks
from app.spawner.agent import Agent, AgentOptions, hostable_harnesses
from app.spawner.appclient import AppClient, AppError, Rejected, Unauthorized, url_problem
from app.spawner.argv import adapter_for
from app.spawner.assembly import build_context, registry_for, spawner_state_dir, verdict_cache
from app.spawner.confine.cgroups import probe, spawner_tag
from app.spawner.confine.hardening import undumpable
from app.spawner.confine.installs import Exposure
from app.spawner.confine.isolation import bubblewrap_problem, harness_exposure, secrets, shared_plan
from app.spawner.confine.limits import choose_plan
from app.spawner.confine.sessionuser import SESSION_USER, unconfined_as_root
from app.spawner.context import SpawnerContext
from app.spawner.devbox_checks import Check, HttpOutcome, JsonFile, Level, Tool, failed
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.harness import adapter_of
from app.spawner.harness.claude_trust import claude_config_path, claude_settings_path
from app.spawner.netchecks import check_presets, check_services
from app.spawner.network.credroutes import CredentialRoutes
from app.spawner.network.presets import describe_presets
from app.spawner.network.registries import read_registries
from app.spawner.network.routecreds import read_text, resolve_routes, variables_of
from app.spawner.probes import PROBE_TIMEOUT, Result, Verdict, cached_results, check, plan_probes
from app.spawner.session.tmux import DEFAULT_SOCKET, TmuxRunner
from app.spawner.standing_control import ControlError, Request, ask
from app.spawner.standing_sessions import statuses

__all__ = [
    "DEFAULT_SOCKET",
    "PROBE_TIMEOUT",
    "SESSION_USER",
    "Agent",
    "AgentOptions",
    "AppClient",
    "AppError",
    "Check",
    "ControlError",
    "CredentialRoutes",
    "Exposure",
    "HttpOutcome",
    "JsonFile",
    "Level",
    "Rejected",
    "Request",
    "Result",
    "SpawnerContext",
    "SpawnerEvents",
    "TmuxRunner",
    "Tool",
    "Unauthorized",
    "Verdict",
    "adapter_for",
    "adapter_of",
    "ask",
    "bubblewrap_problem",
    "build_context",
    "cached_results",
    "check",
    "check_presets",
    "check_services",
    "choose_plan",
    "claude_config_path",
    "claude_settings_path",
    "describe_presets",
    "devbox_checks",
    "failed",
    "harness_exposure",
    "hostable_harnesses",
    "plan_probes",
    "probe",
    "read_registries",
    "read_text",
    "registry_for",
    "resolve_routes",
    "secrets",
    "shared_plan",
    "spawner_state_dir",
    "spawner_tag",
    "statuses",
    "unconfined_as_root",
    "undumpable",
    "url_problem",
    "variables_of",
    "verdict_cache",
]
