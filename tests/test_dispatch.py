"""The `dispatch` surface end to end (Mini-A's proxy-dispatch), plus its connection aliases and result cache."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from mcp_manifold._config import ServerConfig, load_config
from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.result_cache import ResultCache
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.state_file import JsonStateFile
from mcp_manifold._surfaces.dispatch.connections import ALIASES_FILE, Connections
from tests.conftest import (
    CLIENT_MODES,
    TRANSPORT_MODE_IDS,
    TRANSPORT_MODES,
    client_over,
    http_gateway_url,
    keyed_client,
    manifold_command,
    server_entry,
    stdio_gateway,
    write_gateway_config,
)

TOOL = "proxy-dispatch"
SECRET = "sekrit-value-123"
KITCHEN = server_entry("kitchen.py", env={"KITCHEN_EXTRAS": "1", "API_TOKEN": SECRET})
SERVERS = {"kitchen": KITCHEN, "numbers": server_entry("numbers.py")}


MULTIPLIED = {"action": "call", "tool": "multiply", "connection": "c2", "estimatedTokens": 1}  # its `_meta`


def own_meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    """`_meta` without the protocol's own keys (at 2026-07-28 every request and result carries some)."""
    return {key: value for key, value in (meta or {}).items() if not key.startswith("io.modelcontextprotocol/")}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


def inner(result: types.CallToolResult) -> str:
    """The tool's own text inside a call's answer: Mini-A's response object (`dispatch_response: object`)."""
    answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert answer["action"] == "call" and answer["content"], answer
    return "".join(item["text"] for item in answer["content"] if item["type"] == "text")


async def dispatch(client: Any, **arguments: Any) -> types.CallToolResult:
    return await client.call_tool(TOOL, arguments)


async def data(client: Any, **arguments: Any) -> Any:
    result = await dispatch(client, **arguments)
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


async def error(client: Any, **arguments: Any) -> str:
    result = await dispatch(client, **arguments)
    assert result.is_error, text_of(result)
    return text_of(result)


@asynccontextmanager
async def logged_gateway(config: Path, log: Path) -> AsyncIterator[Client]:
    """A stdio gateway whose own stderr (its log) goes to `log`."""
    command = manifold_command(config)
    shell = ["-c", 'exec "$@" 2>>"$0"', str(log), *command]  # $0 is the log, "$@" the gateway
    async with Client(StdioServerParameters(command="/bin/sh", args=shell, env=dict(os.environ)), mode="legacy") as c:
        yield c


# One stdio gateway for the tests below that use `SERVERS` as they are: a start of a gateway and its servers
# costs seconds of CPU. Each of these tests makes files of its own in the spill directory and reads only those
# (or names paths outside it); none changes a setting or a server.


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so the shared gateway's client lives across tests


@pytest.fixture(scope="module")
def shared_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gateway_config(tmp_path_factory.mktemp("dispatch"), SERVERS, expose=["dispatch"])


@pytest.fixture(scope="module")
async def client(shared_config: Path) -> AsyncIterator[Client]:
    """The shared gateway over stdio, to a session-era client (as `stdio_gateway`)."""
    async with stdio_gateway(shared_config) as opened:
        yield opened


@pytest.fixture(scope="module")
def shared_http_url(shared_config: Path) -> Iterator[str]:
    with http_gateway_url(shared_config) as url:
        yield url


@pytest.fixture(scope="module", params=TRANSPORT_MODES, ids=TRANSPORT_MODE_IDS)
async def each_client(request: pytest.FixtureRequest, shared_config: Path, client: Client) -> AsyncIterator[Client]:
    """The shared gateway over each transport and in each client mode in turn (as `connect`); one HTTP
    gateway serves both modes, and the stdio one of `client` the session-era one (a parameter, not
    `getfixturevalue`: an async fixture cannot be set up from inside another)."""
    transport, mode = request.param
    if (transport, mode) == ("stdio", "legacy"):
        yield client
        return
    async with client_over(transport, mode, shared_config, lambda: request.getfixturevalue("shared_http_url")) as c:
        yield c


# --- list, search, call ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_search_and_call_through_one_tool(connect: Any, write_config: Any) -> None:
    async with connect(write_config(SERVERS, {"expose": ["dispatch"]})) as client:
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == [TOOL]
        assert "Connections: c1 kitchen, c2 numbers." in (tools[0].description or "")

        # Lazy: listing connections without tools starts nothing.
        bare = await data(client, action="list", includeTools=False)
        assert [(c["alias"], c["name"], c["state"]) for c in bare["connections"]] == [
            ("c1", "kitchen", "stopped"),
            ("c2", "numbers", "stopped"),
        ]
        assert all("tools" not in c and len(c["id"]) == 12 for c in bare["connections"])

        numbers = (await data(client, action="list", connection="c2"))["connections"]
        assert [c["name"] for c in numbers] == ["numbers"] and numbers[0]["state"] == "ready"
        assert [t["name"] for t in numbers[0]["tools"]] == ["add", "multiply", "sqrt"]
        assert "inputSchema" not in numbers[0]["tools"][0]
        everything = (await data(client, action="list", includeInputSchema=True))["connections"]
        kitchen = {t["name"]: t for t in everything[0]["tools"]}
        assert kitchen["ticket"]["annotations"] == {"readOnlyHint": True}
        assert kitchen["echo"]["inputSchema"]["required"] == ["text"]
        bare_tools = (await data(client, action="list", connection="kitchen", includeAnnotations=False))["connections"]
        assert all("annotations" not in t for t in bare_tools[0]["tools"])

        found = await data(client, action="search", query="multiply two numbers", limit=2)
        assert found["results"][0] | {"score": 0} == {
            "connection": "c2",
            "server": "numbers",
            "tool": "multiply",
            "score": 0,
            "description": "Multiply two numbers and return their product (a * b).",
            "args": "a: number*, b: number*",
        }
        assert len(found["results"]) == 2
        only_kitchen = await data(client, action="search", query="numbers", connection="c1", includeInputSchema=True)
        assert only_kitchen["results"] and {r["connection"] for r in only_kitchen["results"]} == {"c1"}
        assert all("inputSchema" in r for r in only_kitchen["results"])
        long_query = await data(client, action="search", query="add numbers " * 10_000, limit=1)
        assert long_query["results"][0]["tool"] == "add" and len(long_query["query"]) == 203  # not echoed whole

        product = await dispatch(client, action="call", tool="multiply", arguments={"a": 6, "b": 7})
        assert inner(product).startswith("42") and not product.is_error
        assert own_meta(product.meta) == {
            "action": "call",
            "tool": "multiply",
            "connection": "c2",
            "estimatedTokens": 1,
        }
        assert product.structured_content is None  # the data lives only in content

        ambiguous = await error(client, action="call", tool="add", arguments={"a": 1, "b": 2})
        assert "offered by several connections: c1 (kitchen), c2 (numbers)" in ambiguous and "'connection'" in ambiguous
        summed = await dispatch(client, action="call", tool="add", connection="c2", arguments={"a": 1, "b": 2})
        assert inner(summed).startswith("3")
        by_exposed_name = await dispatch(client, action="call", tool="numbers_add", arguments={"a": 2, "b": 2})
        assert inner(by_exposed_name).startswith("4")
        as_json_string = await dispatch(client, action="call", tool="echo", arguments='{"text": "hi"}')
        assert inner(as_json_string) == "hi"
        failing = await dispatch(client, action="call", tool="fail", arguments={"message": "nope"})
        assert failing.is_error and "nope" in inner(failing)
        # A tool error stays inline even with resultToFile, so the model sees what went wrong.
        kept = await dispatch(client, action="call", tool="fail", arguments={"message": "nope"}, resultToFile=True)
        assert kept.is_error and "nope" in inner(kept) and "resultFile" not in (kept.meta or {})
        by_id = await dispatch(
            client, action="call", tool="add", connection=bare["connections"][1]["id"], arguments={"a": 1, "b": 1}
        )
        assert inner(by_id).startswith("2")  # a connection's id works like its alias
        forwarded = await dispatch(client, action="call", tool="request_meta", meta={"trace": "t-1", "n": 2})
        # `meta` reaches the server as `_meta` (beside what 2026-07-28 puts there on every request)
        assert own_meta(json.loads(inner(forwarded))) == {"trace": "t-1", "n": 2}


@pytest.mark.anyio
async def test_call_answers_are_mini_a_response_objects_unless_lean(client: Client, write_config: Any) -> None:
    product = await dispatch(client, action="call", tool="multiply", arguments={"a": 6, "b": 7})
    # What the model reads: the facts and the tool's content in one object, as in Mini-A's examples.
    assert [block.type for block in product.content] == ["text"]
    assert json.loads(text_of(product)) == {
        "action": "call",
        "tool": "multiply",
        "connection": "c2",
        "estimatedTokens": 1,
        "content": [{"type": "text", "text": "42.0"}],
    }
    assert own_meta(product.meta) == MULTIPLIED

    written = await dispatch(client, action="call", tool="document", arguments={"size": 50}, resultToFile=True)
    path = (written.meta or {})["resultFile"]
    measured = await dispatch(client, action="call", tool="measure", argumentsFile=path, resultToFile=True)
    answer = json.loads(text_of(measured))
    assert answer["arguments"] == {"_fromFile": path} and answer["autoSpilled"] is False
    assert answer["resultFile"].endswith(".json") and answer["resultFile"] != path
    assert answer["content"][0]["text"].startswith(f"Result written to file: {answer['resultFile']}")

    failed = json.loads(text_of(await dispatch(client, action="call", tool="fail", arguments={"message": "no"})))
    assert failed["isError"] is True and "no" in failed["content"][0]["text"]

    # Binary content follows the object as blocks of its own; inside, it is named without its data.
    picture = await dispatch(client, action="call", tool="image", arguments={})
    assert [block.type for block in picture.content] == ["text", "image"]
    assert json.loads(text_of(picture))["content"] == [{"type": "image", "mimeType": "image/png", "attached": 1}]

    lean = write_config(SERVERS, {"expose": ["dispatch"], "dispatch_response": "lean"}, name="lean.json")
    async with stdio_gateway(lean) as lean_client:
        product = await dispatch(lean_client, action="call", tool="multiply", arguments={"a": 6, "b": 7})
        assert text_of(product) == "42.0"
        assert own_meta(product.meta) == MULTIPLIED


@pytest.mark.anyio
async def test_the_schema_declares_what_the_tool_accepts(client: Client) -> None:
    import jsonschema

    [tool] = (await client.list_tools()).tools
    # A schema-strict client checks the arguments before sending them: a JSON string must pass.
    for request in (
        {"action": "call", "tool": "echo", "arguments": '{"text": "hi"}', "meta": '{"trace": "t"}'},
        {"action": "call", "tool": "echo", "arguments": {"text": "hi"}, "meta": {"trace": "t"}},
    ):
        jsonschema.validate(request, tool.input_schema)
        assert inner(await dispatch(client, **request)) == "hi"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": "call", "tool": "echo", "arguments": 5}, tool.input_schema)


@pytest.mark.anyio
async def test_every_validation_error_is_a_clear_tool_error(client: Client) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "missing required parameter 'action': one of list, search, call, readresult"),
        ({"action": "delete"}, "unknown action 'delete'"),
        ({"action": "list", "colour": "red"}, "'colour' is not a parameter of action 'list' (unknown parameter)"),
        (
            {"action": "list", "query": "x"},
            "'query' is not a parameter of action 'list' (it belongs to action search)",
        ),
        ({"action": "list", "includeTools": "yes"}, "'includeTools' must be true or false, got a string"),
        ({"action": "list", "connection": "c9"}, "unknown connection 'c9'; known connections: c1 (kitchen), c2"),
        ({"action": "search"}, "action 'search' needs 'query'"),
        ({"action": "search", "query": "x", "limit": 0}, "'limit' must be an integer from 1 to 50, got 0"),
        ({"action": "call"}, "action 'call' needs 'tool'"),
        ({"action": "call", "tool": "echo", "arguments": [1]}, "'arguments' must be an object"),
        ({"action": "call", "tool": "echo", "arguments": "{oops"}, "'arguments' is a string but not valid JSON"),
        ({"action": "call", "tool": "echo", "meta": 3}, "'meta' must be an object"),
        (
            {"action": "call", "tool": "echo", "resultSizeThreshold": -1},
            "'resultSizeThreshold' must be an integer >= 0",
        ),
        ({"action": "call", "tool": "echo", "resultToFile": 1}, "'resultToFile' must be true or false"),
        (
            {"action": "call", "tool": "multiplyy"},
            "no connection offers a tool named 'multiplyy'; did you mean 'multiply'",
        ),
        ({"action": "call", "tool": "echo", "connection": "c2"}, "connection c2 (numbers) has no tool 'echo'"),
        (
            {"action": "call", "tool": "echo", "arguments": {"txt": "a"}},
            "unknown parameter(s) txt; missing required",
        ),
        ({"action": "call", "tool": "echo", "argumentsFile": "/etc/passwd"}, "'argumentsFile' must name a file in"),
        ({"action": "readresult"}, "action 'readresult' needs 'resultFile'"),
        ({"action": "readresult", "resultFile": "../x"}, "'resultFile' may not contain '..'"),
        ({"action": "readresult", "resultFile": "nope.json"}, "'resultFile': no such file 'nope.json'"),
    ]
    for arguments, expected in cases:
        assert expected in await error(client, **arguments), arguments
    # The gateway still answers after all of that.
    assert inner(await dispatch(client, action="call", tool="echo", arguments={"text": "ok"})) == "ok"


@pytest.mark.anyio
async def test_readresult_ops_and_their_errors(client: Client) -> None:
    spilled = await dispatch(client, action="call", tool="document", arguments={"size": 3000}, resultToFile=True)
    assert spilled.meta is not None and spilled.meta["autoSpilled"] is False
    path = spilled.meta["resultFile"]
    assert f"Result written to file: {path}" in inner(spilled) and "Top-level keys: [text]" in inner(spilled)

    facts = await data(client, action="readresult", resultFile=path)
    assert facts == {"resultFile": path, "byteSize": 3016, "lineCount": 3, "estimatedTokens": 754}
    head = await dispatch(client, action="readresult", resultFile=path, op="head", lines=1)
    assert [c.text for c in head.content] == ["{", "[lines 1-1 of 3]"]  # type: ignore[union-attr]
    tail = await dispatch(client, action="readresult", resultFile=path, op="tail", lines=1)
    assert text_of(tail).startswith("}")
    middle = await dispatch(client, action="readresult", resultFile=path, op="slice", fromLine=2, toLine=2)
    assert middle.content[0].text.startswith('  "text": "w1 w2 w3')  # type: ignore[union-attr]
    grep = await dispatch(client, action="readresult", resultFile=path, op="grep", pattern=r"W99\b", context=1)
    assert grep.content[0].text.startswith("1- {\n2: ")  # type: ignore[union-attr]
    assert "1 matching line(s) of 3" in text_of(grep)
    part = await dispatch(client, action="readresult", resultFile=path, op="read", maxBytes=12)
    assert part.content[0].text == '{\n  "text": ' and "continue with offset 12" in text_of(part)  # type: ignore[union-attr]
    rest = await dispatch(client, action="readresult", resultFile=path, op="read", offset=3000)
    assert rest.content[0].text.endswith('"\n}')  # type: ignore[union-attr]
    everything = await dispatch(client, action="readresult", resultFile=path, op="read")
    assert json.loads(everything.content[0].text)["text"].startswith("w1 w2")  # type: ignore[union-attr]
    by_name = await data(client, action="readresult", resultFile=Path(path).name, op="stat")
    assert by_name["byteSize"] == 3016

    for arguments, expected in [
        ({"op": "cat"}, "unknown op 'cat': expected one of stat, head, tail, slice, grep, read"),
        ({"op": "head", "pattern": "x"}, "'pattern' is only used by op grep, not by op 'head'"),
        ({"op": "stat", "lines": 3}, "'lines' is only used by op head and tail"),
        ({"op": "grep"}, "op 'grep' needs 'pattern'"),
        ({"op": "grep", "pattern": "("}, "'pattern' is not a valid regular expression"),
        ({"op": "slice", "fromLine": 3, "toLine": 2}, "'toLine' (2) must not be smaller than 'fromLine' (3)"),
        ({"op": "head", "lines": 0}, "'lines' must be an integer >= 1, got 0"),
        ({"op": "read", "maxBytes": "all"}, "'maxBytes' must be an integer >= 0"),
    ]:
        assert expected in await error(client, action="readresult", resultFile=path, **arguments), arguments


@pytest.mark.anyio
async def test_spill_threshold_and_per_call_threshold(connect: Any, write_config: Any) -> None:
    config = write_config(SERVERS, {"expose": ["dispatch"], "spill_threshold": 5000})
    async with connect(config) as client:
        small = await dispatch(client, action="call", tool="huge", arguments={"size": 4000})
        assert len(inner(small)) == 4000 and small.meta is not None and small.meta["estimatedTokens"] == 1000

        big = await dispatch(client, action="call", tool="huge", arguments={"size": 200_000})
        notice = inner(big)
        assert len(notice) < 1000 and "auto-spilled (exceeded 5000 bytes)" in notice
        assert "Size: 200000 bytes, 1 lines (~50000 tokens)" in notice and "Preview: 0123456789abc" in notice
        assert big.meta is not None and big.meta["autoSpilled"] is True and big.meta["byteSize"] == 200_000
        spilled = Path(big.meta["resultFile"])
        assert spilled.read_text() == ("0123456789abcdefghijklmnopqrstuvwxyz" * 5556)[:200_000]
        assert stat.S_IMODE(spilled.stat().st_mode) == 0o600
        assert stat.S_IMODE(spilled.parent.stat().st_mode) == 0o700

        # The per-call threshold wins over the global one; 0 turns spilling off for that call.
        lower = await dispatch(client, action="call", tool="huge", arguments={"size": 4000}, resultSizeThreshold=1000)
        assert lower.meta is not None and "resultFile" in lower.meta and "exceeded 1000 bytes" in inner(lower)
        off = await dispatch(client, action="call", tool="huge", arguments={"size": 20_000}, resultSizeThreshold=0)
        assert len(inner(off)) == 20_000

        # readresult never spills, whatever the threshold.
        whole = await dispatch(client, action="readresult", resultFile=str(spilled), op="read")
        assert len(whole.content[0].text) == 200_000  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_1mb_result_moves_between_tools_through_a_file(each_client: Client) -> None:
    client = each_client
    produced = await dispatch(client, action="call", tool="document", arguments={"size": 1_000_000}, resultToFile=True)
    # All the client gets of the megabyte: a short notice, and the file's facts in _meta.
    assert len(inner(produced)) < 1500 and len(json.dumps(produced.meta)) < 500
    assert produced.meta is not None
    result_file = produced.meta["resultFile"]
    assert produced.meta["byteSize"] > 1_000_000

    measured = await dispatch(client, action="call", tool="measure", argumentsFile=result_file)
    assert json.loads(inner(measured)) == {"characters": 1_000_000, "words": 138_889}
    assert measured.meta is not None and measured.meta["arguments"] == {"_fromFile": result_file}

    # Inline arguments refine the file's.
    short = await dispatch(client, action="call", tool="measure", argumentsFile=result_file, arguments={"text": "a b"})
    assert json.loads(inner(short)) == {"characters": 3, "words": 2}

    found = await dispatch(client, action="readresult", resultFile=result_file, op="grep", pattern=r"\bw138888\b")
    assert "w138888" in text_of(found) and len(text_of(found)) < 3000

    not_an_object = await dispatch(client, action="call", tool="huge", arguments={"size": 50}, resultToFile=True)
    assert not_an_object.meta is not None
    refused = await error(client, action="call", tool="measure", argumentsFile=not_an_object.meta["resultFile"])
    assert "'argumentsFile' must hold a JSON object" in refused


@pytest.mark.anyio
async def test_toon_results_and_toon_files_as_arguments(write_config: Any) -> None:
    config = write_config(SERVERS, {"expose": ["dispatch"], "toon": True, "spill_threshold": 4000})
    async with stdio_gateway(config) as client:
        inline = await dispatch(client, action="call", tool="document", arguments={"size": 8})
        assert inner(inline) == "text: w1 w2 w3"
        spilled = await dispatch(client, action="call", tool="document", arguments={"size": 5000})
        assert spilled.meta is not None and spilled.meta["autoSpilled"] is True
        assert spilled.meta["resultFile"].endswith(".toon") and "Preview: text: w1 w2" in inner(spilled)
        measured = await dispatch(client, action="call", tool="measure", argumentsFile=spilled.meta["resultFile"])
        assert "characters: 5000" in inner(measured)
        # As Mini-A's mcpproxytoon: no threshold for the call, no TOON.
        off = await dispatch(client, action="call", tool="document", arguments={"size": 8}, resultSizeThreshold=0)
        assert json.loads(inner(off)) == {"text": "w1 w2 w3"}


@pytest.mark.anyio
async def test_toon_needs_a_threshold_as_in_mini_a(write_config: Any) -> None:
    async with stdio_gateway(write_config(SERVERS, {"expose": ["dispatch"], "toon": True})) as client:
        inline = await dispatch(client, action="call", tool="document", arguments={"size": 8})
        assert json.loads(inner(inline)) == {"text": "w1 w2 w3"}
        to_file = await dispatch(client, action="call", tool="document", arguments={"size": 8}, resultToFile=True)
        assert to_file.meta is not None and to_file.meta["resultFile"].endswith(".json")
        per_call = await dispatch(client, action="call", tool="document", arguments={"size": 8}, resultSizeThreshold=99)
        assert inner(per_call) == "text: w1 w2 w3"  # the call's own threshold turns it on


@pytest.mark.anyio
async def test_paths_outside_the_spill_directory_are_refused(client: Client, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text('{"text": "stolen"}')
    spilled = await dispatch(client, action="call", tool="echo", arguments={"text": "x"}, resultToFile=True)
    assert spilled.meta is not None
    directory = Path(spilled.meta["resultFile"]).parent
    (directory / "escape.json").symlink_to(outside)
    attempts = [
        str(outside),
        str(directory / ".." / ".." / ".." / "outside.json"),
        "../../../outside.json",
        str(directory / "escape.json"),
        "escape.json",
        "/etc/passwd",
    ]
    for attempt in attempts:
        for field, action in (("argumentsFile", "call"), ("resultFile", "readresult")):
            extra = {"tool": "echo"} if action == "call" else {}
            message = await error(client, action=action, **{field: attempt}, **extra)
            assert f"'{field}'" in message and ("outside" in message or "'..'" in message), (attempt, message)
            assert "stolen" not in message


@pytest.mark.anyio
async def test_secrets_never_appear_in_listings_errors_or_logs(write_config: Any, tmp_path: Path) -> None:
    servers = {
        "kitchen": KITCHEN,
        "remote": {
            "url": f"http://user:{SECRET}@127.0.0.1:9/mcp?token={SECRET}&page=1",
            "headers": {"Authorization": f"Bearer {SECRET}"},
        },
        "cli": server_entry("exits_early.py", "--api-key", SECRET),
        # Its argument parser quotes the unknown argument, password and all, on stderr.
        "pg": server_entry("exits_early.py", f"postgresql://me:{SECRET}@db.example/app"),
    }
    log = tmp_path / "gateway.log"
    async with logged_gateway(write_config(servers, {"expose": ["dispatch"]}), log) as client:
        tools = (await client.list_tools()).tools
        everything = await dispatch(client, action="list", includeInputSchema=True)
        remote_call = await dispatch(client, action="call", tool="x", connection="remote")
        cli_call = await dispatch(client, action="call", tool="x", connection="cli")
        pg_call = await dispatch(client, action="call", tool="x", connection="pg")
        again = await dispatch(client, action="list")
        texts = [
            tools[0].description or "",
            text_of(everything),
            text_of(again),
            text_of(remote_call),
            text_of(cli_call),
            text_of(pg_call),
        ]
        for text in texts:
            assert SECRET not in text
        assert "postgresql://me:***@db.example/app" in text_of(pg_call)  # the error is still useful
        listed = {c["name"]: c for c in json.loads(text_of(again))["connections"]}
        assert listed["remote"]["url"] == "http://user:***@127.0.0.1:9/mcp?token=***&page=1"
        assert listed["cli"]["command"].endswith("exits_early.py --api-key ***")
        assert listed["remote"]["state"] == "failed" and "lastError" in listed["remote"]
        assert "API_TOKEN" not in text_of(again) and "env" not in listed["kitchen"]
        assert listed["pg"]["command"].endswith("exits_early.py postgresql://me:***@db.example/app")
    assert "exits_early.py" in log.read_text() and SECRET not in log.read_text()


@pytest.mark.anyio
async def test_directories_the_config_allows_can_be_read(write_config: Any, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "args.json").write_text('{"text": "from the inbox"}')
    (tmp_path / "elsewhere.json").write_text('{"text": "not allowed"}')
    settings = {"expose": ["dispatch"], "spill_allowed_dirs": [str(inbox)]}
    async with stdio_gateway(write_config(SERVERS, settings)) as client:
        echoed = await dispatch(client, action="call", tool="echo", argumentsFile=str(inbox / "args.json"))
        assert not echoed.is_error and "from the inbox" in inner(echoed)
        head = await dispatch(client, action="readresult", resultFile=str(inbox / "args.json"), op="head")
        assert not head.is_error and "from the inbox" in text_of(head)
        for attempt in (str(tmp_path / "elsewhere.json"), str(inbox / ".." / "elsewhere.json")):
            message = await error(client, action="call", tool="echo", argumentsFile=attempt)
            assert "'argumentsFile'" in message and "not allowed" not in message


# --- the result cache ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_results_of_read_only_tools_are_cached_when_the_server_opts_in(write_config: Any) -> None:
    servers = {"kitchen": {**KITCHEN, "cache_ttl": 1.0}}
    async with stdio_gateway(write_config(servers, {"expose": ["dispatch", "direct"]})) as client:

        async def call(tool: str, **arguments: Any) -> str:
            return inner(await dispatch(client, action="call", tool=tool, arguments=arguments))

        first = await call("ticket")
        assert await call("ticket") == first  # read-only: reused
        assert text_of(await client.call_tool("kitchen_ticket", {})) == first  # every surface shares the cache
        assert await call("tick") != await call("tick")  # no annotations: never cached
        await anyio.sleep(1.1)
        assert await call("ticket") != first  # expired


@pytest.mark.anyio
async def test_a_clients_own_session_answers_it_alone_whatever_the_cache(tmp_path: Path) -> None:
    # Regression: the cache was keyed by server, tool and arguments only, so under `session_scope: client`
    # bob was answered from alice's own session (a filesystem server following her roots: her files).
    keys = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef"}
    config = write_gateway_config(
        tmp_path, {"private": server_entry("private.py", session_scope="client", cache_ttl=60)}, expose=["direct"]
    )
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "auth": {"api_keys": keys}}))
    with http_gateway_url(config) as url:
        for mode in CLIENT_MODES:
            answers = {}
            for name, key in keys.items():
                async with keyed_client(url, key, mode) as client:
                    answers[name] = [text_of(await client.call_tool("private_whose", {})) for _ in range(2)]
            assert answers["alice"][0] != answers["bob"][0], (mode, answers)  # each its own server process
            assert answers["alice"][0] == answers["alice"][1] and answers["bob"][0] == answers["bob"][1]


@pytest.mark.anyio
async def test_a_result_its_client_answered_for_is_never_anothers(tmp_path: Path) -> None:
    # Regression: a read-only tool that asked its client something (here a form) had its result cached, and
    # the next client got the first one's answer without being asked; a 2026-07-28 client's retry with
    # its answers could be answered from the cache too.
    config = write_gateway_config(tmp_path, {"kitchen": {**KITCHEN, "cache_ttl": 60}}, expose=["direct"])
    with http_gateway_url(config) as url:
        for mode in CLIENT_MODES:
            told = {}
            for name in ("alice", "bob"):

                async def answer(context: Any, params: Any, name: str = name) -> types.ElicitResult:
                    return types.ElicitResult(action="accept", content={"answer": f"{name}'s secret"})

                async with Client(url, mode=mode, elicitation_callback=answer) as client:
                    told[name] = text_of(await client.call_tool("kitchen_confide", {"question": "yours?"}))
            assert told == {"alice": "told: alice's secret", "bob": "told: bob's secret"}, mode
            async with Client(url, mode=mode) as client:  # one that asks nothing is still cached
                first = text_of(await client.call_tool("kitchen_ticket", {}))
                assert text_of(await client.call_tool("kitchen_ticket", {})) == first


@pytest.mark.anyio
@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_a_call_whose_server_a_reload_removes_meanwhile_is_still_answered(tmp_path: Path, mode: str) -> None:
    # Regression: its answer looked for the server's alias among the connections left, found none, and the
    # client got "Internal server error" (or "coroutine raised StopIteration") for a call its server had run.
    probe = server_entry("replica_probe.py")
    config = write_gateway_config(
        tmp_path, {"probe": probe, "numbers": SERVERS["numbers"]}, expose=["dispatch"], reload=False
    )
    journal, gate = tmp_path / "journal", tmp_path / "gate"
    arguments = {"token": "t1", "journal": str(journal), "gate": str(gate)}
    answers: list[types.CallToolResult] = []
    async with (
        Gateway(load_config(config), serving=True) as gateway,
        Client(McpFront(gateway).server, mode=mode) as client,
    ):

        async def call() -> None:
            answers.append(await dispatch(client, action="call", tool="work", arguments=arguments))

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(call)
            with anyio.fail_after(20):
                while not journal.exists():  # the server runs the call
                    await anyio.sleep(0.02)
            write_gateway_config(tmp_path, {"numbers": SERVERS["numbers"]}, expose=["dispatch"], reload=False)
            assert gateway.reloader is not None and (await gateway.reloader.reload()).applied
            gate.touch()
    assert not answers[0].is_error and inner(answers[0]) == "done t1", text_of(answers[0])
    assert (answers[0].meta or {})["connection"] == "probe"  # no alias is left: its name


@pytest.mark.anyio
@pytest.mark.parametrize("mode", CLIENT_MODES)
async def test_a_profile_judges_no_tool_of_a_connection_that_never_listed(tmp_path: Path, mode: str) -> None:
    """A server whose listing the gateway refused (its pages loop) is in no catalog; a call with its `connection`
    went to it anyway under the tool's own name, which a profile's globs (written for `unruly_fine`) never
    matched: `!unruly_fine` let `fine` run. Now a caller with a profile is refused, a name the server has as one
    it has not, and a caller without one still gets the backend's own answer."""
    servers = {"unruly": server_entry("unruly.py", "--cursor-loop")}
    for profile in ("plain", None):
        config = write_gateway_config(
            tmp_path, servers, expose=["dispatch"], **({"profile": profile} if profile else {})
        )
        data = json.loads(config.read_text())
        config.write_text(json.dumps({**data, "profiles": {"plain": {"tools": ["*", "!unruly_fine"]}}}))
        async with (
            Gateway(load_config(config), serving=True) as gateway,
            Client(McpFront(gateway).server, mode=mode) as client,
        ):
            called = await dispatch(client, action="call", tool="fine", connection="unruly")
            if profile is None:  # its tools are unknown: called anyway, so the backend's own answer shows
                assert inner(called) == "fine"
                continue
            assert called.is_error and "cannot be judged for profile 'plain'" in text_of(called), text_of(called)
            missing = await dispatch(client, action="call", tool="nothing", connection="unruly")
            assert text_of(missing) == text_of(called)  # a tool it has or has not: the same words


# --- connection ids and aliases ------------------------------------------------------------------------


def stdio(name: str, *args: str, **env: str) -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command="srv", args=args, env=env)


def aliases_file(directory: Path) -> JsonStateFile:
    return JsonStateFile(directory / ALIASES_FILE)


def aliases(connections: Connections) -> dict[str, str]:
    return {c.server: c.alias for c in connections}


def test_aliases_are_stable_across_restarts(tmp_path: Path) -> None:
    a, b = stdio("a", "--one"), stdio("b", "--two")
    assert aliases(Connections([a, b], aliases_file(tmp_path))) == {"a": "c1", "b": "c2"}
    # Restarted with the servers in another order and one more: the old ones keep theirs.
    c = stdio("c", "--three")
    assert aliases(Connections([c, b, a], aliases_file(tmp_path))) == {"a": "c1", "b": "c2", "c": "c3"}
    # A server removed and added back gets its alias back; a changed config is a new connection.
    assert aliases(Connections([a, c], aliases_file(tmp_path))) == {"a": "c1", "c": "c3"}
    assert aliases(Connections([stdio("b", "--changed"), a], aliases_file(tmp_path))) == {"b": "c4", "a": "c1"}
    assert aliases(Connections([a, b], None)) == {"a": "c1", "b": "c2"}  # no data dir: per run only


def test_ids_ignore_secrets_and_tell_twins_apart(tmp_path: Path) -> None:
    with_token = Connections([stdio("a", API_TOKEN="one-secret")], aliases_file(tmp_path))
    rotated = Connections([stdio("a", API_TOKEN="another-secret")], aliases_file(tmp_path))
    assert [c.id for c in with_token] == [c.id for c in rotated]
    assert aliases(rotated) == {"a": "c1"}
    twins = list(Connections([stdio("x"), stdio("y")], None))
    assert twins[0].id != twins[1].id


def test_scrub_hides_every_secret_of_a_server() -> None:
    config = ServerConfig(
        name="r",
        transport="http",
        url="https://me:pa55word@h.example/mcp?api_key=k3y-value&q=1",
        headers={"Authorization": "Bearer tok-123456"},
    )
    connection = next(iter(Connections([config], None)))
    message = "GET https://me:pa55word@h.example/mcp?api_key=k3y-value&q=1 failed; sent tok-123456, k3y-value"
    scrubbed = connection.scrub(message)
    assert all(secret not in scrubbed for secret in ("pa55word", "k3y-value", "tok-123456"))
    assert connection.describe()["url"] == "https://me:***@h.example/mcp?api_key=***&q=1"


def test_secrets_in_command_line_urls_and_assignments_are_hidden() -> None:
    # Regression: a database URL argument (the postgres server's own example) showed its password
    # in listings, errors and logs, and so did `NAME=value` arguments given to `env` or `docker -e`.
    config = stdio(
        "db",
        "postgresql://me:pg-pa55@db.example/app",
        "--mirror=mysql://u:my-pa55@h/d?ssl=1&token=q-t0ken",
        "https://example.com/a?b=c&d",
        "-e",
        "GITHUB_TOKEN=ghp-t0ken",
        "PATH=/usr/bin",
    )
    connection = next(iter(Connections([config], None)))
    assert connection.describe()["command"] == (
        "srv postgresql://me:***@db.example/app --mirror=mysql://u:***@h/d?ssl=1&token=*** "
        "https://example.com/a?b=c&d -e GITHUB_TOKEN=*** PATH=/usr/bin"
    )
    stderr = "could not connect to postgresql://me:pg-pa55@db.example/app (password pg-pa55); ghp-t0ken q-t0ken"
    scrubbed = connection.scrub(stderr)
    assert all(secret not in scrubbed for secret in ("pg-pa55", "my-pa55", "q-t0ken", "ghp-t0ken")), scrubbed
    assert "db.example/app" in scrubbed


# --- the cache, against a fake clock ----------------------------------------------------------------------


def test_cache_hits_expiry_and_what_is_never_cached() -> None:
    read_only = types.ToolAnnotations(read_only_hint=True)
    idempotent = types.ToolAnnotations(idempotent_hint=True)
    tools = [
        types.Tool(name="get", input_schema={"type": "object"}, annotations=read_only),
        types.Tool(name="put", input_schema={"type": "object"}, annotations=idempotent),
        types.Tool(name="post", input_schema={"type": "object"}),
    ]
    catalog = Catalog()
    catalog.set_backend("s", Listing(tools=tools), prefix="s")
    catalog.set_backend("t", Listing(tools=tools), prefix="t")
    now = [0.0]
    servers = {"s": ServerConfig(name="s", transport="stdio", command="x", cache_ttl=10), "t": stdio("t")}
    cache = ResultCache(catalog, servers, clock=lambda: now[0], max_entries=2)
    answer = types.CallToolResult(content=[types.TextContent(type="text", text="v")])
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="e")], is_error=True)

    cache.store("s", "get", {"a": 1, "b": 2}, answer)
    assert cache.lookup("s", "get", {"b": 2, "a": 1}) is answer  # argument order does not matter
    assert cache.lookup("s", "get", {"a": 2}) is None
    cache.store("s", "put", {}, answer)
    assert cache.lookup("s", "put", None) is answer  # idempotent counts too
    for server, tool in (("s", "post"), ("t", "get")):  # no hint, or a server that did not opt in
        cache.store(server, tool, {}, answer)
        assert cache.lookup(server, tool, {}) is None
    cache.store("s", "get", {"x": 1}, failed)
    assert cache.lookup("s", "get", {"x": 1}) is None  # errors are never cached
    now[0] = 10.0
    assert cache.lookup("s", "get", {"a": 1, "b": 2}) is None  # expired
    assert cache.hits == 2

    # At most max_entries, least recently used out first.
    now[0] = 20.0
    for n in range(3):
        cache.store("s", "get", {"n": n}, answer)
    assert [cache.lookup("s", "get", {"n": n}) is not None for n in range(3)] == [False, True, True]
    # A tool that stops being read-only after a refresh stops being cached.
    catalog.set_backend("s", Listing(tools=[tools[2].model_copy(update={"name": "get"})]), prefix="s")
    assert cache.lookup("s", "get", {"n": 2}) is None


@pytest.mark.anyio
async def test_odd_paths_and_huge_numbers_are_tool_errors_and_the_next_call_works(client: Client) -> None:
    # Regression: each of these reached the client as a traceback (ValueError, RuntimeError,
    # OverflowError, MemoryError) instead of an answer or a tool error naming the field.
    spilled = await dispatch(client, action="call", tool="document", arguments={"size": 3000}, resultToFile=True)
    assert spilled.meta is not None
    path = spilled.meta["resultFile"]
    for field, action in [("resultFile", "readresult"), ("argumentsFile", "call")]:
        extra = {"tool": "echo"} if action == "call" else {}
        nul = await error(client, action=action, **extra, **{field: "result\u0000.json"})
        assert f"'{field}' may not contain a NUL character" in nul
        nobody = await error(client, action=action, **extra, **{field: "~no-such-user-xyz/x.json"})
        assert f"'{field}': cannot use '~no-such-user-xyz/x.json'" in nobody
    tail = await dispatch(client, action="readresult", resultFile=path, op="tail", lines=10**30)
    assert not tail.is_error and "[lines 1-3 of 3]" in text_of(tail)
    whole = await dispatch(client, action="readresult", resultFile=path, op="read", maxBytes=2**40)
    assert not whole.is_error and "[all 3016 bytes]" in text_of(whole)
    past = await dispatch(client, action="readresult", resultFile=path, op="read", offset=10**30)
    assert not past.is_error and "is past the end: the file has 3016 bytes" in text_of(past)
    assert (await data(client, action="readresult", resultFile=path))["byteSize"] == 3016


@pytest.mark.anyio
async def test_a_runaway_grep_pattern_answers_at_once_without_stalling_the_gateway(tmp_path: Path) -> None:
    # Regression: `(a+)+$` on a long line backtracked for hours (Python's re); then it ran in a child
    # process for the full timeout. RE2 matches in linear time: the answer comes at once.
    from mcp_manifold._errors import InvalidRequest
    from mcp_manifold._runtime.result_files import _grep

    path = tmp_path / "result.txt"
    path.write_text("first line\n" + "a" * 40_000 + "!\nlast line\n")
    with anyio.fail_after(5):
        found = await _grep(path, "(a+)+$", 0, timeout=60)
    assert found.note == "no line of 3 matches '(a+)+$'"
    found = await _grep(path, "LAST", 1)
    assert found.body == "2- " + "a" * 2000 + "... [38001 more characters; use op 'read']\n3: last line"
    with pytest.raises(InvalidRequest, match="not a valid regular expression"):
        await _grep(path, "(", 0)
    with pytest.raises(InvalidRequest, match=r"invalid escape sequence.*RE2 syntax: no backreferences"):
        await _grep(path, r"(a)\1", 0)


@pytest.mark.anyio
async def test_a_grep_of_a_file_too_large_for_its_time_stops_with_a_clear_error(tmp_path: Path) -> None:
    from mcp_manifold._errors import InvalidRequest
    from mcp_manifold._runtime.result_files import _grep

    path = tmp_path / "result.txt"
    path.write_text("line\n" * 10_000)
    with pytest.raises(InvalidRequest, match=r"op 'grep' stopped after 0s: the file is too large"):
        await _grep(path, "nothing", 0, timeout=0)


# --- the global spill, for any surface ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_global_spill_applies_to_other_surfaces_and_files_go_at_shutdown(
    write_config: Any, tmp_path: Path
) -> None:
    config = write_config(SERVERS, {"expose": ["direct", "dispatch"], "spill_threshold": 1000})
    async with stdio_gateway(config) as client:
        direct = await client.call_tool("kitchen_huge", {"size": 5000})
        assert "auto-spilled (exceeded 1000 bytes)" in text_of(direct) and direct.meta is not None
        spilled = Path(direct.meta["resultFile"])
        assert spilled.stat().st_size == 5000
        assert text_of(await client.call_tool("kitchen_echo", {"text": "small"})) == "small"
        read_back = await dispatch(client, action="readresult", resultFile=str(spilled), op="read")
        assert len(read_back.content[0].text) == 5000  # type: ignore[union-attr]
    with anyio.fail_after(10):
        while spilled.parent.exists():  # the gateway removes its directory as it stops
            await anyio.sleep(0.05)
    assert list((tmp_path / "data" / "spill").iterdir()) == []


@pytest.mark.anyio
async def test_a_path_outside_the_spill_directory_never_tells_whether_it_exists(client: Client, tmp_path: Path) -> None:
    """`resultFile` and `argumentsFile` used to say "no such file" for a missing path outside the spill
    directory and "outside them" for an existing one: any client could probe the gateway's files."""
    there = tmp_path / "private.txt"
    there.write_text("secret")
    for field, action in [("resultFile", "readresult"), ("argumentsFile", "call")]:
        extra = {"tool": "echo"} if action == "call" else {}
        answers = [
            (await error(client, action=action, **extra, **{field: str(path)})).replace(str(path), "PATH")
            for path in (there, tmp_path / "missing.txt", tmp_path / "missing" / "deeper.txt")
        ]
        assert answers[0] == answers[1] == answers[2] and "is outside them" in answers[0]


@pytest.mark.anyio
async def test_a_file_name_too_long_for_the_file_system_is_a_clear_error(client: Client) -> None:
    # Regression: a name past 255 bytes made the existence check raise (ENAMETOOLONG), which reached the
    # client as an internal error echoing the whole path (a megabyte for a megabyte), with a traceback in
    # the gateway's log; so did every other refusal of a path, in full.
    for name in ("r" * 300, "r" * 1_000_000):
        for field, action in [("resultFile", "readresult"), ("argumentsFile", "call")]:
            extra = {"tool": "echo"} if action == "call" else {}
            message = await error(client, action=action, **extra, **{field: name})
            assert f"'{field}': no such file 'rrr" in message and len(message) < 5000, message[:300]
        message = await error(client, action="readresult", resultFile="/" + name)
        assert "is outside them" in message and len(message) < 5000, message[:300]


@pytest.mark.anyio
async def test_an_error_never_echoes_a_huge_name_back(client: Client) -> None:
    # Regression: unknown tools, connections, actions and parameters were quoted whole: a megabyte name
    # sent a megabyte error back into the model's context.
    big = "x" * 1_000_000
    for request in [
        {"action": "call", "tool": big},
        {"action": "call", "tool": big, "connection": "c2"},
        {"action": "call", "tool": "add", "connection": big},
        {"action": big},
        {"action": "list", big: 1},
    ]:
        message = await error(client, **request)
        assert "'xxxx" in message and "(1000000 characters)" in message and len(message) < 1000, message[:300]
    spilled = await dispatch(client, action="call", tool="echo", arguments={"text": "hi"}, resultToFile=True)
    assert spilled.meta is not None, text_of(spilled)
    pattern = "|".join(f"zz{index}" for index in range(100_000))  # RE2 takes it: 688,889 characters
    missed = await dispatch(
        client, action="readresult", resultFile=spilled.meta["resultFile"], op="grep", pattern=pattern
    )
    assert "no line of 1 matches 'zz0|zz1" in text_of(missed) and len(text_of(missed)) < 1000, text_of(missed)[:300]


@pytest.mark.anyio
async def test_a_spill_the_disk_cannot_hold_leaves_no_part_behind(write_config: Any, tmp_path: Path) -> None:
    # Regression: a write that failed (a full disk) left what it had written, holding that space until its
    # TTL; each failed spill took more, so the disk stayed full. A file size limit stands in for the disk.
    config = write_config({"kitchen": server_entry("kitchen.py")}, {"spill_threshold": 1000})
    command = manifold_command(config)
    limited = StdioServerParameters(
        command="sh", args=["-c", 'ulimit -f 300; exec "$@"', "sh", *command], env=dict(os.environ)
    )
    async with Client(limited, mode="legacy") as client:
        answer = await client.call_tool("kitchen_huge", {"size": 400_000})  # 400 KB, past the 300 KiB limit
        assert not answer.is_error and len(text_of(answer)) == 400_000  # inline, as the spill failed
        assert list((tmp_path / "data" / "spill").rglob("result-*")) == []
        small = await client.call_tool("kitchen_huge", {"size": 5000})
        assert "auto-spilled" in text_of(small)


@pytest.mark.anyio
async def test_a_grep_costs_the_same_whatever_the_groups_of_its_pattern(client: Client) -> None:
    # Regression: RE2 worked out every group of each match, at a cost of their number times the match's
    # length, and the deadline is checked between lines: 1,000 groups around `.*` over one 400 KB line took
    # minutes of a core (a 4 MB line: over 9 minutes), for a pattern of 2 KB.
    spilled = await dispatch(client, action="call", tool="huge", arguments={"size": 400_000}, resultToFile=True)
    assert spilled.meta is not None, text_of(spilled)
    pattern = "(" * 1000 + ".*" + ")" * 1000
    with anyio.fail_after(30):  # the code before took about 100 s here
        found = await dispatch(
            client, action="readresult", resultFile=spilled.meta["resultFile"], op="grep", pattern=pattern
        )
    assert not found.is_error and text_of(found).startswith("1: 0123456789abc"), text_of(found)[:300]


@pytest.mark.anyio
async def test_spilled_files_are_bounded_in_total_the_oldest_go_first(write_config: Any) -> None:
    """Spill files were bounded only by their TTL: a client asking for large results in files could fill the
    gateway's disk. `spill_max_bytes` bounds them; the oldest are removed to make room."""
    settings = {"expose": ["dispatch"], "spill_max_bytes": 25_000}
    async with stdio_gateway(write_config(SERVERS, settings)) as client:
        paths = []
        for _ in range(3):
            spilled = await dispatch(client, action="call", tool="huge", arguments={"size": 10_000}, resultToFile=True)
            assert not spilled.is_error and spilled.meta is not None, text_of(spilled)
            paths.append(spilled.meta["resultFile"])
        assert "no such file" in await error(client, action="readresult", resultFile=paths[0])
        for path in paths[1:]:
            assert (await data(client, action="readresult", resultFile=path))["byteSize"] == 10_000
        too_big = await error(client, action="call", tool="huge", arguments={"size": 30_000}, resultToFile=True)
        assert "the result (30000 bytes) is larger than spill_max_bytes (25000)" in too_big
        assert (await data(client, action="readresult", resultFile=paths[2]))["byteSize"] == 10_000


@pytest.mark.anyio
async def test_spilled_files_expire_after_the_ttl_while_the_gateway_runs(write_config: Any) -> None:
    async with stdio_gateway(write_config(SERVERS, {"expose": ["dispatch"], "spill_ttl": 1})) as client:
        spilled = await dispatch(client, action="call", tool="echo", arguments={"text": "x"}, resultToFile=True)
        assert spilled.meta is not None and "deleted at shutdown or after 1s" in inner(spilled)
        path = Path(spilled.meta["resultFile"])
        with anyio.fail_after(10):
            while path.exists():  # nothing else is spilled: the periodic sweep removes it
                await anyio.sleep(0.2)
        assert "no such file" in await error(client, action="readresult", resultFile=str(path))


@pytest.mark.anyio
async def test_files_of_a_killed_gateway_go_when_the_next_one_starts(write_config: Any, tmp_path: Path) -> None:
    # Regression: they went only when the next gateway spilled something itself; one that never did kept
    # them (results past their TTL, on disk) for as long as it ran.
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = tmp_path / "data" / "spill" / f"gw-{finished.stdout.strip()}-abcd"
    killed.mkdir(parents=True)
    (killed / "result-0123456789abcdef.txt").write_text("a result")
    async with stdio_gateway(write_config(SERVERS, {"expose": ["dispatch"]})) as client:
        assert "hi" in inner(await dispatch(client, action="call", tool="echo", arguments={"text": "hi"}))
        with anyio.fail_after(10):
            while killed.exists():
                await anyio.sleep(0.05)


# --- the documentation's examples ---------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "dispatch.md"


def json_blocks(text: str) -> list[Any]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", text, re.DOTALL)]


@pytest.mark.anyio
async def test_the_documented_requests_work_as_written(write_config: Any) -> None:
    blocks = json_blocks(DOCS.read_text())
    config, requests = blocks[0], [block for block in blocks if "action" in block]
    assert len(requests) >= 12
    root = Path(__file__).resolve().parents[1]
    servers = {
        name: {**entry, "command": sys.executable, "args": [str(root / arg) for arg in entry["args"]]}
        for name, entry in config["mcpServers"].items()
    }
    latest_file = None
    answers: dict[str, types.CallToolResult] = {}
    async with stdio_gateway(write_config(servers, config["manifold"])) as client:
        for request in requests:
            for key in ("resultFile", "argumentsFile"):
                if key in request:  # the page shows an example path; use the file the gateway just wrote
                    assert "/spill/gw-" in request[key] and latest_file is not None
                    request[key] = latest_file
            result = await dispatch(client, **request)
            assert not result.is_error, (request, text_of(result))
            latest_file = (result.meta or {}).get("resultFile", latest_file)
            answers[json.dumps(request, sort_keys=True)] = result
        assert latest_file is not None

        # Mini-A's walk-through: list, search for time tools, call get_current_time.
        def answer(request: str) -> types.CallToolResult:
            return answers[json.dumps(json.loads(request), sort_keys=True)]

        listed = json.loads(text_of(answer('{"action":"list"}')))["connections"]
        assert [(c["alias"], c["name"]) for c in listed] == [
            ("c1", "kitchen"),
            ("c2", "numbers"),
            ("c3", "words"),
            ("c4", "clock"),
        ]
        found = json.loads(text_of(answer('{"action":"search","query":"time"}')))["results"]
        assert found[0]["tool"] == "get_current_time" and found[0]["connection"] == "c4"
        now = answer('{"action":"call","tool":"get_current_time","arguments":{}}')
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", json.loads(inner(now))["time"])
        assert now.meta is not None and now.meta["connection"] == "c4" and now.meta["estimatedTokens"] > 0


# --- restarts, concurrency, files that go away ----------------------------------------------------------------


@pytest.mark.anyio
async def test_aliases_survive_a_gateway_restart_with_a_reordered_config(write_config: Any) -> None:
    async def connections(config: Path) -> dict[str, tuple[str, str]]:
        async with stdio_gateway(config) as client:
            listed = await data(client, action="list", includeTools=False)  # starts no server
            described = (await client.list_tools()).tools[0].description or ""
        found = {c["name"]: (c["alias"], c["id"]) for c in listed["connections"]}
        assert all(f"{alias} {name}" in described for name, (alias, _) in found.items())  # the tool's description
        return found

    before = await connections(write_config(SERVERS, {"expose": ["dispatch"]}))
    assert {name: alias for name, (alias, _) in before.items()} == {"kitchen": "c1", "numbers": "c2"}
    reordered = {"words": server_entry("words.py"), "numbers": SERVERS["numbers"], "kitchen": KITCHEN}
    after = await connections(write_config(reordered, {"expose": ["dispatch"]}, name="reordered.json"))
    assert after["kitchen"] == before["kitchen"] and after["numbers"] == before["numbers"]
    assert after["words"][0] == "c3"


@pytest.mark.anyio
async def test_concurrent_calls_spills_and_reads_do_not_mix(write_config: Any) -> None:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    async with stdio_gateway(write_config(SERVERS, {"expose": ["dispatch"], "spill_threshold": 5000})) as client:

        async def spill_and_read(n: int) -> None:
            size = 20_000 + n
            spilled = await dispatch(client, action="call", tool="huge", arguments={"size": size})
            assert spilled.meta is not None and spilled.meta["byteSize"] == size, inner(spilled)
            path = spilled.meta["resultFile"]
            end = await dispatch(client, action="readresult", resultFile=path, op="read", offset=size - 12)
            assert end.content[0].text == (alphabet * 600)[size - 12 : size]  # type: ignore[union-attr]
            grep = await dispatch(client, action="readresult", resultFile=path, op="grep", pattern="xyz01")
            assert "of 1" in text_of(grep) and not grep.is_error

        async def add(n: int) -> None:
            summed = await dispatch(client, action="call", tool="add", connection="c2", arguments={"a": n, "b": 1})
            assert inner(summed).startswith(str(float(n + 1))), inner(summed)

        with anyio.fail_after(90):
            async with anyio.create_task_group() as group:
                for n in range(12):
                    group.start_soon(spill_and_read, n)
                    group.start_soon(add, n)

        # A result file deleted between calls (by hand, or by the TTL) is a clear error, nothing more.
        spilled = await dispatch(client, action="call", tool="document", arguments={"size": 100}, resultToFile=True)
        assert spilled.meta is not None
        path = Path(spilled.meta["resultFile"])
        path.unlink()
        assert "'resultFile': no such file" in await error(client, action="readresult", resultFile=str(path))
        gone = await error(client, action="call", tool="measure", argumentsFile=str(path))
        assert "'argumentsFile': no such file" in gone
        # Even the whole spill directory going away (a tmp cleaner) only costs the files in it.
        shutil.rmtree(path.parent)
        again = await dispatch(client, action="call", tool="document", arguments={"size": 100}, resultToFile=True)
        assert again.meta is not None and Path(again.meta["resultFile"]).is_file()
        assert (await data(client, action="readresult", resultFile=again.meta["resultFile"]))["byteSize"] == 116
