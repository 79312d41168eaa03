"""Soak: does anything in a serving gateway grow with use? Cycles of client work against one HTTP gateway,
with the gateway's resident memory, open file descriptors, threads, child processes, `/metrics` series and
files in its data dir read after every checkpoint (once idle sessions have expired and the gateway has
settled). A number that keeps growing from checkpoint to checkpoint is a leak; one that grows once and
stays is warm-up.

Each cycle does one of, in turn:

- a session in each client mode (the SDK's default, MCP 2026-07-28, and `legacy`): list tools, call one,
  and (legacy) subscribe to a resource of its own, then end the session;
- a session-era client that subscribes to a resource and vanishes (no DELETE: its session idles out);
- a 2026-07-28 client that starts a slow call with a progress token and drops the connection mid-call;
- junk: an unknown tool, a random request id, a random `Mcp-Session-Id`.

With `--reload-every N`, every N cycles the config file is edited to swap its third server for a new one
(`catalog.py` under a new name), the soak waits for the reload to apply and calls the new server once: what
a reload removes must not stay behind (metric series, pins served, tasks, processes).

Run: `nice .venv/bin/python bench/soak.py --cycles 2000 --every 500`. Writes bench/results/soak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
from mcp import Client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port, gateway_over_http, server_entry, write_gateway_config  # noqa: E402

SESSION_ERA = "2025-11-25"
MODERN = "2026-07-28"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# Session-era subscriptions are what this exercises: the SDK's warning that 2026-07-28 removed them is noise.
warnings.filterwarnings("ignore", message="resources/subscribe is removed")
IDLE = 2  # seconds an idle HTTP session is kept: vanished clients' sessions expire between checkpoints


async def with_sdk(url: str, mode: str, cycle: int) -> None:
    async with Client(url, mode=mode) as client:
        await client.list_tools()
        await client.call_tool("kitchen_echo", {"text": f"cycle {cycle}"})
        if mode == "legacy":
            await client.subscribe_resource(f"kitchen+kitchen://greeting/soak-{cycle}")


async def legacy_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    params = {"protocolVersion": SESSION_ERA, "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}
    opened = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": SESSION_ERA}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session


async def vanish_subscribed(url: str, cycle: int) -> None:
    async with httpx.AsyncClient(headers=HEADERS, timeout=10) as http:
        session = await legacy_session(http, url)
        params = {"uri": f"kitchen+kitchen://greeting/gone-{cycle}"}
        await http.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": params}, headers=session
        )


async def drop_mid_call(url: str, cycle: int) -> None:
    meta = {**MODERN_META, "progressToken": f"soak-{cycle}"}
    body = {
        "jsonrpc": "2.0",
        "id": cycle,
        "method": "tools/call",
        "params": {"name": "kitchen_slow", "arguments": {"seconds": 30}, "_meta": meta},
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "kitchen_slow"}
    async with httpx.AsyncClient(headers=HEADERS, timeout=10) as http:
        with anyio.move_on_after(0.2):  # the call is running on the server: the client goes
            async with http.stream("POST", url, json=body, headers=headers) as answer:
                async for _ in answer.aiter_raw():
                    pass


async def junk(url: str, cycle: int) -> None:
    async with httpx.AsyncClient(headers=HEADERS, timeout=10) as http:
        unknown = {"name": f"nope_{uuid.uuid4().hex[:8]}", "arguments": {}, "_meta": MODERN_META}
        modern = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": unknown["name"]}
        await http.post(
            url,
            json={"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "tools/call", "params": unknown},
            headers=modern,
        )
        stranger = {"mcp-session-id": uuid.uuid4().hex, "mcp-protocol-version": SESSION_ERA}
        await http.post(url, json={"jsonrpc": "2.0", "id": cycle, "method": "tools/list"}, headers=stranger)


async def one_cycle(url: str, cycle: int) -> None:
    kind = cycle % 5
    if kind < 2:
        await with_sdk(url, "legacy" if kind else "auto", cycle)
    elif kind == 2:
        await vanish_subscribed(url, cycle)
    elif kind == 3:
        await drop_mid_call(url, cycle)
    else:
        await junk(url, cycle)


def soak_servers(generation: int) -> dict[str, Any]:
    """The servers of the config's `generation`: each reload swaps the third for one of a new name."""
    servers = {"kitchen": server_entry("kitchen.py"), "numbers": server_entry("numbers.py")}
    if generation:
        servers[f"swapped{generation}"] = server_entry("catalog.py", "--count", "3", "--tag", f"g{generation}")
    return servers


async def reload_swapping(folder: Path, base: str, generation: int) -> None:
    """Edit the config to swap its third server for a new one; return once the reload applied and the new
    server answered a call."""

    def applied() -> int:
        found = re.search(r'manifold_config_reloads_total\{result="applied"\} (\S+)', httpx.get(f"{base}/metrics").text)
        return int(float(found.group(1))) if found else 0

    before = applied()
    write_gateway_config(folder, soak_servers(generation), **SETTINGS)
    with anyio.fail_after(30):
        while applied() == before:
            await anyio.sleep(0.1)
    async with Client(f"{base}/mcp", mode="legacy") as client:
        with anyio.fail_after(30):
            while not any(tool.name.startswith(f"swapped{generation}_") for tool in (await client.list_tools()).tools):
                await anyio.sleep(0.1)
        await client.call_tool(f"swapped{generation}_tool_0001_g{generation}", {})


def descendants(pid: int) -> int:
    found, todo = 0, [pid]
    while todo:
        children = subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True, text=True).stdout.split()
        found += len(children)
        todo += [int(child) for child in children]
    return found


def measure(pid: int, base: str, data: Path) -> dict[str, Any]:
    status = Path(f"/proc/{pid}/status").read_text()
    metrics = httpx.get(f"{base}/metrics", timeout=10).text
    return {
        "rss_kb": int(re.search(r"VmRSS:\s+(\d+)", status).group(1)),  # type: ignore[union-attr]
        "threads": int(re.search(r"Threads:\s+(\d+)", status).group(1)),  # type: ignore[union-attr]
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "children": descendants(pid),
        "series": sum(1 for line in metrics.splitlines() if line and not line.startswith("#")),
        "metrics_bytes": len(metrics),
        "data_files": sum(len(files) for _, _, files in os.walk(data)),
    }


SETTINGS: dict[str, Any] = {"expose": ["direct"], "lazy": False, "session_idle_timeout": IDLE}


async def soak(cycles: int, every: int, settle: float, reload_every: int = 0) -> list[dict[str, Any]]:
    folder = Path(tempfile.mkdtemp(prefix="manifold-soak-"))
    config = write_gateway_config(folder, soak_servers(0), **SETTINGS)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    rows = []
    with gateway_over_http(config, port, timeout=60, stderr=subprocess.DEVNULL) as gateway:
        for cycle in range(5):  # every path once, before the first reading
            await one_cycle(f"{base}/mcp", cycle)
        started = time.monotonic()
        for cycle in range(cycles + 1):
            if cycle % every == 0:
                await anyio.sleep(settle)
                row = {
                    "cycles": cycle,
                    "seconds": round(time.monotonic() - started),
                    **measure(gateway.pid, base, folder / "data"),
                }
                if reload_every:
                    row["reloads"] = cycle // reload_every
                rows.append(row)
                print(" ".join(f"{key}={value}" for key, value in row.items()), flush=True)
            if cycle < cycles:
                await one_cycle(f"{base}/mcp", cycle + 5)
                if reload_every and (cycle + 1) % reload_every == 0:
                    await reload_swapping(folder, base, (cycle + 1) // reload_every)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--every", type=int, default=500, help="cycles between readings")
    parser.add_argument("--settle", type=float, default=IDLE + 4, help="seconds idle before each reading")
    parser.add_argument("--reload-every", type=int, default=0, help="cycles between config reloads (0: none)")
    args = parser.parse_args()
    rows = anyio.run(soak, args.cycles, args.every, args.settle, args.reload_every)
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "soak.json").write_text(json.dumps({"load": os.getloadavg(), "readings": rows}, indent=2))


if __name__ == "__main__":
    main()
