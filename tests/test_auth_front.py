"""The HTTP front's authentication when the issuer misbehaves: a JWKS that fails, cannot be reached, or
answers without end.

A forged token needs no key: anyone can send one whose header names a key id. Its check must not make
the gateway fetch the issuer's keys at every request (one after another, each waiting on the last), nor
read an answer of any length, and an issuer that cannot be reached is a refusal of the token (401), not
an error of the gateway.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mcp_manifold._config.security import hash_key
from tests.conftest import JsonEndpoint, free_port, gateway_over_http, serve_endpoint

pytestmark = pytest.mark.anyio

KEY = "front-key-0123456789abcdef"
ISSUER = "http://127.0.0.1/issuer"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


class DroppingJwks(BaseHTTPRequestHandler):
    """An issuer's JWKS endpoint that hangs up without an answer, and counts how often it is asked."""

    asked = 0

    def do_GET(self) -> None:
        DroppingJwks.asked += 1
        self.close_connection = True  # no status line: the gateway's HTTP client raises, as when unreachable

    def log_message(self, *args: object) -> None:
        pass


class HugeJwks(BaseHTTPRequestHandler):
    """An issuer's JWKS endpoint whose key set is real but padded to 2 MB (an issuer's is a few kB)."""

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def do_GET(self) -> None:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        document = json.dumps({"keys": [{**jwk, "kid": "k1"}], "pad": "x" * (2 << 20)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(document)))
        self.end_headers()
        with suppress(OSError):  # the gateway stopped reading: what this test wants
            self.wfile.write(document)

    def log_message(self, *args: object) -> None:
        pass


class AlgLessJwks(JsonEndpoint):
    """An issuer's JWKS whose RSA key names no `alg` (RFC 7517 makes it optional; Entra ID's keys have none)."""

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def do_GET(self) -> None:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.pop("alg", None)
        self.reply(200, {"keys": [{**jwk, "kid": "k1"}]})


@contextmanager
def gateway(tmp_path: Path, jwks_url: str, **oauth: Any) -> Iterator[str]:
    """A gateway with an API key and OAuth tokens checked against `jwks_url` (and `oauth`'s other settings);
    yields its /mcp URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {},
                "manifold": {"data_dir": str(tmp_path / "data"), "log_level": "critical"},
                "auth": {
                    "api_keys": {"alice": {"sha256": hash_key(KEY)}},
                    "oauth": {"issuer": ISSUER, "jwks_url": jwks_url, "resource_url": url, **oauth},
                },
            }
        )
    )
    with gateway_over_http(config, port):
        yield url


def forged(url: str) -> str:
    """A token signed with a key of nobody's, naming a key id: what anyone can send."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": url, "sub": "mallory", "exp": now + 600}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "made-up"})


async def post(http: httpx2.AsyncClient, url: str, token: str) -> httpx2.Response:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }
    return await http.post(url, json=INITIALIZE, headers=headers)


async def test_a_jwks_that_cannot_be_read_refuses_tokens_and_is_asked_once(tmp_path: Path) -> None:
    with serve_endpoint(DroppingJwks) as base, gateway(tmp_path, base + "/jwks.json") as url:
        token = forged(url)
        async with httpx2.AsyncClient(timeout=30) as http:
            for _ in range(5):
                refused = await post(http, url, token)  # was a 500 "Internal Server Error"
                assert refused.status_code == 401
                described = refused.json()["error_description"]
                assert described == f"the issuer's keys could not be loaded from {base}/jwks.json"
            assert DroppingJwks.asked == 1  # was 5: each forged token fetched the keys again, one after another
            assert (await post(http, url, KEY)).status_code == 200  # API keys go on working


async def test_a_jwks_answer_is_read_up_to_a_megabyte_not_whole(tmp_path: Path) -> None:
    with serve_endpoint(HugeJwks) as base, gateway(tmp_path, base + "/jwks.json") as url:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": url, "sub": "carol", "exp": now + 600}
        token = jwt.encode(claims, HugeJwks.key, algorithm="RS256", headers={"kid": "k1"})
        async with httpx2.AsyncClient(timeout=30) as http:
            refused = await post(http, url, token)  # was 200: the whole answer was read, however long
            assert refused.status_code == 401
            assert "the issuer's keys could not be loaded" in refused.json()["error_description"]


async def test_an_rsa_key_that_names_no_algorithm_verifies_the_rsa_algorithms_configured(tmp_path: Path) -> None:
    """PyJWT reads an RSA key without `alg` as an RS256 key: with PS256 or RS512 configured, every token of such
    an issuer was refused, saying "the token's algorithm is not one of PS256, ..." (it was). A token of another
    key type that names the key is still refused."""
    algorithms = ["PS256", "RS512", "ES256"]
    with serve_endpoint(AlgLessJwks) as base, gateway(tmp_path, base + "/jwks.json", algorithms=algorithms) as url:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": url, "sub": "carol", "exp": now + 600}
        async with httpx2.AsyncClient(timeout=30) as http:
            for algorithm in ("PS256", "RS512"):
                token = jwt.encode(claims, AlgLessJwks.key, algorithm=algorithm, headers={"kid": "k1"})
                assert (await post(http, url, token)).status_code == 200, algorithm  # was 401
            other = ec.generate_private_key(ec.SECP256R1())
            refused = await post(http, url, jwt.encode(claims, other, algorithm="ES256", headers={"kid": "k1"}))
            assert refused.status_code == 401
            assert refused.json()["error_description"] == "the token's signing key ('k1') is not a key for ES256"
