"""core/wire.py: which server answers the fast lane may forward as they came, and what they lose on the way."""

from __future__ import annotations

import mcp_types as types

from mcp_manifold._core.results import content_size
from mcp_manifold._core.wire import WireResult, wire_result

STAMP = {"io.modelcontextprotocol/serverInfo": {"name": "kitchen", "version": "1"}}


def test_a_plain_answer_stays_as_it_came_less_resulttype_and_the_servers_stamp() -> None:
    raw = {
        "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}],
        "structuredContent": {"n": 1},
        "isError": False,
        "resultType": "complete",
        "_meta": {**STAMP, "trace": "x"},
    }
    result = wire_result(raw)
    assert isinstance(result, WireResult) and not result.is_error
    assert result.wire == {
        "content": raw["content"],
        "structuredContent": {"n": 1},
        "isError": False,
        "_meta": {"trace": "x"},  # the server's other _meta stays
    }
    assert "_meta" not in wire_result({"content": [], "_meta": dict(STAMP)}).wire  # nothing left: no _meta


def test_what_the_call_path_must_change_becomes_the_model() -> None:
    error = wire_result({"content": [{"type": "text", "text": "token=abc"}], "isError": True, "_meta": STAMP})
    assert isinstance(error, types.CallToolResult) and error.is_error and error.meta is None  # scrubbed later
    for loose in ("true", 1):  # what the SDK's models read as an error is one here too
        odd = wire_result({"content": [{"type": "text", "text": "token=abc"}], "isError": loose})
        assert isinstance(odd, types.CallToolResult) and odd.is_error
    # Explicit nulls and fields a version does not have are the models' to drop, as the SDK server does.
    for odd_result in (
        {"content": [{"type": "text", "text": "x"}], "structuredContent": None},
        {"content": [{"type": "text", "text": "x", "annotations": None}]},
        {"content": [{"type": "text", "text": "x"}], "extra": 1},
    ):
        assert isinstance(wire_result(odd_result), types.CallToolResult)
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    assert isinstance(wire_result({"content": [link]}), types.CallToolResult)  # its URI is rewritten
    embedded = {"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}
    assert isinstance(wire_result({"content": [embedded]}), types.CallToolResult)
    asking = {
        "resultType": "input_required",
        "inputRequests": {"name": {"method": "roots/list"}},
        "requestState": "s",
    }
    assert isinstance(wire_result(asking), types.InputRequiredResult)


def test_content_is_sized_alike_in_either_form() -> None:
    raw = [{"type": "text", "text": "héllo"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}]
    models = types.CallToolResult.model_validate({"content": raw}).content
    assert content_size(raw) == content_size(models) > 0


def test_an_answer_that_is_not_mcp_is_a_clear_error_that_does_not_quote_it() -> None:
    """The wire form is checked by the SDK's validator; what it refuses becomes the server's error (a tool
    error for the client, recorded and scrubbed like any other), naming where, never quoting the answer."""
    import pytest
    from mcp_types import methods

    from mcp_manifold._errors import BackendRequestError
    from mcp_manifold._runtime.backend_errors import translate_backend_errors

    with pytest.raises(BackendRequestError) as refused, translate_backend_errors("kitchen", "tools/call", str):
        methods.validate_server_result("tools/call", "2025-11-25", {"content": "token=abc"})
    assert str(refused.value) == "server 'kitchen': tools/call: the server's answer is not valid MCP (at content)"


def test_the_backend_boundary_turns_each_failure_into_the_gateways_error_and_lets_the_rest_through() -> None:
    """What `translate_backend_errors` makes of each failure met while talking to a server, the request
    worded only when an error needs it; a cancellation, the gateway's own errors and other bugs go on as
    they are."""
    import asyncio

    import anyio
    import pytest
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    from mcp_manifold._errors import BackendClosed, BackendRequestError, BackendTimeout, InvalidRequest
    from mcp_manifold._runtime.backend_errors import translate_backend_errors

    worded: list[str] = []

    def action() -> str:
        worded.append("tools/call (timeout 2s)")
        return worded[-1]

    def scrub(text: str) -> str:
        return text.replace("s3cret", "***")

    cases: list[tuple[BaseException, type[BaseException], str]] = [
        (MCPError(code=-32602, message="no s3cret"), BackendRequestError, "server 'k': no ***"),
        (
            MCPError(code=REQUEST_TIMEOUT, message="late"),
            BackendTimeout,
            "server 'k': tools/call (timeout 2s) timed out: late",
        ),
        (MCPError(code=CONNECTION_CLOSED, message="Connection closed"), BackendClosed, "connection closed"),
        (TimeoutError(), BackendTimeout, "server 'k': tools/call (timeout 2s) timed out"),
        (BrokenPipeError("pipe s3cret"), BackendClosed, "failed: BrokenPipeError: pipe ***"),
        (anyio.BrokenResourceError(), BackendClosed, "failed: connection closed"),
    ]
    for raised, becomes, says in cases:
        with pytest.raises(becomes) as caught, translate_backend_errors("k", action, scrub):
            raise raised
        assert says in str(caught.value), (raised, str(caught.value))
        assert caught.value.__cause__ is raised
    passing: list[BaseException] = [InvalidRequest("bad"), KeyError("bug"), asyncio.CancelledError()]
    for raised in passing:
        with pytest.raises(type(raised)) as caught, translate_backend_errors("k", action, scrub):
            raise raised
        assert caught.value is raised
    worded.clear()
    with translate_backend_errors("k", action, scrub):
        pass
    assert worded == []  # nothing went wrong: nothing worded
