"""ProxyClient: transparent mode returns what a direct connection returns, for every fixture server.

Two HTTP gateways on the same servers, one exposing `direct`, one exposing only `proxy`, are shared by
the module; each test compares a plain SDK client on the first with a transparent `ProxyClient` on the
second. Library use (`add_proxy_tool`) is checked the same way on in-process SDK servers.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.shared.exceptions import MCPError

from mcp_manifold._errors import InvalidRequest
from mcp_manifold._surfaces.proxy.client import ProxyClient, ProxyError
from mcp_manifold._surfaces.proxy.format import ProxyAnnotations, ProxyOperation, json_answer
from mcp_manifold._surfaces.proxy.tool import add_proxy_tool, wire_middleware
from tests.conftest import (
    answer_elicitation,
    answer_sampling,
    free_port,
    manifold_command,
    server_entry,
    stop_process,
    wait_for_port,
)

pytestmark = pytest.mark.anyio

SERVERS = {
    "kitchen": server_entry("kitchen.py"),
    "numbers": server_entry("numbers.py"),
    "words": server_entry("words.py"),
}
LONG_NAME = "words_really_long_tool_name_for_testing_name_shortening_in_gateway"

# Every tool of every fixture server that can be called repeatedly without side effects on the others.
TOOL_CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "kitchen": [
        ("kitchen_echo", {"text": "hi"}),
        ("kitchen_add", {"a": 2, "b": 3}),
        ("kitchen_image", {}),
        ("kitchen_embedded", {}),
        ("kitchen_mixed", {}),
        ("kitchen_huge", {"size": 5000}),
        ("kitchen_fail", {"message": "kaboom"}),
        ("kitchen_stderr", {"text": "to stderr"}),
        ("kitchen_log", {"message": "logged", "level": "info"}),
        ("kitchen_touch", {"uri": "kitchen://text"}),
        ("kitchen_slow", {"seconds": 0.01}),
        ("kitchen_sample", {"prompt": "2+2?"}),
        ("kitchen_elicit", {"question": "colour?"}),
        ("kitchen_roots", {}),
    ],
    "numbers": [
        ("numbers_add", {"a": 1.5, "b": 2}),
        ("numbers_multiply", {"a": 3, "b": 4}),
        ("numbers_sqrt", {"x": 16}),
        ("numbers_sqrt", {"x": -1}),
    ],
    "words": [
        ("words_upper", {"text": "abc"}),
        ("words_reverse", {"text": "abc"}),
        ("words_count_words", {"text": "one two three"}),
    ],
}


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


CALLBACKS: dict[str, Any] = {
    "mode": "legacy",
    "sampling_callback": answer_sampling,
    "elicitation_callback": answer_elicitation,
    "list_roots_callback": roots,
}


def start_gateway(directory: Path, expose: list[str]) -> tuple[str, subprocess.Popen[bytes]]:
    config = directory / f"{'-'.join(expose)}.json"
    manifold = {"expose": expose, "data_dir": str(directory / f"data-{'-'.join(expose)}")}
    config.write_text(json.dumps({"mcpServers": SERVERS, "manifold": manifold}))
    port = free_port()
    process = subprocess.Popen(manifold_command(config, "--http", "--port", str(port)), start_new_session=True)
    wait_for_port(port, process)
    return f"http://127.0.0.1:{port}/mcp", process


def by_uri(item: types.Resource | types.ResourceTemplate) -> str:
    return item.uri if isinstance(item, types.Resource) else item.uri_template


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(direct-only URL, proxy-only URL): two gateways on the same config but for `expose`."""
    directory = tmp_path_factory.mktemp("proxy-client")
    started = [start_gateway(directory, ["direct"])]
    try:
        started.append(start_gateway(directory, ["proxy"]))
        yield started[0][0], started[1][0]
    finally:
        for _, process in started:
            stop_process(process)


@pytest.fixture
async def pair(gateways: tuple[str, str]) -> AsyncIterator[tuple[Client, ProxyClient]]:
    direct_url, proxy_url = gateways
    async with (
        Client(direct_url, **CALLBACKS) as direct,
        ProxyClient(proxy_url, transparent=True, **CALLBACKS) as proxy,
    ):
        yield direct, proxy


# --- transparent mode against the gateway ---------------------------------------------------------


async def test_transparent_lists_equal_direct_lists(pair: tuple[Client, ProxyClient]) -> None:
    direct, proxy = pair
    assert (await proxy.list_tools()).tools == (await direct.list_tools()).tools
    # Resources come in the order the backends were first listed, which differs between two gateways.
    resources = (await proxy.list_resources()).resources
    assert sorted(resources, key=by_uri) == sorted((await direct.list_resources()).resources, key=by_uri)
    templates = (await proxy.list_resource_templates()).resource_templates
    expected = (await direct.list_resource_templates()).resource_templates
    assert sorted(templates, key=by_uri) == sorted(expected, key=by_uri) and templates
    assert (await proxy.list_prompts()).prompts == (await direct.list_prompts()).prompts
    assert LONG_NAME[:40] in " ".join(tool.name for tool in (await proxy.list_tools()).tools)


@pytest.mark.parametrize("server", sorted(TOOL_CALLS))
async def test_transparent_tool_calls_equal_direct_calls(pair: tuple[Client, ProxyClient], server: str) -> None:
    direct, proxy = pair
    calls = list(TOOL_CALLS[server])
    if server == "words":
        long_name = next(
            tool.name for tool in (await direct.list_tools()).tools if tool.name.startswith("words_really")
        )
        calls.append((long_name, {"text": "same"}))
    for name, arguments in calls:
        expected = await direct.call_tool(name, arguments)
        got = await proxy.call_tool(name, arguments)
        assert got == expected, name


async def test_transparent_resource_reads_equal_direct_reads(pair: tuple[Client, ProxyClient]) -> None:
    direct, proxy = pair
    for uri in ("kitchen+kitchen://text", "kitchen+kitchen://blob", "kitchen+kitchen://greeting/Ada"):
        assert (await proxy.read_resource(uri)).contents == (await direct.read_resource(uri)).contents, uri
    # JSON text comes back re-encoded compactly (the one documented difference), with its MIME type restored.
    for uri in ("kitchen+kitchen://config.json", "numbers+numbers://constants"):
        [expected] = (await direct.read_resource(uri)).contents
        [got] = (await proxy.read_resource(uri)).contents
        assert isinstance(got, types.TextResourceContents) and isinstance(expected, types.TextResourceContents)
        assert (got.uri, got.mime_type, got.meta) == (expected.uri, expected.mime_type, expected.meta)
        assert json.loads(got.text) == json.loads(expected.text)


async def test_transparent_prompts_equal_direct_prompts(pair: tuple[Client, ProxyClient]) -> None:
    direct, proxy = pair
    cases = [
        ("kitchen_greet", {"name": "Bob", "style": "formal"}),
        ("kitchen_greet", {"name": "Ann"}),
        ("kitchen_summarize", {"text": "A long text."}),
        ("numbers_explain", {"topic": "primes"}),
    ]
    for name, arguments in cases:
        assert await proxy.get_prompt(name, arguments) == await direct.get_prompt(name, arguments)


async def test_transparent_errors_equal_direct_errors(pair: tuple[Client, ProxyClient]) -> None:
    direct, proxy = pair
    # A tool that does not exist is a tool error, directly and through the proxy.
    unknown = [await client.call_tool("nope", {}) for client in (direct, proxy)]
    assert all(result.is_error and "unknown tool 'nope'" in result.content[0].text for result in unknown)  # type: ignore[union-attr]
    cases = [
        ("resource", lambda client: client.read_resource("nobody+x://y"), "unknown resource"),
        ("missing", lambda client: client.read_resource("kitchen+kitchen://missing"), "server 'kitchen'"),
        ("prompt", lambda client: client.get_prompt("nope", {}), "unknown prompt 'nope'"),
    ]
    for label, request, message in cases:
        with pytest.raises(MCPError) as expected:
            await request(direct)
        with pytest.raises(ProxyError) as got:
            await request(proxy)
        assert message in expected.value.message and message in got.value.message, label
        assert got.value.code == expected.value.code, label


async def test_transparent_progress_is_relayed(pair: tuple[Client, ProxyClient]) -> None:
    _, proxy = pair
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    result = await proxy.call_tool("kitchen_progress", {"steps": 3}, progress_callback=on_progress)
    assert result.content[0].text == "done 3"  # type: ignore[union-attr]
    assert progress == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


# --- proxy(), batch(), detection ----------------------------------------------------------------


async def test_proxy_returns_raw_items_with_annotations(gateways: tuple[str, str]) -> None:
    async with ProxyClient(gateways[1], mode="legacy") as client:
        [listing] = await client.proxy("tool", "list")
        assert isinstance(listing, types.EmbeddedResource)
        annotations = listing.annotations
        assert isinstance(annotations, ProxyAnnotations)
        assert (annotations.proxy_action, annotations.python_type, annotations.many) == ("list", "Tool", True)
        assert annotations.total_count == len(json.loads(listing.resource.text))  # type: ignore[union-attr]

        [text] = await client.proxy("tool", "call", "words_upper", {"text": "abc"})
        assert text.text == "ABC" and text.annotations.proxy_path == "words_upper"  # type: ignore[union-attr]
        [config] = await client.proxy("resource", "call", "kitchen+kitchen://config.json")
        assert config.resource.content_type == "text/plain"  # type: ignore[union-attr]
        # args as a JSON string, as Magg accepts
        [added] = await client.proxy("tool", "call", "numbers_add", '{"a": 1, "b": 1}')
        assert added.text == "2.0"  # type: ignore[union-attr]


async def test_proxy_validates_before_sending_and_raises_proxy_errors(gateways: tuple[str, str]) -> None:
    async with ProxyClient(gateways[1], mode="legacy") as client:
        with pytest.raises(InvalidRequest, match="'path' must not be given for action 'list'"):
            await client.proxy("tool", "list", "kitchen_echo")
        with pytest.raises(InvalidRequest, match="unknown type 'widget'"):
            await client.proxy("widget", "list")  # type: ignore[arg-type]
        with pytest.raises(ProxyError, match="unknown tool 'nope'") as unknown:
            await client.proxy("tool", "call", "nope")
        assert unknown.value.from_capability is False and unknown.value.code == types.INVALID_PARAMS
        with pytest.raises(ProxyError, match="kaboom") as failed:
            await client.proxy("tool", "call", "kitchen_fail", {"message": "kaboom"})
        assert failed.value.from_capability is True and failed.value.result.is_error
        result = await client.proxy_result("tool", "call", "kitchen_fail", {"message": "kaboom"})
        assert result.is_error and isinstance(result.content[0].annotations, ProxyAnnotations)


async def test_batch_returns_one_result_per_operation(gateways: tuple[str, str]) -> None:
    async with ProxyClient(gateways[1], mode="legacy") as client:
        results = await client.batch(
            [
                {"action": "call", "type": "tool", "path": "words_reverse", "args": {"text": "abc"}},
                ProxyOperation("list", "prompt", filter_server="numbers_"),
                {"action": "call", "type": "tool", "path": "nope"},
                {"action": "call", "type": "tool", "path": "numbers_add", "args": {"a": 1, "b": 2}},
            ]
        )
        assert [result.is_error for result in results] == [False, False, True, False]
        assert results[0].content[0].text == "cba"  # type: ignore[union-attr]
        prompts = json.loads(results[1].content[0].resource.text)  # type: ignore[union-attr]
        assert [prompt["name"] for prompt in prompts] == ["numbers_explain"]
        assert "unknown tool 'nope'" in results[2].content[0].text  # type: ignore[union-attr]
        assert results[3].structured_content == {"result": 3.0}


async def test_has_proxy_detects_the_proxy_tool(gateways: tuple[str, str]) -> None:
    direct_url, proxy_url = gateways
    async with ProxyClient(proxy_url, mode="legacy") as client:
        assert await client.has_proxy()
        # Not transparent: the standard methods are the plain client's.
        assert [tool.name for tool in (await client.list_tools()).tools] == ["proxy"]
    async with ProxyClient(direct_url, mode="legacy", transparent=True) as client:
        assert not await client.has_proxy()
    async with ProxyClient(proxy_url, mode="legacy", proxy_tool_name="other") as client:
        assert not await client.has_proxy()


# --- library use: add_proxy_tool on in-process SDK servers ----------------------------------------


def library_server() -> MCPServer:
    server = MCPServer("library", instructions="A server with its own proxy tool.")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(structured_output=False)
    def shout(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    @server.tool()
    def picture() -> Image:
        """A tiny image."""
        return Image(data=b"\x89PNG\r\n\x1a\nfake", format="png")

    @server.tool(structured_output=False)
    def broken() -> str:
        """Always fails."""
        raise ValueError("broken on purpose")

    @server.tool(structured_output=False)
    async def steps(ctx: Context, count: int = 2) -> str:
        """Reports progress."""
        for index in range(1, count + 1):
            await ctx.report_progress(index, count, f"step {index}")
        return "stepped"

    @server.resource("lib://readme", mime_type="text/plain")
    def readme() -> str:
        return "read me"

    @server.resource("lib://settings", mime_type="application/json")
    def settings() -> str:
        return '{"a": 1}'

    @server.resource("lib://data", mime_type="application/octet-stream")
    def data() -> bytes:
        return b"\x00\xff"

    @server.resource("lib://user/{name}", mime_type="text/plain")
    def user(name: str) -> str:
        return f"user {name}"

    @server.prompt()
    def hello(name: str) -> str:
        """Say hello."""
        return f"Hello, {name}!"

    add_proxy_tool(server)
    return server


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_library_mcpserver_transparent_equals_direct(mode: str) -> None:
    server = library_server()
    async with Client(server, mode=mode) as direct, ProxyClient(server, mode=mode, transparent=True) as proxy:
        direct_tools = (await direct.list_tools()).tools
        assert "proxy" in [tool.name for tool in direct_tools]
        assert (await proxy.list_tools()).tools == [tool for tool in direct_tools if tool.name != "proxy"]
        assert (await proxy.list_resources()).resources == (await direct.list_resources()).resources
        templates = (await proxy.list_resource_templates()).resource_templates
        assert templates == (await direct.list_resource_templates()).resource_templates
        assert (await proxy.list_prompts()).prompts == (await direct.list_prompts()).prompts
        for name, arguments in (("add", {"a": 1, "b": 2}), ("shout", {"text": "x"}), ("picture", {}), ("broken", {})):
            assert await proxy.call_tool(name, arguments) == await direct.call_tool(name, arguments), name
        for uri in ("lib://readme", "lib://data", "lib://user/ann"):
            assert (await proxy.read_resource(uri)).contents == (await direct.read_resource(uri)).contents, uri
        assert json.loads((await proxy.read_resource("lib://settings")).contents[0].text) == {"a": 1}  # type: ignore[union-attr]
        assert await proxy.get_prompt("hello", {"name": "Ann"}) == await direct.get_prompt("hello", {"name": "Ann"})
        with pytest.raises(ProxyError) as missing:
            await proxy.read_resource("lib://nothing")
        assert missing.value.code == types.INVALID_PARAMS

        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        assert (await proxy.call_tool("steps", {"count": 3}, progress_callback=on_progress)).content[
            0
        ].text == "stepped"  # type: ignore[union-attr]
        assert progress == [1, 2, 3]


async def test_library_transparent_lists_page_through_more_than_one_proxy_page() -> None:
    server = MCPServer("many")
    for index in range(1203):
        server.add_tool(lambda: "x", name=f"tool_{index:04d}", description=f"Tool {index}.", structured_output=False)
    add_proxy_tool(server)
    async with ProxyClient(server, transparent=True) as proxy, Client(server) as direct:
        tools = (await proxy.list_tools()).tools
        assert len(tools) == 1203
        assert tools == [tool for tool in (await direct.list_tools()).tools if tool.name != "proxy"]


async def test_library_lowlevel_server_gets_the_proxy_tool() -> None:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="ping", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
        # lowlevel handlers may answer with plain dicts
        return {"content": [{"type": "text", "text": f"pong {params.arguments}"}], "isError": False}

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="p")])

    server: Server[Any] = Server("low", on_list_tools=list_tools, on_call_tool=call_tool, on_list_prompts=list_prompts)
    tool = add_proxy_tool(server, name="mcp_proxy")
    assert tool.name == "mcp_proxy"
    with pytest.raises(ValueError, match="already has a proxy tool"):
        add_proxy_tool(server, name="mcp_proxy")
    async with ProxyClient(server, transparent=True, proxy_tool_name="mcp_proxy") as proxy:
        assert await proxy.has_proxy()
        assert [tool.name for tool in (await proxy.list_tools()).tools] == ["ping"]
        assert (await proxy.call_tool("ping", {"n": 1})).content[0].text == "pong {'n': 1}"  # type: ignore[union-attr]
        assert [prompt.name for prompt in (await proxy.list_prompts()).prompts] == ["p"]
        with pytest.raises(ProxyError, match="does not serve resources/list"):
            await proxy.list_resources()
        with pytest.raises(ProxyError, match="cannot call itself"):
            await proxy.proxy("tool", "call", "mcp_proxy", {"action": "list", "type": "tool"})


def server_answering_resource_lists_as(python_type: str) -> Server[Any]:
    """A server with its own `proxy` tool whose resource list carries `python_type` (another gateway, say)."""
    rows = [{"uri": "x://one", "name": "one"}, {"uriTemplate": "x://user/{name}", "name": "user"}]
    annotations = {"proxyAction": "list", "proxyType": "resource", "pythonType": python_type, "many": True}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="proxy", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return json_answer("proxy:list/resource", json.dumps(rows), annotations | {"totalCount": 2})

    server: Server[Any] = Server("other", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(wire_middleware("proxy"))
    return server


@pytest.mark.parametrize(
    "python_type",
    [
        "mcp.types.Resource | mcp.types.ResourceTemplate",  # Magg's server, and ours
        "Resource | ResourceTemplate",  # the spellings of the spec and its examples
        "Resource|ResourceTemplate",
        "Resource",
    ],
)
async def test_transparent_resource_lists_accept_every_spelling_of_the_type(python_type: str) -> None:
    async with ProxyClient(server_answering_resource_lists_as(python_type), transparent=True) as proxy:
        assert [item.uri for item in (await proxy.list_resources()).resources] == ["x://one"]
        templates = (await proxy.list_resource_templates()).resource_templates
        assert [item.uri_template for item in templates] == ["x://user/{name}"]


async def test_transparent_lists_refuse_an_answer_typed_as_another_kind() -> None:
    async with ProxyClient(server_answering_resource_lists_as("Tool"), transparent=True) as proxy:
        with pytest.raises(ProxyError, match="a resource query with pythonType 'Tool'; expected Resource"):
            await proxy.list_resources()


def server_paging_for_ever(total: int | None) -> tuple[Server[Any], list[int]]:
    """A server with its own `proxy` tool that answers every tool list with the same full page, whatever the
    offset, claiming `total` tools (None: not saying), up to its 200th answer (then an empty page, so a
    client that never stops still ends here); the list records the offsets asked for."""
    rows = json.dumps([{"name": f"t{index}", "inputSchema": {"type": "object"}} for index in range(1000)])
    annotations: dict[str, Any] = {"proxyAction": "list", "proxyType": "tool", "pythonType": "Tool", "many": True}
    if total is not None:
        annotations["totalCount"] = total
    asked: list[int] = []

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="proxy", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        asked.append((params.arguments or {}).get("offset", 0))
        return json_answer("proxy:list/tool", rows if len(asked) < 200 else "[]", annotations)

    server: Server[Any] = Server("endless", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(wire_middleware("proxy"))
    return server, asked


@pytest.mark.parametrize(("mode", "total"), [("legacy", None), ("auto", 10**9)])
async def test_transparent_lists_stop_paging_a_proxy_that_never_ends(mode: str, total: int | None) -> None:
    # Regression: the listing asked for the next page as long as the proxy said there was more (or sent a
    # full page without a count): for ever, every item kept (326 MB after 300 pages, still asking).
    server, asked = server_paging_for_ever(total)
    async with ProxyClient(server, mode=mode, transparent=True) as proxy:
        with pytest.raises(ProxyError, match="more than 100 pages of tools"):
            await proxy.list_tools()
    assert len(asked) == 100 and asked[-1] == 99_000


def server_answering(answer: types.CallToolResult) -> Server[Any]:
    """A server with its own `proxy` tool that gives `answer` to every request."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="proxy", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return answer

    server: Server[Any] = Server("garbled", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(wire_middleware("proxy"))
    return server


LISTED = {"proxyAction": "list", "proxyType": "tool", "pythonType": "Tool", "many": True, "totalCount": 1}


@pytest.mark.parametrize(
    ("mode", "answer", "reason"),
    [
        ("legacy", json_answer("proxy:list/tool", "not json {", LISTED), "Expecting value"),
        ("auto", json_answer("proxy:list/tool", "[1, 2]", LISTED), "validation error"),
        ("legacy", json_answer("proxy:list/tool", "[" * 100_000 + "]" * 100_000, LISTED), "recursion"),
        ("auto", types.CallToolResult(content=[types.TextContent(type="text", text="hi")]), "no embedded JSON"),
    ],
    ids=["not-json", "not-items", "too-deep", "no-json"],
)
async def test_transparent_answers_that_cannot_be_read_raise_proxy_errors(
    mode: str, answer: types.CallToolResult, reason: str
) -> None:
    # Regression: they raised ValueError, RecursionError or pydantic's ValidationError, which code written for
    # a direct connection (catching MCPError) does not expect.
    async with ProxyClient(server_answering(answer), mode=mode, transparent=True) as proxy:
        for request in (proxy.list_tools(), proxy.get_prompt("p")):
            with pytest.raises(ProxyError, match=f"the proxy's answer cannot be read: .*{reason}") as raised:
                await request
            assert raised.value.code == types.INTERNAL_ERROR
