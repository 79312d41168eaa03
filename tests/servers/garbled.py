"""garbled: an MCP server whose `garble` tool answers with a message no JSON-RPC reader accepts.

Its answer to `garble` carries a lone surrogate (`"\\ud800"`), which Python's `json` reads but the SDK's
reader (pydantic) refuses, and so does `garble_error`'s JSON-RPC error message; `nan` answers with `NaN`
in its structured content (no JSON either, but the SDK's reader takes it); `misshapen` answers with content
that is no list (JSON, but no MCP result); `fine` answers `fine`. Written
without the SDK, message by message, since the SDK cannot write such a message. For the tests that a
server's unreadable answer costs that call only.

Run: ``python tests/servers/garbled.py`` (stdio), or add ``--http PORT`` (each request's answer as the
POST's JSON body, session-era; no session id, no GET stream).
"""

import json
import sys
from typing import Any

TOOLS = [
    {"name": "garble", "description": "Answer with a lone surrogate.", "inputSchema": {"type": "object"}},
    {"name": "garble_error", "description": "Fail with a lone surrogate.", "inputSchema": {"type": "object"}},
    {"name": "fine", "description": "Answer 'fine'.", "inputSchema": {"type": "object"}},
    {"name": "nan", "description": "Answer with NaN in its structured content.", "inputSchema": {"type": "object"}},
    {"name": "misshapen", "description": "Answer with content that is no list.", "inputSchema": {"type": "object"}},
]


def reply_to(message: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to `message`, as a JSON-RPC message (None for a notification)."""
    if "id" not in message or "method" not in message:
        return None
    method, request_id = message["method"], message["id"]
    name = message.get("params", {}).get("name")
    if method == "initialize":
        info = {"name": "garbled", "version": "1.0.0"}
        version = message["params"]["protocolVersion"]
        result: Any = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and name == "garble":
        result = {"content": [{"type": "text", "text": "\ud800"}]}  # json.dumps writes \ud800
    elif method == "tools/call" and name == "garble_error":
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "bad \ud800 half"}}
    elif method == "tools/call" and name == "misshapen":
        result = {"content": "token=abc"}  # JSON, but no MCP result: its content must be a list
    elif method == "tools/call" and name == "nan":
        structured = {"x": float("nan")}  # json.dumps writes NaN, which is no JSON
        result = {"content": [{"type": "text", "text": "nan"}], "structuredContent": structured}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "fine"}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def serve_stdio() -> None:
    for line in sys.stdin:
        answer = reply_to(json.loads(line))
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


def serve_http(port: int) -> None:
    import _common  # noqa: F401  (first: this folder has a numbers.py that shadows the standard one)
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def endpoint(request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        answer = reply_to(json.loads(await request.body()))
        if answer is None:
            return Response(status_code=202)
        return Response(json.dumps(answer), media_type="application/json")

    app = Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http(int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        serve_stdio()
