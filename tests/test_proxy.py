"""The proxy surface against the MCP Proxy Extension spec (sections 2-4), plus the batch and filter extensions.

Each test is named after the spec section it checks. Most run against one HTTP gateway shared by the
module (`expose: ["direct", "proxy"]`, three fixture servers) and read the raw wire result, since the
SDK's typed parse drops the spec's annotation keys; the transport tests run a proxy-only gateway over
stdio and HTTP each.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from pydantic import TypeAdapter

from mcp_manifold._config import load_config
from mcp_manifold._config.values import OTHER_SURFACES_TOOLS
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._surfaces.proxy.format import has_tag, parse_request, wire_dump
from tests.conftest import free_port, manifold_command, server_entry, stop_process, wait_for_port

pytestmark = pytest.mark.anyio

SERVERS = {
    "kitchen": server_entry("kitchen.py"),
    "numbers": server_entry("numbers.py"),
    "words": server_entry("words.py"),
}
RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
# What Magg 0.10.1's ProxyClient requires of a resource list: Python's str() of its union type.
MAGG_RESOURCE_LIST = "mcp.types.Resource | mcp.types.ResourceTemplate"


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One HTTP gateway for the whole module: direct and proxy side by side."""
    directory = tmp_path_factory.mktemp("proxy")
    config = directory / "mcp.json"
    manifold = {"expose": ["direct", "proxy"], "data_dir": str(directory / "data")}
    config.write_text(json.dumps({"mcpServers": SERVERS, "manifold": manifold}))
    port = free_port()
    process = subprocess.Popen(manifold_command(config, "--http", "--port", str(port)), start_new_session=True)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


@pytest.fixture
async def client(gateway_url: str) -> AsyncIterator[Client]:
    async with Client(gateway_url, mode="legacy") as client:
        yield client


async def raw_proxy(client: Client, *, progress: Any = None, tool: str = "proxy", **arguments: Any) -> dict[str, Any]:
    """Call the proxy tool and return the result exactly as it came over the wire."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
    return await client.session.send_request(request, RAW, progress_callback=progress)


async def error_text(client: Client, **arguments: Any) -> str:
    result = await raw_proxy(client, **arguments)
    assert result["isError"] is True, result
    assert len(result["content"]) == 1 and "annotations" not in result["content"][0]
    return result["content"][0]["text"]


def embedded(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The single embedded resource of a query answer: (resource, annotations)."""
    assert result["isError"] is False, result
    [item] = result["content"]
    assert item["type"] == "resource"
    return item["resource"], item["annotations"]


def payload(result: dict[str, Any]) -> Any:
    resource, _ = embedded(result)
    assert resource["mimeType"] == "application/json"
    return json.loads(resource["text"])


# --- transports ---------------------------------------------------------------------------------


async def test_2_1_proxy_only_gateway_over_each_transport(connect: Any, write_config: Any) -> None:
    """Section 2 end to end on stdio and HTTP: the tool, a list, an info, a call with progress."""
    config = write_config({"kitchen": server_entry("kitchen.py")}, {"expose": ["proxy"]})
    async with connect(config) as client:
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == ["proxy"]
        assert "proxy" in (tools[0].description or "").lower()

        listed = await raw_proxy(client, action="list", type="tool")
        names = [tool["name"] for tool in payload(listed)]
        assert "kitchen_echo" in names and "proxy" not in names
        info = await raw_proxy(client, action="info", type="tool", path="kitchen_echo")
        assert payload(info)["name"] == "kitchen_echo" and "text" in payload(info)["inputSchema"]["properties"]
        # The spec's annotations reach the client on this transport too (they pass the SDK's sieve).
        assert embedded(listed)[1] == {
            "proxyAction": "list",
            "proxyType": "tool",
            "pythonType": "Tool",
            "many": True,
            "totalCount": len(names),
            "offset": 0,
            "limit": 100,
        }
        assert embedded(info)[1] == {
            "proxyAction": "info",
            "proxyType": "tool",
            "proxyPath": "kitchen_echo",
            "pythonType": "Tool",
            "many": False,
        }
        _, resources = embedded(await raw_proxy(client, action="list", type="resource"))
        assert resources["pythonType"] == "mcp.types.Resource | mcp.types.ResourceTemplate"
        config_json = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://config.json")
        [item] = config_json["content"]
        assert item["resource"]["contentType"] == "text/plain"
        assert item["annotations"] == {
            "proxyType": "resource",
            "proxyAction": "call",
            "proxyPath": "kitchen+kitchen://config.json",
        }

        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message))

        args = {"steps": 3}
        result = await raw_proxy(
            client, progress=on_progress, action="call", type="tool", path="kitchen_progress", args=args
        )
        assert result["content"][0]["text"] == "done 3"
        assert result["content"][0]["annotations"] == {
            "proxyType": "tool",
            "proxyAction": "call",
            "proxyPath": "kitchen_progress",
        }
        assert [p[0] for p in progress] == [1, 2, 3] and progress[0][2] == "step 1 of 3"


async def test_2_1_alternative_tool_name_may_be_configured(http_gateway: Any, write_config: Any) -> None:
    config = write_config(
        {"numbers": server_entry("numbers.py")}, {"expose": ["proxy"], "proxy_tool_name": "mcp_proxy"}
    )
    async with Client(http_gateway(config), mode="legacy") as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["mcp_proxy"]
        args = {"a": 1, "b": 2}
        result = await raw_proxy(client, tool="mcp_proxy", action="call", type="tool", path="numbers_add", args=args)
        assert result["structuredContent"] == {"result": 3.0}
        assert result["content"][0]["annotations"]["proxyPath"] == "numbers_add"


def test_the_proxy_tool_may_not_take_another_surfaces_tool_name(write_config: Any) -> None:
    """`proxy_tool_name: call_tool` used to start: retrieve's `call_tool` then reached the proxy (the first
    surface in `expose`), silently. It is a config problem now, for every other surface's tool."""
    for name, surface in OTHER_SURFACES_TOOLS.items():
        config = write_config({}, {"expose": ["proxy", surface], "proxy_tool_name": name})
        checked = subprocess.run(
            [*manifold_command(config)[:3], "config", "check", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert checked.returncode != 0
        said = checked.stdout + checked.stderr
        assert f"'proxy_tool_name': {name!r} is the {surface} surface's tool: choose another name" in said


def test_the_names_the_proxy_may_not_take_are_the_other_surfaces_tools(tmp_path: Path) -> None:
    env = {"MANIFOLD_EXPOSE": "dispatch,retrieve,hub,code", "MANIFOLD_DATA_DIR": str(tmp_path)}
    gateway = Gateway(load_config(None, env=env))
    shown = {name: surface.name for surface in gateway.surfaces for name in surface.reserved_tool_names()}
    assert shown == OTHER_SURFACES_TOOLS


# --- 2.1 / 2.2 parameters -----------------------------------------------------------------------


async def test_2_1_tool_should_be_named_proxy_beside_direct_tools(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "proxy" in tools and "kitchen_echo" in tools
    schema = tools["proxy"].input_schema
    assert set(schema["properties"]) >= {"action", "type", "path", "args", "limit", "offset", "filter_server"}
    assert schema["properties"]["type"]["enum"] == ["tool", "resource", "prompt"]


async def test_2_2_1_action_is_required(client: Client) -> None:
    assert "missing required parameter 'action'" in await error_text(client, type="tool")


async def test_2_2_1_action_must_be_list_info_or_call(client: Client) -> None:
    message = await error_text(client, action="delete", type="tool")
    assert "unknown action 'delete'" in message and "list, info, call" in message
    for action, extra in (("list", {}), ("info", {"path": "kitchen_echo"}), ("call", {"path": "kitchen_echo"})):
        arguments = {"args": {"text": "x"}} if action == "call" else {}
        assert (await raw_proxy(client, action=action, type="tool", **extra, **arguments))["isError"] is False


async def test_2_2_2_type_is_required(client: Client) -> None:
    assert "missing required parameter 'type'" in await error_text(client, action="list")


async def test_2_2_2_type_must_be_tool_resource_or_prompt(client: Client) -> None:
    message = await error_text(client, action="list", type="widget")
    assert "unknown type 'widget'" in message and "tool, resource, prompt" in message


async def test_2_2_3_path_is_required_for_info_and_call(client: Client) -> None:
    for action in ("info", "call"):
        message = await error_text(client, action=action, type="tool")
        assert f"'path' is required for action '{action}'" in message
    assert "must not be empty" in await error_text(client, action="info", type="tool", path="")
    assert "'path' must be a string" in await error_text(client, action="info", type="tool", path=3)


async def test_2_2_3_path_must_not_be_given_for_list(client: Client) -> None:
    message = await error_text(client, action="list", type="tool", path="kitchen_echo")
    assert "'path' must not be given for action 'list'" in message


async def test_2_2_4_args_are_passed_to_the_call_as_object_or_json_string(client: Client) -> None:
    for args in ({"text": "hello"}, '{"text": "hello"}'):
        result = await raw_proxy(client, action="call", type="tool", path="kitchen_echo", args=args)
        assert result["content"][0]["text"] == "hello"
    # no args at all: the tool gets {}
    result = await raw_proxy(client, action="call", type="tool", path="kitchen_fail")
    assert result["isError"] is True and result["content"][0]["text"].endswith("boom")


async def test_2_2_4_args_must_not_be_given_for_list_and_info(client: Client) -> None:
    for action, extra in (("list", {}), ("info", {"path": "kitchen_echo"})):
        message = await error_text(client, action=action, type="tool", args={"x": 1}, **extra)
        assert f"'args' must not be given for action '{action}'" in message


async def test_2_2_4_args_must_be_an_object_or_a_json_string_of_one(client: Client) -> None:
    call = {"action": "call", "type": "tool", "path": "kitchen_echo"}
    assert "'args' must be an object" in await error_text(client, **call, args=[1, 2])
    assert "got an array" in await error_text(client, **call, args="[1, 2]")
    assert "not valid JSON" in await error_text(client, **call, args="{text: hi}")


async def test_2_3_list_only_parameters_are_rejected_for_info_and_call(client: Client) -> None:
    for key, value in (("limit", 5), ("offset", 1), ("filter_server", "kitchen"), ("filter", {"prefix": "k"})):
        for action in ("info", "call"):
            message = await error_text(client, action=action, type="tool", path="kitchen_echo", **{key: value})
            assert f"'{key}' is only allowed for action 'list', not '{action}'" in message


async def test_2_3_limit_and_offset_are_range_checked(client: Client) -> None:
    for limit in (0, 1001, -3, "ten", True):
        assert "'limit' must be an integer from 1 to 1000" in await error_text(
            client, action="list", type="tool", limit=limit
        )
    assert "'offset' must be an integer >= 0" in await error_text(client, action="list", type="tool", offset=-1)
    assert "'filter_server' must be a string" in await error_text(client, action="list", type="tool", filter_server=1)


async def test_2_3_unknown_parameters_are_rejected_and_errors_are_harmless(client: Client) -> None:
    message = await error_text(client, action="list", type="tool", colour="red")
    assert "unknown parameter 'colour'" in message and "action, type, path" in message
    # Explicit nulls count as not given (some clients send every parameter).
    nulls = {"path": None, "args": None, "limit": None, "offset": None, "filter_server": None}
    assert (await raw_proxy(client, action="list", type="prompt", **nulls))["isError"] is False
    assert (await client.call_tool("kitchen_echo", {"text": "still fine"})).content[0].text == "still fine"  # type: ignore[union-attr]


# --- 3.1 query actions --------------------------------------------------------------------------


async def test_3_1_1_list_must_return_one_embedded_json_resource(client: Client) -> None:
    for kind in ("tool", "resource", "prompt"):
        resource, _ = embedded(await raw_proxy(client, action="list", type=kind))
        assert resource["uri"] == f"proxy:list/{kind}"
        assert resource["mimeType"] == "application/json"
        assert isinstance(json.loads(resource["text"]), list)


async def test_3_1_1_list_holds_the_items_as_the_direct_surface_lists_them(client: Client) -> None:
    direct_tools = (await client.list_tools()).tools
    listed = payload(await raw_proxy(client, action="list", type="tool", limit=1000))
    expected = [tool for tool in direct_tools if tool.name != "proxy"]
    assert [types.Tool.model_validate(item) for item in listed] == expected
    listed_resources = payload(await raw_proxy(client, action="list", type="resource"))
    uris = {item.get("uri") or item.get("uriTemplate") for item in listed_resources}
    assert {"kitchen+kitchen://text", "kitchen+kitchen://greeting/{name}", "numbers+numbers://constants"} <= uris


async def test_3_1_1_info_must_return_one_embedded_json_resource(client: Client) -> None:
    cases = (
        ("tool", "numbers_sqrt", "name"),
        ("resource", "kitchen+kitchen://text", "uri"),
        ("resource", "kitchen+kitchen://greeting/{name}", "uriTemplate"),
        ("prompt", "kitchen_greet", "name"),
    )
    for kind, path, key in cases:
        resource, _ = embedded(await raw_proxy(client, action="info", type=kind, path=path))
        assert resource["uri"] == f"proxy:info/{kind}/{path}"
        assert resource["mimeType"] == "application/json"
        assert json.loads(resource["text"])[key] == path
    message = await error_text(client, action="info", type="tool", path="echo")
    assert "unknown tool 'echo'" in message and "kitchen_echo" in message


async def test_3_1_2_query_annotations_must_name_action_and_type_and_path_only_for_info(client: Client) -> None:
    _, listed = embedded(await raw_proxy(client, action="list", type="prompt"))
    assert listed["proxyAction"] == "list" and listed["proxyType"] == "prompt"
    assert "proxyPath" not in listed
    _, info = embedded(await raw_proxy(client, action="info", type="prompt", path="kitchen_greet"))
    assert info["proxyAction"] == "info" and info["proxyType"] == "prompt"
    assert info["proxyPath"] == "kitchen_greet"


async def test_3_1_2_query_annotations_should_include_python_type_and_many(client: Client) -> None:
    for kind, python_type in (("tool", "Tool"), ("resource", MAGG_RESOURCE_LIST), ("prompt", "Prompt")):
        _, annotations = embedded(await raw_proxy(client, action="list", type=kind))
        assert annotations["pythonType"] == python_type and annotations["many"] is True
    _, info = embedded(await raw_proxy(client, action="info", type="tool", path="kitchen_echo"))
    assert info["pythonType"] == "Tool" and info["many"] is False


async def test_3_1_list_pagination_and_filter_server(client: Client) -> None:
    everything = payload(await raw_proxy(client, action="list", type="tool", limit=1000))
    names = [tool["name"] for tool in everything]

    result = await raw_proxy(client, action="list", type="tool", limit=3, offset=2)
    _, annotations = embedded(result)
    assert [tool["name"] for tool in payload(result)] == names[2:5]
    assert (annotations["totalCount"], annotations["offset"], annotations["limit"]) == (len(names), 2, 3)
    _, defaults = embedded(await raw_proxy(client, action="list", type="tool"))
    assert (defaults["offset"], defaults["limit"]) == (0, 100)

    numbers = await raw_proxy(client, action="list", type="tool", filter_server="numbers_")
    assert [tool["name"] for tool in payload(numbers)] == ["numbers_add", "numbers_multiply", "numbers_sqrt"]
    assert embedded(numbers)[1]["totalCount"] == 3
    resources = payload(await raw_proxy(client, action="list", type="resource", filter_server="numbers+"))
    assert [item["uri"] for item in resources] == ["numbers+numbers://constants"]
    beyond = await raw_proxy(client, action="list", type="tool", offset=5000)
    assert payload(beyond) == [] and embedded(beyond)[1]["totalCount"] == len(names)


# --- 3.2 call actions ---------------------------------------------------------------------------


async def test_3_2_1_tool_call_must_return_the_tools_content_annotated(client: Client) -> None:
    annotations = {"proxyType": "tool", "proxyAction": "call", "proxyPath": "kitchen_mixed"}
    result = await raw_proxy(client, action="call", type="tool", path="kitchen_mixed")
    assert [item["type"] for item in result["content"]] == ["text", "image"]
    assert all(item["annotations"] == annotations for item in result["content"])
    direct = await client.call_tool("kitchen_mixed", {})
    assert result["content"][1]["data"] == direct.content[1].data  # type: ignore[union-attr]

    embedded_result = await raw_proxy(client, action="call", type="tool", path="kitchen_embedded")
    [item] = embedded_result["content"]
    assert item["type"] == "resource" and item["resource"]["text"] == "embedded text"
    assert item["annotations"]["proxyPath"] == "kitchen_embedded"

    added = await raw_proxy(client, action="call", type="tool", path="kitchen_add", args={"a": 2, "b": 3})
    assert added["structuredContent"] == {"result": 5} and added["isError"] is False


async def test_3_2_1_tool_errors_keep_is_error_and_are_annotated(client: Client) -> None:
    result = await raw_proxy(client, action="call", type="tool", path="numbers_sqrt", args={"x": -4})
    assert result["isError"] is True
    assert "negative" in result["content"][0]["text"]
    assert result["content"][0]["annotations"]["proxyPath"] == "numbers_sqrt"


async def test_3_2_2_resource_reads_must_become_annotated_embedded_resources(client: Client) -> None:
    uri = "kitchen+kitchen://text"
    result = await raw_proxy(client, action="call", type="resource", path=uri)
    [item] = result["content"]
    assert item["type"] == "resource"
    assert item["annotations"] == {"proxyType": "resource", "proxyAction": "call", "proxyPath": uri}
    direct = (await client.read_resource(uri)).contents[0]
    # Plain text is not JSON: passed through unchanged.
    assert item["resource"] == direct.model_dump(mode="json", by_alias=True, exclude_none=True)


async def test_3_2_2_json_text_resources_should_be_objectified(client: Client) -> None:
    result = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://config.json")
    resource = result["content"][0]["resource"]
    assert resource["mimeType"] == "application/json"
    assert resource["contentType"] == "text/plain"
    assert resource["text"] == '{"debug":true,"level":3}'


async def test_3_2_2_binary_resources_keep_their_blob_and_mime_type(client: Client) -> None:
    result = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://blob")
    resource = result["content"][0]["resource"]
    assert resource["mimeType"] == "application/octet-stream" and "contentType" not in resource
    assert base64.b64decode(resource["blob"]) == b"\x00\x01\x02binary"


async def test_3_2_2_resources_from_templates_can_be_read(client: Client) -> None:
    result = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://greeting/Ada")
    assert result["content"][0]["resource"]["text"] == "Hello, Ada!"
    message = await error_text(client, action="call", type="resource", path="kitchen+kitchen://text", args={"a": 1})
    assert "'args' is not used to read a resource" in message


async def test_3_2_3_prompt_results_must_be_wrapped_as_json(client: Client) -> None:
    args = {"name": "Bob", "style": "formal"}
    result = await raw_proxy(client, action="call", type="prompt", path="kitchen_greet", args=args)
    resource, annotations = embedded(result)
    assert annotations == {
        "proxyType": "prompt",
        "proxyAction": "call",
        "proxyPath": "kitchen_greet",
        "pythonType": "GetPromptResult",
    }
    assert resource["mimeType"] == "application/json" and resource["uri"] == "proxy:call/prompt/kitchen_greet"
    direct = await client.get_prompt("kitchen_greet", args)
    assert types.GetPromptResult.model_validate(json.loads(resource["text"])) == direct


async def test_3_2_3_non_string_prompt_arguments_are_json_encoded(client: Client) -> None:
    result = await raw_proxy(client, action="call", type="prompt", path="numbers_explain", args={"topic": 42})
    text = json.loads(embedded(result)[0]["text"])["messages"][0]["content"]["text"]
    assert "'42'" in text


async def test_3_2_cancelling_a_proxied_call_leaves_the_gateway_serving(client: Client) -> None:
    started = time.monotonic()
    with anyio.move_on_after(0.5):
        await raw_proxy(client, action="call", type="tool", path="kitchen_slow", args={"seconds": 5})
    assert time.monotonic() - started < 2
    result = await raw_proxy(client, action="call", type="tool", path="kitchen_echo", args={"text": "after"})
    assert result["content"][0]["text"] == "after"


# --- 4 type preservation ------------------------------------------------------------------------


async def test_4_1_1_type_annotations_should_be_included(client: Client) -> None:
    """pythonType and many on list and info answers; pythonType on prompt results."""
    for action, extra in (("list", {}), ("info", {"path": "kitchen_greet"})):
        _, annotations = embedded(await raw_proxy(client, action=action, type="prompt", **extra))
        assert annotations["pythonType"] == "Prompt" and annotations["many"] is (action == "list")
    result = await raw_proxy(client, action="call", type="prompt", path="kitchen_summarize", args={"text": "x"})
    assert embedded(result)[1]["pythonType"] == "GetPromptResult"


async def test_4_1_2_type_identifiers_should_be_simple_names(client: Client) -> None:
    seen = set()
    for path in ("kitchen+kitchen://text", "kitchen+kitchen://greeting/{name}"):
        _, annotations = embedded(await raw_proxy(client, action="info", type="resource", path=path))
        seen.add(annotations["pythonType"])
    assert seen == {"Resource", "ResourceTemplate"}
    _, listed = embedded(await raw_proxy(client, action="list", type="resource"))
    # A list of both kinds is named as Magg's client decodes it (docs/proxy.md, "Type identifiers").
    assert listed["pythonType"] == MAGG_RESOURCE_LIST


async def test_4_2_1_objectified_resources_should_keep_the_original_mime_type(client: Client) -> None:
    # numbers://constants is already application/json: still re-encoded, original type still given.
    result = await raw_proxy(client, action="call", type="resource", path="numbers+numbers://constants")
    resource = result["content"][0]["resource"]
    assert resource["contentType"] == "application/json" and resource["mimeType"] == "application/json"
    direct = (await client.read_resource("numbers+numbers://constants")).contents[0]
    assert json.loads(resource["text"]) == json.loads(direct.text)  # type: ignore[union-attr]
    assert ", " not in resource["text"]


async def test_4_2_2_json_text_should_be_reencoded_but_plain_text_left_alone(client: Client) -> None:
    config = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://config.json")
    assert json.loads(config["content"][0]["resource"]["text"]) == {"debug": True, "level": 3}
    plain = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://text")
    assert plain["content"][0]["resource"]["mimeType"] == "text/plain"
    assert "contentType" not in plain["content"][0]["resource"]


async def test_4_2_3_binary_resources_must_remain_unchanged(client: Client) -> None:
    result = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://blob")
    direct = (await client.read_resource("kitchen+kitchen://blob")).contents[0]
    assert result["content"][0]["resource"] == direct.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- 5 errors -----------------------------------------------------------------------------------


async def test_5_2_capability_errors_propagate_as_tool_errors(client: Client) -> None:
    assert "unknown tool 'nope'" in await error_text(client, action="call", type="tool", path="nope")
    assert "unknown resource" in await error_text(client, action="call", type="resource", path="nobody+x://y")
    assert "unknown prompt 'nope'" in await error_text(client, action="call", type="prompt", path="nope")
    # A failure of the capability itself is an error result annotated like a failed tool's.
    failed = await raw_proxy(client, action="call", type="resource", path="kitchen+kitchen://missing")
    assert failed["isError"] is True and failed["content"][0]["text"].startswith("server 'kitchen'")
    assert failed["content"][0]["annotations"]["proxyPath"] == "kitchen+kitchen://missing"


# --- extensions: batch and filter ---------------------------------------------------------------


async def test_ext_batch_runs_operations_concurrently_with_results_in_order(client: Client) -> None:
    operations = [
        {"action": "call", "type": "tool", "path": "kitchen_slow", "args": {"seconds": 1.0}},
        {"action": "call", "type": "tool", "path": "kitchen_slow", "args": {"seconds": 1.0}},
        {"action": "call", "type": "tool", "path": "numbers_add", "args": {"a": 1, "b": 2}},
        {"action": "info", "type": "tool", "path": "words_upper"},
    ]
    await raw_proxy(client, action="call", type="tool", path="kitchen_echo", args={"text": "warm"})
    started = time.monotonic()
    result = await raw_proxy(client, action="batch", operations=operations)
    assert time.monotonic() - started < 1.8  # sequential would take 2 s or more
    assert result["isError"] is False
    indexes = [item["annotations"]["batchIndex"] for item in result["content"]]
    assert indexes == sorted(indexes) and set(indexes) == {0, 1, 2, 3}
    texts = [item.get("text") for item in result["content"]]
    assert texts[:3] == ["slept", "slept", "3.0"]
    info = result["content"][3]
    assert (
        info["annotations"]["proxyAction"] == "info" and json.loads(info["resource"]["text"])["name"] == "words_upper"
    )
    summary = result["structuredContent"]["results"]
    assert [entry["isError"] for entry in summary] == [False] * 4
    assert summary[2]["structuredContent"] == {"result": 3.0}


async def test_ext_batch_reports_errors_inline_without_failing_the_batch(client: Client) -> None:
    operations = [
        {"action": "call", "type": "tool", "path": "nope"},
        {"action": "list", "type": "tool", "path": "x"},
        {"action": "call", "type": "tool", "path": "kitchen_echo", "args": {"text": "ok"}},
        {"action": "call", "type": "tool", "path": "kitchen_fail", "args": {"message": "bad"}},
        "not an object",
        {"action": "batch", "operations": []},
    ]
    result = await raw_proxy(client, action="batch", operations=operations)
    assert result["isError"] is False
    summary = result["structuredContent"]["results"]
    assert [entry["isError"] for entry in summary] == [True, True, False, True, True, True]
    assert "unknown tool 'nope'" in summary[0]["error"]
    assert "'path' must not be given" in summary[1]["error"]
    assert summary[3]["error"].endswith("bad")
    assert "must be an object" in summary[4]["error"] and "cannot be nested" in summary[5]["error"]
    by_index = {item["annotations"]["batchIndex"]: item for item in result["content"]}
    assert by_index[2]["text"] == "ok" and by_index[0]["annotations"]["proxyPath"] == "nope"


async def test_ext_batch_parameters_are_validated(client: Client) -> None:
    assert "needs 'operations'" in await error_text(client, action="batch")
    assert "needs 'operations'" in await error_text(client, action="batch", operations=[])
    assert "takes only 'operations'" in await error_text(client, action="batch", type="tool", operations=[{}])
    assert "at most 100" in await error_text(client, action="batch", operations=[{}] * 101)
    message = await error_text(client, action="list", type="tool", operations=[{}])
    assert "'operations' is only allowed for action 'batch'" in message


async def test_ext_filter_by_prefix_and_tags(client: Client) -> None:
    def names(result: dict[str, Any]) -> list[str]:
        return [tool["name"] for tool in payload(result)]

    assert (
        names(await raw_proxy(client, action="list", type="tool", filter={"prefix": "words_"}))[0]
        == "words_count_words"
    )
    # A tag matches a word of the name or the description; several tags match any of them.
    assert names(await raw_proxy(client, action="list", type="tool", filter={"tags": ["square"]})) == ["numbers_sqrt"]
    both = names(await raw_proxy(client, action="list", type="tool", filter={"tags": ["square", "reverse"]}))
    assert both == ["numbers_sqrt", "words_reverse"]
    multi_word = names(await raw_proxy(client, action="list", type="tool", filter={"tags": ["upper case"]}))
    assert multi_word == ["words_upper"]
    narrowed = await raw_proxy(client, action="list", type="tool", filter={"prefix": "kitchen_", "tags": ["reverse"]})
    assert names(narrowed) == [] and embedded(narrowed)[1]["totalCount"] == 0
    prompts = payload(await raw_proxy(client, action="list", type="prompt", filter={"tags": ["mathematical"]}))
    assert [prompt["name"] for prompt in prompts] == ["numbers_explain"]


async def test_ext_filter_is_validated(client: Client) -> None:
    assert "'filter' must be an object" in await error_text(client, action="list", type="tool", filter="x")
    assert "unknown filter key 'server'" in await error_text(client, action="list", type="tool", filter={"server": 1})
    message = await error_text(client, action="list", type="tool", filter={"tags": [1]})
    assert "'filter.tags' must be a list of non-empty strings" in message
    # Regression: any number of tags of any length were matched against every item on the event loop
    # (100,000 tags over 1,000 tools held every client of the gateway for 135 s).
    many = {"tags": [f"nomatch{index}" for index in range(10_000)]}
    assert "'filter.tags' takes at most 32 tags, got 10000" in await error_text(
        client, action="list", type="tool", filter=many
    )
    long = {"tags": ["word " * 10_000]}
    message = await error_text(client, action="list", type="tool", filter=long)
    assert "'filter.tags': a tag has at most 200 characters, got one of 50000" in message
    most = payload(await raw_proxy(client, action="list", type="tool", filter={"tags": ["square"] * 32}))
    assert [tool["name"] for tool in most] == ["numbers_sqrt"]


async def test_an_error_never_echoes_a_huge_name_back(client: Client) -> None:
    # Regression: unknown names, URIs, actions and parameters were quoted whole: a megabyte name sent a
    # megabyte error back into the model's context.
    big = "x" * 1_000_000
    for request in [
        {"action": "info", "type": "tool", "path": big},
        {"action": "call", "type": "resource", "path": big},
        {"action": "call", "type": "prompt", "path": big},
        {"action": big},
        {"action": "list", "type": "tool", big: 1},
    ]:
        message = await error_text(client, **request)
        assert "'xxxx" in message and "(1000000 characters)" in message and len(message) < 1000, message[:300]


def test_ext_filter_tags_match_meta_tags() -> None:
    tool = types.Tool(name="x_run", description="Runs things.", input_schema={"type": "object"}, _meta={"tags": ["CI"]})
    fastmcp = types.Tool(name="y", input_schema={"type": "object"}, _meta={"_fastmcp": {"tags": ["deploy"]}})
    assert has_tag(tool, ["ci"]) and has_tag(tool, ["runs"]) and not has_tag(tool, ["deploy"])
    assert has_tag(fastmcp, ["Deploy"]) and not has_tag(fastmcp, ["y z"])


_WORDS = st.text(alphabet="abXy0_-. é\u212a", max_size=12)  # letters, digits, separators, a non-ASCII letter, Kelvin


@settings(max_examples=300, derandomize=True, deadline=None)
@given(name=_WORDS.filter(bool), description=st.one_of(st.none(), _WORDS), tags=st.lists(_WORDS, max_size=3))
def test_a_tag_matches_when_all_its_words_are_whole_words_of_the_item(
    name: str, description: str | None, tags: list[str]
) -> None:
    """`has_tag` searches each word of a tag whole in the item's text (in C: splitting every item into a set of
    words held the gateway 1.5 s for a list of 5,000 tools): it answers as the set of words does."""
    import re

    tool = types.Tool(name=name, description=description, input_schema={"type": "object"})
    words = set(re.findall(r"[a-z0-9]+", " ".join(filter(None, (name, description))).lower()))
    expected = any(
        (found := re.findall(r"[a-z0-9]+", tag.lower().strip())) and all(word in words for word in found)
        for tag in tags
    )
    assert has_tag(tool, tags) == bool(expected)


def test_wire_format_of_a_built_answer_is_the_spec_example() -> None:
    """The builder plus the wire lift give the spec's 10.2 example exactly (no middleware needed here)."""
    from mcp_manifold._surfaces.proxy.format import tool_call_result

    op = parse_request({"action": "call", "type": "tool", "path": "calculator_add", "args": {"a": 5, "b": 3}})
    result = types.CallToolResult(content=[types.TextContent(type="text", text="8")])
    assert wire_dump(tool_call_result(op, result))["content"] == [  # type: ignore[arg-type]
        {
            "type": "text",
            "text": "8",
            "annotations": {"proxyType": "tool", "proxyAction": "call", "proxyPath": "calculator_add"},
        }
    ]
