"""What one client's heavy requests cost every other client: a gateway over HTTP, each measurement in a
gateway of its own.

- `arguments`: 2026-07-28 `tools/call`s whose arguments are 4 MB of `{}` (1.4 million objects, under the
  SDK's 4 MiB body limit), three in a row, while another client calls `echo` of another server every
  10 ms; its waits (the worst is what one such request holds the event loop for).
- `listen`: `--streams` 2026-07-28 clients each open a `subscriptions/listen` stream naming 256 resources
  (the most one client may hold) of a 2026-07-28 server, all at once: the time until all are open, the
  gateway's CPU for it, and that an update of the last stream's last resource reaches it.

Run: `.venv/bin/python bench/heavy_requests.py [--against OTHER_PYTHON]` (`--against`: the same, with
another checkout's gateway, e.g. a wrapper setting PYTHONPATH to its src). Writes
bench/results/heavy_requests.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
from mcp import Client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port, server_entry, stop_process, wait_for_port  # noqa: E402

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "heavy", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_gateway(python: str, servers: dict[str, Any], folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    folder.mkdir(parents=True)
    config = folder / "mcp.json"
    settings = {"data_dir": str(folder / "data"), "lazy": False, "expose": ["direct"]}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    port = free_port()
    command = [python, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(command, start_new_session=True, stderr=subprocess.DEVNULL)
    wait_for_port(port, process, 30)
    return process, f"http://127.0.0.1:{port}/mcp"


async def large_arguments(url: str) -> dict[str, Any]:
    values = (4 * 1024 * 1024 - 400) // 3
    call = {"name": "kitchen_echo", "arguments": {"text": [{}] * values}, "_meta": MODERN_META}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, separators=(",", ":"))
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "kitchen_echo",
    }
    waits: list[float] = []
    async with Client(url) as other:
        await other.call_tool("other_echo", {"text": "warm"})
        done = anyio.Event()

        async def bystander() -> None:
            while not done.is_set():
                started = time.monotonic()
                await other.call_tool("other_echo", {"text": "x"})
                waits.append(time.monotonic() - started)
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(bystander)
            async with httpx.AsyncClient(timeout=300) as http:
                started = time.monotonic()
                for _ in range(3):
                    await http.post(url, content=body.encode(), headers=headers)
                big = time.monotonic() - started
            done.set()
    waits.sort()
    return {
        "body_bytes": len(body),
        "three_requests_s": round(big, 2),
        "bystander_calls": len(waits),
        "bystander_worst_ms": round(waits[-1] * 1000, 1),
        "bystander_p90_ms": round(waits[int(len(waits) * 0.9)] * 1000, 1),
        "bystander_worst5_ms": [round(wait * 1000, 1) for wait in waits[-5:]],
    }


async def listen_streams(url: str, pid: int, streams: int) -> dict[str, Any]:
    opened, updated = 0, anyio.Event()
    async with Client(url) as toucher:
        await toucher.list_tools()
        cpu_before, started = cpu_seconds(pid), time.monotonic()
        all_open = anyio.Event()

        async def stream(number: int) -> None:
            nonlocal opened
            uris = [f"kitchen+kitchen://greeting/s{number}-{index}" for index in range(256)]
            async with Client(url) as client, client.listen(resource_subscriptions=uris) as events:
                opened += 1
                if opened == streams:
                    all_open.set()
                if number == streams - 1:
                    await events.__anext__()
                    updated.set()
                await anyio.sleep_forever()

        async with anyio.create_task_group() as task_group:
            for number in range(streams):
                task_group.start_soon(stream, number)
            await all_open.wait()
            open_s, cpu = time.monotonic() - started, cpu_seconds(pid) - cpu_before
            with anyio.fail_after(60):
                while not updated.is_set():  # the server may not be listening for it yet: touch again
                    await toucher.call_tool("kitchen_touch", {"uri": f"kitchen://greeting/s{streams - 1}-255"})
                    with anyio.move_on_after(0.2):
                        await updated.wait()
            task_group.cancel_scope.cancel()
    return {
        "streams": streams,
        "open_s": round(open_s, 2),
        "gateway_cpu_s": round(cpu, 2),
        "update_after_s": round(time.monotonic() - started, 2),
    }


async def measure(python: str, streams: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        servers = {"kitchen": server_entry("kitchen.py"), "other": server_entry("kitchen.py")}
        process, url = start_gateway(python, servers, Path(folder) / "arguments")
        try:
            figures["arguments"] = await large_arguments(url)
        finally:
            stop_process(process)
        process, url = start_gateway(python, {"kitchen": server_entry("kitchen.py")}, Path(folder) / "listen")
        try:
            figures["listen"] = await listen_streams(url, process.pid, streams)
        finally:
            stop_process(process)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--against", help="another Python whose gateway is measured too (a checkout's wrapper)")
    args = parser.parse_args()
    results: dict[str, Any] = {"load": os.getloadavg()}
    targets = {"this": sys.executable, **({"against": args.against} if args.against else {})}
    for name, python in targets.items():
        results[name] = anyio.run(measure, python, args.streams)
        print(name, json.dumps(results[name], indent=1))
    out = ROOT / "bench" / "results" / "heavy_requests.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
