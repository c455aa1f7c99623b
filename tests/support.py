"""Helpers shared by the tests: published fixtures, signing, scratch databases, a running App."""

from __future__ import annotations

import inspect
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from githubkit.webhooks import sign
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from app.gateway.metering import Tally, Usage

OPERATOR_TOKEN = "an-operator-token-for-the-status-page"  # THE_LOOP_ADMIN_TOKEN
FIXTURES = Path(__file__).resolve().parent / "data"  # published payloads; see its READMEs
WEBHOOK_SECRET = "test-webhook-secret"
APP_ID = 4242  # the fake GitHub's App
POSTGRES_URL = os.environ.get("THE_LOOP_TEST_POSTGRES_URL", "")


def artifact(title: str = "Design") -> str:
    """An artifact's text that counts (`app.graph.substantive`): a heading and a paragraph."""
    return f"# {title}\n\nWhat this phase settled, said in a short paragraph of plain words.\n"


def fixture_bytes(name: str) -> bytes:
    """The exact bytes of a published payload under tests/data (e.g. 'github/ping.json')."""
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> dict[str, Any]:
    return json.loads(fixture_bytes(name))


def with_installation(payload: dict[str, Any], installation_id: int = 1) -> dict[str, Any]:
    """Add the `installation` key an App delivery carries (some published payloads lack it)."""
    return {
        **payload,
        "installation": {"id": installation_id, "node_id": "MDIzOkludGVncmF0aW9uMQ=="},
    }


def signed_headers(
    event: str, body: bytes, secret: str = WEBHOOK_SECRET, delivery: str | None = None
) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(secret, body),
        "Content-Type": "application/json",
    }


def post_webhook(
    base_url: str,
    event: str,
    body: bytes | dict[str, Any],
    *,
    delivery: str | None = None,
    secret: str = WEBHOOK_SECRET,
) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{base_url}/github/webhooks",
        content=raw,
        headers=signed_headers(event, raw, secret, delivery),
        timeout=10,
    )


@contextmanager
def scratch_database(kind: str, directory: Path, template: str | None = None) -> Iterator[str]:
    """A fresh, empty database: a SQLite file in `directory`, or a new PostgreSQL database
    (dropped afterwards) on the server THE_LOOP_TEST_POSTGRES_URL names; with `template`
    (PostgreSQL only), a copy of that database instead of an empty one."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'the-loop.db'}"
        return
    if not POSTGRES_URL:
        pytest.skip("THE_LOOP_TEST_POSTGRES_URL is not set")
    name = f"t_{uuid.uuid4().hex[:12]}"
    # No pooled connection: the server may have been restarted by the time the test ends.
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    copied = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copied}'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def migrated_postgres(directory: Path) -> Iterator[str]:
    """The name of a new PostgreSQL database migrated to the newest revision, with nothing
    connected to it: a template `scratch_database` copies (dropped afterwards)."""
    from app.store.engines import make_engine, migrate

    with scratch_database("postgres", directory) as url:
        engine = make_engine(url)
        try:
            migrate(engine)
        finally:
            engine.dispose()  # a template copied while someone is connected is refused
        name = make_url(url).database
        assert name is not None
        yield name


def app_env(
    directory: Path, database_url: str, github_url: str, private_key: str
) -> dict[str, str]:
    """The environment of an App under test, its state and config in `directory`; tests add
    keys before building settings."""
    config = directory / "cli-config.yaml"
    if not config.exists():
        config.write_text("{}\n")
    return {
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_PRIVATE_KEY": private_key,
        "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "GITHUB_API_URL": github_url,
        "DATABASE_URL": database_url,
        "THE_LOOP_STATE_DIR": str(directory / "state"),
        "THE_LOOP_CONFIG": str(config),
        # Reading GitHub's delivery log adds requests and events to every App a test starts;
        # the tests of the log turn it on.
        "THE_LOOP_RECONCILE_SECONDS": "0",
        # A progress comment is posted or edited this long after the change that makes it due
        # (two seconds by default, to make a burst of changes one GitHub edit): the tests that
        # wait for a comment to say something do not wait out the operator's window.
        "THE_LOOP_PROGRESS_WINDOW_SECONDS": "0.2",
        # Most tests' spawners are clients that poll and report but never heartbeat: a test
        # that outlasts the dead window must not see its items turn lost. The tests of a
        # spawner's death set their own window.
        "THE_LOOP_SPAWNER_DEAD_SECONDS": "3600",
    }


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll until `predicate()` is truthy; fail with a clear message after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


@dataclass
class RunningApp:
    url: str
    state: Any  # app.runtime.app_state.AppState
    pid: int | None = None  # the serving process, when it is one of its own

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        from sqlalchemy import select

        from app.store.tables import Event

        with self.state.sessions() as session:
            query = select(Event).order_by(Event.id)
            if name:
                query = query.where(Event.event == name)
            return [row.data for row in session.scalars(query)]


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds, for a server started as a process of its own
    (told its port, so it cannot bind port 0 and say which it got).

    The port is checked free and handed on, so something else could take it before the
    server binds. Ports are therefore drawn from below the kernel's ephemeral range, which
    neither outgoing connections nor servers bound to port 0 ever get; each test process
    draws from its own slice of that span (by xdist worker), starting at a place its pid
    picks, so two processes running at once do not hand out the same port either."""
    low, span = _PORT_SPAN
    for _ in range(span):
        port = low + next(_PORT_DRAWS) % span
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {low}..{low + span - 1}")


def _port_span() -> tuple[int, int]:
    """(first port, number of ports) of this process's slice below the ephemeral range."""
    try:
        ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        top = int(ephemeral[0])
    except (OSError, IndexError, ValueError):
        top = 32768
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    slot = int(worker[2:]) % 8 if worker[2:].isdigit() else 8  # 8: not an xdist worker
    span = max((top - 10000) // 9, 16)
    return 10000 + slot * span, span


_PORT_SPAN = _port_span()
_PORT_DRAWS = itertools.count(os.getpid() * 7919)


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def start_the_loop(
    args: list[str], cwd: Path, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """`the-loop <args>` in `cwd` with exactly `env`, in a process group of its own,
    everything it prints going to `log` (what `wait_serving` shows when it never serves). A
    file rather than a pipe: nobody reads a pipe while the App runs, and a full one would
    stop it."""
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", *args],
            cwd=cwd,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_serving(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Wait until the App `proc` started answers /healthz at `url`. If the process exits
    first or the time runs out, fail with the end of what it printed (`log`): a start-up
    that never comes says why."""
    deadline = time.monotonic() + timeout
    while not healthy(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            status = "still running" if proc.poll() is None else f"exit status {proc.returncode}"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no output)"
            raise AssertionError(f"{url} never answered /healthz ({status}); it printed:\n{tail}")
        time.sleep(0.05)


@contextmanager
def served_app(env: dict[str, str], *args: str) -> Iterator[RunningApp]:
    """`the-loop serve` (gunicorn's asgi worker, as deployed) in its own process group on a
    free port; `state.engine` reads the same database. Stopped with SIGTERM, and the exit
    status checked: a clean shutdown is part of what is tested."""
    with _app_process(env, ["-m", "app.cli", "serve", "--workers", "1", *args]) as app:
        yield app


@contextmanager
def gunicorn_app(env: dict[str, str], threads: int) -> Iterator[RunningApp]:
    """The App as plain WSGI under gunicorn's stock threaded worker (`gunicorn -k gthread
    'app.runtime:create_app()'`, one process of `threads` threads), stopped like `served_app`."""
    command = [
        "-m",
        "gunicorn",
        "-k",
        "gthread",
        "--threads",
        str(threads),
        "app.runtime:create_app()",
    ]
    with _app_process(env, command, bind=True) as app:
        yield app


@contextmanager
def _app_process(
    env: dict[str, str], command: list[str], bind: bool = False
) -> Iterator[RunningApp]:
    """`python <command>` serving the App on a free port (`--bind` added, or PORT set)."""
    from app.store import Sessions
    from app.store.engines import make_engine

    port = free_port()
    log = Path(env["THE_LOOP_CONFIG"]).parent / "serve.log"
    root = Path(__file__).resolve().parents[1]
    argv = [*command, "--bind", f"127.0.0.1:{port}"] if bind else command
    with log.open("wb") as output:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=root,
            env={**os.environ, **env, "PORT": str(port)},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    engine = make_engine(env["DATABASE_URL"])
    try:
        wait_serving(url, proc, log, timeout=30)
        yield RunningApp(
            url=url, state=SimpleNamespace(engine=engine, sessions=Sessions(engine)), pid=proc.pid
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        engine.dispose()
    assert proc.returncode == 0, log.read_text(errors="replace")[-2000:]


def forked_workers(arbiter: int) -> list[int]:
    """The processes gunicorn's arbiter forked, by the parent in each /proc/<pid>/stat
    rather than the arbiter's `children` file, which can read empty while its worker runs."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == arbiter:
            found.append(int(stat.parent.name))
    return found


def memory_kib(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory from /proc/<pid>/status in KiB: `VmRSS` now, or `VmHWM`,
    the most it has held since it started."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(f"{field} not in /proc/{pid}/status")


def hold_open_bodies(url: str, path: str, count: int, size: int) -> list[socket.socket]:
    """`count` unsigned POSTs to `path`, each declaring a `size`-byte body and sending all of
    it but the last byte, at once; the sockets are returned open. A sender the server
    refuses stops where the server closed on it (its answer is left to read)."""
    host, port = url.removeprefix("http://").split(":")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nX-GitHub-Event: issues\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    block = b" " * (1024 * 1024)
    socks = [socket.create_connection((host, int(port)), timeout=60) for _ in range(count)]

    def send(sock: socket.socket) -> None:
        left = size - 1
        try:
            sock.sendall(head)
            while left:
                sent = sock.send(block[: min(left, len(block))])
                left -= sent
        except OSError:
            return  # refused: the server answered and closed

    threads = [threading.Thread(target=send, args=(sock,)) for sock in socks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return socks


@contextmanager
def wsgi_app(env: dict[str, str]) -> Iterator[RunningApp]:
    """The App as plain WSGI (`gunicorn 'app.runtime:create_app()'`), with its inbox worker, on a
    threaded server on 127.0.0.1 in this process."""
    from app.config.process_settings import load_settings
    from app.runtime.flask_app import create_app
    from tests.fakes.server import LiveServer

    app = create_app(load_settings(env, dotenv=None))
    state = app.extensions["the-loop"]
    try:
        with LiveServer(app) as server:
            yield RunningApp(url=server.url, state=state)
    finally:
        state.close()


def module_setting(request: pytest.FixtureRequest, name: str, default: Any) -> Any:
    """What the requesting test's module sets, as the module-level `name`, for one of the
    shared fixtures (`default` where it sets nothing). A function there is called with the
    fixtures its parameters name: for a setting built from a test's own (`tmp_path`, a
    stand-in harness)."""
    given = getattr(request.module, name, default)
    if not inspect.isfunction(given):
        return given
    wanted = inspect.signature(given).parameters
    return given(**{fixture: request.getfixturevalue(fixture) for fixture in wanted})


def self_signed(
    folder: Path, names: tuple[str, ...] = ("localhost", "127.0.0.1")
) -> tuple[Path, Path]:
    """A self-signed certificate for `names` (host names or IP addresses; the first is its
    common name) and its key, written into `folder`: a TLS server made here, trusted by
    whoever is given the certificate."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def alt(name: str) -> x509.GeneralName:
        try:
            return x509.IPAddress(ipaddress.ip_address(name))
        except ValueError:
            return x509.DNSName(name)

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([alt(n) for n in names]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def usage_counted(tally: Tally, requests: int) -> dict[str, Usage]:
    """Everything a model gateway's `tally` counted, once it has counted `requests` requests: a
    client may have its whole answer a moment before the relay has closed it and added its
    usage. (The harness's working time is left out: the clock says it, not the answer.)"""
    seen: dict[str, Usage] = {}

    def drained() -> dict[str, Usage] | None:
        for item, usage in tally.drain().items():
            seen[item] = seen.get(item, Usage()) + replace(usage, active_ms=0)
        return seen if sum(u.requests for u in seen.values()) >= requests else None

    return wait_for(drained, timeout=30)
