"""Large HTTP request bodies in flight are bounded together by what they may cost in memory
(`request_memory_mb`): ten 4 MiB calls of `{}` at once took the gateway from 40 MB to 2.2 GB, so a few dozen
from one client ended it for everyone. A large request waits in turn for room; small ones never wait."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from starlette.types import Message, Receive, Scope, Send

from mcp_manifold._front.large_requests import LARGE, LargeRequests, MemoryBudget, estimated_cost
from tests.conftest import CLIENT_MODES, http_gateway_url, server_entry, write_gateway_config

pytestmark = pytest.mark.anyio
PAD = "x" * 3 * LARGE  # a large body, of more than 1 MB by estimate: one such call at a time


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_a_body_of_many_small_objects_is_estimated_dearer_than_one_of_a_string() -> None:
    many = json.dumps({"arguments": {"a": [{}] * 100_000}}).encode()
    string = json.dumps({"arguments": {"a": "x" * len(many)}}).encode()
    assert estimated_cost(many) > 5 * estimated_cost(string) >= 5 * 6 * len(string)


async def test_the_budget_gives_room_in_turn_and_a_request_larger_than_it_alone() -> None:
    budget = MemoryBudget(100, wait=5)
    await budget.acquire(60)
    order: list[str] = []

    async def take(name: str, cost: int) -> None:
        await budget.acquire(cost)
        order.append(name)

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(take, "second", 60)
        await anyio.wait_all_tasks_blocked()
        task_group.start_soon(take, "small", 10)  # it would fit, but waits its turn behind the second
        await anyio.wait_all_tasks_blocked()
        assert order == [] and budget.held == 60
        budget.release(60)
    assert order == ["second", "small"] and budget.held == 70
    budget.release(70)
    await budget.acquire(500)  # more than the whole budget: goes on when nothing else is held
    assert budget.held == 500
    budget.release(500)


async def test_a_request_that_finds_no_room_in_time_is_told_so_and_gives_its_turn_up() -> None:
    budget = MemoryBudget(100, wait=0.2)
    await budget.acquire(100)
    with pytest.raises(TimeoutError):
        await budget.acquire(50)
    assert budget.held == 100 and not budget._waiting
    budget.release(100)
    await budget.acquire(50)


async def test_a_large_request_past_its_wait_is_answered_503_naming_the_setting() -> None:
    """The layer in front of the gateway's app (here an app that holds its request until told)."""
    release = anyio.Event()
    answered: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    layer = LargeRequests(app, MemoryBudget(1024 * 1024, wait=0.3), max_body=4 * 1024 * 1024)
    body = json.dumps({"a": [{}] * 20_000}).encode()  # 80 kB, 4.5 MB by estimate: past the budget alone

    async def post(sent: list[Message]) -> None:
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"content-length", b"%d" % len(body))]}
        messages = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def receive() -> Message:
            return next(messages, {"type": "http.disconnect"})

        async def send(message: Message) -> None:
            sent.append(message)

        await layer(scope, receive, send)
        answered.append(sent[0]["status"])

    first: list[Message] = []
    second: list[Message] = []
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(post, first)
        await anyio.wait_all_tasks_blocked()
        await post(second)  # waits 0.3 s, finds no room
        release.set()
    assert answered == [503, 200]
    assert dict(second[0]["headers"])[b"retry-after"] == b"5"
    error = json.loads(second[1]["body"])["error"]
    assert error["message"].startswith("the gateway is busy with other large requests (request_memory_mb 1); ")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("large")
    # 1 MB: one large call at a time.
    config = write_gateway_config(folder, {"probe": server_entry("replica_probe.py")}, request_memory_mb=1)
    with http_gateway_url(config) as url:
        yield url


@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_a_large_call_waits_for_room_and_a_small_one_does_not(url: str, mode: str, tmp_path: Path) -> None:
    journal, gate = tmp_path / "journal", tmp_path / "gate"
    finished: list[str] = []

    async def call(name: str, tool: str, arguments: dict[str, Any]) -> None:
        async with Client(url, mode=mode) as client:
            result = await client.call_tool(tool, arguments)
        assert not result.is_error, text_of(result)
        finished.append(name)

    held = {"token": "held", "journal": str(journal), "gate": str(gate), "pad": PAD}
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(call, "large held", "probe_work", held)
        with anyio.fail_after(20):
            while not journal.exists():  # at its server: it holds the room until the gate opens
                await anyio.sleep(0.05)
        task_group.start_soon(call, "large quick", "probe_where", {"pad": PAD})
        await call("small", "probe_where", {})  # answered meanwhile
        await anyio.sleep(0.5)  # time for the large quick call to be answered, were it not waiting its turn
        gate.touch()
    assert finished == ["small", "large held", "large quick"]
