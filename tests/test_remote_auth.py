"""OAuth to remote servers: the SDK's client auth against a real authorization server on loopback."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from mcp.shared.auth import OAuthToken

from mcp_manifold._config import load_config, parse_config_data
from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._errors import ManifoldError
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.remote_auth import TokenFile, login_by_name, logins_in_browser, token_path, token_storage
from tests.conftest import SERVERS, free_port, server_entry, stdio_gateway, stop_process, wait_for_port
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - a fixture

pytestmark = pytest.mark.anyio


@pytest.fixture
def protected() -> Iterator[str]:
    """The OAuth-protected fixture server; yields its base URL (its MCP endpoint is <base>/mcp)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "oauth_protected.py"), "--http", str(port)], start_new_session=True
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def text(result: Any) -> str:
    return result.content[0].text


def token_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "data" / "oauth").glob("*.json"))


async def test_client_credentials_end_to_end(protected: str, write_config: Callable[..., Path], tmp_path: Path) -> None:
    auth = {"type": "oauth", "grant": "client_credentials", "client_id": "machine", "client_secret": "machine-secret"}
    config = write_config({"remote": {"url": f"{protected}/mcp", "auth": {**auth, "issuer": protected}}})
    async with stdio_gateway(config, mode="auto") as client:
        assert text(await client.call_tool("remote_whoami", {})) == "machine"
    (stored,) = token_files(tmp_path)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text())["tokens"]["access_token"]


async def test_serve_never_waits_for_a_login(protected: str, write_config: Callable[..., Path], tmp_path: Path) -> None:
    config = write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth"}}})
    async with stdio_gateway(config, mode="auto") as client:
        refused = await client.call_tool("remote_whoami", {})
        assert refused.is_error
        assert "needs an OAuth login: run `manifold auth login remote`" in text(refused)
    assert token_files(tmp_path) == []


async def test_a_person_logs_in_once_with_the_browser(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth", "scopes": ["read"]}}})
    # The real command, with a browser that follows the redirect by itself.
    env = {**os.environ, "BROWSER": f"{sys.executable} {SERVERS / 'fake_browser.py'} %s"}
    done = subprocess.run(
        [sys.executable, "-m", "mcp_manifold", "auth", "login", "remote", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (stored,) = token_files(tmp_path)
    assert f"logged in to 'remote'; its tokens are kept in {stored}" in done.stderr
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700  # the login made the data dir: 0755 was
    saved = json.loads(stored.read_text())
    assert saved["tokens"]["access_token"] not in done.stdout + done.stderr  # never shown
    registered = saved["client"]["client_id"]  # registered dynamically, for the loopback redirect
    assert saved["tokens"]["refresh_token"]
    async with stdio_gateway(config, mode="auto") as client:
        assert text(await client.call_tool("remote_whoami", {})) == registered


def test_a_command_run_by_a_person_logs_in_when_its_server_asks(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """`manifold tools` (not `serve`) opens the login in the browser instead of failing, then lists."""
    config = write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth"}}})
    env = {**os.environ, "BROWSER": f"{sys.executable} {SERVERS / 'fake_browser.py'} %s"}
    command = [sys.executable, "-m", "mcp_manifold", "tools", "--json", "--config", str(config)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "remote_whoami" in {tool["name"] for tool in json.loads(done.stdout)}
    assert len(token_files(tmp_path)) == 1


def test_a_login_left_undone_in_the_browser_is_named_not_the_servers_speed(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """`manifold tools` showed the login page and nobody logged in: the server's start timed out and the
    error said "init_timeout: raise it for a server that is slow to start"."""
    config = write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth"}}}, {"init_timeout": 1})
    env = {**os.environ, "BROWSER": "true %s"}  # a browser that opens the page, and a person who does nothing
    command = [sys.executable, "-m", "mcp_manifold", "tools", "--json", "--config", str(config)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-3000:]
    said = " ".join(done.stderr.split())
    assert "remote: did not finish initialization within 1s: its OAuth login in the browser was not completed" in said
    assert "log in first with `manifold auth login remote` (it waits five minutes)" in said
    assert "init_timeout: raise it" not in said


def test_auth_login_names_an_unknown_server(write_config: Callable[..., Path]) -> None:
    config = write_config({"local": {"command": sys.executable, "args": [str(SERVERS / "kitchen.py")]}})
    command = [sys.executable, "-m", "mcp_manifold", "auth", "login", "nowhere", "--config", str(config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "no server 'nowhere' in the config (servers with OAuth: none)" in done.stderr


@pytest.mark.parametrize(
    ("auth", "words"),
    [
        ({"type": "oauth", "grant": "client_credentials", "client_id": "a"}, "needs 'client_id' and 'client_secret'"),
        ({"type": "basic"}, "auth.type"),
        ({"type": "oauth", "scope": "a"}, "did you mean 'scopes'"),
        ({"type": "oauth", "redirect_port": 0}, "from 1 to 65535"),
        ({"type": "oauth", "client_metadata_url": "http://example.com/c"}, "https URL with a path"),
        ({"type": "oauth", "client_secret": "s3cret-value"}, "needs its 'client_id'"),
        ("oauth", "must be a mapping"),
    ],
)
def test_bad_auth_entries_are_named(auth: Any, words: str) -> None:
    with pytest.raises(Exception) as raised:
        parse_config_data({"mcpServers": {"r": {"url": "http://127.0.0.1:9/mcp", "auth": auth}}}, source="t.json")
    assert words in str(raised.value) and "server 'r'" in str(raised.value)
    assert "s3cret-value" not in str(raised.value)


def test_oauth_is_for_remote_servers_and_its_secret_is_never_shown() -> None:
    with pytest.raises(Exception, match="OAuth is for servers reached by 'url'"):
        parse_config_data({"mcpServers": {"r": {"command": "x", "auth": {"type": "oauth"}}}}, source="t.json")
    auth = {"type": "oauth", "grant": "client_credentials", "client_id": "machine", "client_secret": "s3cret-value"}
    config = parse_config_data({"mcpServers": {"r": {"url": "http://127.0.0.1:9/mcp", "auth": auth}}}, source="t")
    server = config.servers["r"]
    assert "s3cret-value" not in json.dumps(server.redacted()) and "s3cret-value" not in repr(server)
    assert server.scrub("token request failed for s3cret-value") == "token request failed for ***"


async def test_login_names_what_is_wrong(write_config: Callable[..., Path]) -> None:
    config = load_config(write_config({"plain": {"url": "http://127.0.0.1:9/mcp"}}))
    with pytest.raises(ManifoldError, match="no server 'nope' in the config"):
        await login_by_name(config, "nope")
    with pytest.raises(ManifoldError, match="server 'plain' has no 'auth'"):
        await login_by_name(config, "plain")
    # A stdio server cannot have `auth`: it was told to add one, which the config then refused.
    local = load_config(write_config({"local": server_entry("numbers.py")}, name="local.json"))
    with pytest.raises(ManifoldError, match=r"server 'local' is started by the gateway \(stdio\) and needs no login"):
        await login_by_name(local, "local")
    down = load_config(
        write_config({"down": {"url": f"http://127.0.0.1:{free_port()}/mcp", "auth": {"type": "oauth"}}}, name="d.json")
    )
    with pytest.raises(ManifoldError, match=r"could not reach http://127\.0\.0\.1:\d+/mcp: is the server running\?"):
        await login_by_name(down, "down")


async def test_tokens_the_server_no_longer_takes_ask_for_a_login_without_waiting(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # Stored tokens the authorization server does not know (it restarted): the SDK's flow would need a person.
    port = free_port()
    config = write_config({"remote": {"url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "oauth"}}})
    loaded = load_config(config)
    stored = TokenFile(token_path(loaded.settings.data_dir, loaded.servers["remote"]))
    await stored.set_tokens(OAuthToken(access_token="forgotten-access", refresh_token="forgotten-refresh"))
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "oauth_protected.py"), "--http", str(port)], start_new_session=True
    )
    try:
        wait_for_port(port, process)
        async with stdio_gateway(config, mode="auto") as client:
            refused = await client.call_tool("remote_whoami", {})
            assert refused.is_error
            assert "needs an OAuth login: run `manifold auth login remote`" in text(refused), text(refused)
    finally:
        stop_process(process)


async def test_a_command_run_by_a_person_logs_in_when_it_connects(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # `manifold call` / `tools` / `servers`: no separate login step, the browser opens when the server asks.
    config = load_config(write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth"}}}))
    opened: list[str] = []

    def browser(url: str) -> bool:
        opened.append(url)
        return httpx.get(url, follow_redirects=True, timeout=30).status_code == 200

    with logins_in_browser(browser):
        async with Gateway(config) as gateway:
            answer = await gateway.call_tool_by_name(Request(Caller("cli")), "remote_whoami", {})
    assert len(opened) == 1 and "code_challenge=" in opened[0]
    assert not answer.is_error and text(answer) not in ("nobody", "machine")
    assert len(token_files(tmp_path)) == 1


# --- tokens in the shared state (state_url): one login serves every replica --------------------------------


@contextmanager
def shared_login(
    redis: RedisServer, write_config: Callable[..., Path], tmp_path: Path, *server_args: str
) -> Iterator[tuple[list[str], str, Path, str]]:
    """The OAuth fixture server (with `server_args`), logged in to once with `manifold auth login` by a gateway
    whose tokens go to `redis`, and two gateways over HTTP with data dirs of their own and the same store.
    Yields their URLs, the store's key of the server's tokens, the server's log (`issued`/`refused` lines)
    and its address."""
    from tests.conftest import gateway_over_http

    port = free_port()
    told = tmp_path / "oauth-server.log"
    with told.open("wb") as log:  # the server names each token it issues (never the token)
        command = [sys.executable, str(SERVERS / "oauth_protected.py"), "--http", str(port), *server_args]
        server = subprocess.Popen(command, start_new_session=True, stderr=log)
    try:
        wait_for_port(port, server)
        remote = {"remote": {"url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "oauth"}}}
        replicas = [
            write_config(remote, {"state_url": redis.url, "data_dir": str(tmp_path / name)}, name=f"{name}.json")
            for name in ("one", "two")
        ]
        env = {**os.environ, "BROWSER": f"{sys.executable} {SERVERS / 'fake_browser.py'} %s"}
        login = [sys.executable, "-m", "mcp_manifold", "auth", "login", "remote", "--config", str(replicas[0])]
        done = subprocess.run(login, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "its tokens are kept in the shared state store (key manifold:oauth:remote-" in done.stderr
        assert not list(tmp_path.glob("*/oauth/*.json"))  # nothing in either data dir
        (key,) = [line for line in redis.command("KEYS", "manifold:oauth:*").split("\r\n") if "oauth" in line]
        assert stored_field(redis, key, "tokens")["access_token"] not in done.stdout + done.stderr  # never shown
        ports = [free_port(), free_port()]
        with gateway_over_http(replicas[0], ports[0]), gateway_over_http(replicas[1], ports[1]):
            yield [f"http://127.0.0.1:{p}/mcp" for p in ports], key, told, f"http://127.0.0.1:{port}"
    finally:
        stop_process(server)


def stored_field(redis: RedisServer, key: str, field: str) -> Any:
    return json.loads(redis.command("HGET", key, field).split("\r\n")[1])


async def test_a_login_on_one_replica_serves_every_replica_and_refreshes_are_taken_in_turn(
    redis_server: RedisServer,  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    import anyio
    from mcp import Client

    with shared_login(redis_server, write_config, tmp_path, "--token-seconds", "4") as (urls, _key, told, _server):
        async with Client(urls[0], mode="auto") as first, Client(urls[1], mode="auto") as second:
            whoami = [text(await client.call_tool("remote_whoami", {})) for client in (first, second)]
            assert whoami[0] == whoami[1] not in ("nobody", "machine")  # the client the login registered
            await anyio.sleep(5)  # both replicas' access token expired: each must refresh or take the other's
            answers: list[Any] = []

            async def call(client: Any) -> None:
                answers.append(await client.call_tool("remote_whoami", {}))

            async with anyio.create_task_group() as group:
                group.start_soon(call, first)
                group.start_soon(call, second)
            assert [text(answer) for answer in answers] == [whoami[0]] * 2, [text(a) for a in answers]
    # The login, then refreshes (one at least), each refresh token spent once: never by both replicas.
    lines = told.read_text().splitlines()
    assert sum(line.startswith("issued ") for line in lines) >= 2
    assert not [line for line in lines if line.startswith("refused")]


async def first_refresh(
    write_config: Callable[..., Path], tmp_path: Path, server_args: tuple[str, ...], settings: dict[str, Any]
) -> list[str]:
    """The OAuth fixture server (with `server_args`, which make it tell whether a refresh lock was held),
    logged in to, its stored access token then expired (the morning after), and a gateway with `settings`
    started on it to make one call: the `refresh ...` lines the server printed."""
    port = free_port()
    told = tmp_path / "oauth-server.log"
    with told.open("wb") as log:
        command = [sys.executable, str(SERVERS / "oauth_protected.py"), "--http", str(port), *server_args]
        server = subprocess.Popen(command, start_new_session=True, stderr=log)
    try:
        wait_for_port(port, server)
        remote = {"remote": {"url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "oauth"}}}
        config = load_config(write_config(remote, settings))
        browse = lambda page: httpx.get(page, follow_redirects=True, timeout=30).is_success  # noqa: E731
        await login_by_name(config, "remote", open_browser=browse)
        kept = token_storage(config.servers["remote"], config.settings.data_dir, config.settings.state_url)
        async with kept as storage:
            await storage.place.save({"expires_at": time.time() - 60})
        async with Gateway(config) as gateway:
            answer = await gateway.call_tool_by_name(Request(Caller("cli")), "remote_whoami", {})
        assert not answer.is_error and text(answer) not in ("nobody", "machine"), text(answer)
    finally:
        stop_process(server)
    return [line for line in told.read_text().splitlines() if line.startswith("refresh ")]


async def test_a_replicas_first_refresh_after_it_starts_is_taken_in_turn_too(
    redis_server: RedisServer,  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    """Replicas that start when the stored access token has expired refresh it holding the refresh lock, as
    every later refresh is: the first one was made without it, so replicas starting together spent one
    refresh token twice (an authorization server that detects reuse revokes the grant)."""
    lock = ("--refresh-lock-in", str(redis_server.port))
    refreshes = await first_refresh(write_config, tmp_path, lock, {"state_url": redis_server.url})
    assert refreshes == ["refresh with the lock held"], refreshes


async def test_sessions_that_share_a_token_file_refresh_in_turn(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Without state_url the tokens are a file that several sessions use (one per client with `session_scope:
    client`, a `manifold call` beside `serve`): a refresh holds a lock on it, so two of them never spend one
    refresh token; there was no lock at all, and two clients' sessions both spent it."""
    folder = tmp_path / "data" / "oauth"
    refreshes = await first_refresh(write_config, tmp_path, ("--refresh-lock-files", str(folder)), {})
    assert refreshes == ["refresh with the lock held"], refreshes
    (lock,) = folder.glob("*.lock")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


async def test_a_token_renewed_elsewhere_is_taken_when_the_old_one_is_refused(
    redis_server: RedisServer,  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    from mcp import Client

    # This server revokes a client's access tokens when it refreshes: a replica that holds the old one
    # gets a 401, and must take the stored one rather than ask for a new login.
    with shared_login(redis_server, write_config, tmp_path, "--revoke-on-refresh") as (urls, key, _told, server):
        async with Client(urls[0], mode="auto") as first, Client(urls[1], mode="auto") as second:
            whoami = [text(await client.call_tool("remote_whoami", {})) for client in (first, second)]
            # Another process refreshes (as a third replica would) and stores what it got.
            tokens, client = stored_field(redis_server, key, "tokens"), stored_field(redis_server, key, "client")
            form = {
                "grant_type": "refresh_token",
                "refresh_token": tokens["refresh_token"],
                "client_id": client["client_id"],
            }
            if client.get("client_secret"):
                form["client_secret"] = client["client_secret"]
            answer = httpx.post(f"{server}/token", data=form, timeout=30)
            assert answer.status_code == 200, answer.text
            renewed = answer.json()
            fields = {"tokens": renewed, "expires_at": time.time() + renewed["expires_in"]}
            redis_server.command(
                "HSET", key, *[part for name, value in fields.items() for part in (name, json.dumps(value))]
            )
            for client_of_a_replica in (first, second):
                answered = await client_of_a_replica.call_tool("remote_whoami", {})
                assert not answered.is_error and text(answered) == whoami[0], text(answered)


# --- the login's loopback redirect: only the answer to this login ends it ----------------------------------


def _redirect_uri(page: str) -> tuple[str, str]:
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(page).query)
    return query["redirect_uri"][0], query["state"][0]


async def test_a_login_ends_only_on_the_redirect_that_carries_its_state(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # Any page in the person's browser can reach the loopback port: with no state, or the wrong one, it is
    # answered 400 and the login goes on to the real redirect.
    config = load_config(write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth"}}}))
    refused: list[int] = []

    def browser(page: str) -> bool:
        redirect, _state = _redirect_uri(page)
        for forged in ("?error=access_denied&error_description=gone", "?code=forged&state=not-it"):
            refused.append(httpx.get(redirect + forged, timeout=10).status_code)
        return httpx.get(page, follow_redirects=True, timeout=30).status_code == 200

    where = await login_by_name(config, "remote", open_browser=browser)
    assert refused == [400, 400]
    assert json.loads(Path(where).read_text())["tokens"]["access_token"]


async def test_a_refusal_is_shown_without_control_characters(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = load_config(write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth"}}}))

    def browser(page: str) -> bool:
        redirect, state = _redirect_uri(page)
        words = "access_denied&error_description=%1b%5b31mred%1b%5b0m%07%0aforged line"
        return httpx.get(f"{redirect}?state={state}&error={words}", timeout=10).status_code == 400

    with pytest.raises(ManifoldError) as raised:
        await login_by_name(config, "remote", open_browser=browser)
    assert "the authorization server refused the login: [31mred[0mforged line" in str(raised.value)
    assert not any(ord(c) < 32 or ord(c) == 127 for c in str(raised.value))


async def test_an_authorization_responses_iss_is_shown_without_control_characters(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # The `iss` of the redirect (RFC 9207) is the authorization server's words: quoted in the error the
    # person's terminal shows, it carried its escape sequences (a window title, a cleared screen).
    config = load_config(write_config({"remote": {"url": f"{protected}/mcp", "auth": {"type": "oauth"}}}))

    def browser(page: str) -> bool:
        redirect, state = _redirect_uri(page)
        return httpx.get(f"{redirect}?state={state}&code=c&iss=%1b%5d0%3bPWNED%07%1b%5b2J", timeout=10).is_success

    with pytest.raises(ManifoldError) as raised:
        await login_by_name(config, "remote", open_browser=browser)
    assert "Authorization response iss mismatch: ]0;PWNED[2J != " in str(raised.value), str(raised.value)
    assert not any(ord(c) < 32 or ord(c) == 127 for c in str(raised.value))


async def test_a_login_whose_redirect_port_is_taken_says_so(
    protected: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # Another program listens on the configured redirect port: the login ends at once, naming the port (it
    # ended in a bare "OSError: [Errno 98] Address already in use").
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        auth = {"type": "oauth", "redirect_port": port}
        config = load_config(write_config({"remote": {"url": f"{protected}/mcp", "auth": auth}}))
        with pytest.raises(ManifoldError) as raised:
            await login_by_name(config, "remote", open_browser=lambda _page: True)
    assert (
        f"the login to 'remote' failed: server 'remote': the login's redirect port 127.0.0.1:{port} cannot be"
        in str(raised.value)
    ), str(raised.value)
