"""bulky: a remote MCP server whose answers are as large as asked, plain or gzip-encoded.

Written without the SDK (raw JSON-RPC over streamable HTTP, session-era, no session id), since the SDK's
server cannot send a large answer cheaply, nor compress one. Tools: `big(kb, gzip, chunked, objects)` answers
a text of `kb` KiB as one JSON body, gzip-encoded if `gzip`, without a content-length if `chunked`, or with
`objects` structured content of `kb` KiB of empty objects (`[{},{},...]`) instead;
`chatty(kb)` answers in an event stream, after `kb` KiB of log notifications, 64 KiB each; `fine` answers
`fine`. Resources: `bulky://big/{kb}` and `bulky://gzip/{kb}`, a text of `kb` KiB (its `resources/read`
answer gzip-encoded for the second). For the tests that an answer past `max_answer_bytes` fails that
request only, counted once decoded.

Run: ``python tests/servers/bulky.py --http PORT``, or ``--sse PORT`` for the SSE transport
(``http://127.0.0.1:PORT/sse``), where `big`'s answer is the POST's own body instead of an event.
"""

import asyncio
import gzip
import json
import sys
from typing import Any

import _common  # noqa: F401  (first: this folder has a numbers.py that shadows the standard one)
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

KB = {"kb": {"type": "integer"}}
TOOLS = [
    {
        "name": "big",
        "description": "Answer a text of kb KiB.",
        "inputSchema": {
            "type": "object",
            "properties": {
                **KB,
                "gzip": {"type": "boolean"},
                "chunked": {"type": "boolean"},
                "objects": {"type": "boolean"},
            },
        },
    },
    {
        "name": "chatty",
        "description": "Log kb KiB, 64 KiB at a time, then answer.",
        "inputSchema": {"type": "object", "properties": KB},
    },
    {"name": "fine", "description": "Answer 'fine'.", "inputSchema": {"type": "object"}},
]
TEMPLATES = [{"uriTemplate": f"bulky://{kind}/{{kb}}", "name": kind} for kind in ("big", "gzip")]


def answer(request_id: Any, result: dict[str, Any], encode: bool = False, chunked: bool = False) -> Response:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
    if chunked:  # no content-length: the reader learns its size only as it reads

        async def pieces() -> Any:
            for start in range(0, len(body), 1 << 16):
                yield body[start : start + (1 << 16)]

        return StreamingResponse(pieces(), media_type="application/json")
    if not encode:
        return Response(body, media_type="application/json")
    return Response(gzip.compress(body), media_type="application/json", headers={"content-encoding": "gzip"})


def chatty(request_id: Any, kb: int) -> StreamingResponse:
    def event(message: dict[str, Any]) -> bytes:
        return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"

    async def events() -> Any:
        said = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x" * 65000}}
        for _ in range(kb // 64):
            yield event(said)
        yield event({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "said"}]}})

    return StreamingResponse(events(), media_type="text/event-stream")


async def endpoint(request: Request) -> Response:
    if request.method != "POST":
        return Response(status_code=405)
    message = json.loads(await request.body())
    if "id" not in message:
        return Response(status_code=202)
    return reply(message)


def reply(message: dict[str, Any]) -> Response:
    """The answer to a request, as the POST's body (streamable HTTP)."""
    request_id, method, params = message["id"], message["method"], message.get("params") or {}
    if method == "initialize":
        info = {"name": "bulky", "version": "1.0.0"}
        capabilities = {"tools": {}, "resources": {}, "logging": {}}
        return answer(
            request_id, {"protocolVersion": params["protocolVersion"], "capabilities": capabilities, "serverInfo": info}
        )
    if method == "tools/list":
        return answer(request_id, {"tools": TOOLS})
    if method == "resources/list":
        return answer(request_id, {"resources": []})
    if method == "resources/templates/list":
        return answer(request_id, {"resourceTemplates": TEMPLATES})
    if method == "tools/call":
        arguments = params.get("arguments") or {}
        kb = int(arguments.get("kb", 1))
        if params["name"] == "big":
            text = {"type": "text", "text": "x" * (kb << 10)}
            result: dict[str, Any] = {"content": [text]}
            if arguments.get("objects"):
                result = {
                    "content": [{"type": "text", "text": "objects"}],
                    "structuredContent": {"items": [{}] * ((kb << 10) // 4)},
                }  # "{}, ": 4 bytes
            return answer(request_id, result, bool(arguments.get("gzip")), bool(arguments.get("chunked")))
        if params["name"] == "chatty":
            return chatty(request_id, kb)
        return answer(request_id, {"content": [{"type": "text", "text": "fine"}]})
    if method == "resources/read":
        uri = params["uri"]
        kind, _, kb = uri.removeprefix("bulky://").partition("/")
        contents = [{"uri": uri, "mimeType": "text/plain", "text": "x" * (int(kb) << 10)}]
        return answer(request_id, {"contents": contents}, kind == "gzip")
    if method in ("ping", "logging/setLevel"):
        return answer(request_id, {})
    error = {"code": -32601, "message": f"method not found: {method}"}
    return Response(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}), media_type="application/json")


def sse_app() -> Starlette:
    """The SSE transport: answers on the GET stream, except `big`'s, which is the POST's own body (the SDK's
    client reads a POST's answer whole, whatever it is)."""
    answers: asyncio.Queue[bytes] = asyncio.Queue()

    async def stream(request: Request) -> Response:
        async def events() -> Any:
            yield b"event: endpoint\ndata: /messages?session_id=1\n\n"
            while True:
                yield b"event: message\ndata: " + await answers.get() + b"\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def messages(request: Request) -> Response:
        message = json.loads(await request.body())
        if "id" in message:
            answered = reply(message)
            if (message.get("params") or {}).get("name") == "big":
                return answered
            await answers.put(bytes(answered.body))
        return Response("Accepted", status_code=202)

    return Starlette(routes=[Route("/sse", stream), Route("/messages", messages, methods=["POST"])])


if __name__ == "__main__":
    if "--sse" in sys.argv:
        app, port = sse_app(), int(sys.argv[sys.argv.index("--sse") + 1])
    else:
        app = Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])
        port = int(sys.argv[sys.argv.index("--http") + 1])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
