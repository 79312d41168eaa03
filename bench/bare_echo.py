"""bare_echo: a stdio MCP server of a few lines, without the SDK, whose only tool `echo` answers at once.

For the HTTP throughput bench only (never a test fixture: those are written with the SDK). On this
2-core machine the gateway shares the CPU with the server behind it, and the SDK's stdio server costs
about as much per call as the SDK's HTTP server does by itself. Behind this server, which costs a few
hundredths of a millisecond per call, what the bench measures is the gateway's own capacity.

It speaks just enough MCP for the gateway's client: `initialize` (session era, the version asked for when
it knows it), `tools/list`, `tools/call` of `echo`, `ping`; any other request is "method not found",
notifications are read and dropped. One request at a time, answered before the next is read.

Run: ``python bench/bare_echo.py`` (stdio).
"""

from __future__ import annotations

import json
import sys
from typing import Any

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
TOOLS = [
    {
        "name": "echo",
        "description": "Answer with the text given.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
]


def result_of(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bare_echo", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "echo":
        text = (params.get("arguments") or {}).get("text", "")
        return {"content": [{"type": "text", "text": text}], "isError": False}
    if method == "ping":
        return {}
    return None


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            continue  # a notification, or an answer: nothing to say
        result = result_of(message["method"], message.get("params") or {})
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            answer["error"] = {"code": -32601, "message": f"Method not found: {message['method']}"}
        else:
            answer["result"] = result
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
