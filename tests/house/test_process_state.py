"""No process-wide state by accident: listeners, caches and registries live on the App's
state (or the spawner's context), started where it is built and stopped in its shutdown.

A module-level lock, thread-local or empty container is where a registry starts; each one
left guards something the whole process shares (a file, an OS user, an engine's hook) and
says so here. A new one fails this scan until it moves onto the App or is listed with its
reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("app", "channels", "hooks")

# Calls that make a container or a lock the module would then share with every App in it.
MUTABLE_CALLS = frozenset(
    {
        "Lock",
        "RLock",
        "Condition",
        "Event",
        "Semaphore",
        "BoundedSemaphore",
        "local",
        "WeakKeyDictionary",
        "WeakValueDictionary",
        "WeakSet",
        "defaultdict",
        "OrderedDict",
        "Counter",
        "deque",
        "dict",
        "set",
        "list",
    }
)

ALLOWED = {
    # The session user is an OS account: made once for the machine, whichever spawner asks.
    "app/spawner/confine/sessionuser.py:_MADE": "a one-time useradd for the whole process",
    "app/spawner/session/transcript_usage.py:_LOCK": "one kept file on disk, two reporters",
    # One SQLite file is one file for the whole process, whichever engine opened it.
    "app/store/sqlite_writes.py:_locks": "the write lock of each SQLite file",
    "app/store/sqlite_writes.py:_locks_guard": "guards `_locks`",
    "app/store/sqlite_writes.py:_checkpointed": "files whose WAL a checkpointer copies",
    "app/store/sqlite_writes.py:_checkpointed_guard": "guards `_checkpointed`",
    "app/store/wal_checkpoints.py:_shared": "one checkpointer per SQLite file",
    "app/store/wal_checkpoints.py:_shared_guard": "guards `_shared`",
    "app/store/wal_checkpoints.py:_descriptors": "one flushing descriptor per SQLite file",
    "app/store/wal_checkpoints.py:_descriptors_guard": "guards `_descriptors`",
    # Pure memos and per-thread scratch: nothing an App starts or must stop.
    "app/store/inbox.py:_sql_by_dialect": "SQL compiled once per dialect (a memo)",
    "app/store/tables.py:_codecs": "a (de)compressor per thread",
}


def _called(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _shared_state(value: ast.expr) -> bool:
    """Whether a module-level value is a lock, a thread-local or an empty container."""
    if isinstance(value, ast.Dict):
        return not value.keys
    if isinstance(value, ast.List | ast.Set):
        return not value.elts
    if isinstance(value, ast.Call):
        name = _called(value)
        return name in MUTABLE_CALLS and not (name in {"dict", "set", "list"} and value.args)
    return False


def module_state() -> set[str]:
    found = set()
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.Assign):
                    targets, value = node.targets, node.value
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    targets, value = [node.target], node.value
                else:
                    continue
                if _shared_state(value):
                    for target in targets:
                        found.add(f"{path.relative_to(ROOT).as_posix()}:{ast.unparse(target)}")
    return found


def test_module_level_state_is_only_what_the_process_shares():
    found = module_state()
    assert sorted(found - ALLOWED.keys()) == [], "move it onto the App's state, or list why"
    assert sorted(ALLOWED.keys() - found) == [], "gone: drop it from the list"


def test_the_scan_sees_a_registry():
    """The control: the same test on a module that keeps a registry finds it."""
    tree = ast.parse("import threading\n_REG: dict[str, int] = {}\n_GUARD = threading.Lock()\n")
    values = [n.value for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)]
    assert [_shared_state(v) for v in values if v is not None] == [True, True]


def opened_apart(source: str) -> list[int]:
    """The lines of `source` that open a SQLAlchemy `Session` directly."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and _called(node) == "Session"
    )


def test_sessions_are_opened_from_the_app_s_own_sessions():
    """The App's hooks (its progress watch, its job signal) ride on the sessions its
    `Sessions` opens, so a session opened as `Session(engine)` would change a work item
    unseen by its progress comment. Only the store opens its own, for its own tables."""
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for room in ROOMS
        for path in sorted((ROOT / room).rglob("*.py"))
        if not path.relative_to(ROOT).as_posix().startswith("app/store/")
        for line in opened_apart(path.read_text())
    ]
    assert found == [], "open it from the App's `Sessions` (`state.sessions()`)"


def test_the_session_scan_sees_a_session_opened_apart():
    """The control: the scan finds `Session(engine)` and `orm.Session(engine)`, not a
    session opened from `Sessions`."""
    source = "with Session(engine) as s: pass\nt = orm.Session(engine)\nu = sessions()\n"
    assert opened_apart(source) == [1, 2]
