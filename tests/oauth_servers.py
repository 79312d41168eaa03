"""Fixtures for the OAuth tests: the authorization server on an origin of its own (`oauth_protected.py
--split`), a hostile remote server (`oauth_hostile.py`), and `manifold auth login` run as a person would.
Import the fixtures into a test module to use them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SERVERS, free_port, stop_process, wait_for_port


@dataclass(frozen=True)
class Split:
    """The OAuth fixture server with its authorization server on another origin."""

    mcp: str  # the MCP server's base URL (its endpoint is <mcp>/mcp)
    issuer: str  # the authorization server's
    log: Path  # what it printed: `token request on port N (grant)`, `issued ...`

    def token_requests_to(self, base: str) -> list[str]:
        port = base.rsplit(":", 1)[1]
        return [line for line in self.log.read_text().splitlines() if line.startswith(f"token request on port {port} ")]


@pytest.fixture
def split(tmp_path: Path) -> Iterator[Split]:
    mcp_port, as_port = free_port(), free_port()
    log = tmp_path / "oauth-server.log"
    with log.open("wb") as out:
        command = [sys.executable, str(SERVERS / "oauth_protected.py"), "--http", str(mcp_port)]
        process = subprocess.Popen([*command, "--split", str(as_port)], start_new_session=True, stderr=out)
    try:
        wait_for_port(mcp_port, process)
        wait_for_port(as_port, process)
        yield Split(f"http://127.0.0.1:{mcp_port}", f"http://127.0.0.1:{as_port}", log)
    finally:
        stop_process(process)


@dataclass(frozen=True)
class Hostile:
    """A running `oauth_hostile.py`: its base URL and what it was sent."""

    base: str
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def sent_anywhere(self, secret: str) -> bool:
        return any(secret in json.dumps(entry) for entry in self.requests())


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Callable[..., Hostile]]:
    """Start `oauth_hostile.py` with the given options (`hostile("--token", "hang")`); stopped at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*options: str) -> Hostile:
        port = free_port()
        log = tmp_path / f"hostile-{port}.log"
        command = [sys.executable, str(SERVERS / "oauth_hostile.py"), "--http", str(port), "--log", str(log), *options]
        process = subprocess.Popen(command, start_new_session=True)
        started.append(process)
        wait_for_port(port, process)
        return Hostile(f"http://127.0.0.1:{port}", log)

    try:
        yield start
    finally:
        for process in started:  # killed at once: it may hold a request that never ends (`--token hang`)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def login(config: Path, server: str = "remote", browser: str | None = None) -> subprocess.CompletedProcess[str]:
    """`manifold auth login SERVER`, the browser `fake_browser.py` (it follows the redirects) unless given."""
    env = {**os.environ, "BROWSER": browser or f"{sys.executable} {SERVERS / 'fake_browser.py'} %s"}
    command = [sys.executable, "-m", "mcp_manifold", "auth", "login", server, "--config", str(config)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
