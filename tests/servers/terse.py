"""terse: a 2026-07-28 server that leaves out what its schema calls required but whose absence has one
meaning (`resultType`, and `ttlMs`/`cacheScope` on lists), as some SDKs' servers do.

Plain Python speaking JSON-RPC on stdio by hand (the official SDK always writes those fields, so it cannot
play this server). `server/discover` only; `initialize` gets -32022 naming 2026-07-28. Tools: `picture`
(one PNG image block) and `mixed` (text, image and an embedded text resource).

Run: ``python tests/servers/terse.py``.
"""

import json
import sys

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGAAAAAFAAHh+hNvAAAAAElFTkSuQmCC"
VERSION = "2026-07-28"
TOOLS = [
    {"name": "picture", "description": "One PNG image.", "inputSchema": {"type": "object"}},
    {"name": "mixed", "description": "Text, an image and an embedded resource.", "inputSchema": {"type": "object"}},
]
RESULTS = {
    "picture": {"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]},
    "mixed": {
        "content": [
            {"type": "text", "text": "a caption"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "terse://note", "mimeType": "text/plain", "text": "a note"}},
        ]
    },
}


def answer(method: str, params: dict) -> dict:
    if method == "server/discover":
        return {
            "supportedVersions": [VERSION],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "terse", "version": "1.0.0"}},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") in RESULTS:
        return RESULTS[params["name"]]
    if method == "ping":
        return {}
    raise LookupError(method)


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications and answers: nothing to do
        reply: dict = {"jsonrpc": "2.0", "id": message["id"]}
        method = message["method"]
        if method == "initialize":
            reply["error"] = {
                "code": -32022,
                "message": "unsupported protocol version",
                "data": {"supported": [VERSION]},
            }
        else:
            try:
                reply["result"] = answer(method, message.get("params") or {})
            except LookupError:
                reply["error"] = {"code": -32601, "message": f"method not found: {method}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
