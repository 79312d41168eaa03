"""A server that sends more than its clients can take, or comes and goes (tests/servers/noisy.py,
restless.py), costs the gateway a bounded amount of work and memory and nobody else anything: its stderr is
read for the lines kept, what it sends a call's client waits in a bounded queue, an old process's exit
stops nothing of the new one's, and event streams it ends at once are opened again at a pace."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from mcp_manifold._config import load_config, redaction
from mcp_manifold._errors import BackendError
from mcp_manifold._runtime.backends import Backend
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.get_pacing import BURST, RATE
from mcp_manifold._runtime.relay_bound import MOST_QUESTIONS
from tests.conftest import (
    free_port,
    gateway_over_http,
    http_gateway_url,
    server_entry,
    server_over_http,
    stdio_gateway,
    write_gateway_config,
)


def text_of(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


@pytest.mark.anyio
async def test_a_flood_of_stderr_lines_is_read_for_the_lines_kept(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server writing short stderr lines as fast as it can: each line the gateway takes costs its event
    loop some 15 us (decoding, scrubbing), and a read of 64 kB held 32,000 of them, so every other server's
    calls waited half a second at a time (860 ms instead of 1). Only the lines kept (`stderr_lines`) of each
    read are taken now: of 300,000 lines, the gateway takes a few thousand, and keeps the last ones."""
    taken = 0
    take = Backend._on_stderr_line

    def counted(self: Backend, line: str) -> None:
        nonlocal taken
        taken += 1
        take(self, line)

    monkeypatch.setattr(Backend, "_on_stderr_line", counted)
    path = write_config({"noisy": server_entry("noisy.py")}, {"expose": ["direct"], "stderr_lines": 20})
    async with Gateway(load_config(path)) as gateway:
        backend = gateway.pool.backends["noisy"]
        result = await backend.request("tools/call", lambda session: session.call_tool("stderr", {"lines": 300_000}))
        assert not result.is_error
        with anyio.fail_after(30):  # the last 64 kB the server wrote may still be in the pipe
            while not backend.stderr or backend.stderr[-1] != "done":
                await anyio.sleep(0.01)
        assert list(backend.stderr) == ["e"] * 19 + ["done"]
        assert taken < 30_000, taken


@pytest.fixture(scope="module")
def noisy_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway over HTTP in front of noisy.py (and another, for the calls that must go on)."""
    folder = tmp_path_factory.mktemp("noisy")
    servers = {"noisy": server_entry("noisy.py"), "other": server_entry("noisy.py")}
    with http_gateway_url(write_gateway_config(folder, servers, expose=["direct"], log_level="error")) as url:
        with httpx2.Client(timeout=30) as http:  # the servers start (the tests' calls then take the same time)
            _session(http, url)
        yield url


def _session(http: httpx2.Client, url: str) -> dict[str, str]:
    """A new session-era session's headers (its first request lists the servers, starting them)."""
    head = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    opened = http.post(url, json=_INITIALIZE, headers=head)
    session = {**head, "Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
    return session


def _unread_call(url: str, arguments: dict[str, Any], progress: bool) -> socket.socket:
    """A session-era session's `tools/call noisy_flood`, sent on a socket with a small buffer that is not read."""
    with httpx2.Client(timeout=30) as http:
        session = _session(http, url)
    params: dict[str, Any] = {"name": "noisy_flood", "arguments": arguments}
    if progress:
        params["_meta"] = {"progressToken": "flood"}
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}).encode()
    host = url.split("/")[2]
    unread = socket.socket()
    unread.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    unread.connect((host.split(":")[0], int(host.split(":")[1])))
    lines = ["POST /mcp HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{key}: {value}" for key, value in session.items()]
    unread.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return unread


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "slow", "version": "1"}},
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["log", "progress"])
async def test_what_a_server_sends_a_call_faster_than_its_client_reads_waits_in_a_bounded_queue(
    noisy_url: str, tmp_path: Path, kind: str
) -> None:
    """A server sending a call's client 1,000 messages of 20 kB (log messages, or progress on the call's
    token) while the client does not read: each waited in a task of its own, holding its message, for as
    long as the client did not read (20,000 such took the gateway from 83 MB to 1.5 GB). Now at most 4 MB
    of them wait; the rest are dropped, the call is answered, and the gateway's other calls go on."""
    marker = tmp_path / "sent"
    arguments = {"count": 1000, "size": 20_000, "kind": kind, "marker": str(marker)}
    unread = await anyio.to_thread.run_sync(_unread_call, noisy_url, arguments, kind == "progress")
    with unread:
        with anyio.fail_after(60):
            while not marker.exists():  # every message is written, and all but the pipe's last 64 kB read
                await anyio.sleep(0.05)
        async with Client(noisy_url, mode="legacy") as other:
            assert (await other.call_tool("other_fine", {})).content[0].text == "fine"  # type: ignore[union-attr]
        received = await anyio.to_thread.run_sync(_read_until_answered, unread)
    sent = received.count(b"notifications/message" if kind == "log" else b"notifications/progress")
    assert b"flooded" in received
    assert 0 < sent < 700, sent


def _read_until_answered(unread: socket.socket) -> bytes:
    unread.settimeout(30)
    received = bytearray()
    while b"flooded" not in received[-100_000:]:
        chunk = unread.recv(1 << 20)
        if not chunk:
            break
        received += chunk
    return bytes(received)


@pytest.mark.anyio
async def test_the_exit_of_a_server_process_gone_before_stops_nothing_of_the_one_after_it(
    write_config: Any, tmp_path: Path
) -> None:
    """A server whose connection ended while its process lived on (it closed its stdout) is started again on
    its next call; the old process is stopped meanwhile (its group, SIGTERM then SIGKILL). Its exit was
    taken for the new process's: the new, healthy session was stopped, and the call running on it failed
    ("the server closed the connection"). An exit stops only the session of its own process now."""
    path = write_config({"noisy": server_entry("noisy.py")}, {"expose": ["direct"]})
    gone, started = tmp_path / "gone", tmp_path / "started"

    def call(name: str, arguments: dict[str, Any]) -> Any:
        return backend.request("tools/call", lambda session: session.call_tool(name, arguments))

    async with Gateway(load_config(path)) as gateway:
        backend = gateway.pool.backends["noisy"]
        await backend.list_all()  # the SDK's session checks each result against the tool it listed
        first = backend.pid
        assert text_of(await call("vanish", {"marker": str(gone)})) == "vanishing"
        with pytest.raises(BackendError, match="closed the connection"):  # the call that finds it gone
            await call("fine", {})
        async with anyio.create_task_group() as group:

            async def let_the_old_one_go() -> None:
                with anyio.fail_after(30):
                    while not started.exists():  # the call below is running on the new process
                        await anyio.sleep(0.02)
                gone.touch()  # the old process exits; a child left in its group keeps its stop going 2 s

            group.start_soon(let_the_old_one_go)
            assert text_of(await call("slow", {"seconds": 1.5, "started": str(started)})) == "slept"
        assert backend.pid != first and backend.state == "ready"


@pytest.mark.anyio
async def test_event_streams_a_server_ends_at_once_are_opened_again_at_a_pace(write_config: Any) -> None:
    """A remote server that ends each GET stream at once with `retry: 0` was sent some 190 GETs a second
    for as long as its session lasted (the SDK's client opens it again at once): a fifth of a core of the
    gateway, and other servers' calls took three times as long. The session's GETs are paced now: 20 back
    to back, then 20 a second at most."""
    with server_over_http("restless.py") as url:
        path = write_config({"restless": {"url": url, "protocol": "legacy"}}, {"expose": ["direct"]})
        async with Gateway(load_config(path)) as gateway:
            backend = gateway.pool.backends["restless"]

            async def gets() -> int:
                return int(text_of(await backend.request("tools/call", lambda s: s.call_tool("gets", {}))))

            before = await gets()
            await anyio.sleep(1)  # what is measured: how many GETs one second of the session costs
            after = await gets()
            assert after - before <= BURST + 2 * RATE, "paced: the burst, then 20 a second"


@pytest.mark.anyio
async def test_what_the_sdks_client_logs_of_a_server_reaches_the_gateways_log_as_text(
    write_config: Any, tmp_path: Path
) -> None:
    """The SDK's client logs a remote server's unknown SSE event by its name (`Unknown SSE event: ...`). Its
    records went through Python's fallback handler, raw: a server's escape sequences set the operator's
    window title and cleared the screen. They go through the gateway's formatter now."""
    hostile = "x\x1b]0;owned\x07\x1b[2J"
    with server_over_http("restless.py", "--event", hostile) as url:
        config = write_config({"restless": {"url": url, "protocol": "legacy"}}, {"lazy": False})
        log, port = tmp_path / "gateway.log", free_port()
        with log.open("wb") as stream, gateway_over_http(config, port, stderr=stream):
            with anyio.fail_after(30):
                while b"Unknown SSE event" not in log.read_bytes():
                    await anyio.sleep(0.1)
    said = log.read_bytes()
    assert b"\x1b" not in said
    assert b"WARNING mcp.client.streamable_http: Unknown SSE event: x\\x1b]0;owned\\x07\\x1b[2J" in said


QUESTIONS = 50


@pytest.mark.anyio
async def test_a_call_has_a_few_questions_wait_for_its_client_at_once_and_the_rest_are_refused(
    write_config: Any, tmp_path: Path
) -> None:
    """A server asking its client 5,000 elicitations of 20 kB at once in one call, which a person answers
    one by one: every one was passed on and waited in the gateway for its answer (76 to 473 MB in ten
    seconds, the client shown thousands of questions). Now at most `MOST_QUESTIONS` of a call's questions
    wait for its client at once; the server gets an error for each one past that."""
    asked = 0
    answer = anyio.Event()
    tally = tmp_path / "refused"

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal asked
        asked += 1
        await answer.wait()  # a person: the questions wait while the others are asked
        return types.ElicitResult(action="decline")

    def refused() -> int:
        return int(tally.read_text() or 0) if tally.exists() else 0

    async def answer_once_every_question_is_asked_or_refused() -> None:
        with anyio.fail_after(30):
            while asked + refused() < QUESTIONS:
                await anyio.sleep(0.02)
        answer.set()

    path = write_config({"noisy": server_entry("noisy.py")}, {"expose": ["direct"]})
    async with stdio_gateway(path, mode="legacy", elicitation_callback=elicit) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(answer_once_every_question_is_asked_or_refused)
            said = text_of(await client.call_tool("noisy_ask", {"count": QUESTIONS, "tally": str(tally)}))
        assert said == f"answered {MOST_QUESTIONS}, refused {QUESTIONS - MOST_QUESTIONS}", said
        assert text_of(await client.call_tool("noisy_fine", {})) == "fine"


@pytest.mark.anyio
async def test_a_log_message_of_many_strings_is_scrubbed_without_a_walk_when_no_secret_is_in_it(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log message's data is scrubbed of the server's secrets before anyone sees it. Each of its strings
    was scrubbed on the event loop, working out the server's secrets again for each (some 3 to 14 us): a
    list of 100,000 one-letter strings (600 kB) held the loop a third of a second, and a server sending
    such messages held every other client's calls (up to 1.8 s). The secrets are worked out once now, and
    the strings are walked only when one of them may be in the message."""
    scrubbed = 0
    apply = redaction.apply

    def counted(pairs: Any, text: str) -> str:
        nonlocal scrubbed
        scrubbed += 1
        return apply(pairs, text)

    monkeypatch.setattr(redaction, "apply", counted)  # what scrubs each string
    monkeypatch.setenv("NOISY_TOKEN", "sesame-1234567890")
    path = write_config(
        {"noisy": {**server_entry("noisy.py"), "env": {"TOKEN": "${NOISY_TOKEN}"}}}, {"expose": ["direct"]}
    )
    async with Gateway(load_config(path)) as gateway:
        backend = gateway.pool.backends["noisy"]
        await backend.list_all()
        before = scrubbed
        result = await backend.request("tools/call", lambda session: session.call_tool("biglog", {"strings": 100_000}))
        assert text_of(result) == "logged"  # the log message came before the answer
        assert scrubbed - before < 100, scrubbed - before


@pytest.mark.anyio
async def test_questions_for_a_call_that_has_ended_are_given_up(write_config: Any, tmp_path: Path) -> None:
    """A server asking its client questions in a call, then answering the call without waiting for them:
    the questions waited at the client, and in the gateway, for as long as the client did not answer (a
    person away): 16 of 200 kB in each call left 96 MB held after 30 calls. Those of a call that has ended
    are given up now, and the server gets an error for each."""
    asked = 0

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal asked
        asked += 1
        await anyio.sleep_forever()  # its person is away
        raise AssertionError

    tally = tmp_path / "refused"
    path = write_config({"noisy": server_entry("noisy.py")}, {"expose": ["direct"]})
    async with stdio_gateway(path, mode="legacy", elicitation_callback=elicit) as client:
        arguments = {"count": 5, "tally": str(tally), "wait": False}
        assert text_of(await client.call_tool("noisy_ask", arguments)) == "asked"
        with anyio.fail_after(10):
            while not tally.exists() or tally.read_text() != "5":  # the server hears the five given up
                await anyio.sleep(0.02)
        assert text_of(await client.call_tool("noisy_fine", {})) == "fine"
