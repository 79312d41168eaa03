"""Shared fixtures: config files, and a real gateway reached by a real SDK client over stdio or HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

TESTS = Path(__file__).parent
SERVERS = TESTS / "servers"
NODE_BIN = TESTS / "node" / "node_modules" / ".bin"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the gateway's sources and the fixture servers' shared module once, before any test starts
    them. The suite starts a Python process per gateway, server and CLI command (well over a thousand);
    with PYTHONDONTWRITEBYTECODE set (as on the test machine) none of them writes what it compiled, so
    each compiled every module it imported again: about 0.15 s of CPU per gateway. Python still reads a
    cache it finds, and checks it against the source's mtime, so an edit is never run stale."""
    import compileall

    import mcp_manifold

    compileall.compile_dir(Path(mcp_manifold.__file__).parent, quiet=2)
    compileall.compile_file(SERVERS / "_common.py", quiet=2)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server_entry(script: str, *args: str, **extra: Any) -> dict[str, Any]:
    """A stdio mcpServers entry running one of the fixture servers with this Python."""
    return {"command": sys.executable, "args": [str(SERVERS / script), *args], **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(
    port: int, process: subprocess.Popen[bytes] | None = None, timeout: float = 20.0, host: str = "127.0.0.1"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        with socket.socket() as sock:
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout}s")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop a process started in its own group, and everything it started."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


@contextmanager
def server_over_http(script: str, *args: str, timeout: float = 20.0) -> Iterator[str]:
    """A fixture server of tests/servers/ serving streamable HTTP on a free port, stopped on leaving: its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / script), *args, "--http", str(port)], start_new_session=True
    )
    try:
        wait_for_port(port, process, timeout=timeout)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """Write an mcpServers config (plus an optional manifold section) and return its path."""

    def write(servers: dict[str, Any], manifold: dict[str, Any] | None = None, name: str = "mcp.json") -> Path:
        data: dict[str, Any] = {"mcpServers": servers}
        settings = {"data_dir": str(tmp_path / "data"), **(manifold or {})}
        data["manifold"] = settings
        path = tmp_path / name
        path.write_text(json.dumps(data, indent=2))
        return path

    return write


def manifold_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config), *extra]


@asynccontextmanager
async def stdio_gateway(config: Path, *extra: str, **client_kwargs: Any) -> AsyncIterator[Client]:
    """The gateway as Claude Desktop runs it: a subprocess on stdio, reached by the SDK client."""
    command = manifold_command(config, *extra)
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    client_kwargs.setdefault("mode", "legacy")
    async with Client(params, **client_kwargs) as client:
        yield client


@contextmanager
def gateway_over_http(
    config: Path, port: int, *, timeout: float = 20.0, **popen: Any
) -> Iterator[subprocess.Popen[bytes]]:
    """A gateway serving `config` over streamable HTTP on `port`, a subprocess in a group of its own
    (`popen`: its env, stderr, ...), once it listens; stopped with everything it started afterwards."""
    command = manifold_command(config, "--http", "--port", str(port))
    process = subprocess.Popen(command, start_new_session=True, **popen)
    try:
        wait_for_port(port, process, timeout)
        yield process
    finally:
        stop_process(process)


@pytest.fixture
def http_gateway() -> Iterator[Callable[..., str]]:
    """Start gateways over streamable HTTP as subprocesses; returns their /mcp URLs. All stopped after."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(config: Path, *extra: str) -> str:
        port = free_port()
        process = subprocess.Popen(
            manifold_command(config, "--http", "--port", str(port), *extra), start_new_session=True
        )
        processes.append(process)
        wait_for_port(port, process)
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for process in processes:
        stop_process(process)


@asynccontextmanager
async def keyed_client(url: str, key: str, mode: str, **client_kwargs: Any) -> AsyncIterator[Client]:
    """A real SDK client of an HTTP gateway that wants an API key, presenting `key` as a bearer token."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **client_kwargs) as client,
    ):
        yield client


CLIENT_MODES = ("auto", "legacy")  # the SDK's default (2026-07-28 with the gateway) and the session era

# --- one gateway shared by a module's tests, over each transport in each client mode -------------------
# A start of a gateway and its servers costs seconds of CPU: tests that only call and read share one.

TRANSPORT_MODES = [(transport, mode) for transport in ("stdio", "http") for mode in CLIENT_MODES]
TRANSPORT_MODE_IDS = [f"{transport}-{mode}" for transport, mode in TRANSPORT_MODES]


def write_gateway_config(folder: Path, servers: dict[str, Any], **settings: Any) -> Path:
    """`folder`/mcp.json serving `servers` with `settings`, keeping its data in `folder`/data."""
    config = folder / "mcp.json"
    manifold = {**settings, "data_dir": str(folder / "data")}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}))
    return config


@contextmanager
def http_gateway_url(config: Path) -> Iterator[str]:
    """A gateway of `config` serving HTTP on a free port (one for every client mode): its /mcp URL."""
    port = free_port()
    with gateway_over_http(config, port):
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def client_over(transport: str, mode: str, config: Path, http_url: Callable[[], str]) -> AsyncIterator[Client]:
    """A client of the gateway of `config`: over stdio a gateway of its own; over HTTP the shared one whose URL
    `http_url()` gives (a module fixture's, set up only when a test asks for HTTP)."""
    if transport == "stdio":
        async with stdio_gateway(config, mode=mode) as client:
            yield client
    else:
        async with Client(http_url(), mode=mode) as client:
            yield client


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests using `connect` run over stdio and HTTP, in both client modes; a test marked `session_era`
    (a behaviour 2026-07-28 removed, named in the mark's reason) only in the legacy mode, one marked
    `modern_era` (a behaviour only 2026-07-28 has) only in the SDK's default mode."""
    if "connect" not in metafunc.fixturenames:
        return
    modes = CLIENT_MODES
    if metafunc.definition.get_closest_marker("session_era"):
        modes = ("legacy",)
    elif metafunc.definition.get_closest_marker("modern_era"):
        modes = ("auto",)
    pairs = [(transport, mode) for transport in ("stdio", "http") for mode in modes]
    metafunc.parametrize("connect", pairs, ids=[f"{t}-{m}" for t, m in pairs], indirect=True)


@pytest.fixture
def connect(request: pytest.FixtureRequest, http_gateway: Callable[..., str]) -> Callable[..., Any]:
    """`connect(config, **client_kwargs)`: an SDK client to a real gateway, over each transport and in
    each client mode in turn (`connect.transport`, `connect.mode`)."""
    transport, mode = request.param

    @asynccontextmanager
    async def open_client(config: Path, *extra: str, **client_kwargs: Any) -> AsyncIterator[Client]:
        client_kwargs.setdefault("mode", mode)
        if transport == "stdio":
            async with stdio_gateway(config, *extra, **client_kwargs) as client:
                yield client
        else:
            async with Client(http_gateway(config, *extra), **client_kwargs) as client:
                yield client

    open_client.transport = transport  # type: ignore[attr-defined]
    open_client.mode = mode  # type: ignore[attr-defined]
    return open_client


# --- a client that answers what servers ask (sampling, elicitation) -------------------------------------


async def answer_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """A client's model: answers "answer to <the question>"."""
    asked = params.messages[0].content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"answer to {asked}"), model="test"
    )


async def answer_elicitation(context: Any, params: Any) -> types.ElicitResult:
    """A client's user: accepts with {"answer": "blue"}."""
    return types.ElicitResult(action="accept", content={"answer": "blue"})


class Instances:
    """Instance servers over HTTP, started by the test, stopped after it."""

    def __init__(self) -> None:
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}

    def start(self, name: str) -> str:
        port = self.ports.setdefault(name, free_port())
        command = [sys.executable, str(SERVERS / "instance.py"), "--name", name, "--http", str(port)]
        process = subprocess.Popen(command, start_new_session=True, stderr=subprocess.DEVNULL)
        self.processes[name] = process
        wait_for_port(port, process)
        return self.url(name)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}/mcp"

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.processes.values():
            stop_process(process)


@pytest.fixture
def instances() -> Iterator[Instances]:
    running = Instances()
    yield running
    running.stop_all()


class JsonEndpoint(BaseHTTPRequestHandler):
    """A small JSON-over-HTTP endpoint run in the test process (fake embedding APIs)."""

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def reply(self, status: int, payload: Any) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass  # keep test output clean


@contextmanager
def serve_endpoint(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free loopback port; yields its base URL (ending in /v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
