"""Latency the proxy tool adds: `proxy` call of kitchen_echo vs the direct call of kitchen_echo.

One gateway (``expose: ["direct", "proxy"]``, the kitchen fixture behind it), one SDK client, both
kinds of call in the same run, interleaved (direct, proxy, direct, ...) so drift hits both alike.
After a warm-up, each kind is timed ``--calls`` times; the report gives p50/p90/p99 and the p50/p99
differences. Target: the proxy within 0.5 ms of direct at p50.

Run: ``.venv/bin/python bench/proxy_overhead.py`` (``--transport stdio`` for stdio; ``--calls N``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
KITCHEN = ROOT / "tests" / "servers" / "kitchen.py"


def write_config(directory: Path) -> Path:
    config = {
        "mcpServers": {"kitchen": {"command": sys.executable, "args": [str(KITCHEN)]}},
        "manifold": {"expose": ["direct", "proxy"], "data_dir": str(directory / "data"), "lazy": False},
    }
    path = directory / "mcp.json"
    path.write_text(json.dumps(config))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"gateway not listening on {port}")


@asynccontextmanager
async def gateway_client(transport: str, config: Path) -> AsyncIterator[Client]:
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]
    if transport == "stdio":
        params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
        async with Client(params, mode="legacy") as client:
            yield client
        return
    port = free_port()
    process = subprocess.Popen([*command, "--http", "--port", str(port)], start_new_session=True)
    try:
        wait_for_port(port)
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=10)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    result = await call()
    elapsed = (time.perf_counter() - start) * 1000
    assert not result.is_error, result
    return elapsed


async def run(transport: str, calls: int, warmup: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with gateway_client(transport, write_config(Path(tmp))) as client:

            async def direct() -> Any:
                return await client.call_tool("kitchen_echo", {"text": "hi"})

            async def proxy() -> Any:
                arguments = {"action": "call", "type": "tool", "path": "kitchen_echo", "args": {"text": "hi"}}
                return await client.call_tool("proxy", arguments)

            for _ in range(warmup):
                await direct()
                await proxy()
            samples: dict[str, list[float]] = {"direct": [], "proxy": []}
            for _ in range(calls):
                samples["direct"].append(await timed(direct))
                samples["proxy"].append(await timed(proxy))
    report: dict[str, Any] = {"transport": transport, "calls": calls}
    for kind, values in samples.items():
        report[kind] = {f"p{int(q * 100)}": round(percentile(values, q), 3) for q in (0.5, 0.9, 0.99)}
    report["overhead_ms"] = {
        key: round(report["proxy"][key] - report["direct"][key], 3) for key in ("p50", "p90", "p99")
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("http", "stdio", "both"), default="both")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    transports = ("http", "stdio") if args.transport == "both" else (args.transport,)
    for transport in transports:
        report = anyio.run(run, transport, args.calls, args.warmup)
        print(json.dumps(report))


if __name__ == "__main__":
    main()
