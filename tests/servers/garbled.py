"""garbled: a stdio MCP server whose `garble` tool answers with a line no JSON-RPC reader accepts.

Its answer to `garble` carries a lone surrogate (`"\\ud800"`), which Python's `json` reads but the SDK's
reader (pydantic) refuses; `nan` answers with `NaN` in its structured content (no JSON either, but the
SDK's reader takes it); `fine` answers `fine`. Written without the SDK, line by line, since the SDK
cannot write such a line. For the test that a server's unreadable answer costs that call only.

Run: ``python tests/servers/garbled.py`` (stdio only).
"""

import json
import sys

TOOLS = [
    {"name": "garble", "description": "Answer with a lone surrogate.", "inputSchema": {"type": "object"}},
    {"name": "fine", "description": "Answer 'fine'.", "inputSchema": {"type": "object"}},
    {"name": "nan", "description": "Answer with NaN in its structured content.", "inputSchema": {"type": "object"}},
]


def answer(request_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, request_id = message["method"], message["id"]
        if method == "initialize":
            info = {"name": "garbled", "version": "1.0.0"}
            version = message["params"]["protocolVersion"]
            answer(request_id, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
        elif method == "tools/list":
            answer(request_id, {"tools": TOOLS})
        elif method == "tools/call" and message["params"]["name"] == "garble":
            answer(request_id, {"content": [{"type": "text", "text": "\ud800"}]})  # json.dumps writes \ud800
        elif method == "tools/call" and message["params"]["name"] == "nan":
            structured = {"x": float("nan")}  # json.dumps writes NaN, which is no JSON
            answer(request_id, {"content": [{"type": "text", "text": "nan"}], "structuredContent": structured})
        elif method == "tools/call":
            answer(request_id, {"content": [{"type": "text", "text": "fine"}]})
        elif method == "ping":
            answer(request_id, {})
        else:
            error = {"code": -32601, "message": f"method not found: {method}"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
