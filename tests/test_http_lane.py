"""The HTTP fast lane (`_front/http_lane.py`): same answers as the SDK's path, for real clients of both eras.

Two gateways with the same config run side by side, one with the lane off (`MANIFOLD_HTTP_LANE=0`). Each
request of a corpus (results, tool errors, refusals, unknown tools, bad arguments, large results,
structured content, images, embedded resources) is POSTed to both, raw, in both protocol eras, and the
JSON-RPC messages that come back must be the same bytes. `/metrics` says which path answered, so the test
also shows that the lane took the plain calls (and the SDK's path the rest).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from tests.conftest import (
    answer_sampling,
    free_port,
    manifold_command,
    server_entry,
    server_over_http,
    stop_process,
    wait_for_port,
)

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
SESSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"

# (name, arguments): every one a tools/call of the corpus, in both eras.
CORPUS: list[tuple[str, Any]] = [
    ("kitchen_echo", {"text": "plain"}),
    ("kitchen_echo", {"text": "non-ASCII: héllo wörld ✓ 日本 \U0001f600"}),
    ("kitchen_echo", {"text": 'quotes " and \\ backslashes \n newlines \t tabs \u0000 nul'}),
    ("kitchen_echo", None),  # no arguments: the tool's own validation error
    ("kitchen_echo", {"text": 5}),  # a wrong type
    ("kitchen_echo", {"text": "x", "extra": [1, 2.5, 1e100, None, True, {"deep": "er"}]}),
    ("kitchen_add", {"a": 2, "b": 40}),  # structured content
    ("kitchen_add", {"a": "two", "b": 40}),
    ("kitchen_image", {}),
    ("kitchen_mixed", {}),
    ("kitchen_embedded", {}),  # not a plain result: the model path, inside the lane
    ("kitchen_fail", {"message": "it broke: api_key=sk-should-not-matter"}),  # a tool error
    ("kitchen_huge", {"size": 300_000}),  # a large result
    ("kitchen_nope", {"text": "x"}),  # an unknown tool
    ("echo", {"text": "x"}),  # the backend's own name: unknown at the gateway
    ("kitchen_crash_not_in_profile", {}),
]
PROFILE_CORPUS: list[tuple[str, Any]] = [
    ("kitchen_echo", {"text": "allowed"}),
    ("kitchen_add", {"a": 1, "b": 2}),  # hidden by the profile: refused as unknown
]


def gateway_config(tmp_path: Path, name: str, extra: dict[str, Any] | None = None) -> Path:
    config = {
        "mcpServers": {"kitchen": server_entry("kitchen.py")},
        "manifold": {"data_dir": str(tmp_path / f"data-{name}")},
        "profiles": {"narrow": {"servers": ["kitchen"], "tools": ["kitchen_echo"]}},
        **(extra or {}),
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """`start(lane, extra)`: a gateway over HTTP with the lane on or off (`extra`: more config); its /mcp URL."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(lane: bool, extra: dict[str, Any] | None = None) -> str:
        port = free_port()
        env = {**os.environ, "MANIFOLD_HTTP_LANE": "1" if lane else "0"}
        name = "lane" if lane else "sdk"
        command = manifold_command(gateway_config(tmp_path, name, extra), "--http", "--port", str(port))
        process = subprocess.Popen(command, env=env, start_new_session=True)
        processes.append(process)
        wait_for_port(port, process, timeout=60)
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for process in processes:
        stop_process(process)


def message_text(response: httpx.Response, request_id: Any) -> str:
    """The JSON-RPC message answering `request_id`, as the bytes (text) it was sent as: the body of a JSON
    response, or the `data:` of an SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data: ") and json.loads(line[6:]).get("id") == request_id:
                return line[6:]
        raise AssertionError(f"no answer to {request_id!r} in {response.text[:500]!r}")
    return response.text


class SessionClient:
    """A session-era client written out by hand: initialize, initialized, then requests on its session."""

    def __init__(self, http: httpx.Client, url: str, headers: dict[str, str] | None = None) -> None:
        self.http = http
        self.url = url
        self.headers = {"accept": ACCEPT, "content-type": "application/json", **(headers or {})}
        opening = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        }
        response = http.post(url, json=opening, headers=self.headers)
        assert response.status_code == 200, response.text
        self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = SESSION
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, json=initialized, headers=self.headers).status_code == 202
        self.request("tools/list", {}, "list")  # its first request after initialize: the gateway now knows it

    def request(self, method: str, params: dict[str, Any], request_id: Any) -> tuple[int, str]:
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = self.http.post(self.url, content=json.dumps(body), headers=self.headers)
        return response.status_code, message_text(response, request_id)


def modern_request(
    http: httpx.Client, url: str, name: str, arguments: Any, request_id: Any, **extra: str
) -> tuple[int, str]:
    params: dict[str, Any] = {
        "name": name,
        "_meta": {
            PROTOCOL_VERSION_META_KEY: MODERN,
            CLIENT_CAPABILITIES_META_KEY: {},
            CLIENT_INFO_META_KEY: {"name": "raw", "version": "1"},
        },
    }
    if arguments is not None:
        params["arguments"] = arguments
    headers = {
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
        **extra,
    }
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    response = http.post(url, content=json.dumps(body), headers=headers)
    if response.status_code >= 400 and not response.headers.get("content-type", "").startswith("application/json"):
        return response.status_code, response.text  # a refusal before any JSON-RPC
    return response.status_code, message_text(response, request_id)


def call_params(name: str, arguments: Any) -> dict[str, Any]:
    return {"name": name} if arguments is None else {"name": name, "arguments": arguments}


def lane_counts(url: str) -> dict[str, float]:
    text = httpx.get(url.removesuffix("/mcp") + "/metrics").text
    return {
        path: float(count) for path, count in re.findall(r'manifold_http_tool_calls_total\{path="(\w+)"\} (\S+)', text)
    }


def answers(url: str) -> dict[str, tuple[int, str]]:
    """Every corpus request's (HTTP status, JSON-RPC message) from the gateway at `url`, in both eras."""
    found: dict[str, tuple[int, str]] = {}
    with httpx.Client(timeout=120) as http:
        session = SessionClient(http, url)
        narrow = SessionClient(http, url.replace("/mcp", "/mcp/p/narrow"))
        for index, (name, arguments) in enumerate(CORPUS):
            found[f"session {index} {name}"] = session.request("tools/call", call_params(name, arguments), index + 1)
            found[f"modern {index} {name}"] = modern_request(http, url, name, arguments, f"m{index}")
        for index, (name, arguments) in enumerate(PROFILE_CORPUS):
            key = f"narrow {index} {name}"
            found[f"session {key}"] = narrow.request("tools/call", call_params(name, arguments), 100 + index)
            profile_url = url.replace("/mcp", "/mcp/p/narrow")
            found[f"modern {key}"] = modern_request(http, profile_url, name, arguments, 100 + index)
    return found


def same_answers(url: str, other: str) -> dict[str, tuple[int, str]]:
    """Every corpus answer of the gateway at `url`, each checked to be the same as the one at `other` gives."""
    found, expected = answers(url), answers(other)
    assert found.keys() == expected.keys()
    for key in expected:
        assert found[key] == expected[key], key
    return found


async def test_the_lane_answers_byte_for_byte_as_the_sdk_path(gateways: Callable[[bool], str]) -> None:
    lane_url, sdk_url = gateways(True), gateways(False)
    on_lane = same_answers(lane_url, sdk_url)
    # The answers are the real ones, not two alike failures.
    status, text = on_lane["session 0 kitchen_echo"]
    assert status == 200 and json.loads(text)["result"]["content"] == [{"type": "text", "text": "plain"}]
    status, text = on_lane["modern 6 kitchen_add"]
    assert json.loads(text)["result"]["structuredContent"] == {"result": 42}
    assert json.loads(on_lane["modern narrow 1 kitchen_add"][1])["result"]["isError"] is True
    # The lane took the plain calls of both eras; the SDK's path had them all on the other gateway.
    taken = lane_counts(lane_url)
    assert taken["lane"] >= 2 * 8, taken
    assert taken["sdk"] >= 2 * 3, taken  # unknown names and hidden tools go the SDK's way
    assert lane_counts(sdk_url) == {"lane": 0, "sdk": 2 * len(CORPUS + PROFILE_CORPUS)}  # the lane off


ENVELOPE = {
    PROTOCOL_VERSION_META_KEY: MODERN,
    CLIENT_CAPABILITIES_META_KEY: {},
    CLIENT_INFO_META_KEY: {"name": "raw", "version": "1"},
}
# (era, what replaces or joins the call's `_meta` or params, whether the SDK accepts it)
ODD_REQUESTS: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("modern", {CLIENT_INFO_META_KEY: {"name": 5, "version": "1"}}, {}, False),
    ("modern", {CLIENT_INFO_META_KEY: {"name": "no version"}}, {}, False),
    ("modern", {CLIENT_CAPABILITIES_META_KEY: None}, {}, False),
    ("modern", {CLIENT_CAPABILITIES_META_KEY: []}, {}, False),
    ("modern", {CLIENT_CAPABILITIES_META_KEY: {"sampling": 5}}, {}, False),
    ("modern", {"progressToken": None}, {}, False),
    ("modern", {"example.com/note": [1, {"x": None}]}, {}, True),  # a key of the client's own: fine
    ("session", {"progressToken": None}, {}, False),
    ("session", {"progressToken": [1]}, {}, False),
    ("session", {"example.com/note": "mine"}, {}, True),
    ("session", {}, {"task": {"ttl": "soon"}}, False),  # params the SDK types beyond name and arguments
]


def odd_answers(url: str) -> list[tuple[int, str]]:
    """The gateway's answers to each of `ODD_REQUESTS`, a `kitchen_echo` call each."""
    found = []
    with httpx.Client(timeout=60) as http:
        session = SessionClient(http, url)
        for index, (era, meta, extra, _) in enumerate(ODD_REQUESTS):
            params: dict[str, Any] = {"name": "kitchen_echo", "arguments": {"text": "odd"}, **extra}
            if era == "session":
                params["_meta"] = meta
                found.append(session.request("tools/call", params, index))
                continue
            params["_meta"] = {**ENVELOPE, **meta}
            headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "kitchen_echo"}
            body = {"jsonrpc": "2.0", "id": index, "method": "tools/call", "params": params}
            response = http.post(url, content=json.dumps(body), headers={**session.headers, **headers})
            found.append((response.status_code, message_text(response, index)))
    return found


def test_the_lane_leaves_what_the_sdk_refuses_in_a_calls_meta_to_the_sdk(gateways: Callable[[bool], str]) -> None:
    """A 2026-07-28 envelope of the wrong shape, a null progress token, a task: the SDK path refuses them
    (invalid params); the lane must not answer them as plain calls."""
    lane_url, sdk_url = gateways(True), gateways(False)
    before = lane_counts(lane_url)
    on_lane, on_sdk = odd_answers(lane_url), odd_answers(sdk_url)
    assert on_lane == on_sdk
    for (era, meta, extra, accepted), (_, text) in zip(ODD_REQUESTS, on_lane, strict=True):
        message = json.loads(text)
        if accepted:
            assert message["result"]["content"] == [{"type": "text", "text": "odd"}], (era, meta, extra)
        else:
            assert message["error"]["code"] == types.INVALID_PARAMS, (era, meta, extra)
    taken = lane_counts(lane_url)["lane"] - before.get("lane", 0)
    assert taken == sum(accepted for *_, accepted in ODD_REQUESTS)


# Request bodies written by hand, as no JSON encoder would write them: odd ids, odd numbers and strings in
# the arguments, a key twice. The answers must be the same bytes on both paths, in both eras.
ODD_IDS = ["0", "-1", "123456789012345678901234567890", '""', r'"\u00e9"', r'"\ud800"', r'"a\"b"', "1e2", "1.0"]
ODD_ARGUMENTS = [
    r'{"text":"\ud800"}',
    '{"text":NaN}',
    '{"text":"x","n":1e400}',
    '{"text":"x","n":-0.0}',
    '{"text":"x","text":"y"}',
    r'{"text":"\u0000"}',
    "null",
]


def last_message(response: httpx.Response) -> str:
    """The last JSON-RPC message of a response: its JSON body, or its event stream's last `data:`."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [line for line in response.text.splitlines() if line.startswith("data: ")][-1][6:]
    return response.text


def raw_answers(url: str) -> list[tuple[str, int, str]]:
    """(case, HTTP status, last message) for each odd body, as a 2026-07-28 request and on a session."""
    envelope = json.dumps(ENVELOPE)
    cases = [(request_id, '{"text":"x"}') for request_id in ODD_IDS]
    cases += [("7", arguments) for arguments in ODD_ARGUMENTS]
    found = []
    with httpx.Client(timeout=60) as http:
        session = SessionClient(http, url)
        modern = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "kitchen_echo"}
        for request_id, arguments in cases:
            start = f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{{"name":"kitchen_echo"'
            for era, meta, headers in (("modern", f',"_meta":{envelope}', modern), ("session", "", {})):
                body = f'{start},"arguments":{arguments}{meta}}}}}'
                response = http.post(url, content=body.encode(), headers={**session.headers, **headers})
                found.append(
                    (f"{era} id {request_id} arguments {arguments}", response.status_code, last_message(response))
                )
    return found


def test_odd_bodies_are_answered_alike_on_both_paths(gateways: Callable[[bool], str]) -> None:
    lane_url, sdk_url = gateways(True), gateways(False)
    on_lane, on_sdk = raw_answers(lane_url), raw_answers(sdk_url)
    for lane_answer, sdk_answer in zip(on_lane, on_sdk, strict=True):
        assert lane_answer == sdk_answer
    # Answers, not two alike failures: the plain ones were results, and the lane took them.
    results = [case for case, _, text in on_lane if "result" in json.loads(text)]
    assert 'modern id 0 arguments {"text":"x"}' in results and len(results) >= len(ODD_IDS)
    assert lane_counts(lane_url)["lane"] >= len(ODD_IDS)


def progress_into(steps: list[float]) -> Any:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    return on_progress


async def test_real_clients_of_both_eras_take_the_lane(gateways: Callable[[bool], str]) -> None:
    url = gateways(True)
    for mode in ("auto", "legacy"):
        before = lane_counts(url)
        async with Client(url, mode=mode, cache=None) as client:
            await client.list_tools()
            for index in range(5):
                result = await client.call_tool("kitchen_echo", {"text": f"call {index}"})
                assert not result.is_error and result.content[0].text == f"call {index}"  # type: ignore[union-attr]
            structured = await client.call_tool("kitchen_add", {"a": 1, "b": 2})
            assert structured.structured_content == {"result": 3}
            unknown = await client.call_tool("kitchen_nope", {})
            assert unknown.is_error
            steps: list[float] = []
            on_progress = progress_into(steps)
            # A progress token: the SDK's path streams the progress and then the answer.
            with_progress = await client.call_tool("kitchen_progress", {"steps": 2}, progress_callback=on_progress)
            assert not with_progress.is_error and steps
        after = lane_counts(url)
        assert after["lane"] - before.get("lane", 0) == 6, (mode, before, after)
        assert after["sdk"] - before.get("sdk", 0) == 2, (mode, before, after)


async def test_a_session_that_can_be_asked_keeps_the_sdk_path(gateways: Callable[[bool], str]) -> None:
    """A client that declared sampling may be asked mid-call, on its request's own stream: not the lane's."""
    url = gateways(True)
    before = lane_counts(url)
    async with Client(url, mode="legacy", cache=None, sampling_callback=answer_sampling) as client:
        result = await client.call_tool("kitchen_echo", {"text": "asked"})
        assert result.content[0].text == "asked"  # type: ignore[union-attr]
        sampled = await client.call_tool("kitchen_sample", {"prompt": "hi"})
        assert not sampled.is_error
    after = lane_counts(url)
    assert after.get("lane", 0) == before.get("lane", 0)
    assert after["sdk"] - before.get("sdk", 0) == 2


async def test_only_an_open_session_of_the_same_caller_takes_the_lane(gateways: Callable[[bool], str]) -> None:
    url = gateways(True)
    with httpx.Client(timeout=60) as http:
        session = SessionClient(http, url)
        params = call_params("kitchen_echo", {"text": "mine"})
        status, text = session.request("tools/call", params, 1)
        assert status == 200 and json.loads(text)["result"]["content"][0]["text"] == "mine"
        taken = lane_counts(url)["lane"]
        # A session id nobody opened: the SDK's 404, not an answer.
        stranger = {**session.headers, "mcp-session-id": "0" * 32}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        response = http.post(url, content=json.dumps(body), headers=stranger)
        assert response.status_code == 404
        # The session used at another profile's address: refused as the SDK path refuses it.
        narrow = http.post(url.replace("/mcp", "/mcp/p/narrow"), content=json.dumps(body), headers=session.headers)
        assert "profile" in message_text(narrow, 2)
        # Ended by the client: its id is gone.
        assert http.delete(url, headers=session.headers).status_code in (200, 204)
        response = http.post(url, content=json.dumps(body), headers=session.headers)
        assert response.status_code == 404
        assert lane_counts(url)["lane"] == taken


def test_a_lane_answer_is_json_with_the_session_id(gateways: Callable[[bool], str]) -> None:
    url = gateways(True)
    with httpx.Client(timeout=60) as http:
        session = SessionClient(http, url)
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call_params("kitchen_echo", {"text": "j"})}
        response = http.post(url, content=json.dumps(body), headers=session.headers)
    assert response.headers["content-type"] == "application/json"
    assert response.headers["mcp-session-id"] == session.headers["mcp-session-id"]
    assert types.JSONRPCResponse.model_validate_json(response.text).id == 7


def test_a_log_sent_during_a_session_call_on_the_lane_comes_before_its_answer(gateways: Callable[[bool], str]) -> None:
    """As on the SDK's path: the server's log message goes on the call's own response stream, ahead of the
    answer (through the session it would take the GET stream and could arrive after the answer, or never)."""
    url = gateways(True)
    with httpx.Client(timeout=60) as http:
        session = SessionClient(http, url)
        before = lane_counts(url).get("lane", 0.0)
        params = call_params("kitchen_log", {"message": "on the way", "level": "warning"})
        body = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": params}
        response = http.post(url, content=json.dumps(body), headers=session.headers)
        assert lane_counts(url)["lane"] == before + 1  # the lane answered it
    assert response.headers["content-type"] == "text/event-stream"
    messages = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert [message.get("method") or message.get("id") for message in messages] == ["notifications/message", 8]
    assert messages[0]["params"]["data"] == "on the way" and messages[0]["params"]["level"] == "warning"
    assert messages[1]["result"]["content"] == [{"type": "text", "text": "logged"}]


def test_a_rebound_host_is_refused_as_on_the_sdk_path(gateways: Callable[[bool], str]) -> None:
    """A web page that rebinds a name to the loopback gateway gets the SDK's refusal, not a lane answer."""
    url = gateways(True)
    with httpx.Client(timeout=60) as http:
        assert modern_request(http, url, "kitchen_echo", {"text": "ok"}, 1)[0] == 200
        taken = lane_counts(url)["lane"]
        assert modern_request(http, url, "kitchen_echo", {"text": "x"}, 2, host="evil.example:80")[0] == 421
        assert modern_request(http, url, "kitchen_echo", {"text": "x"}, 3, origin="http://evil.example")[0] == 403
        assert lane_counts(url)["lane"] == taken
        # The lane keeps each verdict by the headers checked: asked again, each answer is the same.
        assert modern_request(http, url, "kitchen_echo", {"text": "x"}, 4, host="evil.example:80")[0] == 421
        assert modern_request(http, url, "kitchen_echo", {"text": "ok"}, 5)[0] == 200
        assert modern_request(http, url, "kitchen_echo", {"text": "x"}, 6, origin="http://evil.example")[0] == 403
    assert lane_counts(url)["lane"] == taken + 1


def test_routing_headers_the_sdk_refuses_get_its_refusal_on_the_lane_too(gateways: Callable[[bool], str]) -> None:
    """The lane reads a 2026-07-28 call's routing headers (the version, `Mcp-Method`, `Mcp-Name`) as the
    SDK's ladder does: one that disagrees with the body, or one sent twice, leaves the call to the SDK's
    path, which refuses it, alike with the lane on and off."""
    lane_url, sdk_url = gateways(True), gateways(False)
    meta = {PROTOCOL_VERSION_META_KEY: MODERN, CLIENT_CAPABILITIES_META_KEY: {}}
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "kitchen_echo", "_meta": meta}}
    base = [("accept", ACCEPT), ("content-type", "application/json"), ("mcp-protocol-version", MODERN)]
    cases = {
        "another name": [*base, ("mcp-method", "tools/call"), ("mcp-name", "kitchen_add")],
        "the method twice": [
            *base,
            ("mcp-method", "tools/call"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "kitchen_echo"),
        ],
        "the name twice": [
            *base,
            ("mcp-method", "tools/call"),
            ("mcp-name", "kitchen_echo"),
            ("Mcp-Name", "kitchen_echo"),
        ],
        "the version twice": [
            *base,
            ("MCP-Protocol-Version", MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", "kitchen_echo"),
        ],
    }
    plain = [*base, ("mcp-method", "tools/call"), ("mcp-name", "kitchen_echo")]
    with httpx.Client(timeout=60) as http:
        assert http.post(lane_url, content=json.dumps(body), headers=plain).status_code == 200  # its server up
        taken = lane_counts(lane_url)["lane"]
        for case, headers in cases.items():
            found = [http.post(url, content=json.dumps(body), headers=headers) for url in (lane_url, sdk_url)]
            assert found[0].status_code == found[1].status_code and found[0].status_code >= 400, case
            assert found[0].text == found[1].text, case
        assert http.post(lane_url, content=json.dumps(body), headers=plain).status_code == 200  # the control
    assert lane_counts(lane_url)["lane"] == taken + 1


def test_a_session_is_its_credentials_on_the_lane_too(gateways: Callable[..., str], tmp_path: Path) -> None:
    """With authentication, another principal's request on a session gets the SDK's 404, not a lane answer."""
    keys = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789"}
    auth = {"api_keys": {name: {"sha256": hashlib.sha256(key.encode()).hexdigest()} for name, key in keys.items()}}
    profiles = {"team": {"principals": ["alice", "bob"], "servers": ["kitchen"]}}
    url = gateways(True, {"auth": auth, "profiles": profiles})
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call_params("kitchen_echo", {"text": "a"})}
    with httpx.Client(timeout=60) as http:
        alice = SessionClient(http, url, {"authorization": f"Bearer {keys['alice']}"})
        status, text = alice.request("tools/call", body["params"], 5)
        assert status == 200 and json.loads(text)["result"]["content"][0]["text"] == "a"
        as_bob = {**alice.headers, "authorization": f"Bearer {keys['bob']}"}
        response = http.post(url, content=json.dumps(body), headers=as_bob)
        assert response.status_code == 404
        assert "result" not in response.text


def test_a_cancel_with_another_credential_stops_nothing(gateways: Callable[..., str]) -> None:
    """Bob's `notifications/cancelled` naming Alice's session and call gets the SDK's 404 and leaves her call
    running; her own cancel, sent after it, still stops it (so Bob's came while it could have)."""
    keys = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789"}
    auth = {"api_keys": {name: {"sha256": hashlib.sha256(key.encode()).hexdigest()} for name, key in keys.items()}}
    profiles = {"team": {"principals": ["alice", "bob"], "servers": ["kitchen"]}}
    url = gateways(True, {"auth": auth, "profiles": profiles})
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9, "reason": "mine"}}
    with httpx.Client(timeout=60) as http, httpx.Client(timeout=60) as other:
        alice = SessionClient(http, url, {"authorization": f"Bearer {keys['alice']}"})
        answered: list[tuple[int, str]] = []
        call = threading.Thread(
            target=lambda: answered.append(alice.request("tools/call", call_params("kitchen_slow", {"seconds": 30}), 9))
        )
        call.start()
        time.sleep(1.0)  # the call is on its way to kitchen.py
        as_bob = {**alice.headers, "authorization": f"Bearer {keys['bob']}"}
        refused = other.post(url, content=json.dumps(cancel), headers=as_bob)
        assert refused.status_code == 404
        call.join(0.5)
        assert call.is_alive() and not answered  # still running
        assert other.post(url, content=json.dumps(cancel), headers=alice.headers).status_code == 202
        call.join(20)
    assert answered and answered[0][0] == 200
    assert json.loads(answered[0][1])["error"] == {"code": -32800, "message": "Request cancelled"}


def stateless_requests(url: str) -> float:
    text = httpx.get(url.removesuffix("/mcp") + "/metrics").text
    found = re.search(r"^manifold_stateless_requests_total (\S+)", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_the_sdk_path_checks_param_headers_without_listing_every_tool(gateways: Callable[[bool], str]) -> None:
    """A 2026-07-28 call with arguments on the SDK's path is one request to the gateway: the `Mcp-Param-*`
    check reads the tool's schema from the gateway (`get_tool_input_schema`), not from a whole tools/list
    the SDK would otherwise run (and count) for every such call."""
    url = gateways(False)
    with httpx.Client(timeout=60) as http:
        assert modern_request(http, url, "kitchen_echo", {"text": "warm"}, 1)[0] == 200
        before = stateless_requests(url)
        for index in range(3):
            status, text = modern_request(http, url, "kitchen_echo", {"text": f"n{index}"}, 2 + index)
            assert status == 200 and json.loads(text)["result"]["content"][0]["text"] == f"n{index}"
        assert stateless_requests(url) - before == 3


@pytest.mark.parametrize("lane", [False, True])
def test_param_headers_are_checked_against_the_listed_schema(
    gateways: Callable[..., str], lane: bool, tmp_path: Path
) -> None:
    """A tool whose schema mirrors `region` into `Mcp-Param-Region`: a call whose header disagrees with
    its argument is refused (HTTP 400) and one that agrees is answered, with the lane on or off."""
    url = gateways(lane, {"mcpServers": {"kitchen": server_entry("kitchen.py"), "routed": server_entry("routed.py")}})
    with httpx.Client(timeout=60) as http:
        arguments = {"region": "eu", "text": "hi"}
        status, text = modern_request(http, url, "routed_locate", arguments, 1, **{"mcp-param-region": "eu"})
        assert status == 200 and json.loads(text)["result"]["content"][0]["text"] == "eu: hi"
        status, text = modern_request(http, url, "routed_locate", arguments, 2, **{"mcp-param-region": "us"})
        assert status == 400 and "Region" in text
        status, text = modern_request(http, url, "routed_locate", arguments, 3)  # the header left out
        assert status == 400


def test_an_http_gateway_runs_on_uvloop_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop (a dependency) is the HTTP gateway's event loop; `MANIFOLD_UVLOOP=0` keeps asyncio's, and a
    stdio gateway always does."""
    from mcp_manifold._cli.serve import _event_loop_options

    monkeypatch.delenv("MANIFOLD_UVLOOP", raising=False)
    assert _event_loop_options(True) == {"use_uvloop": True}
    assert _event_loop_options(False) == {}
    monkeypatch.setenv("MANIFOLD_UVLOOP", "0")
    assert _event_loop_options(True) == {}


# --- an HTTP backend: the raw leg (`_runtime/http_leg.py`) against the SDK's streamable HTTP client ---------


@pytest.fixture
def kitchen_over_http() -> Iterator[str]:
    """kitchen.py served over streamable HTTP by the SDK's own server; its /mcp URL."""
    with server_over_http("kitchen.py", timeout=60) as url:
        yield url


@pytest.mark.parametrize("protocol", ["auto", "legacy"])  # the backend reached at 2026-07-28, or in a session
async def test_an_http_backend_answers_alike_on_the_raw_leg(
    tmp_path: Path, kitchen_over_http: str, protocol: str
) -> None:
    processes: list[subprocess.Popen[bytes]] = []
    extra = {"mcpServers": {"kitchen": {"url": kitchen_over_http, "protocol": protocol}}}

    def start(name: str, lane: bool, leg: bool) -> tuple[str, Path]:
        port = free_port()
        env = {**os.environ, "MANIFOLD_HTTP_LANE": "1" if lane else "0", "MANIFOLD_HTTP_LEG": "1" if leg else "0"}
        config = {**json.loads(gateway_config(tmp_path, name).read_text()), **extra}
        config["manifold"]["log_level"] = "info"
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(config))
        log = tmp_path / f"{name}.log"
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                manifold_command(path, "--http", "--port", str(port)), env=env, stderr=stderr, start_new_session=True
            )
        processes.append(process)
        wait_for_port(port, process, timeout=60)
        return f"http://127.0.0.1:{port}/mcp", log

    try:
        (leg_url, leg_log), (sdk_url, sdk_log) = start("leg", True, True), start("sdk", False, False)
        on_leg = same_answers(leg_url, sdk_url)
        status, text = on_leg["modern 6 kitchen_add"]
        assert status == 200 and json.loads(text)["result"]["structuredContent"] == {"result": 42}
        status, text = on_leg["session 0 kitchen_echo"]
        assert json.loads(text)["result"]["content"] == [{"type": "text", "text": "plain"}]
        # The calls went out on the raw leg on one gateway, and through the SDK's client on the other.
        assert "go on the raw HTTP leg" in leg_log.read_text()
        assert "go on the raw HTTP leg" not in sdk_log.read_text()
        # A real client's calls of both eras, and a log the server sent while answering, relayed.
        for mode in ("auto", "legacy"):
            async with Client(leg_url, mode=mode, cache=None) as client:
                result = await client.call_tool("kitchen_echo", {"text": f"via {mode}"})
                assert result.content == [types.TextContent(type="text", text=f"via {mode}")]
        logs: list[Any] = []

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logs.append(params.data)

        async with Client(leg_url, mode="legacy", cache=None, logging_callback=on_log) as client:
            result = await client.call_tool("kitchen_log", {"message": "from the stream", "level": "warning"})
            assert result.content == [types.TextContent(type="text", text="logged")]
        assert logs == ["from the stream"]
        assert leg_log.read_text().count("go on the raw HTTP leg") == 1  # one session to the server, one leg
    finally:
        for process in processes:
            stop_process(process)
