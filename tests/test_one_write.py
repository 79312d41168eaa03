"""The HTTP front's protocol sends a response's head with its first body bytes (`_front/one_write.py`).

What reaches the transport is checked on a real event loop with a transport that records its writes;
what reaches a client, through uvicorn on a real socket.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn

from mcp_manifold._front.one_write import OneWriteHttpToolsProtocol, _HeldHeadTransport
from tests.conftest import free_port

pytestmark = pytest.mark.anyio

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class _Recording(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.vectored = 0  # writes given as parts (one system call for all of them)
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.writes.append(b"".join(list_of_data))
        self.vectored += 1

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


async def _pass() -> None:
    await asyncio.sleep(0)  # lets the callbacks scheduled so far run
    await asyncio.sleep(0)


async def test_a_head_and_the_body_written_after_it_go_out_as_one_write() -> None:
    recording = _Recording()
    held = _HeldHeadTransport(recording, asyncio.get_running_loop())
    held.write(HEAD)
    assert recording.writes == []
    held.write(b"{}")
    assert recording.writes == [HEAD + b"{}"] and recording.vectored == 0
    await _pass()
    assert recording.writes == [HEAD + b"{}"]  # the pass's end sends nothing twice


async def test_a_head_with_no_body_in_its_pass_goes_out_at_the_end_of_the_pass() -> None:
    recording = _Recording()
    held = _HeldHeadTransport(recording, asyncio.get_running_loop())
    held.write(HEAD)
    await _pass()
    assert recording.writes == [HEAD]
    held.write(b"data: 1\n\n")
    assert recording.writes == [HEAD, b"data: 1\n\n"]


async def test_writes_that_are_no_head_are_not_held_and_keep_their_order() -> None:
    recording = _Recording()
    held = _HeldHeadTransport(recording, asyncio.get_running_loop())
    for part in (b"a", HEAD, b"b", b"c"):
        held.write(part)
    assert recording.writes == [b"a", HEAD + b"b", b"c"]


async def test_a_large_body_goes_out_with_its_head_without_being_copied_into_one_buffer() -> None:
    recording = _Recording()
    held = _HeldHeadTransport(recording, asyncio.get_running_loop())
    body = b"x" * (1 << 20)
    held.write(HEAD)
    held.write(body)
    assert recording.writes == [HEAD + body] and recording.vectored == 1


async def test_closing_sends_a_held_head_first_and_a_closed_transport_gets_nothing() -> None:
    recording = _Recording()
    held = _HeldHeadTransport(recording, asyncio.get_running_loop())
    held.write(HEAD)
    held.close()
    assert recording.writes == [HEAD] and recording.closed

    lost = _Recording()
    held = _HeldHeadTransport(lost, asyncio.get_running_loop())
    held.write(HEAD)
    lost.closed = True  # the client went away within the pass
    await _pass()
    assert lost.writes == []


async def test_what_it_does_not_hold_is_the_transports_own() -> None:
    recording = _Recording()
    held = _HeldHeadTransport(recording, asyncio.get_running_loop())
    assert held.get_extra_info("peername") == ("127.0.0.1", 1)
    assert held.is_closing() is False


# --- through uvicorn, on a real socket ------------------------------------------------------------------


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await receive()
    if scope["path"] == "/later":  # a stream: its head now, its body a while after
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await asyncio.sleep(1.0)
        await send({"type": "http.response.body", "body": b"later"})
        return
    body = b'{"ok":true}'
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextmanager
def _serving() -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(_app, host="127.0.0.1", port=port, http=OneWriteHttpToolsProtocol, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def _read_until(sock: socket.socket, marker: bytes, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("connection", ["keep-alive", "close"])
def test_answers_reach_the_client_whole_and_in_order(connection: str) -> None:
    with _serving() as port, socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(3 if connection == "keep-alive" else 1):
            sock.sendall(f"GET / HTTP/1.1\r\nhost: x\r\nconnection: {connection}\r\n\r\n".encode())
            data = _read_until(sock, b'{"ok":true}', 5)
            assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b'\r\n\r\n{"ok":true}'), data


def test_a_streams_head_reaches_the_client_before_its_body_is_written() -> None:
    with _serving() as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /later HTTP/1.1\r\nhost: x\r\n\r\n")
        head = _read_until(sock, b"\r\n\r\n", 0.8)  # the body comes a second after the head
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"later" not in head
        assert b"later" in _read_until(sock, b"later", 5)
