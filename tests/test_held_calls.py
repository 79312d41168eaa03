"""Held calls (`_runtime/input_bridge.py`): a session-era server's call that the gateway keeps running for a
2026-07-28 client, so that the server may ask the client mid-call. `held_call_timeout` bounds only the wait
for the client's answers; the call itself runs as long as its client waits for it, and stops when its
client cancels, as any other call does.

A real gateway on stdio and over HTTP, `instance.py` behind it held to the session era, and a 2026-07-28
SDK client that declares elicitation, so its calls there are held (over HTTP once it authenticates, which
gives it sessions of its own to servers: docs/clients.md). Over HTTP such a client cancels by hanging up.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._errors import InvalidRequest, ManifoldError
from mcp_manifold._front.replica_route import _HeldAnswer
from mcp_manifold._runtime.input_bridge import HeldCalls, read_state
from mcp_manifold._runtime.shared_state import held as shared_held
from tests.conftest import server_entry
from tests.test_eras import Host, http_gateway, ok_text, stdio_gateway, write_config

pytestmark = pytest.mark.anyio

SERVERS = {"inst": {**server_entry("instance.py", "--name", "held"), "protocol": "legacy", "session_scope": "client"}}
KEY = "held-calls-key-0123456789"  # principal `ada`'s API key on the HTTP gateway
AUTH = {"api_keys": {"ada": {"sha256": hashlib.sha256(KEY.encode()).hexdigest()}}}


@asynccontextmanager
async def gateway(folder: Path, transport: str, held_call_timeout: float) -> AsyncIterator[Client]:
    settings = {"held_call_timeout": held_call_timeout, "log_level": "info"}
    log = folder / "gateway.log"
    if transport == "stdio":
        config = write_config(folder, SERVERS, settings, "held.json")
        async with stdio_gateway(config, "auto", log) as running:
            yield running.client
        return
    config = write_config(folder, SERVERS, settings, "held.json")
    config.write_text(json.dumps({**json.loads(config.read_text()), "auth": AUTH}))
    with http_gateway(config, log) as url:
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}))
            yield await stack.enter_async_context(Host().client(streamable_http_client(url, http_client=http), "auto"))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_held_call_runs_past_held_call_timeout_while_its_client_waits(tmp_path: Path, transport: str) -> None:
    async with gateway(tmp_path, transport, held_call_timeout=1) as client:
        assert ok_text(await client.call_tool("inst_slow", {"seconds": 3})) == "slept"
        assert ok_text(await client.call_tool("inst_whoami", {})) == "held"
    assert "gave up on held call" not in (tmp_path / "gateway.log").read_text()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_held_call_stops_at_its_server_when_its_client_cancels(tmp_path: Path, transport: str) -> None:
    # A timeout far beyond the test: only the client's cancel can stop the call in time.
    async with gateway(tmp_path, transport, held_call_timeout=120) as client:
        assert ok_text(await client.call_tool("inst_cancellations", {})) == "0"
        with anyio.move_on_after(0.5):  # over HTTP the client hangs up
            await client.call_tool("inst_slow", {"seconds": 60})

        last = ""
        with anyio.move_on_after(10):
            while (last := ok_text(await client.call_tool("inst_cancellations", {}))) != "1":
                await anyio.sleep(0.1)
        assert last == "1", "the server's call went on after its client cancelled it"
        assert ok_text(await client.call_tool("inst_whoami", {})) == "held"  # nothing else broke


# --- HeldCalls itself: what it keeps ---------------------------------------------------------------------


class _Asker(Caller):
    @property
    def capabilities(self) -> types.ClientCapabilities:
        return types.ClientCapabilities(elicitation=types.ElicitationCapability())


QUESTION = types.ElicitRequestFormParams(message="Your name?", requested_schema={"type": "object", "properties": {}})


def asking(responses: dict[str, Any] | None = None) -> Request:
    request = Request(_Asker())
    request.input_responses = responses
    return request


ACCEPTED = {"action": "accept", "content": {}}


async def asks_then(request: Request, after: Any = None) -> Any:
    """A server's call: one question, then `after` (seconds to work on, or an exception to fail with)."""
    await request.ask("elicitation/create", QUESTION)
    if isinstance(after, BaseException):
        raise after
    await anyio.sleep(after or 0)
    return "done"


@asynccontextmanager
async def holding(timeout: float) -> AsyncIterator[HeldCalls]:
    held = HeldCalls(timeout=timeout)
    async with anyio.create_task_group() as task_group:
        await task_group.start(held.run)
        yield held
        task_group.cancel_scope.cancel()


async def first_questions(held: HeldCalls, work: Any) -> Any:
    asked = await held.start(asking(), work)
    assert isinstance(asked, types.InputRequiredResult)
    state = read_state(asked.request_state)
    assert state is not None
    return state


async def fails_after_asking(request: Request) -> Any:
    """A server's call that asks, then fails a moment later, its question still with the client."""
    with anyio.move_on_after(0.1):
        await request.ask("elicitation/create", QUESTION)
    raise ManifoldError("server 'inst' broke")


async def test_a_call_that_ends_while_its_questions_wait_is_dropped_after_the_timeout() -> None:
    """Its server failed while the client held its questions, and the client never came back: the call is
    not kept for ever (before, only calls still running were ever given up)."""

    async with holding(timeout=0.2) as held:
        state = await first_questions(held, fails_after_asking)
        await anyio.sleep(1.5)  # past the timeout, and a round of the reaper (every 0.5 s at the least)
        with pytest.raises(ManifoldError, match="no longer held"):
            await held.resume(state, asking({"q1": ACCEPTED}))


async def test_a_retry_for_a_call_whose_server_failed_gets_that_failure() -> None:
    """Its question is no longer open once the server's call ended: the retry gets the failure, not a
    demand for an answer."""

    async with holding(timeout=30) as held:
        state = await first_questions(held, fails_after_asking)
        await anyio.sleep(0.3)
        with pytest.raises(ManifoldError, match="server 'inst' broke"), anyio.fail_after(5):
            await held.resume(state, asking({}))


async def test_a_retry_with_a_bad_answer_is_refused_and_leaves_the_call_as_it_was() -> None:
    async with holding(timeout=0.3) as held:
        state = await first_questions(held, asks_then)
        with pytest.raises(InvalidRequest, match="q1"):
            await held.resume(state, asking({"q1": {"action": "bogus"}}))
        with anyio.fail_after(5):
            assert await held.resume(state, asking({"q1": ACCEPTED})) == "done"  # a good retry still works

        state = await first_questions(held, asks_then)
        with pytest.raises(InvalidRequest):
            await held.resume(state, asking({"q1": {"action": "bogus"}}))
        await anyio.sleep(1.5)  # and one never followed by a good retry is given up after the timeout
        with pytest.raises(ManifoldError, match="no longer held"):
            await held.resume(state, asking({"q1": ACCEPTED}))


async def test_two_retries_with_one_state_the_second_is_refused_the_first_answered() -> None:
    answers: dict[str, Any] = {}

    async def retry(name: str, state: Any) -> None:
        try:
            with anyio.fail_after(5):
                answers[name] = await held.resume(state, asking({"q1": ACCEPTED}))
        except InvalidRequest as refused:
            answers[name] = str(refused)

    async with holding(timeout=30) as held:
        state = await first_questions(held, lambda request: asks_then(request, 0.3))
        async with anyio.create_task_group() as retries:
            retries.start_soon(retry, "first", state)
            await anyio.sleep(0.05)
            retries.start_soon(retry, "second", state)
    assert answers["first"] == "done"
    assert "already given" in answers["second"]


async def answers_ok(request: Request) -> str:
    return "ok"


def stray(kind: str) -> BaseException:
    """A cancellation nothing asked for: alone, in an exception group, or in one beside an error."""
    cancelled = anyio.get_cancelled_exc_class()("stray")
    if kind == "alone":
        return cancelled
    return BaseExceptionGroup("a task group's", [cancelled] if kind == "grouped" else [cancelled, ValueError("x")])


@pytest.mark.parametrize("kind", ["alone", "grouped", "beside an error"])
async def test_a_stray_cancellation_ends_one_held_call_not_the_others(kind: str) -> None:
    """Before, one in an exception group got past the check and ended every held call and the reaper."""

    async def cancelled_by_nobody(request: Request) -> Any:
        raise stray(kind)

    async with holding(timeout=30) as held:
        with pytest.raises(ManifoldError, match="stopped before it finished"):
            await held.start(asking(), cancelled_by_nobody)
        await anyio.sleep(0.1)
        with anyio.fail_after(5):
            assert await held.start(asking(), answers_ok) == "ok"


async def test_a_question_asked_a_moment_after_the_first_goes_out_next() -> None:
    """The client was handed the first only: its answer to that is enough, and the second comes back."""

    async def asks_twice(request: Request) -> str:
        async with anyio.create_task_group() as questions:
            questions.start_soon(request.ask, "elicitation/create", QUESTION)
            await anyio.sleep(0.05)
            questions.start_soon(request.ask, "elicitation/create", QUESTION)
        return "done"

    async with holding(timeout=30) as held:
        first = await held.start(asking(), asks_twice)
        assert list(first.input_requests) == ["q1"]
        state = read_state(first.request_state)
        await anyio.sleep(0.2)  # the second is asked meanwhile
        with anyio.fail_after(5):
            second = await held.resume(state, asking({"q1": ACCEPTED}))
            assert isinstance(second, types.InputRequiredResult) and list(second.input_requests) == ["q2"]
            assert await held.resume(read_state(second.request_state), asking({"q2": ACCEPTED})) == "done"


async def test_a_foreign_cancellation_meeting_the_calls_own_cancel_ends_that_call_only() -> None:
    """A cancellation from outside anyio lands as the call is cancelled (by its client, or the reaper):
    anyio's scope does not take it, and before it ended every held call and the reaper."""
    waiting: dict[str, Any] = {}

    async def awaits_a_future(request: Request) -> str:
        waiting["future"] = asyncio.get_running_loop().create_future()
        await waiting["future"]
        return "never"

    async def victim() -> None:
        with pytest.raises(ManifoldError, match="stopped before it finished"):
            await held.start(asking(), awaits_a_future)

    async with holding(timeout=30) as held, anyio.create_task_group() as calls:
        bystander = await first_questions(held, lambda request: asks_then(request, 0))
        calls.start_soon(victim)
        await anyio.sleep(0.1)
        (call,) = [call for call in held._held.values() if not call.awaiting_client]
        waiting["future"].cancel()  # the foreign one first ...
        call.scope.cancel()  # ... while the call is being cancelled
        await anyio.sleep(0.2)
        with anyio.fail_after(5):
            assert await held.resume(bystander, asking({"q1": ACCEPTED})) == "done"  # the others live on
            assert await held.start(asking(), answers_ok) == "ok"


# --- a retry forwarded from another replica (shared_state/held.py, _front/replica_route.py) ----------------


async def asks_then_answers_late(request: Request) -> types.CallToolResult:
    await asks_then(request, 0.55)
    return types.CallToolResult(content=[types.TextContent(type="text", text="done")])


async def test_a_forwarded_call_that_runs_long_keeps_its_forwarding_replica_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The holder writes blank lines while the call says nothing, so the forwarding replica's read timeout
    (held_call_timeout + 30 s) never ends a call that simply takes long."""
    monkeypatch.setattr(shared_held, "KEEP_ALIVE", 0.1)
    async with holding(timeout=30) as held:
        forwarding = shared_held.HeldForwarding(held, None, "token", 30)  # type: ignore[arg-type]
        state = await first_questions(held, asks_then_answers_late)
        body = {"holder": held.holder, "id": state.held_id, "responses": {"q1": ACCEPTED}}
        send, receive = anyio.create_memory_object_stream[bytes](16)
        with anyio.fail_after(5):
            await forwarding.answer(body, send)
            lines = [line async for line in receive]
        await forwarding.close()
    assert lines[:-1] and set(lines[:-1]) == {b"\n"}  # blank lines while it ran, then its answer
    assert json.loads(lines[-1])["result"]["content"][0]["text"] == "done"


async def test_a_forwarding_replica_that_hangs_up_stops_the_call_on_the_holder() -> None:
    """Its client cancelled (so it hung up): the holder stops the call, as a local client's cancel does."""
    stopped = anyio.Event()

    async def asks_then_works_long(request: Request) -> str:
        await request.ask("elicitation/create", QUESTION)
        try:
            await anyio.sleep(60)
        finally:
            stopped.set()
        return "done"

    hung_up = anyio.Event()

    async def receive() -> dict[str, Any]:
        await hung_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    async with holding(timeout=30) as held:
        forwarding = shared_held.HeldForwarding(held, None, "token", 30)  # type: ignore[arg-type]
        state = await first_questions(held, asks_then_works_long)
        body = {"holder": held.holder, "id": state.held_id, "responses": {"q1": ACCEPTED}}
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_HeldAnswer(forwarding, body), {"type": "http"}, receive, send)
            await anyio.sleep(0.2)
            hung_up.set()
            with anyio.fail_after(5):
                await stopped.wait()
        await forwarding.close()


async def test_a_forwarded_retry_refused_for_what_it_sent_is_refused_as_such() -> None:
    async with holding(timeout=30) as held:
        forwarding = shared_held.HeldForwarding(held, None, "token", 30)  # type: ignore[arg-type]
        state = await first_questions(held, asks_then)
        body = {"holder": held.holder, "id": state.held_id, "responses": {"q1": {"action": "bogus"}}}
        send, receive = anyio.create_memory_object_stream[bytes](16)
        with anyio.fail_after(5):
            await forwarding.answer(body, send)
            (line,) = [line async for line in receive]
        await forwarding.close()
    with pytest.raises(InvalidRequest, match="q1"):
        shared_held.decode(json.loads(line))
