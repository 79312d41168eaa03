"""unruly: a server that misbehaves at the gateway on request, written without the SDK (raw JSON-RPC on
stdio), since the SDK's server cannot send what it sends.

- `storm(n, kind="tools")` writes `n` `notifications/<kind>/list_changed` before it answers "stormed";
- `listings` answers how many `tools/list` requests it got so far;
- `spew(mb)` writes `mb` megabytes on stdout with no newline (a line that never ends), then nothing;
- `objects(kb, pad_kb=0, logs=0)` answers structured content of `kb` KiB of empty objects (`[{},{},...]`) and
  a text of `pad_kb` KiB, followed in the same write by `logs` log notifications of 512 `[` each;
- `fine` answers "fine";
- `--cursor-loop`: every `tools/list` page names a next cursor, the same one each time, for ever (a
  pagination that never ends); `--endless`: a new one each time, for ever;
- `--tools N`: N more tools (`tool_00001`, ...) in the listing;
- `--schema loop|fanout|huge`: one more tool, `forecast` ("Forecast the weather for a city."), whose
  input schema's `$defs` refer to themselves (`loop`: through `anyOf` and array `items`) or fan out, each
  of 40 definitions naming the next one twice (`fanout`: 2**40 paths through a schema of 40 entries), or
  whose parameters take a `const` of 1 MB and an `enum` of eight such values (`huge`).

Run: ``python tests/servers/unruly.py [--cursor-loop | --endless] [--tools N] [--schema loop|fanout|huge]``
(stdio only).
"""

import json
import sys
from typing import Any

OBJECT = {"type": "object"}
TOOLS: list[dict[str, Any]] = [
    {
        "name": "storm",
        "description": "Announce a list change n times.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}, "kind": {"type": "string"}}},
    },
    {"name": "listings", "description": "How many tools/list requests came.", "inputSchema": OBJECT},
    {"name": "fine", "description": "Answer 'fine'.", "inputSchema": OBJECT},
    {
        "name": "objects",
        "description": "Answer kb KiB of empty objects.",
        "inputSchema": {
            "type": "object",
            "properties": {"kb": {"type": "integer"}, "pad_kb": {"type": "integer"}, "logs": {"type": "integer"}},
        },
    },
    {
        "name": "spew",
        "description": "Write mb megabytes with no newline.",
        "inputSchema": {"type": "object", "properties": {"mb": {"type": "integer"}}},
    },
]
CURSOR_LOOP = "--cursor-loop" in sys.argv
ENDLESS = "--endless" in sys.argv
if "--tools" in sys.argv:
    count = int(sys.argv[sys.argv.index("--tools") + 1])
    TOOLS += [{"name": f"tool_{i:05d}", "description": f"Tool {i}.", "inputSchema": OBJECT} for i in range(count)]
if "--schema" in sys.argv:
    shape = sys.argv[sys.argv.index("--schema") + 1]
    if shape == "loop":
        defs: dict[str, Any] = {
            "either": {"anyOf": [{"$ref": "#/$defs/either"}, {"type": "string"}]},
            "list": {"type": "array", "items": {"$ref": "#/$defs/list"}},
        }
    elif shape == "huge":
        big = "x" * 1_000_000
        defs = {"fixed": {"const": big}, "choice": {"enum": [big + str(i) for i in range(8)]}}
    else:
        defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(40)}
        defs["d40"] = {"type": "string"}
    top = ["d0"] if shape == "fanout" else list(defs)
    properties = {name: {"$ref": f"#/$defs/{name}"} for name in top}
    schema = {"type": "object", "properties": properties, "$defs": defs}
    TOOLS.append({"name": "forecast", "description": "Forecast the weather for a city.", "inputSchema": schema})
LISTS = {"resources/list": "resources", "resources/templates/list": "resourceTemplates", "prompts/list": "prompts"}
listings = 0


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(request_id: Any, said: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": said}]}}


def reply_to(message: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to `message` (None for a notification), after whatever it sends first."""
    global listings
    if "id" not in message or "method" not in message:
        return None
    method, request_id = message["method"], message["id"]
    params = message.get("params") or {}
    if method == "initialize":
        changes = {"listChanged": True}
        capabilities = {"tools": changes, "resources": changes, "prompts": changes}
        info = {"name": "unruly", "version": "1.0.0"}
        result: Any = {"protocolVersion": params["protocolVersion"], "capabilities": capabilities, "serverInfo": info}
    elif method == "tools/list":
        listings += 1
        result = {"tools": TOOLS}
        if CURSOR_LOOP:
            result["nextCursor"] = "again"
        elif ENDLESS:
            result["nextCursor"] = f"page-{listings}"
    elif method in LISTS:
        result = {LISTS[method]: []}
    elif method == "tools/call" and params.get("name") == "storm":
        arguments = params.get("arguments") or {}
        kind = arguments.get("kind", "tools")
        for _ in range(int(arguments.get("n", 1))):
            send({"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"})
        return text(request_id, "stormed")
    elif method == "tools/call" and params.get("name") == "spew":
        chunk = "x" * (1 << 20)
        for _ in range(int((params.get("arguments") or {}).get("mb", 1))):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return None
    elif method == "tools/call" and params.get("name") == "objects":
        arguments = params.get("arguments") or {}
        items = [{}] * (int(arguments.get("kb", 1)) * 1024 // 3)
        said = "objects" + " " * (int(arguments.get("pad_kb", 0)) << 10)
        result = {"content": [{"type": "text", "text": said}], "structuredContent": {"items": items}}
        log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "[" * 512}}
        answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
        sys.stdout.write("".join(json.dumps(line) + "\n" for line in [answer] + [log] * int(arguments.get("logs", 0))))
        sys.stdout.flush()
        return None
    elif method == "tools/call" and params.get("name") == "listings":
        return text(request_id, str(listings))
    elif method == "tools/call":
        return text(request_id, "fine")
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


if __name__ == "__main__":
    for line in sys.stdin:
        answer = reply_to(json.loads(line))
        if answer is not None:
            send(answer)
