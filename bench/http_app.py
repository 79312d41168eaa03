"""The HTTP gateway's own CPU per plain `tools/call`, in-process: its ASGI app driven directly, no uvicorn,
no client process, a server behind it that costs next to nothing (`bare_echo.py`).

`http_throughput.py` measures the whole chain on two shared cores, where a change of a few per cent is
inside one run's noise. This drives the app the HTTP front serves (`build_app`: authentication, the lane,
the call path, the stdio leg) with plain calls as uvicorn would hand them over, from `--callers` clients
at once (2026-07-28 ones, or with `--era session` session-era ones, each with its session), and counts the
process's CPU time per call (the gateway's, the pipe's system calls included; not the server's, which is
another process). The best of `--rounds` rounds of `--calls` calls, in microseconds. `--setting
audit=false` (any setting, its value as JSON) shows what a feature costs.

`--server kitchen` puts the SDK's kitchen.py behind instead, which answers a call in about 0.9 ms: then
the gateway waits on its server between calls, each pass of its event loop handles one call, and the same
work costs it much more per call than when calls come together (docs/benchmarks.md).

For a before and after, run it with the other tree first on the path:
``PYTHONPATH=/other/checkout/src .venv/bin/python bench/http_app.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
SERVERS = {  # the stdio server behind the gateway (its script and arguments), by --server
    "bare": [str(BENCH / "bare_echo.py")],
    "bare_modern": [str(BENCH / "bare_echo.py"), "--modern"],  # reached at 2026-07-28, as kitchen.py is
    "kitchen": [str(BENCH.parent / "tests" / "servers" / "kitchen.py")],
    "kitchen_pipes": [str(BENCH / "kitchen_pipes.py")],
}
HOST = "127.0.0.1"
MODERN = "2026-07-28"
SESSION = "2025-11-25"


def request_scope(body: bytes, extra: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The scope uvicorn makes of an SDK client's POST of `body`, with its MCP headers (`extra`)."""
    headers = [
        (b"host", b"127.0.0.1:8765"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
        (b"user-agent", b"python-httpx/0.28.1"),
        (b"accept-encoding", b"gzip, deflate"),
        (b"connection", b"keep-alive"),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": (HOST, 8765),
        "client": (HOST, 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": headers,
        "state": {},
    }


def call_body(request_id: int, session: bool) -> bytes:
    """A plain `echo` call, with the envelope the SDK's 2026-07-28 client sends (none in a session)."""
    params: dict[str, Any] = {"name": "bench_echo", "arguments": {"text": "hello world from the bench"}}
    if not session:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


async def post(app: Any, body: bytes, extra: list[tuple[bytes, bytes]]) -> tuple[dict[bytes, bytes], bytes]:
    """POST `body` to the app at /mcp: the response's headers and body."""
    sent = False
    head: dict[bytes, bytes] = {}
    answer: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            head.update(message.get("headers", []))
        elif message["type"] == "http.response.body":
            answer.append(message.get("body", b""))

    await app(request_scope(body, extra), receive, send)
    return head, b"".join(answer)


class Caller:
    """One client of an era: a 2026-07-28 one (no session), or a session-era one with its session."""

    def __init__(self, app: Any, era: str) -> None:
        self.app = app
        self.session = era == "session"
        self.headers = [(b"mcp-protocol-version", MODERN.encode()), (b"mcp-method", b"tools/call")]
        self.headers.append((b"mcp-name", b"bench_echo"))

    async def open(self) -> None:
        """A session-era client's handshake: initialize, initialized, and a first request."""
        if not self.session:
            return
        opening = {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": opening}
        head, _ = await post(self.app, json.dumps(message).encode(), [])
        self.headers = [(b"mcp-session-id", head[b"mcp-session-id"]), (b"mcp-protocol-version", SESSION.encode())]
        await post(self.app, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', self.headers)
        await post(self.app, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', self.headers)

    async def call(self, request_id: int) -> bytes:
        return (await post(self.app, call_body(request_id, self.session), self.headers))[1]


async def lifespan(app: Any, task_group: anyio.abc.TaskGroup) -> Any:
    """Start the app's lifespan (the SDK's session manager runs in it); returns what ends it."""
    to_app, app_reads = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_says, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    task_group.start_soon(app, scope, app_reads.receive, app_says.send)
    await to_app.send({"type": "lifespan.startup"})
    started = await from_app.receive()
    if started["type"] != "lifespan.startup.complete":
        raise SystemExit(f"the app did not start: {started}")

    async def stop() -> None:
        await to_app.send({"type": "lifespan.shutdown"})
        await from_app.receive()

    return stop


async def calls_of(caller: Caller, first_id: int, count: int) -> None:
    for number in range(count):
        await caller.call(first_id + number)


async def round_of(callers: list[Caller], first_id: int, per_caller: int) -> tuple[float, float]:
    """(user, system) CPU seconds of this process while each of `callers` makes `per_caller` calls."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    async with anyio.create_task_group() as task_group:
        for number, caller in enumerate(callers):
            task_group.start_soon(calls_of, caller, first_id + number * per_caller, per_caller)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def message_of(body: bytes) -> dict[str, Any]:
    """The JSON-RPC message of an answer: a JSON body, or the last `data:` of an event stream."""
    if body.startswith(b"event:") or body.startswith(b"data:"):
        body = [line for line in body.splitlines() if line.startswith(b"data:")][-1][5:]
    return json.loads(body)


async def measure(
    era: str, calls: int, rounds: int, callers: int, settings: dict[str, Any], server_args: list[str]
) -> tuple[float, float, str]:
    """The best round's (user, system) microseconds per call, and the first call's answer."""
    from mcp_manifold._cli.common import load
    from mcp_manifold._front.http import build_app
    from mcp_manifold._runtime.gateway import Gateway
    from mcp_manifold._runtime.heap import settle_after_start

    per_caller = max(1, calls // callers)
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "manifold.json"
        server = {"command": sys.executable, "args": server_args}
        manifold = {"data_dir": f"{folder}/data", **settings}
        config.write_text(json.dumps({"mcpServers": {"bench": server}, "manifold": manifold}))
        cfg = load(config, {"http": True})
        async with anyio.create_task_group() as task_group:
            async with Gateway(cfg, serving=True, single_client=False) as gateway, AsyncExitStack() as stack:
                app = build_app(gateway, HOST, stack)
                settle_after_start(task_group)  # as `manifold serve` does
                stop = await lifespan(app, task_group)
                clients = [Caller(app, era) for _ in range(callers)]
                for client in clients:
                    await client.open()
                first = await clients[0].call(10)
                result = message_of(first).get("result") or {}
                if result.get("isError") is not False or "hello world" not in first.decode():
                    raise SystemExit(f"the call failed: {first[:300]!r}")
                await round_of(clients, 100, 500 // callers + 1)  # warm: series, caches, the leg
                best = (float("inf"), 0.0)
                for number in range(rounds):
                    user, system = await round_of(clients, (number + 1) * 1_000_000, per_caller)
                    best = min(best, (user + system, system))
                await stop()
            task_group.cancel_scope.cancel()
    total, system = best
    done = per_caller * callers
    return (total - system) / done * 1e6, system / done * 1e6, first.decode(errors="replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--callers", type=int, default=32, help="clients calling at once, one call each at a time")
    parser.add_argument(
        "--era", choices=("2026-07-28", "session"), default="2026-07-28", help="the clients' protocol era"
    )
    parser.add_argument(
        "--server",
        choices=tuple(SERVERS),
        default="bare",
        help="the stdio server behind: bare_echo.py (default; bare_modern: reached at 2026-07-28), or the SDK's "
        "kitchen.py, which answers in about 0.9 ms, as it is or with its transport on the event loop (kitchen_pipes)",
    )
    parser.add_argument("--show", action="store_true", help="print the first answer")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="NAME=JSON", help="a gateway setting (audit=false, ...)"
    )
    args = parser.parse_args()
    settings = {name: json.loads(value) for name, value in (item.split("=", 1) for item in args.setting)}
    options = {"use_uvloop": True} if importlib.util.find_spec("uvloop") else {}  # as an HTTP gateway runs
    user, system, first = anyio.run(
        measure,
        args.era,
        args.calls,
        args.rounds,
        args.callers,
        settings,
        SERVERS[args.server],
        backend_options=options,
    )
    if args.show:
        print(first)
    total = user + system
    print(f"gateway CPU per plain tools/call (app, in-process): {total:.1f} us (user {user:.1f}, system {system:.1f})")


if __name__ == "__main__":
    main()
