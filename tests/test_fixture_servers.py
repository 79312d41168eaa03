"""Checks that the fixture servers in tests/servers behave as documented, as real subprocesses.

Everything goes through the SDK client (``mode="legacy"``, i.e. the initialize handshake) over stdio, plus one
streamable-HTTP run of kitchen; never_ready and exits_early are driven with plain subprocesses.
"""

from __future__ import annotations

import base64
import json
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

SERVERS = Path(__file__).parent / "servers"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ROOTS = ["file:///tmp/project-a", "file:///tmp/project-b"]

pytestmark = [
    pytest.mark.anyio,
    # kitchen exercises logging/sampling/roots/resources-subscribe, which the SDK flags as deprecated (2026-07-28).
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server_params(name: str, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVERS / f"{name}.py"), *args], env=env)


@dataclass
class Recorder:
    """Client-side callbacks that answer like a cooperative host and remember what they saw."""

    notifications: list[types.ServerNotification] = field(default_factory=list)
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    sampled: list[types.CreateMessageRequestParams] = field(default_factory=list)
    elicited: list[types.ElicitRequestParams] = field(default_factory=list)

    async def on_message(self, message: IncomingMessage) -> None:
        if not isinstance(message, Exception):
            self.notifications.append(message)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampled.append(params)
        content = params.messages[0].content
        prompt = content.text if isinstance(content, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=f"model says: {prompt}"), model="fake-llm"
        )

    async def on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicited.append(params)
        if "decline" in params.message:
            return types.ElicitResult(action="decline")
        if "cancel" in params.message:
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="accept", content={"answer": "42"})

    async def on_list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in ROOTS])  # type: ignore[arg-type]

    async def wait_for(self, method: str, timeout: float = 5) -> types.ServerNotification:
        with anyio.fail_after(timeout):
            while True:
                for notification in self.notifications:
                    if notification.method == method:
                        return notification
                await anyio.sleep(0.01)

    def client(self, server: Any) -> Client:
        return Client(
            server,
            mode="legacy",
            sampling_callback=self.on_sampling,
            elicitation_callback=self.on_elicitation,
            list_roots_callback=self.on_list_roots,
            logging_callback=self.on_log,
            message_handler=self.on_message,
        )


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent), block
    return block.text


# --- kitchen ---------------------------------------------------------------------------------------------------


async def test_kitchen_lists_everything() -> None:
    async with Recorder().client(server_params("kitchen")) as client:
        assert client.server_info is not None and client.server_info.name == "kitchen"
        caps = client.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed
        assert caps.resources is not None and caps.resources.subscribe
        assert caps.logging is not None and caps.prompts is not None

        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {
            "echo", "add", "image", "embedded", "mixed", "progress", "log", "sample", "elicit", "roots",
            "slow", "crash", "huge", "fail", "add_tool", "touch", "stderr",
        }  # fmt: skip
        assert list(tools["elicit"].input_schema["properties"]) == ["question"]
        assert tools["roots"].input_schema["properties"] == {}
        assert tools["add"].output_schema is not None and tools["echo"].output_schema is None

        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(resources) == {"kitchen://text", "kitchen://config.json", "kitchen://blob"}
        assert resources["kitchen://config.json"].mime_type == "text/plain"
        assert resources["kitchen://blob"].mime_type == "application/octet-stream"
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["kitchen://greeting/{name}"]

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"greet", "summarize"}
        assert [(a.name, a.required) for a in prompts["greet"].arguments or []] == [("name", True), ("style", False)]
        assert prompts["summarize"].description


async def test_kitchen_content_tools(tmp_path: Path) -> None:
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Recorder().client(stdio_client(server_params("kitchen"), errlog=errlog)) as client:
            assert text_of(await client.call_tool("echo", {"text": "héllo"})) == "héllo"

            added = await client.call_tool("add", {"a": 2, "b": 40})
            assert added.structured_content == {"result": 42} and text_of(added) == "42"

            image = (await client.call_tool("image")).content
            assert len(image) == 1 and isinstance(image[0], types.ImageContent)
            assert image[0].mime_type == "image/png" and base64.b64decode(image[0].data).startswith(PNG_SIGNATURE)

            embedded = (await client.call_tool("embedded")).content
            assert len(embedded) == 1 and isinstance(embedded[0], types.EmbeddedResource)
            resource = embedded[0].resource
            assert isinstance(resource, types.TextResourceContents)
            assert (str(resource.uri), resource.text) == ("kitchen://embedded", "embedded text")

            mixed = (await client.call_tool("mixed")).content
            assert [block.type for block in mixed] == ["text", "image"]

            assert len(text_of(await client.call_tool("huge"))) == 1_000_000
            assert len(text_of(await client.call_tool("huge", {"size": 7}))) == 7

            failed = await client.call_tool("fail")
            assert failed.is_error and "boom" in text_of(failed)
            failed = await client.call_tool("fail", {"message": "custom failure"})
            assert failed.is_error and "custom failure" in text_of(failed)

            assert text_of(await client.call_tool("stderr", {"text": "a line for stderr"})) == "ok"

            with pytest.raises(MCPError):  # the process dies mid-call: "Connection closed"
                await client.call_tool("crash")
    stderr = (tmp_path / "stderr.log").read_text()
    assert "a line for stderr" in stderr and "crashing now" in stderr


async def test_kitchen_talks_back_during_calls() -> None:
    recorder = Recorder()
    async with recorder.client(server_params("kitchen")) as client:
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        result = await client.call_tool("progress", {"steps": 4}, progress_callback=on_progress)
        assert text_of(result) == "done 4"
        assert [(p, t) for p, t, _ in progress] == [(1, 4), (2, 4), (3, 4), (4, 4)]
        assert all(message for _, _, message in progress)

        assert text_of(await client.call_tool("log", {"message": "hello log", "level": "warning"})) == "logged"
        with anyio.fail_after(5):
            while not recorder.logs:
                await anyio.sleep(0.01)
        assert (recorder.logs[0].level, recorder.logs[0].data) == ("warning", "hello log")
        await client.set_logging_level("error")
        await client.call_tool("log", {"message": "too quiet", "level": "info"})
        await client.call_tool("log", {"message": "loud", "level": "error"})
        with anyio.fail_after(5):
            while len(recorder.logs) < 2:
                await anyio.sleep(0.01)
        assert [log.data for log in recorder.logs] == ["hello log", "loud"]

        assert text_of(await client.call_tool("sample", {"prompt": "2+2?"})) == "model says: 2+2?"
        assert len(recorder.sampled) == 1

        assert text_of(await client.call_tool("elicit", {"question": "Your name?"})) == "accepted: 42"
        schema = recorder.elicited[0]
        assert isinstance(schema, types.ElicitRequestFormParams)
        assert schema.message == "Your name?" and list(schema.requested_schema["properties"]) == ["answer"]
        assert text_of(await client.call_tool("elicit", {"question": "please decline"})) == "declined"
        assert text_of(await client.call_tool("elicit", {"question": "please cancel"})) == "cancelled"

        assert text_of(await client.call_tool("roots")).splitlines() == ROOTS


async def test_kitchen_change_notifications() -> None:
    recorder = Recorder()
    async with recorder.client(server_params("kitchen")) as client:
        assert text_of(await client.call_tool("add_tool", {"name": "fresh_tool"})) == "added fresh_tool"
        await recorder.wait_for("notifications/tools/list_changed")
        assert "fresh_tool" in {tool.name for tool in (await client.list_tools()).tools}
        assert text_of(await client.call_tool("fresh_tool")) == "dynamic tool fresh_tool"

        await client.subscribe_resource("kitchen://text")
        assert text_of(await client.call_tool("touch", {"uri": "kitchen://text"})) == "touched kitchen://text"
        updated = await recorder.wait_for("notifications/resources/updated")
        assert isinstance(updated, types.ResourceUpdatedNotification)
        assert updated.params.uri == "kitchen://text"


async def test_kitchen_resources_and_prompts() -> None:
    async with Recorder().client(server_params("kitchen")) as client:

        async def read(uri: str) -> types.TextResourceContents | types.BlobResourceContents:
            contents = (await client.read_resource(uri)).contents
            assert len(contents) == 1
            return contents[0]

        text = await read("kitchen://text")
        assert isinstance(text, types.TextResourceContents) and text.text == "hello from kitchen"
        config = await read("kitchen://config.json")
        assert isinstance(config, types.TextResourceContents) and config.mime_type == "text/plain"
        assert json.loads(config.text) == {"debug": True, "level": 3}
        blob = await read("kitchen://blob")
        assert isinstance(blob, types.BlobResourceContents) and blob.mime_type == "application/octet-stream"
        assert base64.b64decode(blob.blob) == b"\x00\x01\x02binary"
        greeting = await read("kitchen://greeting/Ada")
        assert isinstance(greeting, types.TextResourceContents) and greeting.text == "Hello, Ada!"

        for args, expected in [
            ({"name": "Bob"}, "Greet Bob in a plain way."),
            ({"name": "Bob", "style": "pirate"}, "Greet Bob in a pirate way."),
        ]:
            messages = (await client.get_prompt("greet", args)).messages
            assert len(messages) == 1 and messages[0].role == "user"
            assert isinstance(messages[0].content, types.TextContent) and messages[0].content.text == expected
        summary = (await client.get_prompt("summarize", {"text": "Long text."})).messages
        assert isinstance(summary[0].content, types.TextContent) and "Long text." in summary[0].content.text


async def test_kitchen_slow_is_cancellable() -> None:
    async with Recorder().client(server_params("kitchen")) as client:
        started = time.monotonic()
        with anyio.move_on_after(0.5) as scope:
            await client.call_tool("slow", {"seconds": 30})
        assert scope.cancelled_caught and time.monotonic() - started < 5
        assert text_of(await client.call_tool("echo", {"text": "still alive"})) == "still alive"
        assert text_of(await client.call_tool("slow", {"seconds": 0.05})) == "slept"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[Any], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"server exited early with {process.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port}")


@contextmanager
def spawn(name: str, *args: str, stdin: int | IO[Any] | None = subprocess.DEVNULL) -> Iterator[subprocess.Popen[bytes]]:
    """Start a fixture script as a plain subprocess and make sure it is gone afterwards."""
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / f"{name}.py"), *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


async def test_kitchen_over_streamable_http() -> None:
    port = free_port()
    with spawn("kitchen", "--http", str(port)) as process:
        wait_for_port(port, process)
        recorder = Recorder()
        async with recorder.client(f"http://127.0.0.1:{port}/mcp") as client:
            assert client.server_info is not None and client.server_info.name == "kitchen"
            assert text_of(await client.call_tool("echo", {"text": "over http"})) == "over http"
            assert text_of(await client.call_tool("add_tool", {"name": "http_tool"})) == "added http_tool"
            await recorder.wait_for("notifications/tools/list_changed")
            assert text_of(await client.call_tool("sample", {"prompt": "hi"})) == "model says: hi"
    assert process.poll() is not None


# --- the other MCP fixtures ------------------------------------------------------------------------------------


async def test_numbers() -> None:
    async with Recorder().client(server_params("numbers")) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"add", "multiply", "sqrt"} and all(tool.description for tool in tools.values())
        assert (await client.call_tool("add", {"a": 1.5, "b": 2})).structured_content == {"result": 3.5}
        assert (await client.call_tool("multiply", {"a": 3, "b": 4})).structured_content == {"result": 12.0}
        assert (await client.call_tool("sqrt", {"x": 9})).structured_content == {"result": 3.0}
        assert (await client.call_tool("sqrt", {"x": -1})).is_error
        assert [p.name for p in (await client.list_prompts()).prompts] == ["explain"]
        explained = (await client.get_prompt("explain", {"topic": "primes"})).messages[0].content
        assert isinstance(explained, types.TextContent) and "primes" in explained.text
        constants = (await client.read_resource("numbers://constants")).contents[0]
        assert isinstance(constants, types.TextResourceContents)
        assert json.loads(constants.text)["pi"] == pytest.approx(3.14159, abs=1e-5)


async def test_words() -> None:
    async with Recorder().client(server_params("words")) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        long_names = [name for name in names if len(name) == 60]
        assert set(names) - set(long_names) == {"upper", "reverse", "count_words"} and len(long_names) == 1
        assert text_of(await client.call_tool("upper", {"text": "abc"})) == "ABC"
        assert text_of(await client.call_tool("reverse", {"text": "abc"})) == "cba"
        assert (await client.call_tool("count_words", {"text": "one two  three"})).structured_content == {"result": 3}
        assert text_of(await client.call_tool(long_names[0], {"text": "same"})) == "same"


async def test_catalog() -> None:
    async with Recorder().client(server_params("catalog")) as client:
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == [f"tool_{i:04d}" for i in range(1, 201)]
        assert len({tool.description for tool in tools}) == 200
        assert tools[0].description == "Create a calendar event."
        echoed = await client.call_tool("tool_0007", {"query": "pasta for four"})
        assert json.loads(text_of(echoed)) == {"query": "pasta for four", "limit": 10}

    async with Recorder().client(server_params("catalog", "--count", "3", "--tag", "a")) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == [f"tool_000{i}_a" for i in (1, 2, 3)]
    async with Recorder().client(server_params("catalog", "--count", "1", env={"CATALOG_TAG": "b"})) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["tool_0001_b"]


# --- the broken fixtures ---------------------------------------------------------------------------------------


def test_never_ready_over_stdio() -> None:
    with spawn("never_ready", stdin=subprocess.PIPE) as process:
        assert process.stdin is not None and process.stdout is not None
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        process.stdin.write(json.dumps(initialize).encode() + b"\n")
        process.stdin.flush()
        process.stdin.close()
        readable, _, _ = select.select([process.stdout], [], [], 1.0)
        assert not readable  # not a byte of output, and stdout still open
        assert process.poll() is None  # still alive after stdin closed


def test_never_ready_over_http() -> None:
    port = free_port()
    with spawn("never_ready", "--http", str(port)) as process:
        wait_for_port(port, process)
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
            with pytest.raises(TimeoutError):
                sock.recv(1)


@pytest.mark.parametrize("args", [[], ["--http", "1"]])
def test_exits_early(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(SERVERS / "exits_early.py"), *args], capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 2
    assert done.stderr == "fatal: missing API key\n" and done.stdout == ""
