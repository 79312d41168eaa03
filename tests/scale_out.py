"""Fixtures for the scale-out tests: a private redis-server, and N gateway replicas behind HAProxy on loopback.

Both need Debian's binaries (`make test` installs them: the `scaleout` target); without them the tests that
use these fixtures are skipped and say so. Import the fixtures into a test module to use them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx  # the MCP SDK's HTTP client
import pytest

from tests.conftest import free_port, manifold_command, stop_process, wait_for_port

REDIS = shutil.which("redis-server")
HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
NO_REDIS = "redis-server not installed (`make test` installs Debian's as root: the scaleout target)"
NO_HAPROXY = "haproxy not installed (`make test` installs Debian's as root: the scaleout target)"


class RedisServer:
    """A private redis-server on a free loopback port: nothing persisted, its files in a temp dir."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS is not None
        command = [REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        command += ["--dir", str(self.directory), "--protected-mode", "no", "--loglevel", "warning"]
        self.process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL)
        wait_for_port(self.port, self.process)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def command(self, *args: str) -> str:
        """One command through redis-cli-free plain RESP (for checks from the test)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            parts = [f"${len(arg.encode())}\r\n{arg}\r\n" for arg in args]
            sock.sendall(f"*{len(args)}\r\n{''.join(parts)}".encode())
            return sock.recv(65536).decode()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    if REDIS is None:
        pytest.skip(NO_REDIS)
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory)
    server.start()
    yield server
    server.stop()


@dataclass
class Replica:
    id: str
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes]
    log: Path  # its standard error

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@dataclass
class Cluster:
    """Gateway replicas started from one config, and HAProxy in front of them."""

    replicas: list[Replica]
    port: int
    haproxy: subprocess.Popen[bytes]
    admin: Path  # HAProxy's runtime API (a Unix socket)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def by_pid(self, pid: int) -> Replica:
        return next(replica for replica in self.replicas if replica.process.pid == pid)

    def kill(self, replica: Replica) -> None:
        """SIGKILL one replica (its stdio servers see their pipes close and exit)."""
        os.kill(replica.process.pid, signal.SIGKILL)
        replica.process.wait(timeout=10)

    def server_states(self) -> dict[str, str]:
        """Each replica's state as HAProxy sees it ("UP", "DOWN", ...), from its runtime API."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as admin:
            admin.settimeout(5)
            admin.connect(str(self.admin))
            admin.sendall(b"show stat\n")
            text = b"".join(iter(lambda: admin.recv(65536), b"")).decode()
        header, *rows = [line for line in text.splitlines() if line]
        columns = header.lstrip("# ").split(",")
        states = {}
        for row in rows:
            values = dict(zip(columns, row.split(","), strict=False))
            if values.get("pxname") == "replicas" and values.get("svname") not in ("FRONTEND", "BACKEND"):
                states[values["svname"]] = values["status"]
        return states

    def wait_down(self, replica: Replica, timeout: float = 60.0) -> None:
        """Until HAProxy's health checks have taken `replica` out of the rotation (asked, not guessed: on a
        loaded machine the checks can take much longer than `inter` x `fall`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if replica.process.poll() is not None and self.server_states().get(replica.id, "").startswith("DOWN"):
                return
            time.sleep(0.1)
        raise TimeoutError(f"HAProxy still has replica {replica.id} in rotation after {timeout}s")


def haproxy_config(port: int, replicas: list[Replica], *, sticky: bool, admin: Path) -> str:
    """Round robin per request with health checks on /healthz; `sticky`: session-era clients keep their
    replica (a stick table keyed on the mcp-session-id response header)."""
    lines = [
        "global",
        "    maxconn 2000",
        f"    stats socket {admin} mode 600 level admin",
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        "    timeout client 120s",
        "    timeout server 120s",
        "    timeout tunnel 1h",
        "frontend mcp",
        f"    bind 127.0.0.1:{port}",
        "    default_backend replicas",
        "backend replicas",
        "    balance roundrobin",
        "    option httpchk GET /healthz",
        "    default-server inter 300ms fall 2 rise 1",
    ]
    if sticky:
        lines += [
            "    stick-table type string len 128 size 100k expire 30m",
            "    stick match req.hdr(mcp-session-id)",
            "    stick store-response res.hdr(mcp-session-id)",
        ]
    lines += [f"    server {replica.id} 127.0.0.1:{replica.port} check" for replica in replicas]
    return "\n".join(lines) + "\n"


def wait_healthy(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer 200 within {timeout}s")


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """`replicas(config, n=3, sticky=False, env=None)`: n gateways from one config (each its own data_dir and
    replica id `r0`, `r1`, ...), behind HAProxy; everything is stopped after the test."""
    if HAPROXY is None:
        pytest.skip(NO_HAPROXY)
    started: list[subprocess.Popen[bytes]] = []

    def start(config: Path, n: int = 3, *, sticky: bool = False, env: dict[str, str] | None = None) -> Cluster:
        members = []
        for index in range(n):
            port = free_port()
            data_dir = tmp_path / f"replica-{index}"
            replica_env = {
                **os.environ,
                "MANIFOLD_REPLICA_ID": f"r{index}",
                "MANIFOLD_DATA_DIR": str(data_dir),
                "MANIFOLD_DISCOVERY_DIR": str(data_dir / "instances"),  # each replica's machine has its own
                **(env or {}),
            }
            log = tmp_path / f"replica-{index}.log"
            with log.open("wb") as stderr:
                process = subprocess.Popen(
                    manifold_command(config, "--http", "--port", str(port)),
                    start_new_session=True,
                    env=replica_env,
                    stderr=stderr,
                )
            started.append(process)
            members.append(Replica(f"r{index}", port, data_dir, process, log))
        for member in members:
            wait_for_port(member.port, member.process, timeout=60)
            wait_healthy(f"http://127.0.0.1:{member.port}/healthz")
        port = free_port()
        config_file = tmp_path / "haproxy.cfg"
        admin = tmp_path / "haproxy.sock"
        config_file.write_text(haproxy_config(port, members, sticky=sticky, admin=admin))
        assert HAPROXY is not None
        haproxy = subprocess.Popen(
            [HAPROXY, "-f", str(config_file), "-db"], start_new_session=True, stdout=subprocess.DEVNULL
        )
        started.append(haproxy)
        wait_for_port(port, haproxy)
        wait_healthy(f"http://127.0.0.1:{port}/healthz")
        return Cluster(members, port, haproxy, admin)

    yield start
    for process in reversed(started):
        stop_process(process)
