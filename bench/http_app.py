"""The HTTP gateway's own CPU per plain `tools/call`, in-process: its ASGI app driven directly, no uvicorn,
no client process, a server behind it that costs next to nothing (`bare_echo.py`).

`http_throughput.py` measures the whole chain on two shared cores, where a change of a few per cent is
inside one run's noise. This drives the app the HTTP front serves (`build_app`: authentication, the lane,
the call path, the stdio leg) with one 2026-07-28 request at a time, as uvicorn would hand it over, and
counts the process's CPU time per call (the gateway's, the pipe's system calls included; not the server's,
which is another process), with `--callers` calls in flight at once. The best of `--rounds` rounds of
`--calls` calls, in microseconds. `--setting audit=false` (any setting, its value as JSON) shows what a
feature costs.

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

BARE_ECHO = Path(__file__).with_name("bare_echo.py")
HOST = "127.0.0.1"
MODERN = "2026-07-28"


def request_scope(body: bytes) -> dict[str, Any]:
    """The scope uvicorn makes of a 2026-07-28 client's POST of `body` (the SDK client's headers)."""
    headers = [
        (b"host", b"127.0.0.1:8765"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"mcp-protocol-version", MODERN.encode()),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"bare_echo"),
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


def call_body(request_id: int) -> bytes:
    """A plain `echo` call with the envelope the SDK's 2026-07-28 client sends."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "bare_echo", "arguments": {"text": "hello world from the bench"}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


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


async def one_call(app: Any, request_id: int) -> bytes:
    body = call_body(request_id)
    scope = request_scope(body)
    sent = False
    answer: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            answer.append(message.get("body", b""))

    await app(scope, receive, send)
    return b"".join(answer)


async def calls_of(app: Any, first_id: int, count: int) -> None:
    for number in range(count):
        await one_call(app, first_id + number)


async def round_of(app: Any, first_id: int, per_caller: int, callers: int) -> tuple[float, float]:
    """(user, system) CPU seconds of this process for `callers` callers making `per_caller` calls each."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    async with anyio.create_task_group() as task_group:
        for caller in range(callers):
            task_group.start_soon(calls_of, app, first_id + caller * per_caller, per_caller)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


async def measure(calls: int, rounds: int, callers: int, settings: dict[str, Any]) -> tuple[float, float, str]:
    """The best round's (user, system) microseconds per call, and the first call's answer."""
    from mcp_manifold._cli.common import load
    from mcp_manifold._front.http import build_app
    from mcp_manifold._runtime.gateway import Gateway
    from mcp_manifold._runtime.heap import settle_after_start

    per_caller = max(1, calls // callers)
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "manifold.json"
        server = {"command": sys.executable, "args": [str(BARE_ECHO)]}
        manifold = {"data_dir": f"{folder}/data", **settings}
        config.write_text(json.dumps({"mcpServers": {"bare": server}, "manifold": manifold}))
        cfg = load(config, {"http": True})
        async with anyio.create_task_group() as task_group:
            async with Gateway(cfg, serving=True, single_client=False) as gateway, AsyncExitStack() as stack:
                app = build_app(gateway, HOST, stack)
                settle_after_start(task_group)  # as `manifold serve` does
                stop = await lifespan(app, task_group)
                first = await one_call(app, 0)
                result = json.loads(first).get("result") or {}
                if result.get("isError") is not False or "hello world" not in first.decode():
                    raise SystemExit(f"the call failed: {first[:300]!r}")
                await calls_of(app, 1, 500)  # warm: the first calls set up series, caches and the leg
                best = (float("inf"), 0.0)
                for number in range(rounds):
                    user, system = await round_of(app, (number + 1) * 1_000_000, per_caller, callers)
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
    parser.add_argument("--callers", type=int, default=32, help="calls in flight at once")
    parser.add_argument("--show", action="store_true", help="print the first answer")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="NAME=JSON", help="a gateway setting (audit=false, ...)"
    )
    args = parser.parse_args()
    settings = {name: json.loads(value) for name, value in (item.split("=", 1) for item in args.setting)}
    options = {"use_uvloop": True} if importlib.util.find_spec("uvloop") else {}  # as an HTTP gateway runs
    user, system, first = anyio.run(measure, args.calls, args.rounds, args.callers, settings, backend_options=options)
    if args.show:
        print(first)
    total = user + system
    print(f"gateway CPU per plain tools/call (app, in-process): {total:.1f} us (user {user:.1f}, system {system:.1f})")


if __name__ == "__main__":
    main()
