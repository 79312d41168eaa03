"""OAuth to remote servers mid-life: the scopes the gateway asks for, a server's step-up (403
insufficient_scope), a grant revoked while `serve` runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import pytest

from mcp_manifold._config import load_config
from mcp_manifold._runtime.remote_auth import login_by_name
from tests.conftest import SERVERS, free_port, stdio_gateway, stop_process, wait_for_port

pytestmark = pytest.mark.anyio


@contextmanager
def protected(tmp_path: Path, *options: str) -> Iterator[tuple[str, Path]]:
    """`oauth_protected.py` with `options`: its base URL and its log."""
    port = free_port()
    log = tmp_path / "oauth-server.log"
    with log.open("wb") as out:
        command = [sys.executable, str(SERVERS / "oauth_protected.py"), "--http", str(port), *options]
        process = subprocess.Popen(command, start_new_session=True, stderr=out)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}", log
    finally:
        stop_process(process)


@pytest.fixture
def stepping_up(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`oauth_protected.py --step-up admin`: its tool `admin` needs the scope `admin`. Yields its base URL and
    its log (`authorized scope=...` for each authorization, `step-up asked for admin` for each 403)."""
    with protected(tmp_path, "--step-up", "admin") as server:
        yield server


async def log_in(config: Path) -> None:
    """`manifold auth login remote`, in this process (quicker), with a browser whose person says yes at once."""

    def browser(url: str) -> bool:
        return httpx.get(url, follow_redirects=True, timeout=30).status_code == 200

    await login_by_name(load_config(config), "remote", open_browser=browser)


def authorized(log: Path) -> list[str]:
    return [line.removeprefix("authorized ") for line in log.read_text().splitlines() if line.startswith("authorized ")]


async def test_a_step_up_serve_cannot_make_is_one_calls_error_and_the_next_login_makes_it(
    stepping_up: tuple[str, Path], write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """The configured scopes are asked for (the SDK replaced them with the server's challenge: none was sent).
    A tool that needs more scope answers 403 insufficient_scope: `serve` cannot authorize without a person,
    so that call alone fails, saying what to run (it closed the session, failing every call on it, with
    "the server closed the connection"); `manifold auth login` then authorizes anew for the scope the
    server asked for (its stored token still valid, it did nothing) and the running gateway uses it."""
    base, log = stepping_up
    config = write_config({"remote": {"url": f"{base}/mcp", "auth": {"type": "oauth", "scopes": ["read"]}}})
    await log_in(config)
    assert authorized(log) == ["scope=read"]
    async with stdio_gateway(config, mode="auto") as client:
        refused = await client.call_tool("remote_admin", {})
        assert refused.is_error
        said = refused.content[0].text
        assert "this needs more OAuth scope than the gateway holds: run `manifold auth login remote`" in said, said
        assert not (await client.call_tool("remote_whoami", {})).is_error
        (stored,) = (tmp_path / "data" / "oauth").glob("*.json")
        assert json.loads(stored.read_text())["scope_wanted"] == "admin"

        await log_in(config)  # the gateway still running
        assert authorized(log) == ["scope=read", "scope=read admin"]
        granted = await client.call_tool("remote_admin", {})
        assert not granted.is_error and granted.content[0].text == "read admin", granted
    assert "scope_wanted" not in {k for k, v in json.loads(stored.read_text()).items() if v}  # granted: forgotten
    await log_in(config)
    assert len(authorized(log)) == 2  # its tokens have every scope asked for: nothing to do


async def test_a_grant_revoked_mid_life_refuses_each_call_until_a_login_which_the_running_gateway_takes(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Its refresh token spent elsewhere, the server revokes the gateway's access token: each call is refused
    saying what to run, the session kept (the SDK's flow ended it: "the server closed the connection"), and
    right after `manifold auth login` the same gateway answers (it waited for its start backoff, up to 30 s,
    still saying a login was needed)."""
    with protected(tmp_path, "--revoke-on-refresh") as (base, _log):
        config = write_config({"remote": {"url": f"{base}/mcp", "auth": {"type": "oauth"}}})
        await log_in(config)
        async with stdio_gateway(config, mode="auto") as client:
            registered = (await client.call_tool("remote_whoami", {})).content[0].text
            (stored,) = (tmp_path / "data" / "oauth").glob("*.json")
            record = json.loads(stored.read_text())
            spent = {"grant_type": "refresh_token", "refresh_token": record["tokens"]["refresh_token"]}
            assert httpx.post(f"{base}/token", data={**spent, "client_id": registered}).status_code == 200
            for _ in range(2):
                refused = await client.call_tool("remote_whoami", {})
                assert refused.is_error
                said = refused.content[0].text
                assert said == "server 'remote': needs an OAuth login: run `manifold auth login remote`", said
            await log_in(config)
            answered = await client.call_tool("remote_whoami", {})
            assert not answered.is_error and answered.content[0].text == registered, answered


def test_a_step_up_challenges_scope_is_taken_only_as_scope_words() -> None:
    from mcp_manifold._runtime.remote_auth import _step_up_scope

    def answer(status: int, challenge: str) -> httpx.Response:
        return httpx.Response(status, headers={"WWW-Authenticate": challenge})

    stepped = answer(403, 'Bearer error="insufficient_scope", scope="files:write \x1b[31m ok"')
    assert _step_up_scope(stepped) == "files:write ok"
    assert _step_up_scope(answer(403, 'Bearer error="invalid_token", scope="x"')) is None
    assert _step_up_scope(answer(401, 'Bearer error="insufficient_scope", scope="x"')) is None
    assert _step_up_scope(answer(403, 'Bearer error="insufficient_scope"')) is None


async def test_a_server_whose_grant_was_revoked_shows_as_needing_a_login_until_one_works(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Operator views (`manifold servers`, the dashboard's overview: both read `live_snapshot`; /metrics) say a
    server needs a login while its calls are refused for that; they showed it "ready", only the log said why."""
    from prometheus_client import generate_latest
    from rich.console import Console

    from mcp_manifold._cli.status import _servers_table
    from mcp_manifold._core.clients import Caller, Request
    from mcp_manifold._runtime.gateway import Gateway
    from mcp_manifold._runtime.metrics import GatewayMetrics

    def shown(gateway: Gateway) -> tuple[bool, str]:
        (row,) = gateway.live_snapshot()["servers"]
        console = Console(width=100, record=True)
        console.print(_servers_table("servers", [row], health=True))
        scraped = generate_latest(GatewayMetrics(gateway).registry).decode()
        assert f'manifold_backend_needs_login{{server="remote"}} {float(row["needs_login"])}' in scraped
        return row["needs_login"], console.export_text()

    with protected(tmp_path, "--revoke-on-refresh") as (base, _log):
        config = write_config({"remote": {"url": f"{base}/mcp", "auth": {"type": "oauth"}}})
        await log_in(config)
        async with Gateway(load_config(config)) as gateway:
            call = Request(Caller("cli"))
            registered = (await gateway.call_tool_by_name(call, "remote_whoami", {})).content[0].text
            assert shown(gateway)[0] is False
            (stored,) = (tmp_path / "data" / "oauth").glob("*.json")
            spent = {
                "grant_type": "refresh_token",
                "refresh_token": json.loads(stored.read_text())["tokens"]["refresh_token"],
            }
            assert httpx.post(f"{base}/token", data={**spent, "client_id": registered}).status_code == 200
            assert (await gateway.call_tool_by_name(call, "remote_whoami", {})).is_error
            backend = gateway.pool["remote"]
            session = backend._session
            await gateway.health.ping(backend)  # refused for want of a login: not a failure, no restart
            assert gateway.health.health["remote"].state not in ("retrying", "dead"), gateway.health.health["remote"]
            assert backend.state == "ready" and backend._session is session
            needs, table = shown(gateway)
            assert needs is True and "needs login" in table, table
            assert "remote: needs an OAuth login: run `manifold auth login remote`" in table, table
            await log_in(config)
            assert not (await gateway.call_tool_by_name(call, "remote_whoami", {})).is_error
            needs, table = shown(gateway)
            assert needs is False and "needs" not in table, table
