"""Self-checks of the protocol-era fixtures (modern_only, asks), talked to directly with the SDK client.

Real subprocesses over stdio and streamable HTTP; the SDK client in ``mode="auto"`` (``server/discover``,
falling back to ``initialize``) and ``mode="legacy"`` (``initialize`` only). Gateway tests come later; these
only prove the fixtures behave as tests/servers/README.md says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from tests.conftest import SERVERS, free_port, stop_process, wait_for_port

pytestmark = [
    pytest.mark.anyio,
    # The fixtures exercise sampling, roots and logging on purpose; the SDK flags them as deprecated (2026-07-28).
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

MODERN, LEGACY = LATEST_MODERN_VERSION, LATEST_HANDSHAKE_VERSION
ROOTS = ["file:///tmp/project-a", "file:///tmp/project-b"]
CONSENT_URL = "https://example.com/asks/consent"
CHANGE_METHODS = {"notifications/tools/list_changed", "notifications/resources/updated"}


@contextmanager
def http_server(script: str, *args: str) -> Iterator[str]:
    """Run a fixture on streamable HTTP; yields its /mcp URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / script), *args, "--http", str(port)], start_new_session=True
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


@asynccontextmanager
async def server_target(transport: str, script: str, *args: str) -> AsyncIterator[Any]:
    """What `Client` takes to reach a fixture over `transport` ("stdio" or "http")."""
    if transport == "stdio":
        yield StdioServerParameters(command=sys.executable, args=[str(SERVERS / script), *args])
        return
    with http_server(script, *args) as url:
        yield url


@dataclass
class Host:
    """Client-side callbacks that answer like a cooperative host and remember what they were asked."""

    elicited: list[types.ElicitRequestParams] = field(default_factory=list)
    sampled: list[types.CreateMessageRequestParams] = field(default_factory=list)
    roots_asked: int = 0
    notifications: list[types.ServerNotification] = field(default_factory=list)
    logs: list[tuple[str, Any]] = field(default_factory=list)
    decline: bool = False

    async def on_elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        self.elicited.append(params)
        if self.decline:
            return types.ElicitResult(action="decline")
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.sampled.append(params)
        content = params.messages[0].content
        prompt = content.text if isinstance(content, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=f"<{prompt}>"), model="fake-llm"
        )

    async def on_list_roots(self, context: ClientRequestContext) -> Any:
        self.roots_asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in ROOTS])  # type: ignore[arg-type]

    async def on_message(self, message: IncomingMessage) -> None:
        if not isinstance(message, Exception):
            self.notifications.append(message)

    @property
    def methods(self) -> list[str]:
        return [notification.method for notification in self.notifications]

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.data))

    def client(self, target: Any, mode: str, **kwargs: Any) -> Client:
        return Client(
            target,
            mode=mode,
            read_timeout_seconds=30,
            elicitation_callback=self.on_elicitation,
            sampling_callback=self.on_sampling,
            list_roots_callback=self.on_list_roots,
            message_handler=self.on_message,
            logging_callback=self.on_log,
            **kwargs,
        )


def text_of(result: types.CallToolResult) -> str:
    assert not result.is_error, result.content
    (block,) = result.content
    assert isinstance(block, types.TextContent), block
    return block.text


def refusal_of(exc: BaseException) -> MCPError:
    """The MCPError a failed connect raised (the transport's task group may wrap it)."""
    while isinstance(exc, BaseExceptionGroup):
        (exc,) = exc.exceptions
    assert isinstance(exc, MCPError), repr(exc)
    return exc


# --- modern_only -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_modern_only_discovers_and_refuses_the_handshake(transport: str) -> None:
    async with server_target(transport, "modern_only.py") as target:
        async with Host().client(target, "auto") as client:
            assert client.protocol_version == MODERN
            assert client.session.discover_result is not None and client.session.initialize_result is None
            assert client.server_info is not None and client.server_info.name == "modern_only"
            caps = client.server_capabilities
            # At 2026-07-28 listChanged and subscribe mean "served on subscriptions/listen".
            assert caps.tools is not None and caps.tools.list_changed
            assert caps.resources is not None and caps.resources.subscribe and caps.resources.list_changed
            assert caps.logging is None  # no logging/setLevel at this era
            assert client.instructions == "A 2026-07-28-only test fixture."

        with pytest.raises(BaseException) as refused:
            async with Host().client(target, "legacy"):
                pass
        error = refusal_of(refused.value)
        assert error.error.code == types.UNSUPPORTED_PROTOCOL_VERSION
        assert "speaks only MCP 2026-07-28" in error.error.message and "initialize" in error.error.message
        assert error.error.data == {"supported": [MODERN], "requested": LEGACY}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_modern_only_tools_resources_prompts_progress(transport: str) -> None:
    async with server_target(transport, "modern_only.py") as target, Host().client(target, "auto") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == {"echo", "fail", "add", "progress", "add_tool", "touch", "log", "envelope"}
        assert text_of(await client.call_tool("echo", {"text": "héllo"})) == "héllo"
        assert (await client.call_tool("add", {"a": 2, "b": 40})).structured_content == {"result": 42}

        steps: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append((progress, total, message))

        done = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
        assert text_of(done) == "done 3"
        assert steps == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]

        listing = await client.list_resources()
        assert [str(r.uri) for r in listing.resources] == ["modern://text"]
        assert (listing.ttl_ms, listing.cache_scope) == (60_000, "public")
        assert (await client.list_tools()).ttl_ms == 0  # no hint: immediately stale
        text = (await client.read_resource("modern://text")).contents[0]
        assert isinstance(text, types.TextResourceContents) and text.text == "hello from modern_only"
        greeting = (await client.read_resource("modern://greeting/Ada")).contents[0]
        assert isinstance(greeting, types.TextResourceContents) and greeting.text == "Hello, Ada!"
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        content = prompt.messages[0].content
        assert isinstance(content, types.TextContent) and content.text == "Greet Ada warmly."


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_modern_only_announces_changes_on_listen_streams(transport: str) -> None:
    async with server_target(transport, "modern_only.py") as target:
        host = Host()
        async with host.client(target, "auto") as client:
            async with client.listen(tools_list_changed=True, resource_subscriptions=["modern://text"]) as stream:
                assert stream.honored.tools_list_changed and stream.honored.resource_subscriptions == ["modern://text"]
                assert text_of(await client.call_tool("add_tool", {"name": "zap"})) == "added zap"
                assert text_of(await client.call_tool("touch", {"uri": "modern://other"})) == "touched modern://other"
                assert text_of(await client.call_tool("touch", {"uri": "modern://text"})) == "touched modern://text"
                events = []
                with anyio.fail_after(10):
                    async for event in stream:
                        events.append(event)
                        if len(events) == 2:
                            break
            # Only what the stream asked for; modern://other was not subscribed.
            assert [type(event).__name__ for event in events] == ["ToolsListChanged", "ResourceUpdated"]
            assert events[1].uri == "modern://text"  # type: ignore[union-attr]
            assert "zap" in {tool.name for tool in (await client.list_tools()).tools}
            assert text_of(await client.call_tool("zap", {})) == "dynamic tool zap"
        # At this era change notifications come only on the listen stream, stamped with its id.
        changes = [n for n in host.notifications if n.method in CHANGE_METHODS]
        assert [n.method for n in changes] == ["notifications/tools/list_changed", "notifications/resources/updated"]
        assert all((n.params.meta or {}).get(SUBSCRIPTION_ID_META_KEY) == stream.subscription_id for n in changes)  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_modern_only_logs_only_to_requests_that_opt_in(transport: str) -> None:
    async with server_target(transport, "modern_only.py") as target:
        quiet = Host()
        async with quiet.client(target, "auto") as client:
            assert text_of(await client.call_tool("log", {"message": "unheard", "level": "error"})) == "logged"
        assert quiet.logs == []

        loud = Host()
        async with loud.client(target, "auto", log_level="warning") as client:
            await client.call_tool("log", {"message": "too low", "level": "info"})
            await client.call_tool("log", {"message": "heard", "level": "warning"})
            envelope = json.loads(text_of(await client.call_tool("envelope", {})))
        assert loud.logs == [("warning", "heard")]
        assert envelope["io.modelcontextprotocol/protocolVersion"] == MODERN
        assert envelope["io.modelcontextprotocol/logLevel"] == "warning"
        assert envelope["io.modelcontextprotocol/clientInfo"]["name"] == "mcp"
        # The client declares what its callbacks can answer, on every request.
        capabilities = envelope["io.modelcontextprotocol/clientCapabilities"]
        assert set(capabilities) == {"sampling", "elicitation", "roots"}


async def test_modern_only_http_opens_no_session_for_a_handshake() -> None:
    with http_server("modern_only.py") as url:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        async with httpx.AsyncClient() as http:
            response = await http.post(url, json=initialize, headers=headers)
        assert response.status_code == 400 and "mcp-session-id" not in response.headers
        error = response.json()["error"]
        assert error["code"] == types.UNSUPPORTED_PROTOCOL_VERSION
        assert error["data"] == {"supported": [MODERN], "requested": "2025-06-18"}


# --- asks ------------------------------------------------------------------------------------------------------

# (server --era, client mode) -> the era the connection speaks; None: the client is refused.
PAIRINGS = {
    ("both", "auto"): MODERN,
    ("both", "legacy"): LEGACY,
    ("modern", "auto"): MODERN,
    ("legacy", "auto"): LEGACY,  # discover refused the way a 2025 server refuses it, then initialize
    ("legacy", "legacy"): LEGACY,
    ("modern", "legacy"): None,
}
EXPECTED = {
    "ask_name": "hello Ada",
    "ask_model": "model said: <what is 6 x 7?>",
    "ask_roots": "\n".join(ROOTS),
    "ask_url": "url accept",
    "interview": "interview: Ada; model said: <Write a one-line greeting for Ada.>",
    "survey": f"survey: Ada; roots: {chr(10).join(ROOTS)}",
}


@pytest.mark.parametrize(
    ("transport", "era", "mode"),
    [("stdio", era, mode) for era, mode in PAIRINGS]
    + [("http", "both", "auto"), ("http", "both", "legacy"), ("http", "modern", "auto"), ("http", "legacy", "auto")]
    + [("http", "modern", "legacy")],
)
async def test_asks_answers_alike_in_every_pairing(transport: str, era: str, mode: str) -> None:
    expected_version = PAIRINGS[(era, mode)]
    host = Host()
    async with server_target(transport, "asks.py", "--era", era) as target:
        if expected_version is None:
            with pytest.raises(BaseException) as refused:
                async with host.client(target, mode):
                    pass
            assert refusal_of(refused.value).error.code == types.UNSUPPORTED_PROTOCOL_VERSION
            return
        async with host.client(target, mode) as client:
            assert client.protocol_version == expected_version
            assert {tool.name for tool in (await client.list_tools()).tools} == set(EXPECTED)
            answers = {name: text_of(await client.call_tool(name, {"prompt": "what is 6 x 7?"})) for name in EXPECTED}
            prompt = (await client.get_prompt("greeting")).messages[0].content
            resource = (await client.read_resource("asks://name")).contents[0]
    assert answers == EXPECTED
    assert isinstance(prompt, types.TextContent) and prompt.text == "Write a warm greeting for Ada."
    assert isinstance(resource, types.TextResourceContents) and resource.text == "Ada"
    # Each question was put to the host exactly once, whichever way it travelled.
    forms = [p for p in host.elicited if isinstance(p, types.ElicitRequestFormParams)]
    urls = [p for p in host.elicited if isinstance(p, types.ElicitRequestURLParams)]
    assert len(forms) == 5 and len(urls) == 1 and len(host.sampled) == 2 and host.roots_asked == 2
    assert urls[0].url == CONSENT_URL
    # elicitationId is a 2025-11-25 field: the 2026-07-28 result surface drops it.
    assert urls[0].elicitation_id == ("asks-consent" if expected_version == LEGACY else None)
    # notifications/elicitation/complete exists only in the handshake era.
    assert ("notifications/elicitation/complete" in host.methods) == (expected_version == LEGACY)


async def test_asks_input_required_rounds_by_hand() -> None:
    """Drive the 2026-07-28 rounds without the client's driver: keys, sealed state, state-only retry, binding."""
    async with Host().client(
        StdioServerParameters(command=sys.executable, args=[str(SERVERS / "asks.py")]), "auto"
    ) as client:
        session = client.session
        first = await session.call_tool("interview", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        assert list(first.input_requests or {}) == ["name"]
        ask = (first.input_requests or {})["name"]
        assert isinstance(ask, types.ElicitRequest) and isinstance(ask.params, types.ElicitRequestFormParams)
        assert first.request_state.startswith("v1.") and "target" not in first.request_state  # sealed, opaque

        ada = types.ElicitResult(action="accept", content={"name": "Ada"})
        second = await session.call_tool(
            "interview", {}, input_responses={"name": ada}, request_state=first.request_state, allow_input_required=True
        )
        assert isinstance(second, types.InputRequiredResult) and list(second.input_requests or {}) == ["model"]
        sample = (second.input_requests or {})["model"]
        assert isinstance(sample, types.CreateMessageRequest)
        content = sample.params.messages[0].content
        assert isinstance(content, types.TextContent) and "Ada" in content.text  # round one's answer, via the state
        assert second.request_state not in (None, first.request_state)

        # The state alone carries the name: a retry without responses asks round two again, not round one.
        again = await session.call_tool("interview", {}, request_state=second.request_state, allow_input_required=True)
        assert isinstance(again, types.InputRequiredResult) and list(again.input_requests or {}) == ["model"]

        reply = types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Hi Ada!"), model="m"
        )
        done = await session.call_tool(
            "interview",
            {},
            input_responses={"model": reply},
            request_state=second.request_state,
            allow_input_required=True,
        )
        assert isinstance(done, types.CallToolResult) and text_of(done) == "interview: Ada; model said: Hi Ada!"

        # A state that was edited, or minted for another request, is refused.
        assert second.request_state is not None
        edited = (
            second.request_state[:-2] + ("A" if second.request_state[-2] != "A" else "B") + second.request_state[-1]
        )
        for name, state in (("interview", edited), ("ask_name", second.request_state)):
            with pytest.raises(MCPError) as refused:
                await session.call_tool(name, {}, request_state=state, allow_input_required=True)
            assert refused.value.error.code == types.INVALID_PARAMS
            assert refused.value.error.message == "Invalid or expired requestState"

        # One round may carry several questions; answering some of them leaves only the rest.
        survey = await session.call_tool("survey", {}, allow_input_required=True)
        assert isinstance(survey, types.InputRequiredResult) and set(survey.input_requests or {}) == {"name", "roots"}
        assert isinstance((survey.input_requests or {})["roots"], types.ListRootsRequest)
        partial = await session.call_tool(
            "survey", {}, input_responses={"name": ada}, request_state=survey.request_state, allow_input_required=True
        )
        assert isinstance(partial, types.InputRequiredResult) and list(partial.input_requests or {}) == ["roots"]
        roots = types.ListRootsResult(roots=[types.Root(uri=ROOTS[0])])  # type: ignore[arg-type]
        final = await session.call_tool(
            "survey",
            {},
            input_responses={"roots": roots},
            request_state=partial.request_state,
            allow_input_required=True,
        )
        assert isinstance(final, types.CallToolResult) and text_of(final) == f"survey: Ada; roots: {ROOTS[0]}"

        # Without allow_input_required the session refuses to hand an interim result back as a final one.
        with pytest.raises(RuntimeError, match="InputRequiredResult"):
            await session.call_tool("ask_name", {})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_asks_refuses_a_client_without_the_capability(mode: str) -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVERS / "asks.py")])
    async with Client(params, mode=mode, read_timeout_seconds=30) as client:  # no callbacks: nothing declared
        for tool, needed in (("ask_name", {"elicitation": {"form": {}}}), ("ask_model", {"sampling": {}})):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(tool, {})
            assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert refused.value.error.data == {"requiredCapabilities": needed}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_asks_a_decline_ends_the_interview(mode: str) -> None:
    host = Host(decline=True)
    params = StdioServerParameters(command=sys.executable, args=[str(SERVERS / "asks.py")])
    async with host.client(params, mode) as client:
        assert text_of(await client.call_tool("ask_name", {})) == "declined"
        assert text_of(await client.call_tool("interview", {})) == "interview declined"
    assert host.sampled == []  # round two was never asked


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_asks_legacy_only_refuses_the_2026_envelope(transport: str) -> None:
    async with (
        server_target(transport, "asks.py", "--era", "legacy") as target,
        Host().client(target, "legacy") as client,
    ):
        with pytest.raises(MCPError) as refused:
            await client.session.send_discover(MODERN)
        # stdio: the handshake-only loop does not know the method; HTTP: the 2025-style unknown-version answer.
        expected = types.METHOD_NOT_FOUND if transport == "stdio" else types.INVALID_REQUEST
        assert refused.value.error.code == expected
