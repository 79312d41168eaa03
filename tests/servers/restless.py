"""restless: a remote MCP server whose event streams end as soon as they open, asking to be opened again at
once (`retry: 0`).

Written without the SDK (raw JSON-RPC over streamable HTTP, session-era, with a session id), since the
SDK's server keeps its GET stream open. Every GET gets an event stream of one event, `retry: 0`, and
ends. Tools: `gets` answers how many GETs came so far; `fine` answers `fine`. For the test that the
gateway paces the GETs such a server gets. With ``--event NAME`` the event is named NAME (escapes allowed:
for the test that what the SDK's client logs of it reaches the gateway's log as text).

Run: ``python tests/servers/restless.py [--event NAME] --http PORT``.
"""

import json
import sys
from typing import Any

import _common  # noqa: F401  (first: this folder has a numbers.py that shadows the standard one)
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

SESSION = {"mcp-session-id": "restless-1"}
TOOLS = [{"name": name, "description": f"{name}.", "inputSchema": {"type": "object"}} for name in ("gets", "fine")]
gets = 0
EVENT = sys.argv[sys.argv.index("--event") + 1] if "--event" in sys.argv else ""


def answer(request_id: Any, result: dict[str, Any]) -> Response:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
    return Response(body, media_type="application/json", headers=SESSION)


def text(request_id: Any, said: str) -> Response:
    return answer(request_id, {"content": [{"type": "text", "text": said}]})


async def endpoint(request: Request) -> Response:
    global gets
    if request.method == "GET":
        gets += 1
        named = f"event: {EVENT}\ndata: {{}}\n" if EVENT else ""
        return Response(f"{named}retry: 0\n\n".encode(), media_type="text/event-stream", headers=SESSION)
    if request.method == "DELETE":
        return Response(status_code=200)
    message = json.loads(await request.body())
    if "id" not in message:
        return Response(status_code=202, headers=SESSION)
    request_id, method, params = message["id"], message["method"], message.get("params") or {}
    if method == "initialize":
        info = {"name": "restless", "version": "1.0.0"}
        opened = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}
        return answer(request_id, opened)
    if method == "tools/list":
        return answer(request_id, {"tools": TOOLS})
    if method == "tools/call":
        return text(request_id, str(gets) if params.get("name") == "gets" else "fine")
    if method == "ping":
        return answer(request_id, {})
    error = {"code": -32601, "message": f"method not found: {method}"}
    return Response(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}), media_type="application/json")


if __name__ == "__main__":
    port = int(sys.argv[sys.argv.index("--http") + 1])
    app = Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
