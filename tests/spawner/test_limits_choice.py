"""Which mechanism bounds a session, chosen from what the host offers (pure), what a
session's cgroup is given, what the doctor says, and `routing.sandbox.limits` refused with
the key and the file when it is not a limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config.operator_config import ConfigError, parse_config
from app.config.sandbox_config import SessionLimits
from app.spawner.confine.cgroups import cgroup_mounts, own_cgroups
from app.spawner.confine.limits import (
    Counters,
    HostOffer,
    Mechanism,
    cgroup_settings,
    choose_plan,
    describe_plan,
    ending_facts,
    rlimit_args,
)
from app.spawner.devbox_checks import Level, check_limits

MIB = 1 << 20
LIMITS = SessionLimits(memory=256 * MIB, processes=64)
V2 = Path("/sys/fs/cgroup/user.slice/the-loop.x")
V1 = {"memory": Path("/sys/fs/cgroup/memory/a/the-loop.x"), "pids": Path("/p/the-loop.x")}


def test_a_delegated_v2_tree_with_memory_and_pids_comes_first() -> None:
    offer = HostOffer(V2, frozenset({"memory", "pids", "cpu"}), V1)
    plan = choose_plan(offer, LIMITS, sandboxed=True)
    assert plan.mechanism is Mechanism.CGROUP2 and plan.parents == {"": V2}
    assert plan.enforced == ("memory", "processes") and not plan.weak
    assert cgroup_settings(plan) == {
        "": {"memory.max": str(256 * MIB), "memory.swap.max": "0", "pids.max": "64"}
    }
    cpu = choose_plan(offer, SessionLimits(memory=None, processes=64, cpu=1.5), sandboxed=True)
    assert cgroup_settings(cpu) == {"": {"pids.max": "64", "cpu.max": "150000 100000"}}


def test_v1_controllers_serve_when_v2_lacks_one() -> None:
    offer = HostOffer(V2, frozenset({"pids"}), V1)
    plan = choose_plan(offer, LIMITS, sandboxed=True)
    assert plan.mechanism is Mechanism.CGROUP1 and plan.parents == V1
    assert cgroup_settings(plan) == {
        "memory": {
            "memory.limit_in_bytes": str(256 * MIB),
            "memory.memsw.limit_in_bytes": str(256 * MIB),
        },
        "pids": {"pids.max": "64"},
    }
    assert rlimit_args(plan) == []
    # CPU asked for where no cpu controller is writable: bounded otherwise, and said so.
    cpu = choose_plan(offer, SessionLimits(memory=256 * MIB, processes=64, cpu=1), sandboxed=True)
    assert cpu.mechanism is Mechanism.CGROUP1 and cpu.unenforced[0][0] == "cpu"
    assert "cpu 1.0 NOT enforced" in describe_plan(cpu)


def test_without_a_cgroup_resource_limits_bound_what_they_can() -> None:
    user = choose_plan(HostOffer(), LIMITS, sandboxed=True)
    assert user.mechanism is Mechanism.RLIMIT and user.enforced == ("memory", "processes")
    assert rlimit_args(user) == ["--address-space", str(256 * MIB), "--processes", "64"]
    assert describe_plan(user) == "rlimit: memory 256.0MiB per process, processes 64"
    root = choose_plan(HostOffer(root=True), LIMITS, sandboxed=True)
    assert root.mechanism is Mechanism.RLIMIT and root.enforced == ("memory",)
    assert root.weak and "root" in root.unenforced[0][1]
    assert rlimit_args(root) == ["--address-space", str(256 * MIB)]
    unconfined = choose_plan(HostOffer(), LIMITS, sandboxed=False)
    assert [name for name, _ in unconfined.unenforced] == ["processes"]


def test_nothing_enforceable_or_nothing_asked_is_none() -> None:
    only_processes = SessionLimits(memory=None, processes=64)
    plan = choose_plan(HostOffer(root=True), only_processes, sandboxed=True)
    assert plan.mechanism is Mechanism.NONE and plan.weak
    assert "processes 64 NOT enforced" in describe_plan(plan)
    lifted = choose_plan(
        HostOffer(V2, frozenset({"memory", "pids"})),
        SessionLimits(memory=None, processes=None),
        sandboxed=True,
    )
    assert lifted.mechanism is Mechanism.NONE and not lifted.weak


def test_the_doctor_says_the_mechanism_and_warns_of_what_is_not_enforced() -> None:
    good = check_limits(choose_plan(HostOffer(cgroup1=V1), LIMITS, sandboxed=True), HostOffer())
    assert good.level is Level.OK
    assert good.detail == "cgroup1: memory 256.0MiB, processes 64"
    offer = HostOffer(root=True, why="no writable cgroup")
    weak = check_limits(choose_plan(offer, LIMITS, sandboxed=True), offer)
    assert weak.level is Level.WARN and "processes 64 NOT enforced" in weak.detail
    assert "no writable cgroup" in weak.detail and "cgroup" in weak.fix


def test_an_end_says_which_limit_the_session_met() -> None:
    assert ending_facts(None) == {}
    assert ending_facts(Counters(0, 0)) == {"oom_kills": 0, "forks_refused": 0}
    assert ending_facts(Counters(1, 5))["limit"] == "memory"
    assert ending_facts(Counters(0, 5))["limit"] == "processes"


def test_the_spawners_own_cgroups_are_read_from_proc() -> None:
    own = own_cgroups("8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/user.slice\n")
    assert own == {
        "pids": "/",
        "memory": "/process_api/abc",
        "cpu": "/",
        "cpuacct": "/",
        "": "/user.slice",
    }
    mounts = cgroup_mounts(
        "32 31 0:29 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "33 31 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "40 31 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    )
    assert mounts["pids"] == (Path("/sys/fs/cgroup/pids"), "/")
    assert mounts[""] == (Path("/sys/fs/cgroup/unified"), "/")


@pytest.mark.parametrize(
    ("limits", "key", "words"),
    [
        ({"memory": "lots"}, "routing.sandbox.limits.memory", "could not parse"),
        ({"memory": "1MiB"}, "routing.sandbox.limits.memory", "at least 64MiB"),
        ({"processes": 2}, "routing.sandbox.limits.processes", "greater than or equal to 8"),
        ({"processes": "many"}, "routing.sandbox.limits.processes", "valid integer"),
        ({"cpu": 0}, "routing.sandbox.limits.cpu", "greater than 0"),
    ],
)
def test_a_bad_limit_names_the_key_and_the_file(limits: dict, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"routing": {"sandbox": {"limits": limits}}}, "/etc/the-loop/cli.yaml")
    assert str(raised.value).startswith(f"/etc/the-loop/cli.yaml: {key}: ")
    assert words in str(raised.value)


def test_limits_have_sane_defaults_and_read_sizes() -> None:
    default = parse_config({}).routing.sandbox.limits
    assert (default.memory, default.processes, default.cpu) == (4 << 30, 512, None)
    read = parse_config({"routing": {"sandbox": {"limits": {"memory": "512MiB", "cpu": 2}}}})
    assert read.routing.sandbox.limits.memory == 512 * MIB
    lifted = parse_config({"routing": {"sandbox": {"limits": {"memory": None}}}})
    assert lifted.routing.sandbox.limits.memory is None
