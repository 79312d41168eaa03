"""The first call behind a warm listing cache, with many stdio servers (issue 24, item 20).

A stdio gateway in front of N `numbers.py` servers (lazy), reached by a session-era SDK client: the
first `tools/list` and then the first call to the middle server, once cold (no listing cache: the list
starts every server) and twice warm (the list comes from the cache; the servers start behind it).

Run: `python bench/first_call.py [N] [FOLDER]` (default 30 servers, in a fresh temporary folder).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

NUMBERS = Path(__file__).resolve().parent.parent / "tests" / "servers" / "numbers.py"


async def first_call(config: Path, count: int, label: str) -> None:
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(params, mode="legacy") as client:
        started = time.perf_counter()
        tools = (await client.list_tools()).tools
        listed = time.perf_counter()
        result = await client.call_tool(f"n{count // 2}_add", {"a": 1, "b": 2})
        called = time.perf_counter()
    print(
        f"{label}: tools/list {listed - started:.2f}s ({len(tools)} tools), "
        f"first call {called - listed:.2f}s{' (error)' if result.is_error else ''}"
    )


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    folder = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="first-call-"))
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "mcp.json"
    servers = {f"n{i}": {"command": sys.executable, "args": [str(NUMBERS)]} for i in range(count)}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(folder / "data")}}))
    for label in ("cold", "warm", "warm"):
        anyio.run(first_call, config, count, label)


if __name__ == "__main__":
    main()
