"""floor_front: the least an HTTP front written in Python on uvicorn can do in front of a stdio MCP server.

For the HTTP throughput bench only (`http_throughput.py --with-floor`). Each JSON-RPC request POSTed to
/mcp is written to the server's stdin with its id renumbered, and answered with the server's line, its id
put back, as `application/json`; a notification is written and answered 202. Nothing else: no
authentication, no profiles or policy, no limits, no audit or metrics, no check of what either side
sends, no streams. It runs on the event loop and HTTP parser the gateway runs on (uvloop and httptools
when installed), and reads and writes the server's pipes on that loop.

What it shows: how many calls per second, at what latency and for how much CPU, the cheapest possible
front gets out of the same server on the same machine. A figure the gateway reaches here is set by the
server and the machine, not by the gateway; the CPU above this front's is what the gateway's work costs.

2026-07-28 clients only: their requests carry everything a server needs, so any number of clients can
share the one stdio connection. Session-era clients cannot (each would `initialize` the same server).

Run: ``python bench/floor_front.py PORT COMMAND [ARGS...]``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import sys
from typing import Any

import uvicorn

Scope = dict[str, Any]


class FloorFront:
    """The ASGI app: one stdio server, the requests waiting on it by the id it was sent."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.process: asyncio.subprocess.Process | None = None
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.process = await asyncio.create_subprocess_exec(
                    *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
                )
                self.reader = asyncio.ensure_future(self._read_answers())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.process is not None and self.process.returncode is None:
                    self.process.kill()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _read_answers(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            waiting = self.waiting.pop(message.get("id"), None)
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
        for waiting in self.waiting.values():  # the server is gone
            if not waiting.done():
                waiting.set_exception(ConnectionError("the server exited"))

    async def _http(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["method"] != "POST" or scope["path"] != "/mcp":
            await _respond(send, 405, b"")
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(body)
        except ValueError:
            await _respond(send, 400, b"")
            return
        assert self.process is not None and self.process.stdin is not None
        if "id" not in request:  # a notification
            self.process.stdin.write(body + b"\n")
            await _respond(send, 202, b"")
            return
        theirs = request["id"]
        request["id"] = ours = next(self.ids)
        answer = self.waiting[ours] = asyncio.get_running_loop().create_future()
        self.process.stdin.write(json.dumps(request, separators=(",", ":")).encode() + b"\n")
        try:
            message = await answer
        except ConnectionError:
            await _respond(send, 502, b"")
            return
        message["id"] = theirs
        await _respond(send, 200, json.dumps(message, separators=(",", ":")).encode())


async def _respond(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-length", str(len(body)).encode())]
    if body:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit("usage: floor_front.py PORT COMMAND [ARGS...]")
    fast = importlib.util.find_spec("uvloop") is not None and importlib.util.find_spec("httptools") is not None
    uvicorn.run(
        FloorFront(sys.argv[2:]),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        loop="uvloop" if fast else "asyncio",
        http="httptools" if fast else "h11",
        access_log=False,
        log_level="warning",
        lifespan="on",
    )


if __name__ == "__main__":
    main()
