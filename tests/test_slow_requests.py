"""A connection slow to send its request headers is closed at `header_timeout`, its body at `body_timeout`
(`_front/request_deadlines.py`): before, uvicorn kept it for ever, so anyone who could reach the port, with no
credential, could hold connections until the gateway had no file descriptors left (and with one, do the same
with bodies). Raw sockets against a real gateway over HTTP."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port, gateway_over_http, server_entry

PARTIAL = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"  # no blank line: unfinished
PROBE = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
KEY = "slow-requests-key-0123456789"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    tmp: Path = tmp_path_factory.mktemp("slow-headers")
    config = tmp / "mcp.json"
    manifold = {"data_dir": str(tmp / "data"), "log_level": "error", "header_timeout": 1, "body_timeout": 1}
    # Keys configured: what is held here is held before any credential could be checked.
    auth = {"api_keys": {"ada": {"sha256": hashlib.sha256(KEY.encode()).hexdigest()}}}
    servers = {"numbers": server_entry("numbers.py")}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": manifold, "auth": auth}))
    port = free_port()
    with gateway_over_http(config, port):
        yield port


def closed_by_the_gateway(sock: socket.socket) -> bool:
    """Whether the gateway ends the connection (within a guard far beyond `header_timeout`)."""
    sock.settimeout(30)
    try:
        return sock.recv(65536) == b""
    except TimeoutError:
        return False


def test_a_connection_that_never_finishes_its_headers_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(PARTIAL)
        assert closed_by_the_gateway(sock)


def whole_answer(sock: socket.socket) -> bytes:
    """An answer read to its end (its head and body may come in separate reads)."""
    sock.settimeout(30)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    sizes = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    while len(body) < int(sizes[0]):
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_kept_alive_connection_slow_with_its_next_request_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(PROBE)
        answer = whole_answer(sock)  # else the rest of it would be taken for the gateway's next words
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
        sock.sendall(PARTIAL)  # the next request on the same connection, unfinished
        assert closed_by_the_gateway(sock)


def test_a_request_sent_whole_is_served(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(PROBE)
        sock.settimeout(30)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_a_body_that_never_arrives_whole_is_closed(port: int) -> None:
    """With a credential (the body is read once the headers pass authentication)."""
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 100\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head.encode() + b'{"jsonrpc": "2.0",')  # a tenth of the body it announced
        assert closed_by_the_gateway(sock)
