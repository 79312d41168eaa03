"""Both protocol eras end to end (issue 12): real gateways, real fixture servers, the SDK client in both modes.

The SDK's default client (`mode="auto"`) speaks MCP 2026-07-28 to the gateway (no session; questions come
back as `input_required`); `mode="legacy"` speaks the handshake era (questions arrive mid-call). Behind the
gateway, `asks.py --era legacy` asks mid-call, `asks.py --era modern` answers `input_required`,
`modern_only.py` refuses the handshake, `midcall.py` asks the session-era way with `ctx.elicit`.

What every `connect`-based test already runs in both client modes (tests/conftest.py) is not repeated here:
kitchen's sampling, elicitation and roots, URL elicitation through midcall.py and its reconnection in a
session, listen streams, progress and logs, and each surface's own answers. This module keeps what only
shows across eras: session-era servers, every question of asks.py, sealed and held state, each surface
bridging a 2026-07-28 client, retrieve's dynamic routing and the hub without a session, a 2026-only server
behind every surface, tasks and list freshness.

Processes are shared: one stdio gateway per client mode with every surface exposed (`stdio`), one HTTP
gateway for both modes (`http_url`) and one HTTP gateway with retrieve's dynamic routing and the hub
(`hub_url`), each kept for the module. The test of held calls starts a second gateway of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server.request_state import AESGCMRequestStateCodec
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from tests.conftest import Instances, free_port, manifold_command, server_entry, stop_process, wait_for_port
from tests.test_era_fixtures import EXPECTED
from tests.test_era_fixtures import Host as FixtureHost

pytestmark = [
    pytest.mark.anyio,
    # Sampling, roots and logging are deprecated at 2026-07-28; these tests use them on purpose.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

MODES = ("auto", "legacy")
VERSION = {"auto": LATEST_MODERN_VERSION, "legacy": LATEST_HANDSHAKE_VERSION}
KEY = "eras-test-request-state-key-0123456789abcdef"  # shared by the gateways of a test, so seals are valid
ALL_SURFACES = ["direct", "proxy", "dispatch", "retrieve", "hub"]
SERVERS = {
    "old": server_entry("asks.py", "--era", "legacy"),  # asks mid-call
    "new": server_entry("asks.py", "--era", "modern"),  # answers input_required
    "modern": server_entry("modern_only.py"),  # refuses the handshake
    "pinned": server_entry("midcall.py", protocol="modern"),  # asks with ctx.elicit, held to 2026-07-28
}
STDIO_SETTINGS = {"expose": ALL_SURFACES, "held_call_timeout": 2, "request_state_keys": [KEY], "log_level": "info"}
ASKS_ANSWERS = EXPECTED  # what asks.py answers once its questions are answered, in either era
ADA = types.ElicitResult(action="accept", content={"name": "Ada"})
INVALID_STATE = "Invalid or expired requestState"


class Host(FixtureHost):
    """The fixture host (answers "Ada", samples "<prompt>", lists two roots), which can forget what it was asked."""

    def reset(self) -> None:
        self.elicited.clear()
        self.sampled.clear()
        self.roots_asked = 0


@dataclass
class Gateway:
    """A stdio gateway with its one client, the host answering for it, and the gateway's log (stderr)."""

    client: Client
    host: Host
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def ok_text(result: types.CallToolResult) -> str:
    assert not result.is_error, text_of(result)
    return text_of(result)


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error, text_of(result)
    return text_of(result)


def write_config(folder: Path, servers: dict[str, Any], settings: dict[str, Any], name: str) -> Path:
    """`folder/name`, a config whose gateway keeps its data apart from the module's other gateways."""
    path = folder / name
    data = {"mcpServers": servers, "manifold": {"data_dir": str(folder / f"data-{path.stem}"), **settings}}
    path.write_text(json.dumps(data, indent=2))
    return path


@asynccontextmanager
async def stdio_gateway(config: Path, mode: str, log: Path) -> AsyncIterator[Gateway]:
    """`manifold serve` on stdio, reached by an SDK client in `mode`; the gateway's stderr goes to `log`."""
    command = manifold_command(config)
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    host = Host()
    with log.open("w") as errlog:
        async with host.client(stdio_client(params, errlog=errlog), mode) as client:
            yield Gateway(client, host, log)


@asynccontextmanager
async def http_client(url: str, mode: str, host: Host | None = None) -> AsyncIterator[Client]:
    async with (host or Host()).client(url, mode) as client:
        yield client


def opened(state: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A requestState the gateway sealed (with KEY), opened: the SDK's claims, and the gateway's own state."""
    claims = json.loads(AESGCMRequestStateCodec([KEY]).unseal(state))
    return claims, json.loads(claims["s"])


async def raw_call(client: Client, name: str, arguments: dict[str, Any] | None = None, **retry: Any) -> Any:
    """One `tools/call` round, as it came: a CallToolResult or an InputRequiredResult."""
    return await client.session.call_tool(name, arguments or {}, allow_input_required=True, **retry)


async def wait_for(condition: Any, what: str, timeout: float = 20) -> None:
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(0.05)
        return
    raise AssertionError(f"waited {timeout}s for {what}")


# --- shared gateways --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so the shared gateways' clients live across tests


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("eras")


@pytest.fixture(scope="module")
async def stdio(folder: Path) -> AsyncIterator[dict[str, Gateway]]:
    """One stdio gateway per client mode, every surface exposed, the servers above behind it."""
    config = write_config(folder, SERVERS, STDIO_SETTINGS, "stdio.json")
    async with AsyncExitStack() as stack:
        gateways = {
            mode: await stack.enter_async_context(stdio_gateway(config, mode, folder / f"{mode}.log")) for mode in MODES
        }
        for mode, gateway in gateways.items():
            assert gateway.client.protocol_version == VERSION[mode]
        yield gateways


@pytest.fixture
def fresh(stdio: dict[str, Gateway]) -> dict[str, Gateway]:
    """The shared stdio gateways, their hosts having forgotten earlier questions."""
    for gateway in stdio.values():
        gateway.host.reset()
    return stdio


@contextmanager
def http_gateway(config: Path, log: Path) -> Iterator[str]:
    """`manifold serve --http` for the module; its /mcp URL."""
    port = free_port()
    with log.open("w") as errlog:
        process = subprocess.Popen(
            manifold_command(config, "--http", "--port", str(port)), start_new_session=True, stderr=errlog
        )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def http_url(folder: Path) -> Iterator[str]:
    """One HTTP gateway for both client modes. Questions reach a client only through a session of its own
    (`session_scope: client`), which `old` and `new` give; `mid` keeps one shared session."""
    servers = {
        "old": {**SERVERS["old"], "session_scope": "client"},
        "new": {**SERVERS["new"], "session_scope": "client"},
        "mid": server_entry("midcall.py"),  # asks with ctx.elicit; protocol: auto
    }
    config = write_config(folder, servers, {"request_state_keys": [KEY]}, "http.json")
    with http_gateway(config, folder / "http.log") as url:
        yield url


@pytest.fixture(scope="module")
def hub_url(folder: Path) -> Iterator[str]:
    """An HTTP gateway with retrieve's dynamic routing and the hub: numbers and words to search, the
    2026-only server as a configured instance, and `alpha`, announced with `manifold register`."""
    discovery = folder / "instances"
    discovery.mkdir()
    instances = Instances()
    register = ["register", "--name", "alpha", "--url", instances.start("alpha"), "--id", "alpha"]
    registered = subprocess.Popen(
        [sys.executable, "-m", "mcp_manifold", *register, "--discovery-dir", str(discovery)], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not (discovery / "alpha.json").exists():
            assert time.monotonic() < deadline and registered.poll() is None, "alpha was not registered"
            time.sleep(0.05)
        servers = {
            "numbers": server_entry("numbers.py"),
            "words": server_entry("words.py"),
            "modern": SERVERS["modern"],
        }
        settings = {"expose": ["retrieve", "hub"], "routing": "dynamic", "discovery_dir": str(discovery)}
        with http_gateway(write_config(folder, servers, settings, "hub.json"), folder / "hub.log") as url:
            yield url
    finally:
        stop_process(registered)
        instances.stop_all()


# --- 1. the four pairings, through the direct surface ---------------------------------------------------


async def ask_everything(client: Client, server: str) -> dict[str, str]:
    """Every question asks.py has, as tools, a prompt and a resource of `server`; their answers."""
    answers = {}
    for tool in ASKS_ANSWERS:
        arguments = {"prompt": "what is 6 x 7?"} if tool == "ask_model" else {}
        answers[tool] = ok_text(await client.call_tool(f"{server}_{tool}", arguments))
    prompt = (await client.get_prompt(f"{server}_greeting")).messages[0].content
    assert isinstance(prompt, types.TextContent)
    answers["prompt"] = prompt.text
    resource = (await client.read_resource(f"{server}+asks://name")).contents[0]
    assert isinstance(resource, types.TextResourceContents)
    answers["resource"] = resource.text
    return answers


EVERY_ANSWER = {**ASKS_ANSWERS, "prompt": "Write a warm greeting for Ada.", "resource": "Ada"}


def assert_asked_everything(host: Host) -> None:
    """The host was asked each of asks.py's questions once."""
    forms = [p for p in host.elicited if isinstance(p, types.ElicitRequestFormParams)]
    urls = [p for p in host.elicited if isinstance(p, types.ElicitRequestURLParams)]
    # ask_name, interview, survey, the prompt and the resource ask a name; ask_url asks for consent.
    assert len(forms) == 5 and {p.message for p in forms} >= {"What is your name?", "Who should be greeted?"}
    assert [p.url for p in urls] == ["https://example.com/asks/consent"]
    assert [p.messages[0].content.text for p in host.sampled] == [  # type: ignore[union-attr]
        "what is 6 x 7?",
        "Write a one-line greeting for Ada.",
    ]
    assert host.roots_asked == 2  # ask_roots and survey


@pytest.mark.parametrize("server", ["old", "new"])
@pytest.mark.parametrize("mode", MODES)
async def test_stdio_pairings(fresh: dict[str, Gateway], mode: str, server: str) -> None:
    """Over stdio every pairing works: each question reaches the client's host once, the answers are the
    server's own (the same text asks.py gives a client that talks to it directly)."""
    gateway = fresh[mode]
    assert await ask_everything(gateway.client, server) == EVERY_ANSWER
    assert_asked_everything(gateway.host)
    if mode == "legacy" and server == "new":  # a URL elicitation of 2026-07-28 has no id; this era needs one
        (url,) = [p for p in gateway.host.elicited if isinstance(p, types.ElicitRequestURLParams)]
        assert url.elicitation_id


@pytest.mark.parametrize("mode", MODES)
async def test_a_session_era_server_over_http(http_url: str, mode: str) -> None:
    host = Host()
    async with http_client(http_url, mode, host) as client:
        assert client.protocol_version == VERSION[mode]
        if mode == "legacy":  # the client's own session to the session-era server asks it mid-call
            assert await ask_everything(client, "old") == EVERY_ANSWER
            assert_asked_everything(host)
            return
        # An anonymous 2026-07-28 client has no session of its own over HTTP (nothing tells its requests apart
        # from another client's), so the session-era server's shared session was told nobody can be asked:
        # the call fails, and no question goes to a client the gateway would have to guess.
        refused = error_text(await client.call_tool("old_ask_name", {}))
        assert refused.startswith("server 'old': ") and "elicitation" in refused
        assert host.elicited == []
        assert ok_text(await client.call_tool("new_ask_name", {})) == "hello Ada"  # nothing else broke


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_modern_client_holds_only_the_gateways_sealed_state(
    fresh: dict[str, Gateway], http_url: str, transport: str
) -> None:
    """Modern client, modern server: the server's questions reach the client with their keys, and its
    requestState is sealed inside the gateway's, which the client can neither read nor forge."""
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            client = fresh["auto"].client
        else:
            client = await stack.enter_async_context(http_client(http_url, "auto"))
        first = await raw_call(client, "new_interview")
        assert isinstance(first, types.InputRequiredResult) and list(first.input_requests or {}) == ["name"]
        question = (first.input_requests or {})["name"]
        assert isinstance(question, types.ElicitRequest) and question.params.message == "What is your name?"

        assert first.request_state is not None
        claims, state = opened(first.request_state)  # only the gateway's key opens it
        assert (claims["m"], claims["t"], claims["aud"]) == ("tools/call", "new_interview", "mcp-manifold")
        assert state["kind"] == "backend" and state["server"] == "new"
        inner = state["inner"]  # the server's own state, sealed by the server's key
        assert inner.startswith("v1.") and inner not in first.request_state

        # The server's state handed to the gateway directly, an edited one, or one minted for another tool:
        # each refused, naming requestState.
        edited = first.request_state[:-2] + ("A" if first.request_state[-2] != "A" else "B") + first.request_state[-1]
        for name, bad in (("new_interview", inner), ("new_interview", edited), ("new_ask_name", first.request_state)):
            with pytest.raises(MCPError) as refused:
                await raw_call(client, name, input_responses={"name": ADA}, request_state=bad)
            assert refused.value.error.code == types.INVALID_PARAMS
            assert refused.value.error.message == INVALID_STATE

        # The genuine state still works after all that: round two, then the answer.
        second = await raw_call(
            client, "new_interview", input_responses={"name": ADA}, request_state=first.request_state
        )
        assert isinstance(second, types.InputRequiredResult) and list(second.input_requests or {}) == ["model"]
        sample = (second.input_requests or {})["model"]
        assert isinstance(sample, types.CreateMessageRequest)
        assert sample.params.messages[0].content.text == "Write a one-line greeting for Ada."  # type: ignore[union-attr]
        reply = types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Hi!"), model="m"
        )
        done = await raw_call(
            client, "new_interview", input_responses={"model": reply}, request_state=second.request_state
        )
        assert isinstance(done, types.CallToolResult) and ok_text(done) == "interview: Ada; model said: Hi!"


async def test_a_modern_client_answers_a_held_session_era_call(fresh: dict[str, Gateway]) -> None:
    """Modern client, session-era server: the server's mid-call question comes back as the gateway's own
    input_required (its own keys, a held call's state); the retry's answer resumes the server's call."""
    client = fresh["auto"].client
    first = await raw_call(client, "old_interview")
    assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
    ((key, question),) = (first.input_requests or {}).items()
    assert isinstance(question, types.ElicitRequest) and question.params.message == "What is your name?"
    claims, state = opened(first.request_state)
    assert claims["t"] == "old_interview" and state["kind"] == "held"

    # A retry that leaves the question unanswered is refused, and the call stays held.
    missing = await raw_call(client, "old_interview", input_responses={}, request_state=first.request_state)
    assert key in error_text(missing) and "inputResponses" in error_text(missing)

    second = await raw_call(client, "old_interview", input_responses={key: ADA}, request_state=first.request_state)
    assert isinstance(second, types.InputRequiredResult) and second.request_state is not None
    ((key2, sample),) = (second.input_requests or {}).items()
    assert key2 != key and isinstance(sample, types.CreateMessageRequest)
    assert opened(second.request_state)[1] == state  # the same held call
    reply = types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Hi!"), model="m")
    done = await raw_call(client, "old_interview", input_responses={key2: reply}, request_state=second.request_state)
    assert isinstance(done, types.CallToolResult) and ok_text(done) == "interview: Ada; model said: Hi!"


# --- 2. every surface that calls tools ------------------------------------------------------------------


SURFACE_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "proxy": ("proxy", {"action": "call", "type": "tool", "path": "{server}_interview"}),
    "dispatch": ("proxy-dispatch", {"action": "call", "connection": "{server}", "tool": "interview"}),
    "retrieve": ("call_tool", {"name": "{server}_interview"}),
    "hub": ("instances_call", {"instance_id": "{server}", "tool": "interview"}),
}


def surface_call(surface: str, server: str) -> tuple[str, dict[str, Any]]:
    tool, arguments = SURFACE_CALLS[surface]
    return tool, {key: value.format(server=server) for key, value in arguments.items()}


@pytest.mark.parametrize(("surface", "server"), [(surface, "old") for surface in SURFACE_CALLS] + [("proxy", "new")])
async def test_every_surface_bridges_a_modern_client(fresh: dict[str, Gateway], surface: str, server: str) -> None:
    """Through proxy, dispatch, retrieve and hub, a 2026-07-28 client is asked with input_required (a held
    call of the session-era server; the modern server's own questions through proxy) and gets the answer."""
    gateway = fresh["auto"]
    tool, arguments = surface_call(surface, server)
    first = await raw_call(gateway.client, tool, arguments)
    assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
    assert opened(first.request_state)[1]["kind"] == ("held" if server == "old" else "backend")
    ((key, question),) = (first.input_requests or {}).items()
    assert isinstance(question, types.ElicitRequest) and question.params.message == "What is your name?"

    # The first round answered here, the next by the SDK's driver (which asks the host).
    result = await gateway.client.call_tool(
        tool, arguments, input_responses={key: ADA}, request_state=first.request_state
    )
    assert "interview: Ada; model said: <Write a one-line greeting for Ada.>" in ok_text(result)
    assert gateway.host.elicited == []
    assert [p.messages[0].content.text for p in gateway.host.sampled] == ["Write a one-line greeting for Ada."]  # type: ignore[union-attr]


# --- 3. held calls: released after held_call_timeout, and known only to the gateway that holds them -----


async def test_a_held_call_is_released_and_another_gateway_says_it_does_not_hold_it(
    fresh: dict[str, Gateway], http_url: str
) -> None:
    gateway = fresh["auto"]
    first = await raw_call(gateway.client, "old_ask_name")
    assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
    ((key, _),) = (first.input_requests or {}).items()
    held_id = opened(first.request_state)[1]["id"]

    # Another gateway with the same keys (the HTTP one) accepts the seal, but holds no such call.
    async with http_client(http_url, "auto") as elsewhere:
        answer = await raw_call(
            elsewhere, "old_ask_name", input_responses={key: ADA}, request_state=first.request_state
        )
        refusal = error_text(answer)
        assert "not held by this gateway" in refusal and "another gateway" in refusal, refusal
        assert "call it again" in refusal, refusal

    # The client never comes back: after held_call_timeout (2 s) the gateway gives the call up...
    await wait_for(lambda: f"gave up on held call {held_id}" in gateway.log_text(), "the held call to be released")
    # ... and a late retry says so.
    late = error_text(
        await raw_call(gateway.client, "old_ask_name", input_responses={key: ADA}, request_state=first.request_state)
    )
    assert "no longer held" in late and "2s" in late and "call it again" in late, late
    assert ok_text(await gateway.client.call_tool("old_ask_name", {})) == "hello Ada"


# --- 4. retrieve's dynamic routing and the hub, for a client without a session --------------------------


HUB_TOOLS = {"instances_list", "instances_connect", "instances_disconnect", "instances_call"}


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}


async def test_retrieve_dynamic_routing_gives_a_2026_client_schemas_and_call_tool(hub_url: str) -> None:
    """A search cannot add tools to a 2026-07-28 client's list (a session-era client's registration is
    test_retrieve's): the answer says so in one line, carries the input schemas, and call_tool reaches them."""
    async with http_client(hub_url, "auto") as client:
        listed = await tool_names(client)
        assert listed == {"retrieve_tools", "call_tool", *HUB_TOOLS}
        found = ok_text(await client.call_tool("retrieve_tools", {"query": "multiply two numbers", "limit": 2}))
        assert found.startswith("numbers_multiply [numbers]"), found
        assert "This client speaks MCP 2026-07-28, where a search cannot add tools to your list" in found
        assert "call them with call_tool" in found and "registered" not in found
        schema = next(line for line in found.splitlines() if line.startswith("  schema: "))
        assert json.loads(schema.removeprefix("  schema: "))["required"] == ["a", "b"]
        assert await tool_names(client) == listed
        product = await client.call_tool("call_tool", {"name": "numbers_multiply", "args": {"a": 6, "b": 7}})
        assert ok_text(product).startswith("42")


async def test_the_hub_serves_a_2026_client_without_a_session(hub_url: str) -> None:
    # An instance's own address lists its tools beside the hub's, before anyone connected to it.
    async with http_client(f"{hub_url}/instances/alpha", "auto") as client:
        names = await tool_names(client)
        assert names >= HUB_TOOLS and {"whoami", "add", "only_alpha"} <= names, names
        assert ok_text(await client.call_tool("whoami", {})) == "alpha"

    async with http_client(hub_url, "auto") as client:
        listed = await tool_names(client)
        connected = ok_text(await client.call_tool("instances_connect", {"instance_id": "alpha"}))
        # No session to bind: the answer is the instance's tools, with schemas, and how to call them.
        assert "They are in your lists now" not in connected
        assert "instances_call(instance_id='alpha'" in connected and "/mcp/instances/alpha" in connected
        assert '- add: Add two integers.\n  input: {"' in connected and "- whoami: " in connected
        assert await tool_names(client) == listed  # lists never change
        added = await client.call_tool(
            "instances_call", {"instance_id": "alpha", "tool": "add", "arguments": {"a": 2, "b": 3}}
        )
        assert ok_text(added) == "5"
        unknown = error_text(await client.call_tool("instances_call", {"instance_id": "alpha", "tool": "nope"}))
        assert "has no tool 'nope'" in unknown and "whoami" in unknown

    # A 2026-only server as a configured instance, at its own address in both eras, and through instances_call.
    for mode in MODES:
        async with http_client(f"{hub_url}/instances/modern", mode) as client:
            assert {"echo", "add", "envelope"} <= await tool_names(client)
            assert ok_text(await client.call_tool("echo", {"text": mode})) == mode
            text = (await client.read_resource("modern://text")).contents[0]
            assert isinstance(text, types.TextResourceContents) and text.text == "hello from modern_only"
            greeting = (await client.get_prompt("greet", {"name": "Ada"})).messages[0].content
            assert isinstance(greeting, types.TextContent) and greeting.text == "Greet Ada warmly."
            echoed = await client.call_tool(
                "instances_call", {"instance_id": "modern", "tool": "echo", "arguments": {"text": "hi"}}
            )
            assert ok_text(echoed) == "hi"


async def test_a_2026_client_calling_an_instances_tool_by_name_is_told_how_it_can(hub_url: str) -> None:
    """After instances_connect (which binds nothing for it), a call by the tool's name is pointed at
    instances_call and the instance's address, not back at instances_connect."""
    async with http_client(hub_url, "auto") as client:
        ok_text(await client.call_tool("instances_connect", {"instance_id": "alpha"}))
        told = error_text(await client.call_tool("only_alpha", {}))
        assert "instance 'alpha'" in told and "instances_call" in told and "/mcp/instances/alpha" in told, told
        assert "instances_connect" not in told, told
        nobody = error_text(await client.call_tool("no_such_tool_anywhere", {}))
        assert "instances_call" in nobody and "no session to connect" in nobody, nobody


# --- 5. a 2026-only server behind every surface ---------------------------------------------------------


def embedded_text(result: types.CallToolResult) -> str:
    (block,) = ok_result(result).content
    assert isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.TextResourceContents)
    return block.resource.text


def ok_result(result: types.CallToolResult) -> types.CallToolResult:
    assert not result.is_error, text_of(result)
    return result


def dispatched_text(result: types.CallToolResult) -> str:
    """The tool's own text inside a dispatch call's answer (Mini-A's response object)."""
    answer = json.loads(ok_text(result))
    return "".join(item["text"] for item in answer["content"] if item["type"] == "text")


@pytest.mark.parametrize("mode", MODES)
async def test_a_2026_only_server_behind_every_surface(fresh: dict[str, Gateway], mode: str) -> None:
    client = fresh[mode].client
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"modern_echo", "modern_add", "modern_envelope"} <= names

    # direct
    assert ok_text(await client.call_tool("modern_echo", {"text": "direct"})) == "direct"
    assert (await client.call_tool("modern_add", {"a": 2, "b": 40})).structured_content == {"result": 42}
    text = (await client.read_resource("modern+modern://text")).contents[0]
    assert isinstance(text, types.TextResourceContents) and text.text == "hello from modern_only"
    prompt = (await client.get_prompt("modern_greet", {"name": "Ada"})).messages[0].content
    assert isinstance(prompt, types.TextContent) and prompt.text == "Greet Ada warmly."

    # proxy: list, call, resource, prompt
    listed = json.loads(embedded_text(await client.call_tool("proxy", {"action": "list", "type": "tool"})))
    assert "modern_echo" in {tool["name"] for tool in listed}
    proxied = await client.call_tool(
        "proxy", {"action": "call", "type": "tool", "path": "modern_echo", "args": {"text": "proxy"}}
    )
    assert ok_text(proxied) == "proxy"
    read = await client.call_tool("proxy", {"action": "call", "type": "resource", "path": "modern+modern://text"})
    assert embedded_text(read) == "hello from modern_only"
    got = await client.call_tool(
        "proxy", {"action": "call", "type": "prompt", "path": "modern_greet", "args": {"name": "Ada"}}
    )
    assert json.loads(embedded_text(got))["messages"][0]["content"]["text"] == "Greet Ada warmly."

    # dispatch: list, call
    connections = json.loads(
        ok_text(await client.call_tool("proxy-dispatch", {"action": "list", "connection": "modern"}))
    )
    assert "echo" in {tool["name"] for tool in connections["connections"][0]["tools"]}
    dispatched = await client.call_tool(
        "proxy-dispatch", {"action": "call", "connection": "modern", "tool": "echo", "arguments": {"text": "dispatch"}}
    )
    assert dispatched_text(dispatched) == "dispatch"

    # retrieve: search, call
    found = ok_text(await client.call_tool("retrieve_tools", {"query": "return the given text unchanged", "limit": 5}))
    assert "modern_echo [modern]" in found
    retrieved = await client.call_tool("call_tool", {"name": "modern_echo", "args": {"text": "retrieve"}})
    assert ok_text(retrieved) == "retrieve"

    # hub: the configured server as an instance
    called = await client.call_tool(
        "instances_call", {"instance_id": "modern", "tool": "echo", "arguments": {"text": "hub"}}
    )
    assert ok_text(called) == "hub"


# --- 6. servers that ask mid-call the session-era way (their reconnection: test_gateway's URL test) -------


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_asking_mid_call_on_a_shared_http_session_asks_in_the_callers_own_session(
    http_url: str, mode: str
) -> None:
    """midcall.py takes 2026-07-28 but asks with ctx.elicit; its one session of an HTTP gateway is shared, so
    nobody can be asked there. A session-era client (one the gateway tells apart) that can answer gets a
    session of its own, where the first call is made again and asks it; a 2026-07-28 client the gateway
    cannot tell apart (no authentication) gets an error saying what would, every time."""
    host = Host()
    async with http_client(http_url, mode, host) as client:
        if mode == "legacy":
            for options in ("red, blue", "green, grey"):
                assert (
                    ok_text(await client.call_tool("mid_pick", {"options": options}))
                    == f"picked: <Pick one: {options}>"
                )
            assert len(host.sampled) == 2
            return
        for _ in range(2):
            shared = error_text(await client.call_tool("mid_confirm", {"action": "deploy"}))
            assert "cannot carry" in shared and "once it authenticates to the gateway" in shared, shared
        assert host.elicited == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_pinned_to_2026_cannot_ask_mid_call_and_the_error_names_protocol(
    fresh: dict[str, Gateway], mode: str
) -> None:
    gateway = fresh[mode]
    for _ in range(2):  # pinned: nothing is learned, every call says the same
        refused = error_text(await gateway.client.call_tool("pinned_confirm", {"action": "deploy"}))
        assert "cannot carry" in refused and "`protocol: auto` or `legacy`" in refused, refused
    assert gateway.host.elicited == []
    assert ok_text(await gateway.client.call_tool("modern_echo", {"text": "fine"})) == "fine"


# --- 7. what 2026-07-28 changed about lists and tasks ---------------------------------------------------


async def test_tasks_are_not_offered_and_the_error_says_so(fresh: dict[str, Gateway], http_url: str) -> None:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="task-7"))
    async with http_client(http_url, "auto") as over_http:
        for client in (fresh["auto"].client, fresh["legacy"].client, over_http):
            with pytest.raises(MCPError) as refused:
                await client.session.send_request(request, types.GetTaskResult)
            assert refused.value.error.code == types.METHOD_NOT_FOUND
            message = refused.value.error.message
            assert message.startswith("tasks/get: mcp-manifold does not offer tasks"), message
            assert "'task-7'" in message, message


async def test_lists_tell_a_2026_client_how_long_to_keep_them(fresh: dict[str, Gateway], http_url: str) -> None:
    client = fresh["auto"].client
    # Fresh for a minute once every server has listed itself (until then 0: the catalog is filling in);
    # public, since no server here has sessions of each client's own.
    with anyio.fail_after(60):
        while (tools := await client.list_tools(cache_mode="refresh")).ttl_ms != 60_000:
            await anyio.sleep(0.1)
    assert tools.cache_scope == "public"
    for listing in (
        await client.list_resources(cache_mode="refresh"),
        await client.list_resource_templates(cache_mode="refresh"),
        await client.list_prompts(cache_mode="refresh"),
    ):
        assert (listing.ttl_ms, listing.cache_scope) == (60_000, "public"), listing
    # Behind the HTTP gateway, old and new have sessions of each client's own: a list may be the client's.
    async with http_client(http_url, "auto") as over_http:
        assert (await over_http.list_tools(cache_mode="refresh")).cache_scope == "private"
