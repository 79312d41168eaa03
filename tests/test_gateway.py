"""End to end: real fixture servers behind a real gateway, reached by the SDK client over stdio and HTTP."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import (
    SERVERS,
    TRANSPORT_MODE_IDS,
    TRANSPORT_MODES,
    answer_elicitation,
    answer_sampling,
    client_over,
    free_port,
    http_gateway_url,
    server_entry,
    stdio_gateway,
    stop_process,
    wait_for_port,
    write_gateway_config,
)

pytestmark = pytest.mark.anyio

THREE_SERVERS = {
    "kitchen": server_entry("kitchen.py"),
    "numbers": server_entry("numbers.py"),
    "words": server_entry("words.py"),
}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


# --- one gateway per transport, shared by the tests whose servers' state ends as it began ----------------
# Each start of a gateway with its servers costs seconds of CPU; these tests only call and read, or crash
# kitchen, which comes back on the next call (what its test checks). The tests with callbacks of their own,
# or servers that keep what a test did, start their own gateway through `connect`.

SHARED_SERVERS = {**THREE_SERVERS, "links": server_entry("links.py"), "erring": server_entry("erring.py")}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so the shared gateways' clients live across tests


@pytest.fixture(scope="module")
def shared_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gateway_config(tmp_path_factory.mktemp("shared"), SHARED_SERVERS)


@pytest.fixture(scope="module")
def shared_http_url(shared_config: Path) -> Iterator[str]:
    with http_gateway_url(shared_config) as url:
        yield url


@pytest.fixture(scope="module", params=TRANSPORT_MODES, ids=TRANSPORT_MODE_IDS)
async def client(request: pytest.FixtureRequest, shared_config: Path) -> AsyncIterator[Client]:
    """A client of the shared gateway, over each transport and in each client mode in turn (as `connect`)."""
    transport, mode = request.param
    async with client_over(transport, mode, shared_config, lambda: request.getfixturevalue("shared_http_url")) as c:
        yield c


async def test_three_servers_namespaced_in_one_list(client: Client) -> None:
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"kitchen_echo", "numbers_add", "numbers_sqrt", "words_upper", "words_reverse"} <= names
    assert all(len(name) <= 64 for name in names)
    long_names = [name for name in names if name.startswith("words_really_long")]
    assert len(long_names) == 1 and len(long_names[0]) <= 64

    assert text_of(await client.call_tool("kitchen_echo", {"text": "hi"})) == "hi"
    added = await client.call_tool("kitchen_add", {"a": 2, "b": 3})
    assert added.structured_content == {"result": 5}
    assert text_of(await client.call_tool("words_upper", {"text": "abc"})) == "ABC"


async def test_content_types_pass_through(client: Client) -> None:
    image = (await client.call_tool("kitchen_image", {})).content[0]
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    embedded = (await client.call_tool("kitchen_embedded", {})).content[0]
    assert isinstance(embedded, types.EmbeddedResource)
    assert embedded.resource.text == "embedded text"  # type: ignore[union-attr]
    huge = await client.call_tool("kitchen_huge", {"size": 1_000_000})
    assert len(text_of(huge)) == 1_000_000


async def test_resources_templates_and_prompts(client: Client) -> None:
    uris = {r.uri for r in (await client.list_resources()).resources}
    assert {"kitchen+kitchen://text", "kitchen+kitchen://blob", "numbers+numbers://constants"} <= uris
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert "kitchen+kitchen://greeting/{name}" in templates

    text = (await client.read_resource("kitchen+kitchen://text")).contents[0]
    assert text.text == "hello from kitchen"  # type: ignore[union-attr]
    assert text.uri == "kitchen+kitchen://text"
    blob = (await client.read_resource("kitchen+kitchen://blob")).contents[0]
    assert base64.b64decode(blob.blob) == b"\x00\x01\x02binary"  # type: ignore[union-attr]
    greeting = (await client.read_resource("kitchen+kitchen://greeting/Ada")).contents[0]
    assert greeting.text == "Hello, Ada!"  # type: ignore[union-attr]

    prompts = {p.name for p in (await client.list_prompts()).prompts}
    assert {"kitchen_greet", "kitchen_summarize", "numbers_explain"} <= prompts
    prompt = await client.get_prompt("kitchen_greet", {"name": "Bob", "style": "formal"})
    assert "Greet Bob in a formal way." in prompt.messages[0].content.text  # type: ignore[union-attr]


async def test_errors_are_clear_and_harmless(client: Client) -> None:
    failed = await client.call_tool("kitchen_fail", {"message": "kaboom"})
    assert failed.is_error and "kaboom" in text_of(failed)
    unknown = await client.call_tool("nope", {})  # as a server answers for a tool it does not have
    assert unknown.is_error and "unknown tool 'nope'" in text_of(unknown)
    with pytest.raises(Exception, match="unknown resource"):
        await client.read_resource("nobody+x://y")
    with pytest.raises(Exception, match="unknown prompt"):
        await client.get_prompt("nope", {})
    assert text_of(await client.call_tool("kitchen_echo", {"text": "still fine"})) == "still fine"


async def test_progress_and_logging_reach_the_client(connect: Any, write_config: Any) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    # A 2026-07-28 client opts in to log messages per request (`log_level`); a session-era one gets them.
    config = write_config({"kitchen": server_entry("kitchen.py")})
    async with connect(config, logging_callback=on_log, log_level="debug") as client:
        result = await client.call_tool("kitchen_progress", {"steps": 3}, progress_callback=on_progress)
        assert text_of(result) == "done 3"
        assert [p[0] for p in progress] == [1, 2, 3]
        assert progress[0][2] == "step 1 of 3"
        await client.call_tool("kitchen_log", {"message": "hello log", "level": "warning"})
        with anyio.fail_after(5):
            while not logs:
                await anyio.sleep(0.02)
        assert logs[0].data == "hello log" and logs[0].level == "warning"
        assert logs[0].logger and logs[0].logger.startswith("kitchen")


async def test_sampling_elicitation_and_roots_round_trip(connect: Any, write_config: Any) -> None:
    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])

    # Over stdio the one client's capabilities are the server's to know; over HTTP a client is asked only
    # through a session of its own (a shared one serves clients that may not declare them).
    scope = {"session_scope": "client"} if connect.transport == "http" else {}
    config = write_config({"kitchen": server_entry("kitchen.py", **scope)})
    async with connect(
        config, sampling_callback=answer_sampling, elicitation_callback=answer_elicitation, list_roots_callback=roots
    ) as client:
        assert text_of(await client.call_tool("kitchen_sample", {"prompt": "2+2"})) == "answer to 2+2"
        assert text_of(await client.call_tool("kitchen_elicit", {"question": "colour?"})) == "accepted: blue"
        assert "file:///work/project" in text_of(await client.call_tool("kitchen_roots", {}))


async def test_url_mode_elicitation_passes_through(connect: Any, write_config: Any) -> None:
    seen: list[Any] = []

    async def open_the_page(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params)
        return types.ElicitResult(action="accept")

    scope = {"session_scope": "client"} if connect.transport == "http" else {}
    async with connect(
        write_config({"midcall": server_entry("midcall.py", **scope)}), elicitation_callback=open_the_page
    ) as client:
        answer = await client.call_tool("midcall_sign_in", {"service": "shop"})
        if connect.mode == "legacy":  # a session serving one session-era client opens with the handshake
            assert not answer.is_error, text_of(answer)
        if answer.is_error:  # the first call learns that the server asks mid-call (it is reached as 2026-07-28 first)
            assert "call again" in text_of(answer) or "authenticates" in text_of(answer), text_of(answer)
            if connect.transport == "http" and connect.mode != "legacy":
                # Not authenticated, this client has no session of its own; the error said how to get one.
                assert "once it authenticates" in text_of(answer), text_of(answer)
                return
            answer = await client.call_tool("midcall_sign_in", {"service": "shop"})
        assert text_of(answer) == "sign-in: accept", text_of(answer)
    [params] = seen
    # 2026-07-28 has no elicitationId (the question goes out in an input_required answer, not on its own).
    elicitation_id = "sign-in-1" if connect.mode == "legacy" else None
    assert (params.mode, params.url, params.elicitation_id) == ("url", "https://shop.example/login", elicitation_id)
    assert params.message == "Sign in to shop"


async def test_a_shared_session_of_an_http_gateway_promises_no_client_capability(
    http_gateway: Any, write_config: Any
) -> None:
    session_era = {**server_entry("kitchen.py"), "protocol": "legacy"}
    url = http_gateway(write_config({"kitchen": session_era, "modern": server_entry("kitchen.py")}))
    async with Client(url, mode="legacy") as cannot_sample:
        with pytest.raises(MCPError) as refused:  # the server's -32021, which is this client's to act on
            await cannot_sample.call_tool("kitchen_sample", {"prompt": "2+2"})
        assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY, refused.value.error
    async with Client(url, mode="legacy", sampling_callback=answer_sampling) as client:
        # The shared session told the server nothing, so it refuses to ask (-32021); this client can answer:
        # the call is made again in a session of its own, which says so.
        asked = await client.call_tool("kitchen_sample", {"prompt": "2+2"})
        assert not asked.is_error and text_of(asked) == "answer to 2+2", text_of(asked)
        # A 2026-07-28 server is told per request what the calling client can answer, so the
        # question goes to that client alone and a shared connection is no obstacle.
        answered = await client.call_tool("modern_sample", {"prompt": "2+2"})
        assert not answered.is_error and text_of(answered) == "answer to 2+2", text_of(answered)


async def test_backend_list_change_refreshes_catalog_and_notifies(connect: Any, write_config: Any) -> None:
    notices: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notices.append(message)

    async with connect(write_config({"kitchen": server_entry("kitchen.py")}), message_handler=on_message) as client:
        await client.list_tools()
        await anyio.sleep(0.3)  # let any notice about the first listing arrive
        await client.list_tools(cache_mode="refresh")  # a client that has the current list hears of the next change
        if connect.mode == "legacy":  # in its session
            before = len(notices)
            await client.call_tool("kitchen_add_tool", {"name": "fresh"})
            with anyio.fail_after(10):
                while len(notices) == before:
                    await anyio.sleep(0.02)
        else:  # on a subscriptions/listen stream
            async with client.listen(tools_list_changed=True) as stream:
                await client.call_tool("kitchen_add_tool", {"name": "fresh"})
                with anyio.fail_after(10):
                    event = await stream.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
        names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        assert "kitchen_fresh" in names
        assert text_of(await client.call_tool("kitchen_fresh", {})) != ""


async def test_a_crashed_server_does_not_disturb_the_others_and_restarts(client: Client) -> None:
    crashed = await client.call_tool("kitchen_crash", {})
    assert crashed.is_error
    assert "kitchen" in text_of(crashed)
    # The others never noticed.
    assert text_of(await client.call_tool("words_reverse", {"text": "abc"})) == "cba"
    assert text_of(await client.call_tool("numbers_add", {"a": 1, "b": 2})).startswith("3")
    # The crashed one comes back on next need.
    assert text_of(await client.call_tool("kitchen_echo", {"text": "back"})) == "back"


async def test_call_timeout_and_cancellation(connect: Any, write_config: Any) -> None:
    config = write_config({"kitchen": server_entry("kitchen.py", timeout=1.5)})
    async with connect(config) as client:
        timed_out = await client.call_tool("kitchen_slow", {"seconds": 10})
        assert timed_out.is_error and "(timeout 1.5s) timed out" in text_of(timed_out), text_of(timed_out)

        # A client that gives up on a call: the gateway keeps serving it.
        with anyio.move_on_after(0.5):
            await client.call_tool("kitchen_slow", {"seconds": 1.2})
        assert text_of(await client.call_tool("kitchen_echo", {"text": "after cancel"})) == "after cancel"


async def test_a_server_that_never_starts_fails_open(connect: Any, write_config: Any) -> None:
    servers = {
        "numbers": server_entry("numbers.py"),
        "stuck": server_entry("never_ready.py"),
        "broken": server_entry("exits_early.py"),
    }
    # init_timeout gives a healthy server time to start on a loaded 2-core machine (two test workers and
    # their servers share it), and the stuck one none.
    async with connect(write_config(servers, {"init_timeout": 12})) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "numbers_add" in names
        assert not any(name.startswith(("stuck_", "broken_")) for name in names)
        assert text_of(await client.call_tool("numbers_add", {"a": 1, "b": 1})).startswith("2")


async def test_disabled_servers_and_tool_filters(connect: Any, write_config: Any) -> None:
    servers = {
        "numbers": server_entry("numbers.py", tools={"include": ["add", "mul*"]}),
        "words": server_entry("words.py", enabled=False),
        "kitchen": server_entry("kitchen.py", prefix="k", tools={"exclude": ["crash", "slow"]}),
    }
    async with connect(write_config(servers, {"separator": "-"})) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"numbers-add", "numbers-multiply", "k-echo"} <= names
        assert not {"numbers-sqrt", "k-crash", "k-slow"} & names
        assert not any(name.startswith("words") for name in names)


def _fixture_processes(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                pids.append(int(entry.name))
    return pids


async def test_shutdown_leaves_no_child_process(write_config: Any, tmp_path: Path) -> None:
    from tests.conftest import stdio_gateway

    marker = f"--tag={tmp_path.name}"
    servers = {"catalog": server_entry("catalog.py", "--count", "3", marker), "numbers": server_entry("numbers.py")}
    async with stdio_gateway(write_config(servers)) as client:
        await client.list_tools()
        assert _fixture_processes(marker)
    with anyio.fail_after(10):
        while _fixture_processes(marker):
            await anyio.sleep(0.1)


async def test_resource_subscriptions_and_updates(connect: Any, write_config: Any) -> None:
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(message.params.uri)

    async with connect(write_config({"kitchen": server_entry("kitchen.py")}), message_handler=on_message) as client:
        if connect.mode == "legacy":
            with pytest.warns(Warning):  # the SDK marks resources/subscribe deprecated in 2026-07-28
                await client.subscribe_resource("kitchen+kitchen://text")
            await client.call_tool("kitchen_touch", {"uri": "kitchen://text"})
            with anyio.fail_after(5):
                while "kitchen+kitchen://text" not in updates:
                    await anyio.sleep(0.02)
            return
        # 2026-07-28: a listen stream names the resources; the gateway subscribes at the server meanwhile.
        async with client.listen(resource_subscriptions=["kitchen+kitchen://text"]) as stream:
            await client.call_tool("kitchen_touch", {"uri": "kitchen://other"})  # not this stream's
            await client.call_tool("kitchen_touch", {"uri": "kitchen://text"})
            with anyio.fail_after(10):
                event = await stream.__anext__()
        assert event.uri == "kitchen+kitchen://text"  # type: ignore[attr-defined]


async def test_clients_on_the_2026_protocol_are_served_too(connect: Any, write_config: Any) -> None:
    """`mode="auto"` picks the newest protocol both sides speak: no initialize handshake, same answers."""
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with connect(write_config(THREE_SERVERS), mode="auto") as client:
        assert client.session.protocol_version >= "2026"
        listed = await client.list_tools()
        assert listed.cache_scope == "public"  # every client sees the same list (no auth, profiles or own sessions)
        names = {tool.name for tool in listed.tools}
        assert {"kitchen_echo", "numbers_add", "words_upper"} <= names
        assert text_of(await client.call_tool("kitchen_echo", {"text": "modern"})) == "modern"
        assert text_of(await client.call_tool("words_upper", {"text": "abc"})) == "ABC"
        await client.call_tool("kitchen_progress", {"steps": 3}, progress_callback=on_progress)
        assert progress == [1, 2, 3]
        failed = await client.call_tool("kitchen_fail", {"message": "nope"})
        assert failed.is_error and "nope" in text_of(failed)


async def test_an_http_server_that_dies_under_load_takes_nothing_else_down(
    connect: Any, write_config: Any, instances: Any
) -> None:
    """Calls racing a dead HTTP server's restart get clear errors; the gateway and other servers stay up."""
    url = instances.start("alpha")
    # The failed calls pause alpha (breaker_threshold 3): a short pause, so the wait for its return below is
    # for the reconnect, not for the default 10 s cooldown.
    settings = {"init_timeout": 15, "breaker_cooldown": 0.5}
    config = write_config({"alpha": {"url": url}, "numbers": server_entry("numbers.py")}, settings)
    async with connect(config) as client:
        assert text_of(await client.call_tool("alpha_whoami", {})) == "alpha"
        instances.kill("alpha")
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("alpha_whoami", {}))

        async with anyio.create_task_group() as task_group:
            for _ in range(6):
                task_group.start_soon(call)
        assert all(result.is_error for result in results)
        assert all("alpha" in text_of(result) for result in results)
        assert text_of(await client.call_tool("numbers_add", {"a": 1, "b": 2})).startswith("3")

        instances.start("alpha")  # same port: the next call reconnects
        with anyio.fail_after(30):
            while True:
                result = await client.call_tool("alpha_whoami", {})
                if not result.is_error:
                    break
                await anyio.sleep(0.3)
        assert text_of(result) == "alpha"


async def test_paginated_lists_are_followed_to_the_end(connect: Any, write_config: Any) -> None:
    """A server that lists 4 items per page: every page of every kind reaches the merged lists."""
    config = write_config({"paged": server_entry("paged.py", "--count", "23", "--page-size", "4")})
    async with connect(config) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        assert tools == [f"paged_t{i:02d}" for i in range(1, 24)]
        resources = [r.uri for r in (await client.list_resources()).resources]
        assert resources == [f"paged+paged://r{i:02d}" for i in range(1, 24)]
        templates = (await client.list_resource_templates()).resource_templates
        assert len(templates) == 23 and templates[-1].uri_template == "paged+paged://tpl23/{x}"
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert prompts == [f"paged_p{i:02d}" for i in range(1, 24)]
        # Items from the last page route back like the first.
        assert text_of(await client.call_tool("paged_t23", {})) == "t23"
        last = (await client.read_resource("paged+paged://r23")).contents[0]
        assert last.text == "resource r23"  # type: ignore[union-attr]
        prompt = await client.get_prompt("paged_p23", {})
        assert prompt.messages[0].content.text == "prompt p23"  # type: ignore[union-attr]


async def test_an_sse_server_sits_behind_the_gateway(connect: Any, write_config: Any) -> None:
    port = free_port()
    command = [sys.executable, str(SERVERS / "numbers.py"), "--sse", str(port)]
    process = subprocess.Popen(command, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        servers = {
            "old": {"url": f"http://127.0.0.1:{port}/sse", "transport": "sse"},
            "seed": {"url": f"http://127.0.0.1:{port}/sse"},  # smart-mcp-proxy's spelling: SSE from the path
            "words": server_entry("words.py"),
        }
        async with connect(write_config(servers)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"old_add", "old_sqrt", "words_upper", "seed_add"} <= names
            assert text_of(await client.call_tool("seed_add", {"a": 1, "b": 2})).startswith("3")
            assert text_of(await client.call_tool("old_add", {"a": 40, "b": 2})).startswith("42")
            constants = (await client.read_resource("old+numbers://constants")).contents[0]
            assert "pi" in constants.text  # type: ignore[union-attr]
            failed = await client.call_tool("old_sqrt", {"x": -1})
            assert failed.is_error
    finally:
        stop_process(process)


async def test_a_client_that_cancels_cancels_the_backend_call(connect: Any, write_config: Any) -> None:
    """A cancelled call and a timed-out one both reach the server as notifications/cancelled."""
    config = write_config({"inst": server_entry("instance.py", "--name", "inst", timeout=1)})
    async with connect(config) as client:
        assert text_of(await client.call_tool("inst_whoami", {})) == "inst"
        with anyio.move_on_after(0.5) as scope:
            await client.call_tool("inst_slow", {"seconds": 30})
        assert scope.cancelled_caught
        with anyio.fail_after(10):
            while text_of(await client.call_tool("inst_cancellations", {})) != "1":
                await anyio.sleep(0.05)
        timed_out = await client.call_tool("inst_slow", {"seconds": 30})
        assert timed_out.is_error and "timed out" in text_of(timed_out)
        with anyio.fail_after(10):
            while text_of(await client.call_tool("inst_cancellations", {})) != "2":
                await anyio.sleep(0.05)


def _processes_with(marker: str) -> dict[int, int]:
    """pid -> parent pid of every process whose command line contains `marker`."""
    found = {}
    for pid in _fixture_processes(marker):
        try:
            stat = (Path("/proc") / str(pid) / "stat").read_text()
        except OSError:
            continue
        found[pid] = int(stat.rpartition(")")[2].split()[1])
    return found


async def test_grandchildren_die_with_their_server(connect: Any, write_config: Any, tmp_path: Path) -> None:
    """A server that starts a helper (which keeps its stderr open): killing the server or stopping the
    gateway stops the helper too, and the death is noticed although stderr never reaches EOF."""
    marker = f"3000.{abs(hash(tmp_path.name)) % 10**8:08d}"  # a unique `sleep` duration to find the helper by
    script = f"sleep {marker} </dev/null >/dev/null & exec {sys.executable} {SERVERS / 'numbers.py'}"
    servers = {"numbers": {"command": "sh", "args": ["-c", script]}, "words": server_entry("words.py")}
    async with connect(write_config(servers)) as client:
        assert text_of(await client.call_tool("numbers_add", {"a": 1, "b": 2})).startswith("3")
        [(helper, server_pid)] = _processes_with(marker).items()
        os.kill(server_pid, signal.SIGKILL)
        with anyio.fail_after(10):
            while helper in _processes_with(marker):
                await anyio.sleep(0.1)
        assert text_of(await client.call_tool("words_upper", {"text": "abc"})) == "ABC"
        assert text_of(await client.call_tool("numbers_add", {"a": 2, "b": 2})).startswith("4")
        assert len(_processes_with(marker)) == 1  # the restarted server's own helper
    if connect.transport == "stdio":  # the client's exit ends the gateway (an HTTP one keeps serving)
        with anyio.fail_after(10):
            while _processes_with(marker):
                await anyio.sleep(0.1)


async def test_bad_input_to_every_request_gets_a_clear_error(connect: Any, write_config: Any) -> None:
    """Unknown names are invalid params; what a server refuses keeps the server's code and message."""

    async def error_of(request: Any) -> types.ErrorData:
        with pytest.raises(MCPError) as caught:
            await request
        assert "Traceback" not in caught.value.error.message
        return caught.value.error

    # kitchen speaks the handshake era here: at 2026-07-28 the SDK answers any exception of a server's
    # handler as "Internal server error", so only this era shows the server's own words to relay.
    servers = {**THREE_SERVERS, "kitchen": server_entry("kitchen.py", protocol="legacy")}
    async with connect(write_config(servers)) as client:
        unknown = await client.call_tool("numbers_nope", {})
        assert unknown.is_error and "unknown tool 'numbers_nope'" in text_of(unknown)
        wrong_args = await client.call_tool("numbers_add", {"a": "one"})
        assert wrong_args.is_error and "validation error" in text_of(wrong_args)
        assert "Traceback" not in text_of(wrong_args)

        unknown_uri = await error_of(client.read_resource("nobody+x://y"))
        assert unknown_uri.code == types.INVALID_PARAMS and "'<prefix>+<original uri>'" in unknown_uri.message
        refused = await error_of(client.read_resource("kitchen+kitchen://nothing"))
        assert refused.code == types.INVALID_PARAMS  # kitchen's own answer, not an internal error
        assert "server 'kitchen'" in refused.message and "Unknown resource: kitchen://nothing" in refused.message

        assert (await error_of(client.get_prompt("nope", {}))).code == types.INVALID_PARAMS
        missing = await error_of(client.get_prompt("kitchen_greet", {}))
        assert "server 'kitchen'" in missing.message and "Missing required arguments" in missing.message
        with pytest.warns(Warning):  # resources/subscribe is deprecated in 2026-07-28
            not_there = await error_of(client.subscribe_resource("nobody+x://y"))
        # A session-era client subscribes to a resource that does not exist; 2026-07-28 has no such method.
        assert not_there.code == (types.INVALID_PARAMS if connect.mode == "legacy" else types.METHOD_NOT_FOUND)

        assert text_of(await client.call_tool("words_upper", {"text": "still fine"})) == "STILL FINE"


async def test_resource_links_read_back_and_uri_arguments_reach_the_server_in_its_own_form(client: Client) -> None:
    pointed = await client.call_tool("links_link", {"item": "7"})
    link, embedded = pointed.content
    assert isinstance(link, types.ResourceLink) and isinstance(embedded, types.EmbeddedResource)
    assert str(link.uri) == str(embedded.resource.uri) == "links+links://item/7"  # readable through the gateway
    read = await client.read_resource(str(link.uri))
    assert read.contents[0].text == "the text of item 7"  # type: ignore[union-attr]
    assert str(read.contents[0].uri) == "links+links://item/7"
    # The tool's schema says its argument is a URI: the exposed form a client holds reaches the server
    # as the server knows it; its own form passes unchanged.
    for given in ("links+links://item/7", "links://item/7"):
        described = await client.call_tool("links_describe", {"uri": given})
        assert text_of(described) == "got links://item/7: the text of item 7", given


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stdio_gateway_speaks_to_a_stdio_server_in_its_clients_era(write_config: Any, mode: str) -> None:
    """Under `protocol: auto`, a server that speaks both eras is reached in the era of the gateway's one
    client (the handshake for a session-era client, discovery for a 2026-07-28 one); a server that
    refuses the handshake is started again with discovery and works for either client."""
    config = write_config({"kitchen": server_entry("kitchen.py"), "modern": server_entry("modern_only.py")})
    async with stdio_gateway(config, mode=mode) as client:
        assert text_of(await client.call_tool("kitchen_echo", {"text": "both"})) == "both"
        assert text_of(await client.call_tool("modern_echo", {"text": "new"})) == "new"
        deadline = time.monotonic() + 15
        while True:  # the running gateway rewrites its live view every couple of seconds
            live = subprocess.run(
                [sys.executable, "-m", "mcp_manifold", "servers", "--config", str(config), "--json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert live.returncode == 0, live.stderr
            rows = {row["name"]: row for gateway in json.loads(live.stdout)["gateways"] for row in gateway["servers"]}
            if all(rows.get(name, {}).get("protocol") for name in ("kitchen", "modern")) or time.monotonic() > deadline:
                break
            await anyio.sleep(0.5)
    assert rows["kitchen"]["protocol"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert rows["modern"]["protocol"] == "2026-07-28"
    assert rows["modern"]["restarts"] == 0 and rows["modern"]["state"] == "ready"  # a refused handshake is no failure


async def test_a_server_found_to_ask_mid_call_is_reached_in_a_session_after_a_restart(write_config: Any) -> None:
    """A 2026-07-28 client's first call to such a server fails once ("call again") while the gateway learns
    it needs a session; what was learned is kept in the data dir, so the next start does not fail again."""

    async def open_the_page(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept")

    config = write_config({"midcall": server_entry("midcall.py")})
    async with stdio_gateway(config, mode="auto", elicitation_callback=open_the_page) as client:
        first = await client.call_tool("midcall_sign_in", {"service": "shop"})
        assert first.is_error and "call again" in text_of(first), text_of(first)
        assert text_of(await client.call_tool("midcall_sign_in", {"service": "shop"})) == "sign-in: accept"
    async with stdio_gateway(config, mode="auto", elicitation_callback=open_the_page) as client:
        again = await client.call_tool("midcall_sign_in", {"service": "shop"})
        assert not again.is_error and text_of(again) == "sign-in: accept", text_of(again)


async def test_a_principals_later_client_that_can_answer_gets_the_servers_questions(tmp_path: Path) -> None:
    """`session_scope: client` over HTTP: one session per authenticated 2026-07-28 principal. Its first client
    cannot elicit; its next one can, and must get the server's question, not "once it authenticates"."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp_manifold._config.security import hash_key

    key = "mfk_test-key-for-ada"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"midcall": server_entry("midcall.py", session_scope="client")},
                "manifold": {"data_dir": str(tmp_path / "data")},
                "auth": {"api_keys": {"ada": {"sha256": hash_key(key)}}},
            }
        )
    )
    port = free_port()
    process = subprocess.Popen(http_serve_command(config, port), start_new_session=True)

    async def open_the_page(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept")

    try:
        wait_for_port(port, process)
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as first,
        ):
            refused = await first.call_tool("midcall_sign_in", {"service": "shop"})
            assert refused.is_error and "authenticates" not in text_of(refused), text_of(refused)
            assert "this client did not declare that it can answer it (elicitation)" in text_of(refused)
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http), elicitation_callback=open_the_page) as second,
        ):
            answer = await second.call_tool("midcall_sign_in", {"service": "shop"})
            if answer.is_error:  # at most once: the gateway learns the server needs a session
                assert "call again" in text_of(answer) and "authenticates" not in text_of(answer), text_of(answer)
                answer = await second.call_tool("midcall_sign_in", {"service": "shop"})
            assert not answer.is_error and text_of(answer) == "sign-in: accept", text_of(answer)
    finally:
        stop_process(process)


def http_serve_command(config: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(port)]


async def test_a_servers_own_server_error_does_not_restart_it(client: Client) -> None:
    """-32000 is both JSON-RPC's first "server error" code and the SDK's code for a closed connection: the
    server's own answer with it is an error of that call, and the server (and every other call) goes on."""
    before = text_of(await client.call_tool("erring_pid", {}))
    failed = await client.call_tool("erring_fail", {"message": "rate limited, try later"})
    assert failed.is_error and "rate limited, try later" in text_of(failed), text_of(failed)
    assert "connection closed" not in text_of(failed)
    assert text_of(await client.call_tool("erring_pid", {})) == before  # not started again
