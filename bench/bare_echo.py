"""bare_echo: a stdio MCP server of a few lines, without the SDK, whose only tool `echo` answers at once.

For the HTTP throughput bench only (never a test fixture: those are written with the SDK). On this
2-core machine the gateway shares the CPU with the server behind it, and the SDK's stdio server costs
about as much per call as the SDK's HTTP server does by itself. Behind this server, which costs a few
hundredths of a millisecond per call, what the bench measures is the gateway's own capacity.

It speaks just enough MCP for the gateway's client: `initialize` (session era, the version asked for when
it knows it), `tools/list`, `tools/call` of `echo`, `ping`; any other request is "method not found",
notifications are read and dropped. One request at a time, answered before the next is read.

With ``--modern`` it also answers `server/discover` and 2026-07-28 requests (those whose `_meta` names
that version), shaped as the SDK's server shapes them (`resultType`, the `serverInfo` stamp), so the
gateway reaches it as it reaches a 2026-07-28 SDK server; its `subscriptions/listen` is left open.

Run: ``python bench/bare_echo.py [--modern]`` (stdio).
"""

from __future__ import annotations

import json
import sys
from typing import Any

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "bare_echo", "version": "1"}
CAPABILITIES = {"tools": {}}
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
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
        }
    if method == "server/discover":
        return {"supportedVersions": [MODERN], "capabilities": CAPABILITIES}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "echo":
        text = (params.get("arguments") or {}).get("text", "")
        return {"content": [{"type": "text", "text": text}], "isError": False}
    if method == "ping":
        return {}
    return None


def main() -> None:
    modern = "--modern" in sys.argv[1:]
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            continue  # a notification, or an answer: nothing to say
        method, params = message["method"], message.get("params") or {}
        at_2026 = modern and (method == "server/discover" or (params.get("_meta") or {}).get(VERSION_KEY) == MODERN)
        if at_2026 and method == "subscriptions/listen":
            continue  # a listen stays open: nothing here ever changes
        # `server/discover` is answered only with --modern; other requests in either era
        result = result_of(method, params) if modern or method != "server/discover" else None
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            answer["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        else:
            if at_2026:  # as the SDK's server shapes a 2026-07-28 result
                result = {
                    **result,
                    "resultType": "complete",
                    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
                }
            answer["result"] = result
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
