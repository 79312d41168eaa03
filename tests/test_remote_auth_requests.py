"""OAuth to remote servers: the flow's own requests, held to rules (oauth_requests.Guard).

A hostile remote server that is its own authorization server (`oauth_hostile.py`), real gateways on stdio,
real MCP clients: where the flow may go, how long and how much it reads, and what a caller is told."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from mcp import Client

from mcp_manifold._config import load_config, parse_config_data
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime import oauth_requests
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import stdio_gateway
from tests.oauth_servers import Hostile, hostile, login  # noqa: F401 - a fixture

pytestmark = pytest.mark.anyio

MACHINE = {"type": "oauth", "grant": "client_credentials", "client_id": "machine", "client_secret": "machine-secret"}


async def refusal(config: Path) -> str:
    """What a client calling the remote server's tool is told (the call must fail): it carries the server's
    last error, as `manifold servers` shows it."""
    async with stdio_gateway(config, mode="auto") as client:
        answer = await client.call_tool("remote_whoami", {})
    assert answer.is_error
    return str(answer.content[0].text)


def remote(write_config: Callable[..., Path], server: Hostile, auth: dict[str, Any] = MACHINE) -> Path:
    return write_config({"remote": {"url": f"{server.base}/mcp", "auth": auth}}, {"init_timeout": 60})


async def test_an_answers_body_never_reaches_a_caller(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
) -> None:
    # The server names an internal address as its token endpoint; what that answers stays out of errors.
    first = hostile()
    evil = hostile("--token-url", f"{first.base}/internal/token")
    told = await refusal(remote(write_config, evil))
    assert (
        f"its server 'remote' is not running (token endpoint at {first.base.removeprefix('http://')}: HTTP 403" in told
    ), told
    assert "INTERNAL-ONLY" not in told


async def test_a_registration_answers_body_never_reaches_the_person_logging_in(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
) -> None:
    first = hostile()
    evil = hostile("--registration-url", f"{first.base}/internal/register")
    done = login(remote(write_config, evil, {"type": "oauth"}))
    assert done.returncode == 1
    host = first.base.removeprefix("http://")
    assert f"the login to 'remote' failed: server 'remote': client registration at {host}: HTTP 403" in done.stderr
    assert "INTERNAL-ONLY" not in done.stdout + done.stderr


async def test_an_oauth_endpoint_must_be_https_unless_on_loopback(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
) -> None:
    evil = hostile("--as-url", "http://198.51.100.7")  # plain http to another host
    started = time.monotonic()
    told = await refusal(remote(write_config, evil))
    assert (
        "its server 'remote' is not running (authorization-server metadata at 198.51.100.7: refused: "
        "an OAuth endpoint must be https (or http on a loopback host), not http"
    ) in told, told
    assert time.monotonic() - started < 30  # refused, not tried


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:9/token",
        "https://localhost/token",
        "https://10.1.2.3/register",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/token",
        "https://[::ffff:192.168.1.1]/token",
        # Shared address space (a cloud's metadata service), and IPv6 addresses that lead to an IPv4 one
        # (NAT64, 6to4, IPv4-compatible): they were taken for public.
        "https://100.100.100.200/latest/meta-data",
        "https://[64:ff9b::a9fe:a9fe]/latest/meta-data",
        "https://[2002:a9fe:a9fe::1]/token",
        "https://[::a9fe:a9fe]/token",
    ],
)
async def test_a_public_servers_flow_never_reaches_a_local_address(url: str) -> None:
    """The real resolver, the real check: a server that is not local itself cannot lead the flow home."""
    from mcp_manifold._runtime.oauth_requests import Guard, OAuthRequestFailed, is_local_url

    assert not await is_local_url("https://93.184.215.14/mcp") and await is_local_url("http://127.0.0.1:9/mcp")
    with pytest.raises(OAuthRequestFailed, match="refused: it is on a loopback, link-local or private address"):
        await Guard("remote", local_ok=False).check(httpx.Request("GET", url))
    await Guard("remote", local_ok=True).check(httpx.Request("GET", url))  # a local setup, or allowed


def test_private_addresses_can_be_allowed_per_server() -> None:
    auth = {"type": "oauth", "allow_private_addresses": True}
    config = parse_config_data({"mcpServers": {"r": {"url": "https://mcp.example/mcp", "auth": auth}}}, source="t")
    assert config.servers["r"].auth.allow_private_addresses  # type: ignore[union-attr]
    with pytest.raises(Exception, match=r"auth\.allow_private_addresses"):
        bad = {"type": "oauth", "allow_private_addresses": "perhaps"}
        parse_config_data({"mcpServers": {"r": {"url": "https://mcp.example/mcp", "auth": bad}}}, source="t")


async def test_an_oversized_document_is_refused_at_a_megabyte(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
) -> None:
    evil = hostile("--prm", "huge", "--huge-mb", "4")
    told = await refusal(remote(write_config, evil))
    host = evil.base.removeprefix("http://")
    assert (
        f"its server 'remote' is not running (protected-resource metadata at {host}: the answer is larger than 1024 kB"
        in told
    ), told


async def refusal_in_process(config: Path) -> str:
    """`refusal`, from a gateway in this process (so that a test can shorten the flow's deadlines)."""
    async with Gateway(load_config(config)) as gateway, Client(McpFront(gateway).server, mode="auto") as client:
        answer = await client.call_tool("remote_whoami", {})
    assert answer.is_error
    return str(answer.content[0].text)


async def test_an_oauth_request_that_hangs_times_out(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(oauth_requests, "TIMEOUT", httpx.Timeout(2.0))  # 10 s as shipped
    evil = hostile("--token", "hang")
    started = time.monotonic()
    # init_timeout is 60s: the request's own timeout ends it.
    told = await refusal_in_process(remote(write_config, evil))
    assert time.monotonic() - started < 30
    host = evil.base.removeprefix("http://")
    assert f"its server 'remote' is not running (token endpoint at {host}: no answer in time (ReadTimeout)" in told, (
        told
    )


async def test_an_answer_that_never_ends_is_cut_off(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A byte every 2 seconds keeps every read within its timeout: the whole answer has a deadline too.
    monkeypatch.setattr(oauth_requests, "BODY_DEADLINE", 5.0)  # 30 s as shipped
    evil = hostile("--token", "trickle")
    started = time.monotonic()
    told = await refusal_in_process(remote(write_config, evil))  # init_timeout is 60s
    assert time.monotonic() - started < 40
    host = evil.base.removeprefix("http://")
    assert f"(token endpoint at {host}: the answer took longer than 5s)" in told, told


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (("--token", "error"), "token endpoint at {host}: HTTP 400"),
        (("--token", "html"), "token endpoint at {host}: HTTP 200, not a valid document (document: Invalid JSON"),
        (
            ("--prm", "malformed"),
            "protected-resource metadata at {host}: HTTP 200, not a valid document (authorization_servers: ",
        ),
        # An integer of any size validates: it overflowed where the SDK adds it to the clock (an
        # OverflowError naming nothing), and a negative one made every request refresh first.
        (("--expires-in", "1" + "0" * 400), "token endpoint at {host}: HTTP 200, not a valid document (expires_in: "),
        (("--expires-in", "-5"), "token endpoint at {host}: HTTP 200, not a valid document (expires_in: "),
    ],
)
async def test_malformed_documents_are_named(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    options: tuple[str, ...],
    words: str,
) -> None:
    evil = hostile(*options)
    told = await refusal(remote(write_config, evil))
    assert f"its server 'remote' is not running ({words.format(host=evil.base.removeprefix('http://'))}" in told, told
    assert "HOSTILE-BODY" not in told and "UnicodeDecodeError" not in told


async def test_a_server_that_refuses_the_token_it_was_given_says_what_to_check(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
) -> None:
    """A token issued, then refused (401): the gateway's OAuth client is told so, with what to check. It said
    "it wants a credential: a headers entry, or auth: {type: oauth}", of a server that has that entry."""
    evil = hostile()  # answers 401 to every token
    told = await refusal(remote(write_config, evil))
    assert (
        "answered HTTP 401 Unauthorized: it refused the OAuth token the gateway holds: is its client allowed "
        'this server, with the "scopes" it asks for?'
    ) in told, told
    assert "it wants a credential" not in told


async def test_the_address_connected_to_is_checked_too(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
) -> None:
    """A name public when judged may resolve to a private address by connect time (DNS rebinding): a public
    server's client refuses the connection itself, before a byte is sent, whatever the request."""
    from mcp_manifold._runtime.oauth_requests import Guard, OAuthRequestFailed
    from mcp_manifold._sdk import create_http_client

    server = hostile()
    for where in (server.base, server.base.replace("127.0.0.1", "localhost")):
        public = Guard("remote", local_ok=False).network_backend()
        async with create_http_client(None, network_backend=public) as client:
            with pytest.raises(OAuthRequestFailed, match="refused: the name resolved to a loopback, link-local or"):
                await client.get(f"{where}/.well-known/oauth-protected-resource/mcp")
    local = Guard("remote", local_ok=True).network_backend()
    assert local is None
    async with create_http_client(None, network_backend=local) as client:
        assert (await client.get(f"{server.base}/.well-known/oauth-protected-resource/mcp")).status_code == 200


async def test_a_public_servers_client_goes_through_the_proxy_of_the_environment(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Behind a proxy (HTTP_PROXY, as on a corporate network) an OAuth server's client uses it, as every other
    remote server's does; it ignored it. The proxy resolves the name, so the address check is not its."""
    from mcp_manifold._runtime.oauth_requests import Guard
    from mcp_manifold._sdk import create_http_client

    proxy = hostile()  # answers a request in absolute form as if it were the server named
    for variable in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.base)
    public = Guard("remote", local_ok=False).network_backend()
    async with create_http_client(None, network_backend=public) as client:
        answer = await client.get("http://mcp.example.invalid/.well-known/oauth-protected-resource/mcp")
    assert answer.status_code == 200


async def test_a_server_judged_public_is_never_connected_to_on_a_private_address(
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gateway's own connection to the MCP server, not only the flow's requests: as if the server's name
    resolved to a public address when the gateway judged it, and to loopback when it connected."""
    from mcp_manifold._runtime import remote_auth

    async def judged_public(_url: str) -> bool:
        return False

    monkeypatch.setattr(remote_auth, "is_local_url", judged_public)
    server = hostile()
    told = await refusal_in_process(remote(write_config, server))
    host = server.base.removeprefix("http://")
    assert f"its server 'remote' is not running (a connection at {host}: refused: the name resolved" in told, told
