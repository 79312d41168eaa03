"""Attacks on a shared HTTP gateway that held when a limited principal tried them: kept held, for good.

One gateway on loopback with API keys, an OAuth issuer, a profile and per-principal limits. Each test
makes one kind of attack as a raw HTTP client would (no SDK in the way: the point is what the gateway
does with requests no well-behaved client sends) and checks two things: the attack gets a clear refusal
or error, and the gateway goes on serving a well-behaved client afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp_manifold._config.security import hash_key
from tests.conftest import free_port, gateway_over_http, server_entry
from tests.test_security import Issuer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

KEY = "mallory-key-0123456789abcdef"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@dataclass
class Target:
    url: str
    port: int
    issuer: Issuer
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("attacks")
    issuer = Issuer()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with issuer.serve() as jwks_url:
        config = tmp / "mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {"kitchen": server_entry("kitchen.py"), "numbers": server_entry("numbers.py")},
                    "manifold": {
                        "data_dir": str(tmp / "data"),
                        "expose": ["direct", "proxy", "dispatch"],
                        "log_level": "error",
                        "principal_max_calls": 4,
                    },
                    "auth": {
                        "api_keys": {"mallory": {"sha256": hash_key(KEY)}},
                        "oauth": {"issuer": issuer.url, "jwks_url": jwks_url, "resource_url": url},
                    },
                    "profiles": {"limited": {"principals": ["mallory"], "servers": ["kitchen"]}},
                }
            )
        )
        with gateway_over_http(config, port) as process:
            yield Target(url, port, issuer, process)


async def session(http: httpx2.AsyncClient, url: str, key: str = KEY) -> dict[str, str]:
    """A session-era session of the key's principal: the headers its later requests carry."""
    headers = {**HEADERS, "Authorization": f"Bearer {key}"}
    opened = await http.post(url, json=INITIALIZE, headers=headers)
    assert opened.status_code == 200, opened.text
    headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def answer_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message in a response, whether sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(next(item for item in data if item))
    return response.json()


async def still_serves(target: Target) -> None:
    """A well-behaved call of the principal still works: the attack broke nothing."""
    async with httpx2.AsyncClient(timeout=60) as http:
        headers = await session(http, target.url)
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "kitchen_echo"}}
        call["params"]["arguments"] = {"text": "still here"}  # type: ignore[index]
        answer = answer_of(await http.post(target.url, json=call, headers=headers))
    assert answer["result"]["content"][0]["text"] == "still here", answer
    assert target.process.poll() is None


def raw_request(port: int, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client normalizes the path); the status code and the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


# --- tokens ---------------------------------------------------------------------------------------


def _part(value: dict[str, Any] | bytes) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned(claims: dict[str, Any]) -> str:
    return f"{_part({'alg': 'none', 'typ': 'JWT'})}.{_part(claims)}."


def hs256_with(secret: bytes, claims: dict[str, Any], kid: str) -> str:
    """Signed by hand: PyJWT itself refuses a PEM as an HMAC secret, an attacker's tool does not."""
    signing_input = f"{_part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{_part(claims)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_part(signature)}"


async def test_forged_tokens_get_nothing(target: Target) -> None:
    claims = {
        "iss": target.issuer.url,
        "aud": target.url,
        "sub": "mallory",
        "iat": int(time.time()),
        "exp": int(time.time()) + 600,
    }
    public_pem = (
        target.issuer.key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = {
        # the classic: no signature at all
        "alg none": unsigned(claims),
        # HS256 with the issuer's public key as the shared secret (key confusion)
        "hs256 with the public key": hs256_with(public_pem.encode(), claims, target.issuer.kid),
        # the attacker's own key, with a jku that points at the attacker's key set
        "jku": jwt.encode(
            claims,
            attacker,
            algorithm="RS256",
            headers={"kid": target.issuer.kid, "jku": "http://127.0.0.1:1/attacker-jwks.json"},
        ),
        # an embedded jwk of the attacker's
        "embedded jwk": jwt.encode(
            claims,
            attacker,
            algorithm="RS256",
            headers={"jwk": json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(attacker.public_key()))},
        ),
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        for case, token in forged.items():
            response = await http.post(
                target.url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {token}"}
            )
            assert response.status_code == 401, (case, response.text)
            assert "mcp-session-id" not in response.headers, case
            assert response.json()["error"] == "invalid_token", case
    await still_serves(target)


async def test_a_key_anywhere_but_the_bearer_header_gets_nothing(target: Target) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        elsewhere = [
            (f"{target.url}?access_token={KEY}", HEADERS),
            (f"{target.url}?api_key={KEY}", HEADERS),
            (target.url, {**HEADERS, "X-API-Key": KEY}),
            (target.url, {**HEADERS, "Authorization": KEY}),
            (target.url, {**HEADERS, "Authorization": f"Basic {base64.b64encode(f'mallory:{KEY}'.encode()).decode()}"}),
            (target.url, {**HEADERS, "Cookie": f"token={KEY}"}),
        ]
        for url, headers in elsewhere:
            response = await http.post(url, json=INITIALIZE, headers=headers)
            assert response.status_code == 401, (url, headers, response.text)
            assert "mcp-session-id" not in response.headers


async def test_a_huge_header_is_refused_without_harm(target: Target) -> None:
    huge = "x" * 200_000
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{target.port}\r\nX-Filler: {huge}\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    try:
        status, _ = await anyio.to_thread.run_sync(raw_request, target.port, request.encode())
    except ConnectionResetError:
        pass  # the HTTP parser closed the connection on the oversized header: refused too
    else:
        assert 400 <= status < 500
    await still_serves(target)


@pytest.mark.parametrize(
    "path",
    [
        "/metrics",
        "/metrics/",
        "//metrics",
        "/METRICS",
        "/ui/api/overview",
        "/ui/api/calls",
        "/ui/api/tools",
        "/ui/api/./overview",
        "/ui/api/../api/overview",
        "/ui/../metrics",
        "/ui/%2e%2e/metrics",
        "/ui/api%2foverview",
        "/ui/x/../api/calls",
        "/mcp/../metrics",
        "/mcp/instances/../../metrics",
    ],
)
async def test_path_tricks_reach_no_operator_data_without_a_credential(target: Target, path: str) -> None:
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{target.port}\r\nConnection: close\r\n\r\n"
    status, body = await anyio.to_thread.run_sync(raw_request, target.port, request.encode())
    assert status in (401, 404, 405, 307, 308), (path, status, body[:200])
    for data in (b"kitchen", b"manifold_", b"numbers"):
        assert data not in body, (path, body[:200])


# --- bodies ---------------------------------------------------------------------------------------


async def test_bodies_no_parser_should_take_get_an_error_each(target: Target) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        headers = await session(http, target.url)
        bodies = {
            "invalid UTF-8": b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"x": "\xff\xfe"}}',
            "100,000 deep": b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "kitchen_echo", '
            b'"arguments": {"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}}",
            "not JSON": b"{'jsonrpc': 2.0",
            "a batch": json.dumps(
                [
                    {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
                ]
            ).encode(),
        }
        for case, body in bodies.items():
            response = await http.post(target.url, content=body, headers=headers)
            assert response.status_code < 500, (case, response.status_code)
            if response.status_code == 200:  # a JSON-RPC error in the stream, then
                assert "error" in answer_of(response), (case, response.text[:300])
            else:
                assert 400 <= response.status_code < 500, case
    await still_serves(target)


async def test_twenty_megabytes_of_body_is_answered_and_nothing_else_breaks(target: Target) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        headers = await session(http, target.url)
        call = {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {"name": "kitchen_echo", "arguments": {"text": "y" * (20 * 1024 * 1024)}},
        }
        response = await http.post(target.url, json=call, headers=headers)
        if response.status_code == 200:
            answer = answer_of(response)
            assert "error" in answer or answer["result"]["content"], str(answer)[:300]
        else:
            assert response.status_code in (400, 413), response.status_code
    await still_serves(target)


async def test_a_megabyte_tool_name_is_an_unknown_tool_not_an_echo(target: Target) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        headers = await session(http, target.url)
        name = "n" * (1024 * 1024)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}
        response = await http.post(target.url, json=call, headers=headers)
        answer = answer_of(response)
        said = json.dumps(answer)
        assert "unknown tool" in said or "error" in answer, said[:300]
        # The answer names the tool, not a megabyte of it back at the caller.
        assert len(said) < 64 * 1024, len(said)
    await still_serves(target)


async def test_many_concurrent_calls_over_many_connections_keep_the_gateway_up(target: Target) -> None:
    """A bounded version of 2,000 requests over 300 connections: the in-flight limit refuses the excess
    with a clear reason, every request gets an answer, and the gateway serves on."""
    outcomes: list[str] = []

    async def connection(index: int) -> None:
        async with httpx2.AsyncClient(timeout=120) as http:
            headers = await session(http, target.url)

            async def one(n: int) -> None:
                call = {"jsonrpc": "2.0", "id": n, "method": "tools/call"}
                call["params"] = {"name": "kitchen_echo", "arguments": {"text": f"{index}-{n}"}}
                answer = answer_of(await http.post(target.url, json=call, headers=headers))
                result = answer.get("result") or {}
                text = json.dumps(answer)
                if result.get("content") and result["content"][0].get("text") == f"{index}-{n}":
                    outcomes.append("ok")
                elif "in flight" in text or "rate limit" in text:
                    outcomes.append("limited")
                else:
                    outcomes.append(f"other: {text[:200]}")

            async with anyio.create_task_group() as group:
                for n in range(5):
                    group.start_soon(one, n)

    async with anyio.create_task_group() as group:
        for index in range(40):
            group.start_soon(connection, index)
    assert len(outcomes) == 200
    assert not [outcome for outcome in outcomes if outcome.startswith("other")], outcomes
    assert "ok" in outcomes
    await still_serves(target)
