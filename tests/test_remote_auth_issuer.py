"""OAuth to remote servers: tokens and client secrets go only to the authorization server they belong to.

Split origins (the authorization server on a port of its own, `oauth_protected.py --split`) and a hostile
remote server (`oauth_hostile.py`), all real processes on loopback ports; real gateways and MCP clients."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mcp_manifold._config import load_config
from mcp_manifold._runtime.remote_auth import LoginNeeded, TokenFile, oauth_provider, token_path
from tests.conftest import stdio_gateway
from tests.oauth_servers import Hostile, Split, hostile, login, split  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


def text(result: Any) -> str:
    return result.content[0].text


def the_token_file(tmp_path: Path) -> Path:
    (stored,) = sorted((tmp_path / "data" / "oauth").glob("*.json"))
    return stored


@pytest.mark.parametrize("kept", ["with its authorization server", "old, client bound to its issuer", "old, unbound"])
async def test_a_refresh_goes_to_the_authorization_server_never_to_the_mcp_servers_origin(
    split: Split,  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    tmp_path: Path,
    kept: str,
) -> None:
    config = write_config({"remote": {"url": f"{split.mcp}/mcp", "auth": {"type": "oauth"}}})
    done = login(config)
    assert done.returncode == 0, done.stderr[-3000:]
    stored = the_token_file(tmp_path)
    saved = json.loads(stored.read_text())
    assert saved["authorization_server"]["token_endpoint"] == f"{split.issuer}/token"
    if kept != "with its authorization server":  # as a gateway before this kept them
        del saved["authorization_server"]
    if kept == "old, unbound":
        del saved["client"]["issuer"]
    saved["expires_at"] = time.time() - 60  # expired: the gateway's next call refreshes first (a restart)
    stored.write_text(json.dumps(saved))

    async with stdio_gateway(config, mode="auto") as client:
        answer = await client.call_tool("remote_whoami", {})
    assert split.token_requests_to(split.mcp) == []  # never the MCP server's origin
    if kept == "old, unbound":  # nothing to check a looked-up server against: a login, said so
        assert answer.is_error and "needs an OAuth login: run `manifold auth login remote`" in text(answer)
        assert [line for line in split.token_requests_to(split.issuer) if "refresh_token" in line] == []
    else:
        assert text(answer) == saved["client"]["client_id"], text(answer)
        assert [line for line in split.token_requests_to(split.issuer) if "(refresh_token)" in line]


async def test_client_credentials_with_an_issuer_refresh_only_there(
    split: Split,  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
) -> None:
    auth = {"type": "oauth", "grant": "client_credentials", "client_id": "machine", "client_secret": "machine-secret"}
    config = write_config({"remote": {"url": f"{split.mcp}/mcp", "auth": {**auth, "issuer": split.issuer}}})
    loaded = load_config(config)
    stored = TokenFile(token_path(loaded.settings.data_dir, loaded.servers["remote"]))
    # Kept by an earlier gateway (no authorization server with them), expired.
    await stored.set_tokens(OAuthToken(access_token="stale-access", refresh_token="stale-refresh", expires_in=1))
    time.sleep(1.5)
    async with stdio_gateway(config, mode="auto") as client:
        assert text(await client.call_tool("remote_whoami", {})) == "machine"
    assert split.token_requests_to(split.mcp) == []
    assert split.token_requests_to(split.issuer)


async def test_the_configured_issuer_is_the_only_authorization_server_a_login_uses(
    split: Split,  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    # The client and its secret belong to another authorization server than the one the server names.
    opened = tmp_path / "opened.txt"
    browser = f"{sys.executable} -c \"import sys; open({str(opened)!r}, 'a').write(sys.argv[1])\" %s"
    auth = {"type": "oauth", "client_id": "honest", "client_secret": "HONEST-SECRET", "issuer": "https://auth.example"}
    config = write_config({"remote": {"url": f"{split.mcp}/mcp", "auth": auth}})
    done = login(config, browser=browser)
    assert done.returncode == 1
    assert (
        f"the login to 'remote' failed: server 'remote': it names the authorization server "
        f"{split.issuer.removeprefix('http://')}, not the configured issuer https://auth.example"
    ) in done.stderr, done.stderr[-2000:]
    assert not opened.exists()  # no authorization page of the other server was ever shown
    assert split.token_requests_to(split.issuer) == [] and split.token_requests_to(split.mcp) == []


async def test_tokens_are_only_used_with_the_authorization_server_that_issued_them(
    split: Split,  # noqa: F811 - the fixture
    hostile: Callable[..., Hostile],  # noqa: F811 - the fixture
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    """A server that switches to another authorization server after a login (the gateway serving, no person):
    its registration is not kept, and the tokens of the first are never sent to the second."""
    evil = hostile()
    honest = json.loads(httpx.get(f"{split.issuer}/.well-known/oauth-authorization-server", timeout=10).text)
    config = load_config(write_config({"remote": {"url": f"{evil.base}/mcp", "auth": {"type": "oauth"}}}))
    server = config.servers["remote"]
    stored = TokenFile(tmp_path / "tokens.json")
    client = OAuthClientInformationFull(
        client_id="honest-client",
        redirect_uris=["http://127.0.0.1:5555/callback"],  # type: ignore[list-item]
        token_endpoint_auth_method="none",
        issuer=split.issuer,
    )
    await stored.set_client_info(client)
    await stored.set_tokens(OAuthToken(access_token="HONEST-ACCESS", refresh_token="HONEST-REFRESH", expires_in=3))
    await stored.place.save({"authorization_server": honest})  # as a login leaves them

    auth = await oauth_provider(server, stored)
    async with httpx.AsyncClient(auth=auth, timeout=20) as http:
        with pytest.raises(LoginNeeded):  # the server names another authorization server
            await http.post(f"{evil.base}/mcp", content=b"{}")
        assert (await stored.stored_client()) == client  # the registration made there is not kept
        time.sleep(3.2)  # the honest access token has expired
        with pytest.raises(LoginNeeded):
            await http.post(f"{evil.base}/mcp", content=b"{}")
    assert not evil.sent_anywhere("HONEST-REFRESH")
    assert [entry for entry in evil.requests() if entry["path"] == "/token"] == []
