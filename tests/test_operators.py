"""Operators are a role, and token subjects live in their own name space (issue 21, findings 1 and 8).

One real HTTP gateway (a subprocess, with API keys, OAuth JWTs from a local issuer whose keys are made
here, profiles, `pinning: enforce` and a rate limit) is asked with plain HTTP for its operator routes,
and with the SDK's client in both eras for what a token whose subject collides with an API key's
principal may do.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp_manifold._config.model import ApiKey, AuthConfig, OAuthConfig
from mcp_manifold._config.security import hash_key
from mcp_manifold._front.operators import is_operator
from tests.conftest import free_port, gateway_over_http, server_entry
from tests.test_security import Issuer, connect, names, poll, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

KEYS = {name: f"{name}-key-0123456789abcdef" for name in ("alice", "bob", "dana", "ops")}
OPERATOR_ROUTES = ("/metrics", "/ui/api/overview", "/ui/api/calls")
KITCHEN = {"kitchen_echo", "kitchen_add"}
NUMBERS = {"numbers_add", "numbers_multiply", "numbers_sqrt"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@dataclass
class Gateway:
    base: str
    config: Path
    issuer: Issuer

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def token(self, **claims: Any) -> str:
        return self.issuer.token(self.url, **claims)

    async def get(self, path: str, credential: str | None) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {credential}"} if credential else {}
        async with httpx2.AsyncClient(base_url=self.base, timeout=30) as http:
            return await http.get(path, headers=headers)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("operators")
    issuer = Issuer()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with issuer.serve() as jwks_url:
        config = tmp / "mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {"kitchen": server_entry("kitchen.py"), "numbers": server_entry("numbers.py")},
                    "manifold": {
                        "data_dir": str(tmp / "data"),
                        "expose": ["direct", "retrieve"],
                        "pinning": "enforce",
                        "pin_new_tools": "quarantine",
                        "rate_limit": 0.001,  # a bucket that does not refill while the test runs
                        "rate_burst": 4,
                        "log_level": "error",
                    },
                    "auth": {
                        "api_keys": {name: {"sha256": hash_key(key)} for name, key in KEYS.items()},
                        "oauth": {"issuer": issuer.url, "jwks_url": jwks_url, "resource_url": f"{base}/mcp"},
                        "operators": ["ops", "oauth:root@example.com"],
                    },
                    "profiles": {
                        "dev": {"principals": ["alice", "dana"], "servers": ["kitchen"]},
                        "maths": {"principals": ["bob", "oauth:bob@example.com"], "servers": ["numbers"]},
                        "readers": {"principals": ["claim:groups=readers"], "tools": ["numbers_add"]},
                    },
                }
            )
        )
        with gateway_over_http(config, port):
            yield Gateway(base, config, issuer)


def tool_names(response: httpx2.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {row["name"] for row in response.json()["tools"]}


def search_names(response: httpx2.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {row["name"] for row in response.json()["matches"]}


# --- finding 1: operators are a role ------------------------------------------------------------------


async def test_operators_by_principal_and_by_scope_get_everything(gateway: Gateway) -> None:
    # First in the module on purpose: no client has used the gateway yet, so its (lazy) servers are not
    # started; the dashboard's tools must list them all the same.
    operators = {
        "an operator's API key": KEYS["ops"],
        "a token auth.operators names": gateway.token(sub="root@example.com"),
        "a token with the operator scope": gateway.token(sub="nobody-special", scope="openid manifold:operator"),
    }
    for case, credential in operators.items():
        for route in OPERATOR_ROUTES:
            answer = await gateway.get(route, credential)
            assert answer.status_code == 200, (case, route, answer.text)
        overview = (await gateway.get("/ui/api/overview", credential)).json()
        assert {server["name"] for server in overview["servers"]} == {"kitchen", "numbers"}, case
        assert tool_names(await gateway.get("/ui/api/tools", credential)) >= KITCHEN | NUMBERS, case
        assert "manifold_tool_calls_total" in (await gateway.get("/metrics", credential)).text, case
    # An operator who holds no profile reads the operator routes, but /mcp is still for profiles only.
    refused = await gateway.get("/mcp", KEYS["ops"])
    assert refused.status_code == 403 and "principal 'ops' holds no profile" in refused.text
    # A token without the scope (nor named in auth.operators) is not an operator's, whatever else it holds.
    plain = gateway.token(sub="nobody-special", scope="openid", groups=["readers"])
    assert (await gateway.get("/metrics", plain)).status_code == 403


async def test_a_non_operator_gets_403_and_no_data_on_every_operator_route(gateway: Gateway) -> None:
    async with connect(gateway.url, KEYS["alice"]) as alice:  # calls to show up, were the routes open
        assert text_of(await alice.call_tool("kitchen_echo", {"text": "hello"})) == "hello"
    for who, credential in (
        ("'alice'", KEYS["alice"]),
        ("'oauth:carol'", gateway.token(sub="carol", groups=["readers"])),
        ("'oauth:bob@example.com'", gateway.token(sub="bob@example.com")),
    ):
        for route in OPERATOR_ROUTES:
            refused = await gateway.get(route, credential)
            assert refused.status_code == 403, (route, who, refused.text)
            assert refused.json() == {
                "error": "forbidden",
                "error_description": f"principal {who} is not an operator: this route is for the principals "
                "auth.operators names and tokens with the operator scope",
            }
            assert "kitchen" not in refused.text and "numbers" not in refused.text


async def test_a_non_operator_sees_only_its_own_tools_on_the_dashboard(gateway: Gateway) -> None:
    # A tool the server adds is new, so quarantined: nobody's own view shows it.
    async with connect(gateway.url, KEYS["alice"]) as alice:
        await alice.call_tool("kitchen_add_tool", {"name": "fresh"})
    await poll(lambda: _shows(gateway, "kitchen_fresh"))
    ops = await gateway.get("/ui/api/tools", KEYS["ops"])
    everything = tool_names(ops)
    assert KITCHEN | NUMBERS | {"kitchen_fresh"} <= everything
    assert next(row for row in ops.json()["tools"] if row["name"] == "kitchen_fresh")["quarantined"] is True

    alice_tools = tool_names(await gateway.get("/ui/api/tools", KEYS["alice"]))
    assert alice_tools >= KITCHEN and not alice_tools & NUMBERS and "kitchen_fresh" not in alice_tools
    assert tool_names(await gateway.get("/ui/api/tools", KEYS["bob"])) == NUMBERS
    reader = gateway.token(sub="carol", groups=["readers"])
    assert tool_names(await gateway.get("/ui/api/tools", reader)) == {"numbers_add"}
    async with connect(gateway.url, KEYS["alice"]) as alice:  # the same view as its tools/list
        assert alice_tools == await names(alice) - {"retrieve_tools", "call_tool"}  # less retrieve's own

    query = "/ui/api/search?q=add+two+numbers&limit=50"
    assert {"numbers_add", "kitchen_add"} <= search_names(await gateway.get(query, KEYS["ops"]))
    alice_found = search_names(await gateway.get(query, KEYS["alice"]))
    assert "kitchen_add" in alice_found and not {name for name in alice_found if not name.startswith("kitchen_")}
    assert "kitchen_fresh" not in search_names(await gateway.get("/ui/api/search?q=fresh&limit=50", KEYS["alice"]))
    assert search_names(await gateway.get(query, reader)) == {"numbers_add"}


async def _shows(gateway: Gateway, name: str) -> bool:
    return name in tool_names(await gateway.get("/ui/api/tools", KEYS["ops"]))


def test_the_operator_scope_is_the_configured_one_and_only_a_tokens() -> None:
    oauth = OAuthConfig(issuer="https://issuer", audience=("gw",), jwks_file="k.json", operator_scope="gw:admin")
    auth = AuthConfig(api_keys=(ApiKey("ops", "0" * 64),), oauth=oauth, operators=("ops", "claim:groups=sre"))
    assert is_operator(auth, "oauth:x", {"sub": "x"}, ["gw:admin"])
    assert not is_operator(auth, "oauth:x", {"sub": "x"}, ["manifold:operator"])  # not the configured scope
    assert not is_operator(auth, "alice", None, ["gw:admin"])  # an API key carries no scope
    assert is_operator(auth, "ops", None, []) and not is_operator(auth, "oauth:ops", {"sub": "ops"}, [])
    assert is_operator(auth, "oauth:y", {"groups": ["sre"]}, []) and not is_operator(auth, "sre", None, [])


# --- finding 8: token subjects and API-key principals are separate name spaces --------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_token_whose_subject_is_a_key_principal_gets_neither_its_profile_nor_its_bucket(
    gateway: Gateway, mode: str
) -> None:
    # No profile names `oauth:alice`: the token is refused where alice's key gets the dev profile.
    impostor = gateway.token(sub="alice")
    headers = {"Authorization": f"Bearer {impostor}", "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=30) as http:
        refused = await http.post(gateway.url, json=INITIALIZE, headers=headers)
    assert refused.status_code == 403 and "principal 'oauth:alice' holds no profile" in refused.text
    assert (await gateway.get("/ui/api/tools", impostor)).status_code == 403

    # With a profile of its own (by a claim), a token with sub "dana" has that profile and its own bucket.
    dana_key, dana_token = KEYS["dana"], gateway.token(sub="dana", groups=["readers"])
    async with (
        connect(gateway.url, dana_key, mode=mode) as key_client,
        connect(gateway.url, dana_token, mode=mode) as token_client,
    ):
        assert await names(key_client) >= KITCHEN
        assert await names(token_client) & (KITCHEN | NUMBERS) == {"numbers_add"}
        over = None
        for _ in range(10):  # the key's bucket holds 3 calls and does not refill during the test
            result = await key_client.call_tool("kitchen_echo", {"text": "x"})
            if result.is_error:
                over = text_of(result)
                break
        assert over is not None and "principal 'dana' is over its rate limit" in over, over
        answer = await token_client.call_tool("numbers_add", {"a": 2, "b": 3})
        assert not answer.is_error and "5" in text_of(answer), text_of(answer)


async def test_audit_lines_name_the_namespaced_principal(gateway: Gateway) -> None:
    # Its own calls, so that it holds when run alone (the key's call may meet its spent rate limit: a
    # refusal is audited with the same principal, profile and name).
    async with (
        connect(gateway.url, KEYS["dana"], mode="legacy") as key_client,
        connect(gateway.url, gateway.token(sub="dana", groups=["readers"]), mode="legacy") as token_client,
    ):
        await key_client.call_tool("kitchen_echo", {"text": "x"})
        await token_client.call_tool("numbers_add", {"a": 2, "b": 3})
    command = [sys.executable, "-m", "mcp_manifold", "audit", "--json", "-n", "10000", "--config", str(gateway.config)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    seen = {(line["principal"], line["profile"], line["name"]) for line in lines}
    assert ("oauth:dana", "readers", "numbers_add") in seen, seen
    assert ("dana", "dev", "kitchen_echo") in seen
    assert not {line["principal"] for line in lines if line["name"] == "numbers_add"} & {"dana", "alice"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_made_up_name_of_a_megabyte_is_recorded_cut_short(gateway: Gateway, mode: str) -> None:
    # A refused call is recorded with the name the caller sent: kept whole, one such call made an audit
    # line of a megabyte (a few rotated the audit history away) and the dashboard held 200 of them.
    marker = f"made-up-{mode}-"
    name = marker + "x" * 1_000_000
    async with connect(gateway.url, KEYS["bob"], mode=mode) as bob:
        answer = await bob.call_tool(name, {})
    assert answer.is_error and f"({len(name)} characters)" in text_of(answer)
    audit = gateway.config.parent / "data" / "audit" / "audit.jsonl"
    lines = [json.loads(line) for line in audit.read_text().splitlines() if marker in line]
    assert len(lines) == 1 and lines[0]["outcome"] == "denied" and lines[0]["principal"] == "bob"
    assert lines[0]["name"].startswith(name[:4096]) and len(lines[0]["name"]) < 4200
    calls = (await gateway.get("/ui/api/calls", KEYS["ops"])).json()["calls"]
    shown = [call for call in calls if call["name"].startswith(marker)]
    assert len(shown) == 1 and len(shown[0]["name"]) < 4200 and len(json.dumps(shown[0])) < 5000


async def test_audit_follow_shows_lines_whose_name_holds_a_line_separator(gateway: Gateway) -> None:
    # JSON leaves U+2028, U+2029 and U+0085 raw in a string; --follow split what it read at them too, so a
    # caller could keep its refused calls (and a server its errors) out of an operator's --follow.
    command = [sys.executable, "-m", "mcp_manifold", "audit", "--follow", "-n", "0", "--json", "--principal", "bob"]
    follow = subprocess.Popen(
        [*command, "--config", str(gateway.config)],
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    printed: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [printed.put(line) for line in follow.stdout or ()], daemon=True).start()

    async def shown_until(marker: str) -> list[str]:
        lines = []
        while marker not in (line := await anyio.to_thread.run_sync(lambda: printed.get(timeout=30))):
            lines.append(line)
        return lines

    try:
        async with connect(gateway.url, KEYS["bob"]) as bob:
            # It shows the lines written after it started: call until one of them is shown.
            for attempt in range(100):
                await bob.call_tool(f"follow-ready-{attempt}", {})
                with contextlib.suppress(queue.Empty):
                    if "follow-ready" in await anyio.to_thread.run_sync(lambda: printed.get(timeout=0.75)):
                        break
            separators = ("\u2028", "\u2029", "\x85")
            for separator in separators:
                await bob.call_tool(f"split{separator}name", {})
            await bob.call_tool("follow-last", {})
            lines = await shown_until("follow-last")
    finally:
        follow.terminate()
        follow.wait(timeout=30)
    names = [json.loads(line)["name"] for line in lines if "split" in line]
    assert names == [f"split{separator}name" for separator in separators], lines


# --- what held in the attack, kept: path tricks reach no operator data ---------------------------------

TRICKS = (
    "/metrics/",
    "//metrics",
    "/metrics/..",
    "/ui/../metrics",
    "/ui/%2e%2e/metrics",
    "/ui//api/overview",
    "/ui/api//overview",
    "/ui/api/overview/",
    "/ui/./api/overview",
    "/ui/x/../api/calls",
    "/ui/api/%6fverview",
    "/UI/api/overview",
    "/ui/api/calls;x",
    "/ui/api/overview%00",
)


async def raw_get(base: str, path: str, credential: str | None) -> tuple[int, str]:
    """GET `path` exactly as written (an HTTP client would normalise it): status and body."""
    import anyio

    host, port = base.removeprefix("http://").split(":")
    auth = f"Authorization: Bearer {credential}\r\n" if credential else ""
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}Connection: close\r\n\r\n"
    async with await anyio.connect_tcp(host, int(port)) as stream:
        await stream.send(request.encode())
        answer = b""
        try:
            while chunk := await stream.receive():
                answer += chunk
        except anyio.EndOfStream:
            pass
    head, _, body = answer.decode(errors="replace").partition("\r\n\r\n")
    return int(head.split()[1]), body


async def test_path_tricks_reach_no_operator_data(gateway: Gateway) -> None:
    markers = ("manifold_tool_calls", "stderr_tail", '"calls"', "kitchen_echo", '"servers"')
    for credential in (None, KEYS["alice"], gateway.token(sub="carol", groups=["readers"])):
        for path in TRICKS:
            status, body = await raw_get(gateway.base, path, credential)
            assert status != 200 or not any(marker in body for marker in markers), (path, credential, body[:200])
    status, body = await raw_get(gateway.base, "/ui/api/overview", KEYS["ops"])  # the check can see data
    assert status == 200 and '"servers"' in body


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_required_scopes_are_asked_of_tokens_and_keys_still_work(tmp_path: Path, mode: str) -> None:
    """`required_scopes` were asked of every credential: a key carries none, so with them set every API key
    (a scrape key for /metrics, a CI key for /mcp) was refused everywhere with 403 insufficient_scope."""
    issuer, port = Issuer(), free_port()
    base = f"http://127.0.0.1:{port}"
    with issuer.serve() as jwks_url:
        config = tmp_path / "mcp.json"
        oauth = {"issuer": issuer.url, "jwks_url": jwks_url, "resource_url": f"{base}/mcp", "required_scopes": ["mcp"]}
        auth = {"api_keys": {name: {"sha256": hash_key(KEYS[name])} for name in ("bob", "ops")}, "oauth": oauth}
        settings = {"data_dir": str(tmp_path / "data"), "log_level": "error"}
        servers = {"numbers": server_entry("numbers.py")}
        config.write_text(
            json.dumps({"mcpServers": servers, "manifold": settings, "auth": {**auth, "operators": ["ops"]}})
        )
        with gateway_over_http(config, port):
            served = Gateway(base, config, issuer)
            assert (await served.get("/metrics", KEYS["ops"])).status_code == 200
            async with connect(served.url, KEYS["bob"], mode) as client:
                assert text_of(await client.call_tool("numbers_add", {"a": 1, "b": 2})) == "3.0"
            async with connect(served.url, served.token(sub="carol", scope="mcp"), mode) as client:
                assert await names(client) == NUMBERS
            unscoped = await served.get("/ui/api/tools", served.token(sub="carol"))
            assert unscoped.status_code == 403, unscoped.text
            assert unscoped.json()["error"] == "insufficient_scope"
