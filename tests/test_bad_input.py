"""Bad input from one caller never reaches a backend, nor anyone else's calls (issue 21, finding 3).

A lone surrogate (`"\\ud800"`) in a tool's arguments used to end the stdio server's process: the SDK's
writer to the server cannot encode it, so the connection ended, and every call in flight on it failed
with "the server closed the connection". Each surface that takes its arguments as a JSON string
(proxy, dispatch, retrieve, hub) lets such a string through any transport; the stdio fast lane lets it
through for a direct tool. The call path now refuses it with an error naming the argument.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from mcp_manifold._config import load_config
from mcp_manifold._core.arguments import MAX_DEPTH, QUICK_VALUES, encoding_problem, quick_verdict
from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._core.router import Target
from mcp_manifold._errors import InvalidRequest
from mcp_manifold._runtime.audit import read_entries
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry, server_over_http, stdio_gateway
from tests.raw_wire import RawStdio, live_backends

SURFACES = ["direct", "proxy", "dispatch", "retrieve", "hub"]
# The arguments as a JSON string, as models often send them: valid Unicode on the wire, a lone surrogate
# once parsed.
SURROGATE_ARGS = '{"text": "\\ud800"}'
REFUSED = "argument 'text' is not valid Unicode: lone surrogate at position 0"


def config(write_config: Any, tmp_path: Path, surfaces: list[str] = SURFACES) -> Path:
    return write_config(
        {"kitchen": server_entry("kitchen.py")},
        {"expose": surfaces, "discovery_dir": str(tmp_path / "instances")},
    )


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


SURFACE_CALLS = {
    "proxy": ("proxy", {"action": "call", "type": "tool", "path": "kitchen_echo", "args": SURROGATE_ARGS}),
    "dispatch": ("proxy-dispatch", {"action": "call", "tool": "echo", "arguments": SURROGATE_ARGS}),
    "retrieve": ("call_tool", {"name": "kitchen_echo", "args": SURROGATE_ARGS}),
    "hub": ("instances_call", {"instance_id": "kitchen", "tool": "echo", "arguments": SURROGATE_ARGS}),
}


@pytest.mark.anyio
async def test_a_lone_surrogate_is_refused_on_every_surface_and_the_server_keeps_serving(
    connect: Any, write_config: Any, tmp_path: Path
) -> None:
    async with connect(config(write_config, tmp_path)) as client:
        assert text_of(await client.call_tool("kitchen_echo", {"text": "before"})) == "before"
        slow: dict[str, Any] = {}

        async def in_flight() -> None:  # another call on the same server while the bad ones come in
            slow["result"] = await client.call_tool("kitchen_slow", {"seconds": 2})

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(in_flight)
            await anyio.sleep(0.3)
            for surface, (tool, arguments) in SURFACE_CALLS.items():
                result = await client.call_tool(tool, arguments)
                assert result.is_error, surface
                assert REFUSED in text_of(result), (surface, text_of(result))
            prompt = await client.call_tool(
                "proxy", {"action": "call", "type": "prompt", "path": "kitchen_greet", "args": '{"name": "\\udc00"}'}
            )
            assert "argument 'name' is not valid Unicode: lone surrogate at position 0" in text_of(prompt)
        assert not slow["result"].is_error, text_of(slow["result"])
        assert text_of(await client.call_tool("kitchen_echo", {"text": "after"})) == "after"
        statuses = await live_backends(tmp_path / "data")
    assert statuses["kitchen"]["restarts"] == 0, statuses["kitchen"]


@pytest.mark.anyio
async def test_large_arguments_are_checked_whole_and_their_first_bad_place_named(
    connect: Any, write_config: Any, tmp_path: Path
) -> None:
    """Arguments holding more values than the quick walk takes are walked in a worker thread: a bad
    value past the quick walk's reach is still refused, naming its place, and a good one is sent."""
    padding = "{}," * QUICK_VALUES
    async with connect(config(write_config, tmp_path, ["direct", "proxy"])) as client:
        bad = '{"text": "x", "pad": [' + padding + '"\\ud800"]}'
        call = {"action": "call", "type": "tool", "path": "kitchen_echo", "args": bad}
        result = await client.call_tool("proxy", call)
        assert result.is_error
        assert f"argument 'pad[{QUICK_VALUES}]' is not valid Unicode: lone surrogate at position 0" in text_of(result)
        good = await client.call_tool("kitchen_echo", {"text": "big", "pad": [{} for _ in range(QUICK_VALUES)]})
        assert text_of(good) == "big"


@pytest.mark.anyio
async def test_arguments_as_a_deeply_nested_json_string_are_a_tool_error_naming_the_field(
    write_config: Any, tmp_path: Path
) -> None:
    """The parser's recursion limit used to escape as a JSON-RPC error ("maximum recursion depth exceeded
    while decoding...", a traceback on stderr) instead of a tool error naming the argument."""
    deep = '{"a":' * 30_000 + "1" + "}" * 30_000
    async with stdio_gateway(config(write_config, tmp_path)) as client:
        for tool, arguments in SURFACE_CALLS.values():
            field = "args" if "args" in arguments else "arguments"
            result = await client.call_tool(tool, {**arguments, field: deep})
            assert result.is_error, tool
            assert f"'{field}' is a JSON string nested too deeply to be used as arguments" in text_of(result)
        echoed = await client.call_tool("kitchen_echo", {"text": "still here"})
        assert text_of(echoed) == "still here"


@pytest.mark.anyio
async def test_the_stdio_fast_lane_refuses_what_no_wire_carries(write_config: Any, tmp_path: Path) -> None:
    """What the SDK's reader can read but no wire carries (a number that is not finite) is a tool error of
    the call path's, on the lane as on the SDK's path; what it cannot read (a lone surrogate, nesting past
    its parser's depth) the front refuses as an invalid request naming the argument, lane or not."""
    async with RawStdio(config(write_config, tmp_path, ["direct"])) as gateway:  # the lane serves `direct` alone
        await gateway.open_session()
        warm = await gateway.request("tools/call", {"name": "kitchen_echo", "arguments": {"text": "warm"}})
        assert warm["result"]["content"][0]["text"] == "warm"  # the server runs: the lane takes its calls
        pid = (await gateway.backends())["kitchen"]["pid"]
        cases = {
            '{"text": "\\ud800"}': ("error", REFUSED),
            '{"text": "ok", "n": NaN}': ("tool error", "argument 'n' is not a finite number"),
            '{"text": "ok", "n": [1e400]}': ("tool error", "argument 'n[0]' is not a finite number"),
            '{"text": "ok", "deep": ' + "[" * 300 + "]" * 300 + "}": ("error", "is nested deeper than 100 levels"),
            '{"text": "ok", "\\udfff": 1}': ("error", "argument key '\\udfff' is not valid Unicode"),
        }
        for number, (arguments, (kind, expected)) in enumerate(cases.items()):
            line = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"kitchen_echo","arguments":%s}}'
            answer = await gateway.ask_raw((line % (number, arguments)).encode(), number)
            if kind == "error":
                assert answer["error"]["code"] == types.INVALID_REQUEST, answer
                assert expected in answer["error"]["message"], answer
            else:
                assert "result" in answer and answer["result"]["isError"], answer
                assert expected in answer["result"]["content"][0]["text"], answer
        # Past what Python's parser takes (it raises RecursionError, which used to escape the lane and end
        # the gateway): a parse error, and the gateway still serves.
        deep = "[" * 5000 + "]" * 5000
        call = '{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"kitchen_echo","arguments":{"x":%s}}}'
        answer = await gateway.ask_raw((call % deep).encode(), None)
        assert answer["error"]["message"] == "Parse error: the message is nested too deeply", answer
        answer = await gateway.request("tools/call", {"name": "kitchen_echo", "arguments": {"text": "still here"}})
        assert answer["result"]["content"][0]["text"] == "still here"
        after = (await gateway.backends())["kitchen"]
    assert (after["pid"], after["restarts"]) == (pid, 0)


@pytest.mark.anyio
async def test_the_stdio_front_answers_every_line_it_cannot_read(write_config: Any, tmp_path: Path) -> None:
    """The SDK server answers nothing to a line it cannot parse; the client would wait forever."""
    async with RawStdio(config(write_config, tmp_path)) as gateway:
        await gateway.open_session()
        deep = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}"
        cases: list[tuple[bytes, Any, str]] = [
            (b"not json", None, "Parse error: the message is not valid JSON"),
            (b"\xff\xfe{", None, "Parse error"),
            (b"[1, 2]", None, "batches are not supported"),
            (b"42", None, "a JSON-RPC message is a JSON object"),
            (deep, None, "nested too deeply"),
            (b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"\\ud800"}}', 7, "'params.cursor'"),
            (
                b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nope","arguments":{"a":"\\ud800"}}}',
                8,
                REFUSED.replace("text", "a"),
            ),
            (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', None, "'id' is not valid Unicode"),
            (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, "'id' must be a string or an integer"),
            (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, "'id' must be a string or an integer"),
            (b'{"jsonrpc":"1.0","id":9,"method":"ping"}', 9, "'jsonrpc' must be \"2.0\""),
        ]
        for line, answered_id, expected in cases:
            answer = await gateway.ask_raw(line, answered_id)
            assert "error" in answer, (line[:80], answer)
            assert expected in answer["error"]["message"], (line[:80], answer)
        # Notifications get no answer, even bad ones; the connection is still there.
        await gateway.send_raw(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\\ud800"}}')
        assert (await gateway.request("ping", {}))["result"] == {}


@pytest.mark.anyio
async def test_a_message_no_wire_carries_never_ends_the_connection_to_a_server(
    write_config: Any, tmp_path: Path
) -> None:
    """Defence in depth, below the call path: the writer to a server refuses what it cannot encode."""
    async with Gateway(load_config(config(write_config, tmp_path, ["direct"]))) as gateway:
        backend = gateway.pool.backends["kitchen"]
        await backend.request("tools/call", lambda session: session.call_tool("echo", {"text": "warm"}))
        pid = backend.pid
        with pytest.raises(
            InvalidRequest,
            match=r"tools/call was not sent to server 'kitchen': .*'params\.arguments\.text' is not valid Unicode",
        ):
            await backend.request("tools/call", lambda session: session.call_tool("echo", {"text": "\ud800"}))
        result = await backend.request("tools/call", lambda session: session.call_tool("echo", {"text": "after"}))
        assert text_of(result) == "after"
        assert (backend.pid, backend.restarts, backend.state) == (pid, 0, "ready")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"text": "plain", "n": [1, 2.5, None, True, 10**40], "é": "ünïcode"}, None),
        ({"text": "\ud800"}, "argument 'text' is not valid Unicode: lone surrogate at position 0"),
        ({"a": [0, {"b": "ok\udfff"}]}, "argument 'a[1].b' is not valid Unicode: lone surrogate at position 2"),
        ({"a": {"\ud800": 1}}, "argument key 'a.\\ud800' is not valid Unicode: lone surrogate at position 0"),
        ({"x": float("nan")}, "argument 'x' is not a finite number (JSON has no NaN or Infinity)"),
        ({"x": [float("-inf")]}, "argument 'x[0]' is not a finite number"),
        ({"k" * 100: "\ud800"}, "argument '" + "k" * 40 + "...' is not valid Unicode"),
        ("\ud800", "argument is not valid Unicode"),
    ],
)
def test_encoding_problem_names_the_first_bad_place(value: Any, expected: str | None) -> None:
    problem = encoding_problem(value)
    assert problem == expected if expected is None else expected in (problem or "")
    assert quick_verdict(value) is (expected is None)  # small values: decided by the quick walk


def test_the_quick_walk_leaves_a_large_value_undecided_whatever_it_holds() -> None:
    """More values than a quick walk takes (a bound on how long one call's check holds the event loop)
    are left to `encoding_problem`, which the call path runs in a worker thread."""
    many: list[Any] = [{} for _ in range(QUICK_VALUES)]
    assert quick_verdict({"many": many}) is None
    assert encoding_problem({"many": many}) is None
    assert quick_verdict({"flat": list(range(QUICK_VALUES))}) is None
    assert quick_verdict({"many": [*many, "\ud800"]}) is None  # unsendable past the bound: undecided too
    assert quick_verdict({"few": many[:100]}) is True
    assert quick_verdict({"few": [*many[:100], "\ud800"]}) is False


def test_encoding_problem_walks_any_depth_and_limits_nesting() -> None:
    deepest: list[Any] = []
    value = deepest
    for _ in range(100_000):  # far past Python's recursion limit: the walk must not recurse
        value.append([])
        value = value[0]
    assert f"is nested deeper than {MAX_DEPTH} levels" in (encoding_problem({"deep": deepest}) or "")
    allowed: Any = "leaf"
    for _ in range(MAX_DEPTH - 1):
        allowed = [allowed]
    assert encoding_problem({"deep": allowed}) is None


@pytest.mark.anyio
async def test_a_server_answer_no_reader_accepts_costs_that_call_only(write_config: Any, tmp_path: Path) -> None:
    """A server whose answer carries a lone surrogate: the SDK's reader drops the line, so that call
    waits for its timeout; the connection, the server and the client's stream stay."""
    path = write_config({"garbled": server_entry("garbled.py", timeout=3)}, {"expose": ["direct"]})
    async with stdio_gateway(path) as client:
        assert text_of(await client.call_tool("garbled_fine", {})) == "fine"
        garbled = await client.call_tool("garbled_garble", {})
        assert garbled.is_error and "timed out" in text_of(garbled), text_of(garbled)
        assert text_of(await client.call_tool("garbled_fine", {})) == "fine"
        statuses = await live_backends(tmp_path / "data")
    assert statuses["garbled"]["restarts"] == 0, statuses["garbled"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("leg", ["1", "0"])
async def test_a_server_result_that_is_no_mcp_is_that_calls_error_on_either_path(
    write_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, leg: str
) -> None:
    """A result that is JSON but no MCP result (content that is no list): a tool error naming where it went
    wrong and never quoting it, alike on the stdio leg (which checks it as the SDK's client does) and on
    the SDK's client; the server stays up for the next call."""
    monkeypatch.setenv("MANIFOLD_STDIO_LEG", leg)
    path = write_config({"garbled": server_entry("garbled.py", timeout=10)}, {"expose": ["direct"]})
    async with stdio_gateway(path, mode=mode) as client:
        assert text_of(await client.call_tool("garbled_fine", {})) == "fine"
        misshapen = await client.call_tool("garbled_misshapen", {})
        said = text_of(misshapen)
        assert misshapen.is_error and "the server's answer is not valid MCP (at content)" in said, said
        assert "token=abc" not in said
        assert text_of(await client.call_tool("garbled_fine", {})) == "fine"
        statuses = await live_backends(tmp_path / "data")
    assert statuses["garbled"]["restarts"] == 0, statuses["garbled"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_remote_server_answer_no_reader_accepts_costs_that_call_only(
    write_config: Any, http_gateway: Any, tmp_path: Path, mode: str
) -> None:
    """Over HTTP, where the gateway's raw leg reads a plain call's answer itself: a lone surrogate in the
    answer, or in its error's message, is refused in the words of the SDK's client (a tool error), never
    passed on to break the client's stream, nor to cost the call's audit line. It used to be read with
    Python's `json` (which takes it), and the call ended in an internal error. The same calls with the leg
    off (every call through the SDK's client) say the same."""
    texts: dict[str, list[str]] = {}
    with server_over_http("garbled.py") as url:
        for leg in ("1", "0"):
            path = write_config({"garbled": {"url": url, "timeout": 3}}, {"expose": ["direct"]}, name=f"leg{leg}.json")
            os.environ["MANIFOLD_HTTP_LEG"] = leg  # inherited by the gateway
            try:
                gateway = http_gateway(path)
            finally:
                del os.environ["MANIFOLD_HTTP_LEG"]
            async with Client(gateway, mode=mode) as client:
                assert text_of(await client.call_tool("garbled_fine", {})) == "fine"  # the server is up: the lane
                said = texts[leg] = []
                for tool in ("garbled_garble", "garbled_garble_error"):
                    refused = await client.call_tool(tool, {})
                    assert refused.is_error, text_of(refused)
                    said.append(text_of(refused))
                assert text_of(await client.call_tool("garbled_fine", {})) == "fine"
            async with httpx2.AsyncClient() as http:
                scraped = (await http.get(gateway.removesuffix("/mcp") + "/metrics")).text
            taken = f'manifold_backend_raw_leg_calls_total{{server="garbled"}} {3.0 if leg == "1" else 0.0}'
            assert taken in scraped, [line for line in scraped.splitlines() if "raw_leg_calls" in line]
    # The leg's words are the SDK client's, up to where the line breaks off (the request ids differ).
    assert [text.split(" at line ")[0] for text in texts["1"]] == [text.split(" at line ")[0] for text in texts["0"]]
    for text in texts["1"]:
        assert text.startswith("server 'garbled': Failed to parse JSON response: 1 validation error for union["), text
        assert "Invalid JSON: unexpected end of hex escape at line 1" in text, text
    lines = [(line["name"], line["outcome"]) for line in read_entries(tmp_path / "data" / "audit")]
    calls = [
        ("garbled_fine", "ok"),
        ("garbled_garble", "error"),
        ("garbled_garble_error", "error"),
        ("garbled_fine", "ok"),
    ]
    assert lines == calls * 2


@pytest.mark.anyio
async def test_http_answers_a_request_whose_id_json_rpc_does_not_allow(
    http_gateway: Any, write_config: Any, tmp_path: Path
) -> None:
    """The SDK takes such a request for a notification (202, no answer): the client would wait forever.
    Found by the fuzzer (tests/test_fuzz.py)."""
    url = http_gateway(config(write_config, tmp_path, ["direct"]))
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    opening = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    async with httpx2.AsyncClient(timeout=60) as client:
        opened = await client.post(
            url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": opening}
        )
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        for request_id in ("0.0", "1.5", "1e3", "null", "true", "[1]", "{}", "NaN", "-Infinity"):
            body = f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/list"}}'
            answer = await client.post(url, headers=session, content=body)
            assert answer.status_code == 400, (request_id, answer.status_code, answer.text)
            assert answer.json()["error"]["message"] == "Invalid request: 'id' must be a string or an integer"
            assert answer.json()["id"] is None
        # A plain tools/call of either era, which the HTTP lane would take with a usable id, is answered alike.
        modern = {
            **headers,
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "kitchen_echo",
        }
        envelope = '"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", '
        envelope += '"io.modelcontextprotocol/clientCapabilities": {}}'
        for request_id in ("1.5", "null", "true"):
            for sent, extra in ((session, ""), (modern, ", " + envelope)):
                params = f'{{"name": "kitchen_echo", "arguments": {{"text": "x"}}{extra}}}'
                body = f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", "params": {params}}}'
                answer = await client.post(url, headers=sent, content=body)
                assert answer.status_code == 400, (request_id, answer.status_code, answer.text)
                assert answer.json()["error"]["message"] == "Invalid request: 'id' must be a string or an integer"
        # A notification (no id) is still accepted, and a request with a good id still answered.
        notified = await client.post(
            url, headers=session, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        )
        assert notified.status_code == 202
        listed = await client.post(
            url, headers=session, content=b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"note":{"id":0.5}}}'
        )
        assert listed.status_code == 200 and '"id":7' in listed.text


@pytest.mark.anyio
async def test_reads_prompts_and_completions_refuse_what_no_wire_carries(write_config: Any, tmp_path: Path) -> None:
    """The call path's check for the other kinds of call (no SDK front lets such a value through today;
    the call path must hold anyway, for whatever path comes next)."""
    async with Gateway(load_config(config(write_config, tmp_path, ["direct"]))) as gateway:
        await gateway.ensure_catalog()
        request = Request(Caller("bad-input"))
        backend = gateway.pool.backends["kitchen"]
        pid = backend.pid
        uri = Target("kitchen", "kitchen://greeting/\ud800", "kitchen+kitchen://greeting/\ud800", "direct")
        with pytest.raises(InvalidRequest, match=r"^uri is not valid Unicode: lone surrogate at position 19$"):
            await gateway.calls.read_resource(request, uri)
        prompt = Target("kitchen", "greet", "kitchen_greet", "direct")
        with pytest.raises(InvalidRequest, match=r"^argument 'name' is not valid Unicode"):
            await gateway.calls.get_prompt(request, prompt, {"name": "\udc00"})
        reference = types.PromptReference(name="kitchen_greet")
        with pytest.raises(InvalidRequest, match=r"^argument 'value' is not valid Unicode"):
            await gateway.calls.complete(request, prompt, reference, argument={"name": "name", "value": "a\ud800"})
        with pytest.raises(InvalidRequest, match=r"^context argument 'style' is not valid Unicode"):
            await gateway.calls.complete(
                request, prompt, reference, argument={"name": "name", "value": "A"}, context={"style": "\ud800"}
            )
        greeting = await gateway.calls.get_prompt(request, prompt, {"name": "Ada"})
        assert "Ada" in greeting.messages[0].content.text  # type: ignore[union-attr]
        assert (backend.pid, backend.restarts) == (pid, 0)


@pytest.mark.anyio
async def test_a_server_answer_that_is_no_json_never_reaches_a_client(write_config: Any, tmp_path: Path) -> None:
    """A server answering NaN (which Python's JSON writes and reads, but which is no JSON): the stdio
    fast lane used to pass it on as it came, which a strict client's parser (JavaScript's) refuses.
    Found by asking whether a server's answer can break the client's stream."""
    path = write_config({"garbled": server_entry("garbled.py", timeout=3)}, {"expose": ["direct"]})
    async with RawStdio(path) as gateway:
        await gateway.open_session()
        fine = await gateway.request("tools/call", {"name": "garbled_fine", "arguments": {}})
        assert fine["result"]["content"][0]["text"] == "fine"  # the server runs: the lane takes its calls
        answer = await gateway.request("tools/call", {"name": "garbled_nan", "arguments": {}})
        assert answer["result"]["isError"], answer
        assert "holds a number JSON cannot carry (NaN or Infinity)" in answer["result"]["content"][0]["text"]
        fine = await gateway.request("tools/call", {"name": "garbled_fine", "arguments": {}})
        assert fine["result"]["content"][0]["text"] == "fine"


@pytest.mark.anyio
async def test_a_result_that_does_not_fit_its_output_schema_is_the_servers_tool_error(
    connect: Any, write_config: Any
) -> None:
    """`numbers_add` of two numbers whose sum overflows: the server's structured result carries null where
    its schema says number, which the SDK's client refuses. The caller gets a tool error naming the server
    and where the result failed (never the server's data), on every path, lane or not; the gateway and the
    server go on."""
    path = write_config({"numbers": server_entry("numbers.py")}, {"expose": ["direct"]})
    async with connect(path) as client:
        result = await client.call_tool("numbers_add", {"a": 1e308, "b": 1e308})
        assert result.is_error, text_of(result)
        said = text_of(result)
        assert "numbers" in said and "does not fit its output schema (at $.result: type)" in said, said
        assert "None" not in said
        sum_ = await client.call_tool("numbers_add", {"a": 1, "b": 2})
        assert not sum_.is_error and sum_.structured_content == {"result": 3}
