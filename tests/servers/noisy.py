"""noisy: a server that sends more than its clients can take, written without the SDK (raw JSON-RPC on
stdio), so that nothing paces what it writes.

- `stderr(lines)` writes `lines` short lines (`e`) to stderr as fast as the pipe takes them, then `done`,
  and answers "wrote";
- `flood(count, size, kind="log", marker="")` sends `count` notifications of `size` characters during the
  call: log messages (`kind` "log"), or progress on the call's progress token ("progress"); once they are
  all written it creates the file `marker` (if given) and answers "flooded";
- `vanish(marker)` answers "vanishing", then closes its stdout (its connection ends) but lives on until
  the file `marker` exists, leaving a child in its process group that ignores SIGTERM and keeps stderr;
- `slow(seconds, started)` creates the file `started`, then answers "slept" after `seconds`;
- `ask(count, tally, wait=True)` asks its client `count` elicitations at once (`elicitation/create`),
  writes how many of the answers so far were errors to the file `tally` as they come, and once every one
  is in, answers "answered A, refused R" (R: the errors); with `wait` false it answers "asked" at once;
- `biglog(strings)` sends one log message whose data is a list of `strings` one-letter strings, then
  answers "logged";
- `fine` answers "fine".

Run: ``python tests/servers/noisy.py`` (stdio only).
"""

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

OBJECT = {"type": "object"}
NAMES = ("stderr", "flood", "vanish", "slow", "ask", "biglog", "fine")
TOOLS = [{"name": name, "description": f"{name}.", "inputSchema": OBJECT} for name in NAMES]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(request_id: Any, said: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": said}]}}


def write_stderr(lines: int) -> None:
    block = b"e\n" * 32768
    for _ in range(lines // 32768):
        os.write(2, block)
    os.write(2, b"e\n" * (lines % 32768) + b"done\n")


def flood(params: dict[str, Any]) -> None:
    arguments = params.get("arguments") or {}
    blob = "x" * int(arguments.get("size", 1000))
    token = (params.get("_meta") or {}).get("progressToken")
    for step in range(int(arguments.get("count", 1))):
        if arguments.get("kind") == "progress":
            send(
                {
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "message": blob},
                    "jsonrpc": "2.0",
                }
            )
        else:
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": blob}})
    if arguments.get("marker"):
        Path(arguments["marker"]).touch()


def vanish(marker: Path) -> None:
    os.close(1)
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
        os._exit(0)
    for _ in range(600):
        if marker.exists():
            break
        time.sleep(0.05)
    os._exit(0)


class Asked:
    """The answers to this server's questions: counted, the errors written to the `tally` file."""

    answered = 0
    refused = 0
    tally: Path | None = None

    @classmethod
    def take(cls, message: dict[str, Any]) -> None:
        if not str(message.get("id", "")).startswith("ask-") or "method" in message:
            return
        if "error" in message:
            cls.refused += 1
            if cls.tally is not None:
                cls.tally.write_text(str(cls.refused))
        else:
            cls.answered += 1


def ask(count: int, tally: Path, wait: bool) -> str:
    Asked.answered = Asked.refused = 0
    Asked.tally = tally
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    for number in range(count):
        params = {"message": f"Question {number}?", "requestedSchema": schema}
        send({"jsonrpc": "2.0", "id": f"ask-{number}", "method": "elicitation/create", "params": params})
    if not wait:
        return "asked"
    while Asked.answered + Asked.refused < count:
        Asked.take(json.loads(sys.stdin.readline()))
    return f"answered {Asked.answered}, refused {Asked.refused}"


def reply_to(message: dict[str, Any]) -> dict[str, Any] | None:
    if "id" not in message or "method" not in message:
        return None
    method, request_id = message["method"], message["id"]
    params = message.get("params") or {}
    if method == "initialize":
        capabilities = {"tools": {}, "logging": {}}
        info = {"name": "noisy", "version": "1.0.0"}
        result: Any = {"protocolVersion": params["protocolVersion"], "capabilities": capabilities, "serverInfo": info}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") == "stderr":
        write_stderr(int((params.get("arguments") or {}).get("lines", 1)))
        return text(request_id, "wrote")
    elif method == "tools/call" and params.get("name") == "flood":
        flood(params)
        return text(request_id, "flooded")
    elif method == "tools/call" and params.get("name") == "vanish":
        send(text(request_id, "vanishing"))
        vanish(Path(params["arguments"]["marker"]))
    elif method == "tools/call" and params.get("name") == "ask":
        arguments = params["arguments"]
        said = ask(int(arguments["count"]), Path(arguments["tally"]), arguments.get("wait", True))
        return text(request_id, said)
    elif method == "tools/call" and params.get("name") == "biglog":
        data = ["a"] * int(params["arguments"]["strings"])
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}})
        return text(request_id, "logged")
    elif method == "tools/call" and params.get("name") == "slow":
        arguments = params.get("arguments") or {}
        Path(arguments["started"]).touch()
        time.sleep(float(arguments["seconds"]))
        return text(request_id, "slept")
    elif method == "tools/call":
        return text(request_id, "fine")
    elif method in ("ping", "logging/setLevel"):
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


if __name__ == "__main__":
    while line := sys.stdin.readline():  # (not `for line in sys.stdin`: `ask` reads stdin too)
        Asked.take(json.loads(line))
        answer = reply_to(json.loads(line))
        if answer is not None:
            send(answer)
