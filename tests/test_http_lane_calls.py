"""Long calls and clients that give up, on the HTTP fast lane and on the SDK's path, compared.

The app `build_app` assembles is called in this process with raw ASGI messages, so a test sees every
message the app sends, and a client can hang up at a moment of its choosing. The window after which a
silent 2026-07-28 call switches to an event stream is 15 s in the SDK; here both the SDK's and the
lane's are shortened to a fraction of a second. The server behind is kitchen.py, one call at a time
(`max_concurrency: 1`), so a call the gateway failed to stop holds up the next one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp.server import _streamable_http_modern
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from mcp_manifold._config import load_config
from mcp_manifold._front import lane_reply
from mcp_manifold._front.http import build_app
from mcp_manifold._runtime.audit import audit_dir, read_entries
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
SESSION = "2025-11-25"
WINDOW = 0.6  # seconds a call may be silent before its answer streams (the SDK's 15, shortened)
ENVELOPE = {
    PROTOCOL_VERSION_META_KEY: MODERN,
    CLIENT_CAPABILITIES_META_KEY: {},
    CLIENT_INFO_META_KEY: {"name": "raw", "version": "1"},
}
BOTH_PATHS = pytest.mark.parametrize("lane", [True, False], ids=["lane", "sdk"])


@pytest.fixture(autouse=True)
def short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_streamable_http_modern, "_SSE_PING_INTERVAL", WINDOW)
    monkeypatch.setattr(lane_reply, "PING_WINDOW", WINDOW)
    monkeypatch.setattr(lane_reply, "MIND_AFTER", 0.1)


class Exchange:
    """One POST to the app: what it sent back (each ASGI message), and a way for its client to hang up."""

    def __init__(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        self.raw = json.dumps(body).encode()
        self.headers = [(b"host", b"127.0.0.1:8765"), (b"content-length", str(len(self.raw)).encode())]
        self.headers += [(name.encode(), value.encode()) for name, value in headers.items()]
        self.sent: list[dict[str, Any]] = []
        self.over = anyio.Event()  # the response ended, or the client hung up
        self.method = "POST"
        self._read = False

    def hang_up(self) -> None:
        self.over.set()

    async def run(self, app: Any) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "server": ("127.0.0.1", 8765),
            "client": ("127.0.0.1", 50000),
            "scheme": "http",
            "method": self.method,
            "root_path": "",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "headers": self.headers,
            "state": {},
        }
        await app(scope, self._receive, self._send)

    async def _receive(self) -> dict[str, Any]:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": self.raw, "more_body": False}
        await self.over.wait()  # as uvicorn: nothing more until the client goes or the response ends
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.over.set()

    @property
    def head(self) -> dict[str, Any]:
        return next(message for message in self.sent if message["type"] == "http.response.start")

    @property
    def chunks(self) -> list[bytes]:
        return [message["body"] for message in self.sent if message["type"] == "http.response.body"]


@asynccontextmanager
async def app_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool) -> AsyncIterator[Any]:
    """The HTTP front's app over a gateway in front of kitchen.py, with the lane on or off, its lifespan run."""
    monkeypatch.setenv("MANIFOLD_HTTP_LANE", "1" if lane else "0")
    folder = tmp_path / ("lane" if lane else "sdk")
    folder.mkdir()
    path = folder / "mcp.json"
    servers = {"kitchen": server_entry("kitchen.py", max_concurrency=1)}
    manifold = {"data_dir": str(folder / "data"), "ping_interval": 0, "lazy": False}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}))
    async with (
        Gateway(load_config(path), serving=True) as gateway,
        AsyncExitStack() as stack,
        anyio.create_task_group() as task_group,
    ):
        app = build_app(gateway, "127.0.0.1", stack)
        stop = await lifespan(app, task_group)
        try:
            yield app
        finally:
            await stop()
            task_group.cancel_scope.cancel()


async def lifespan(app: Any, task_group: anyio.abc.TaskGroup) -> Any:
    to_app, app_reads = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_says, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)
    task_group.start_soon(
        app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, app_reads.receive, app_says.send
    )
    await to_app.send({"type": "lifespan.startup"})
    assert (await from_app.receive())["type"] == "lifespan.startup.complete"

    async def stop() -> None:
        await to_app.send({"type": "lifespan.shutdown"})
        await from_app.receive()

    return stop


def modern_call(request_id: Any, name: str, arguments: dict[str, Any], kind: type[Exchange] = Exchange) -> Exchange:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": ENVELOPE},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    return kind(body, headers)


def answer_of(exchange: Exchange) -> dict[str, Any]:
    """The JSON-RPC message a finished exchange answered with (a JSON body, or an event stream's last event)."""
    body = b"".join(exchange.chunks)
    if body.startswith(b"{"):
        return json.loads(body)
    data = [line for line in body.split(b"\r\n") if line.startswith(b"data: ")]
    return json.loads(data[-1][6:])


async def answered(app: Any, exchange: Exchange, within: float = 30) -> dict[str, Any]:
    with anyio.fail_after(within):
        await exchange.run(app)
    return answer_of(exchange)


async def silent_call_streams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool) -> Exchange:
    async with app_of(tmp_path, monkeypatch, lane) as app:
        warm = await answered(app, modern_call(1, "kitchen_echo", {"text": "warm"}))  # the server is up
        assert warm["result"]["content"] == [{"type": "text", "text": "warm"}]
        slow = modern_call(2, "kitchen_slow", {"seconds": 2.5 * WINDOW})
        assert (await answered(app, slow))["result"]["content"] == [{"type": "text", "text": "slept"}]
        return slow


async def test_a_silent_2026_call_streams_with_pings_as_on_the_sdk_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that outlasts the window: an event stream, a ping each window, the answer its last event; so
    a proxy's idle-read timeout never cuts it. The lane's response is the SDK path's, message for message."""
    on_lane = await silent_call_streams(tmp_path, monkeypatch, lane=True)
    on_sdk = await silent_call_streams(tmp_path, monkeypatch, lane=False)
    for exchange in (on_lane, on_sdk):
        head, chunks = exchange.head, exchange.chunks
        assert head["status"] == 200 and (b"content-type", b"text/event-stream") in head["headers"]
        assert chunks[0] == b": ping\r\n\r\n" and all(chunk == chunks[0] for chunk in chunks[:-1])
        assert chunks[-1].startswith(b"event: message\r\ndata: ")
    assert on_lane.head == on_sdk.head
    assert on_lane.chunks[-1] == on_sdk.chunks[-1]


@BOTH_PATHS
async def test_a_2026_client_that_hangs_up_cancels_its_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool
) -> None:
    """At 2026-07-28 closing the connection is how a client cancels: the call stops, its server's one slot
    is free for the next call at once, and no answer is sent to the client that left."""
    async with app_of(tmp_path, monkeypatch, lane) as app:
        await answered(app, modern_call(1, "kitchen_echo", {"text": "warm"}))
        slow = modern_call(2, "kitchen_slow", {"seconds": 120})
        queued = modern_call(3, "kitchen_echo", {"text": "queued"})  # behind it, for the server's one slot
        with anyio.fail_after(30):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(slow.run, app)
                await anyio.sleep(0.3)
                task_group.start_soon(queued.run, app)
                await anyio.sleep(0.5)
                queued.hang_up()
                await anyio.sleep(0.3)
                slow.hang_up()
        # No answer went to either (the first may have had pings: it ran past the shortened window).
        assert not any(b"data:" in chunk for chunk in slow.chunks + queued.chunks), slow.sent + queued.sent
        after = await answered(app, modern_call(4, "kitchen_echo", {"text": "next"}))  # not 120 s later
        assert after["result"]["content"] == [{"type": "text", "text": "next"}]
    # The call its server was sent is audited as cancelled; the one that never left the queue is not.
    assert audited(tmp_path, lane) == [("kitchen_echo", "ok"), ("kitchen_slow", "cancelled"), ("kitchen_echo", "ok")]


class _BrokenReceive(Exchange):
    """A request whose `receive` fails once its body is read (a server's fault, not a client's)."""

    async def _receive(self) -> dict[str, Any]:
        if not self._read:
            return await super()._receive()
        raise RuntimeError("receive broke")


class _CancelledReceive(Exchange):
    """... or meets a cancellation nothing asked for (from outside anyio, as a bug of ours would raise)."""

    async def _receive(self) -> dict[str, Any]:
        if not self._read:
            return await super()._receive()
        raise asyncio.CancelledError


@pytest.mark.parametrize("exchange", [_BrokenReceive, _CancelledReceive])
async def test_a_failure_while_the_lane_minds_a_call_ends_the_minding_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: type[Exchange]
) -> None:
    """The lane watches a long call's connection from the gateway's own task group: an error there ends
    that watch, never the gateway; the call is answered and the next one too."""
    async with app_of(tmp_path, monkeypatch, lane=True) as app:
        await answered(app, modern_call(1, "kitchen_echo", {"text": "warm"}))
        broken = modern_call(2, "kitchen_slow", {"seconds": 3 * lane_reply.MIND_AFTER}, exchange)
        assert (await answered(app, broken))["result"]["content"] == [{"type": "text", "text": "slept"}]
        after = await answered(app, modern_call(3, "kitchen_echo", {"text": "next"}))
        assert after["result"]["content"] == [{"type": "text", "text": "next"}]


def audited(tmp_path: Path, lane: bool) -> list[tuple[str, str]]:
    """The (tool, outcome) of each call in the audit log of the gateway `app_of` made."""
    entries = read_entries(audit_dir(tmp_path / ("lane" if lane else "sdk") / "data"))
    return [(entry["name"], entry["outcome"]) for entry in entries if entry["kind"] == "tool"]


async def session_of(app: Any) -> dict[str, str]:
    """A session-era client's headers, once its session is open and known to the gateway."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    opening = {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    first = Exchange({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": opening}, headers)
    await first.run(app)
    session_id = dict(first.head["headers"])[b"mcp-session-id"].decode()
    headers = {**headers, "mcp-session-id": session_id, "mcp-protocol-version": SESSION}
    await Exchange({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers).run(app)
    await Exchange({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}, headers).run(app)
    return headers


def session_call(request_id: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def slow_call(request_id: Any, seconds: float) -> dict[str, Any]:
    return session_call(request_id, "kitchen_slow", {"seconds": seconds})


def echo_call(request_id: Any, text: str) -> dict[str, Any]:
    return session_call(request_id, "kitchen_echo", {"text": text})


async def while_running(app: Any, call: Exchange, then: Exchange) -> None:
    """`call` sent, and half a second later (it runs on) `then`; both to their end."""
    with anyio.fail_after(30):
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(call.run, app)
            await anyio.sleep(0.5)
            await then.run(app)


CANCEL_7 = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "no"}}


@BOTH_PATHS
async def test_a_session_clients_cancel_stops_its_call_and_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool
) -> None:
    """A session-era client cancels with `notifications/cancelled`: the call stops and its request gets
    `Request cancelled` (the SDK path's answer, though the call never went through the SDK on the lane)."""
    async with app_of(tmp_path, monkeypatch, lane) as app:
        headers = await session_of(app)
        slow, cancelling = Exchange(slow_call(7, 120), headers), Exchange(CANCEL_7, headers)
        await while_running(app, slow, cancelling)
        assert cancelling.head["status"] == 202
        assert answer_of(slow) == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
        after = await answered(app, Exchange(echo_call(8, "next"), headers))
        assert after["result"]["content"] == [{"type": "text", "text": "next"}]
    assert audited(tmp_path, lane) == [("kitchen_slow", "cancelled"), ("kitchen_echo", "ok")]


@BOTH_PATHS
async def test_a_call_ends_unanswered_when_its_session_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool
) -> None:
    """A session-era client that ends its session (DELETE) while a call runs on it: the call stops (its
    server's one slot is free for another session's call at once) and its response ends without an
    answer, as the SDK's path ends it."""
    async with app_of(tmp_path, monkeypatch, lane) as app:
        headers = await session_of(app)
        slow, ending = Exchange(slow_call(7, 120), headers), Exchange({}, headers)
        ending.raw, ending.method = b"", "DELETE"
        await while_running(app, slow, ending)
        assert ending.head["status"] == 200
        assert slow.head["status"] == 200 and b"".join(slow.chunks) == b""  # a stream that ends with nothing
        other = await session_of(app)
        after = await answered(app, Exchange(echo_call(8, "next"), other))
        assert after["result"]["content"] == [{"type": "text", "text": "next"}]
    assert audited(tmp_path, lane) == [("kitchen_slow", "cancelled"), ("kitchen_echo", "ok")]


class SlowReader(Exchange):
    """An exchange whose client reads slowly: the first piece of the body waits until `release` is set."""

    def __init__(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        super().__init__(body, headers)
        self.writing = anyio.Event()  # the answer is on its way, held up at the client
        self.release = anyio.Event()

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body") and not self.release.is_set():
            self.writing.set()
            await self.release.wait()
        await super()._send(message)


@BOTH_PATHS
async def test_a_cancel_that_comes_while_the_answer_is_written_does_not_cut_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool
) -> None:
    """The call has its answer and the answer is on its way to a slow client when the client's cancel
    comes: too late, and the client still gets the whole answer (never headers without a body)."""
    async with app_of(tmp_path, monkeypatch, lane) as app:
        headers = await session_of(app)
        slow = SlowReader(slow_call(7, 0.2), headers)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(slow.run, app)
                await slow.writing.wait()
                await Exchange(CANCEL_7, headers).run(app)
                await anyio.sleep(0.2)
                slow.release.set()
        assert answer_of(slow)["result"]["content"] == [{"type": "text", "text": "slept"}]


class _HungUpMidBody(Exchange):
    """A client that hangs up before its body is all sent: what it sent is a whole JSON call, but the
    request promised more (`more_body`), which never comes."""

    async def _receive(self) -> dict[str, Any]:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": self.raw, "more_body": True}
        return {"type": "http.disconnect"}  # as uvicorn answers once the client has gone, each time asked


async def hung_up_on(app: Any, exchange: Exchange) -> None:
    # Its request ends quietly: the SDK's path met the hang-up reading the body, and let Starlette's
    # ClientDisconnect out for uvicorn to log, a traceback each time.
    with anyio.fail_after(30):
        await exchange.run(app)


@BOTH_PATHS
async def test_a_request_whose_client_hung_up_mid_body_is_never_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool
) -> None:
    """An HTTP request that never finished is no request: its call is not made, though the part that came
    reads as one (the lane made it, with nobody to answer), and the next call is served as ever."""
    async with app_of(tmp_path, monkeypatch, lane) as app:
        await hung_up_on(app, modern_call(1, "kitchen_echo", {"text": "never"}, _HungUpMidBody))
        after = await answered(app, modern_call(2, "kitchen_echo", {"text": "next"}))
        assert after["result"]["content"] == [{"type": "text", "text": "next"}]
        headers = await session_of(app)
        await hung_up_on(app, _HungUpMidBody(echo_call(3, "never"), headers))
        after = await answered(app, Exchange(echo_call(4, "next"), headers))
        assert after["result"]["content"] == [{"type": "text", "text": "next"}]
    assert audited(tmp_path, lane) == [("kitchen_echo", "ok")] * 2


@pytest.mark.parametrize("ending", ["cancel", "delete"])
async def test_calls_sharing_an_id_on_the_lane_all_end_with_their_session_or_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """A session-era client that sends two calls with one id at once, then cancels that id or ends its
    session: neither call runs on (the second did, to its end, and was answered on the ended session). On
    the lane only: the SDK's path leaves the first of such calls unanswered for ever."""
    async with app_of(tmp_path, monkeypatch, lane=True) as app:
        headers = await session_of(app)
        calls = [Exchange(slow_call(7, 120), headers), Exchange(slow_call(7, 2), headers)]
        if ending == "cancel":
            stop = Exchange(CANCEL_7, headers)
        else:
            stop = Exchange({}, headers)
            stop.raw, stop.method = b"", "DELETE"
        with anyio.fail_after(30):
            async with anyio.create_task_group() as task_group:
                for call in calls:
                    task_group.start_soon(call.run, app)
                await anyio.sleep(0.5)
                await stop.run(app)
        assert stop.head["status"] in (200, 202)
        for call in calls:
            if ending == "cancel":
                assert answer_of(call)["error"] == {"code": -32800, "message": "Request cancelled"}
            else:
                assert b"".join(call.chunks) == b""  # a stream that ends with nothing


class _Chunked(Exchange):
    """A request whose body comes in two pieces with no Content-Length (chunked, as through some proxies)."""

    def __init__(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        super().__init__(body, headers)
        self.headers = [(name, value) for name, value in self.headers if name != b"content-length"]
        self.headers.append((b"transfer-encoding", b"chunked"))
        self._pieces = [self.raw[:10], self.raw[10:]]

    async def _receive(self) -> dict[str, Any]:
        if self._pieces:
            piece = self._pieces.pop(0)
            return {"type": "http.request", "body": piece, "more_body": bool(self._pieces)}
        self._read = True
        return await super()._receive()


@BOTH_PATHS
async def test_a_chunked_cancel_stops_its_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool) -> None:
    """A session's `notifications/cancelled` with a chunked body, which the SDK accepts: the lane's call
    stops as the SDK's does (the lane looked for cancels only in the requests it could take as calls)."""
    async with app_of(tmp_path, monkeypatch, lane) as app:
        headers = await session_of(app)
        slow, cancelling = Exchange(slow_call(7, 5), headers), _Chunked(CANCEL_7, headers)
        await while_running(app, slow, cancelling)
        assert cancelling.head["status"] == 202
        assert answer_of(slow) == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
