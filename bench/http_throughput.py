"""Throughput over streamable HTTP: many sessions calling at once, the gateway against the server it fronts.

One run, four targets, both client eras (the SDK's default ``Client``, which speaks MCP 2026-07-28, and
``mode="legacy"``, a session-era client):

    direct_http          client -> kitchen.py --http (the official SDK's server by itself)
    manifold_http_stdio  client -> manifold --http -> kitchen.py over stdio
    manifold_http_http   client -> manifold --http -> kitchen.py --http (its own process)
    manifold_http_bare   client -> manifold --http -> bare_echo.py over stdio (no SDK: next to no CPU)

The last one measures the gateway's own capacity. The gateway shares this machine's cores with the
server behind it, and the SDK's stdio server costs about as much per call as the SDK's HTTP server
alone; bare_echo.py answers in a few hundredths of a millisecond.

For each (era, target): ``--sessions`` client sessions (default 32) each make ``--calls`` sequential
``echo`` calls (default 200), all sessions at once. The sessions are spread over ``--workers`` client
processes (default 4), so the client side is not one busy Python process; every worker connects and
warms up its sessions, then all start together when told. Reported: calls/s (all calls over the wall time
from the start signal to the last answer), p50/p99 of the per-call latency, and each server process's
CPU per call (user + system from ``/proc/<pid>/stat`` over the measured window, divided by the calls).

Run: ``.venv/bin/python bench/http_throughput.py`` (or ``make bench-http``); writes
``bench/results/http_throughput.json``. ``--lane off`` starts the gateways with the HTTP fast lane off
(``MANIFOLD_HTTP_LANE=0``); ``--with-lane-off`` adds a fourth target, the stdio-backed gateway with the lane
off, for a before/after within one run; ``--with-leg-off`` adds both chains with their raw backend leg off
(``MANIFOLD_STDIO_LEG=0``, ``MANIFOLD_HTTP_LEG=0``: every request through the SDK's client);
``--with-pipes`` adds the gateway in front of kitchen_pipes.py, the SDK's stdio server without its
transport's worker-thread hops (``bench/stdio_alone.py`` measures the stdio servers by themselves);
``--with-floor`` adds floor_front.py in front of kitchen.py, a front that forwards each request and does
nothing else, at 2026-07-28 (what the server and the machine allow whatever the front).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# The overhead bench's process and measuring helpers.
from overhead import (
    KITCHEN,
    PAYLOAD,
    Processes,
    cpu_seconds,
    free_port,
    git_state,
    manifold_command,
    package_version,
    percentile,
    text_of,
    write_manifold_config,
)

BENCH = Path(__file__).resolve().parent
DEFAULT_OUTPUT = BENCH / "results" / "http_throughput.json"
BARE_ECHO = BENCH / "bare_echo.py"
KITCHEN_PIPES = BENCH / "kitchen_pipes.py"
FLOOR_FRONT = BENCH / "floor_front.py"
ERAS = {"2026-07-28": "auto", "session": "legacy"}


# --- the client side: one worker process, several sessions ----------------------------------------


async def worker(url: str, tool: str, mode: str, sessions: int, calls: int, warmup: int) -> None:
    """Connect `sessions` clients, warm them up, say `ready`, wait for `go`, then print the latencies (ns)."""
    from contextlib import AsyncExitStack

    from mcp import Client

    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, mode=mode, cache=None)) for _ in range(sessions)]
        for client in clients:
            await client.list_tools()
            for _ in range(warmup):
                await client.call_tool(tool, {"text": PAYLOAD})
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

        async def run(client: Any) -> list[int]:
            durations = []
            for _ in range(calls):
                start = time.perf_counter_ns()
                result = await client.call_tool(tool, {"text": PAYLOAD})
                durations.append(time.perf_counter_ns() - start)
                if result.is_error or text_of(result) != PAYLOAD:
                    raise RuntimeError(f"unexpected result {result!r}")
            return durations

        per_session = await asyncio.gather(*(run(client) for client in clients))
        print(json.dumps([value for durations in per_session for value in durations]), flush=True)


# --- the driver -------------------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """`pid` and its descendants (Linux /proc), so a gateway's stdio backend is measured too."""
    found = [pid]
    for current in found:
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                found.extend(int(child) for child in Path(f"/proc/{current}/task/{task}/children").read_text().split())
            except OSError:
                continue
    return found


def load_average() -> float:
    return os.getloadavg()[0]


def measure(url: str, tool: str, mode: str, pids: dict[str, int], args: argparse.Namespace) -> dict[str, Any]:
    """One (target, era): start the workers, wait until all are ready, go, collect."""
    shares = [
        args.sessions // args.workers + (1 if i < args.sessions % args.workers else 0) for i in range(args.workers)
    ]
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", url, tool, mode, str(share), str(args.calls), str(args.warmup)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for share in shares
        if share
    ]
    for process in workers:
        assert process.stdout is not None
        line = process.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"a worker for {url} did not start: {line!r}")
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    load_before = load_average()
    started = time.perf_counter()
    for process in workers:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    samples: list[int] = []
    for process in workers:
        assert process.stdout is not None
        samples.extend(json.loads(process.stdout.readline()))
    wall = time.perf_counter() - started
    cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
    for process in workers:
        process.wait(timeout=60)
    values = sorted(value / 1e6 for value in samples)
    total = len(values)
    return {
        "calls": total,
        "wall_s": wall,
        "calls_per_s": total / wall,
        "p50_ms": percentile(values, 50),
        "p99_ms": percentile(values, 99),
        "cpu_ms_per_call": {name: seconds * 1000 / total for name, seconds in cpu.items()},
        "load_average": [load_before, load_average()],
    }


def hidden_speedups(work: Path) -> Path:
    """A directory that, first on PYTHONPATH, makes `import uvloop` and `import httptools` fail."""
    folder = work / "plain"
    for name in ("uvloop", "httptools"):
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} hidden by the benchmark')\n")
    return folder


def start_with_path(processes: Processes, name: str, command: list[str], port: int, path: Path) -> int:
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), saved]))
    try:
        return processes.start(name, command, port)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def start_targets(
    processes: Processes,
    work: Path,
    lane: str,
    with_lane_off: bool,
    variants: list[str],
    plain: bool = False,
    leg_off: bool = False,
    backend_protocol: str = "auto",
    gc_off: bool = False,
    variant_server: str = "kitchen",
    pipes: bool = False,
    floor: bool = False,
) -> list[dict[str, Any]]:
    kitchen = [sys.executable, str(KITCHEN)]
    bare = [sys.executable, str(BARE_ECHO)]
    kitchen_pipes = [sys.executable, str(KITCHEN_PIPES)]
    direct_port = free_port()
    direct_pid = processes.start("kitchen-http", [*kitchen, "--http", str(direct_port)], direct_port)
    backend_port = free_port()  # the gateway's HTTP backend: a process of its own, measured on its own
    backend_pid = processes.start("kitchen-backend", [*kitchen, "--http", str(backend_port)], backend_port)

    def gateway(
        name: str,
        server: dict[str, Any],
        lane: str = lane,
        path: str | None = None,
        leg: str = "on",
        env: dict[str, str] | None = None,
    ) -> tuple[str, int]:
        config = write_manifold_config(work / f"{name}.json", server, work / f"data-{name}")
        port = free_port()
        saved = dict(os.environ)
        os.environ["MANIFOLD_HTTP_LANE"] = "0" if lane == "off" else "1"  # inherited by the gateway
        os.environ["MANIFOLD_HTTP_LEG"] = "0" if leg == "off" else "1"
        os.environ["MANIFOLD_STDIO_LEG"] = "0" if leg == "off" else "1"
        os.environ.update(env or {})
        if path is not None:
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))
        try:
            pid = processes.start(name, manifold_command(config, "--http", "--port", str(port)), port)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        return f"http://127.0.0.1:{port}/mcp", pid

    stdio_url, stdio_pid = gateway("manifold-stdio", {"command": kitchen[0], "args": kitchen[1:]})
    bare_url, bare_pid = gateway("manifold-bare", {"command": bare[0], "args": bare[1:]})
    backend = {"url": f"http://127.0.0.1:{backend_port}/mcp", "protocol": backend_protocol}
    http_url, http_pid = gateway("manifold-http", backend)
    targets = [
        {
            "key": "direct_http",
            "description": "client -> kitchen.py (HTTP): the SDK's server by itself",
            "url": f"http://127.0.0.1:{direct_port}/mcp",
            "tool": "echo",
            "pids": {"server": direct_pid},
        },
        {
            "key": "manifold_http_stdio",
            "description": "client -> manifold (HTTP) -> kitchen.py (stdio)",
            "url": stdio_url,
            "tool": "kitchen_echo",
            "pids": {"gateway": stdio_pid},  # the stdio backend is added once it runs (started on first need)
            "backend_under": stdio_pid,
        },
        {
            "key": "manifold_http_http",
            "description": "client -> manifold (HTTP) -> kitchen.py (HTTP)",
            "url": http_url,
            "tool": "kitchen_echo",
            "pids": {"gateway": http_pid, "backend": backend_pid},
        },
        {
            "key": "manifold_http_bare",
            "description": "client -> manifold (HTTP) -> bare_echo.py (stdio, no SDK): the gateway's own capacity",
            "url": bare_url,
            "tool": "kitchen_echo",
            "pids": {"gateway": bare_pid},
            "backend_under": bare_pid,
        },
    ]
    if pipes:  # the SDK's server without its stdio transport's thread hops (bench/kitchen_pipes.py)
        pipes_url, pipes_pid = gateway("manifold-pipes", {"command": kitchen_pipes[0], "args": kitchen_pipes[1:]})
        targets.append(
            {
                "key": "manifold_http_pipes",
                "description": "client -> manifold (HTTP) -> kitchen_pipes.py (stdio, the SDK's transport on the loop)",
                "url": pipes_url,
                "tool": "kitchen_echo",
                "pids": {"gateway": pipes_pid},
                "backend_under": pipes_pid,
            }
        )
    if floor:  # the least a Python front does in front of kitchen.py (bench/floor_front.py): 2026-07-28 only
        floor_port = free_port()
        floor_pid = processes.start(
            "floor-front", [sys.executable, str(FLOOR_FRONT), str(floor_port), *kitchen], floor_port
        )
        targets.append(
            {
                "key": "floor_http_stdio",
                "description": "client -> floor_front.py (HTTP, forwards and nothing else) -> kitchen.py (stdio)",
                "url": f"http://127.0.0.1:{floor_port}/mcp",
                "tool": "echo",
                "pids": {"gateway": floor_pid, "backend": descendants(floor_pid)[1]},  # started with the front
                "eras": ["2026-07-28"],
            }
        )
    if leg_off:  # both chains through the SDK's client (stdio and streamable HTTP), for a before/after in one run
        stdio_noleg_url, stdio_noleg_pid = gateway(
            "manifold-stdio-noleg", {"command": kitchen[0], "args": kitchen[1:]}, leg="off"
        )
        targets.append(
            {
                "key": "manifold_http_stdio_noleg",
                "description": "client -> manifold (HTTP, raw stdio leg off) -> kitchen.py (stdio)",
                "url": stdio_noleg_url,
                "tool": "kitchen_echo",
                "pids": {"gateway": stdio_noleg_pid},
                "backend_under": stdio_noleg_pid,
            }
        )
        noleg_url, noleg_pid = gateway("manifold-http-noleg", backend, leg="off")
        targets.append(
            {
                "key": "manifold_http_http_noleg",
                "description": "client -> manifold (HTTP, raw backend leg off) -> kitchen.py (HTTP)",
                "url": noleg_url,
                "tool": "kitchen_echo",
                "pids": {"gateway": noleg_pid, "backend": backend_pid},
            }
        )
    if gc_off:  # the stdio chain with the collector as CPython sets it, for a before/after in one run
        gc_url, gc_pid = gateway(
            "manifold-stdio-gcoff", {"command": kitchen[0], "args": kitchen[1:]}, env={"MANIFOLD_GC_FREEZE": "0"}
        )
        targets.append(
            {
                "key": "manifold_http_stdio_gcoff",
                "description": "client -> manifold (HTTP, MANIFOLD_GC_FREEZE=0) -> kitchen.py (stdio)",
                "url": gc_url,
                "tool": "kitchen_echo",
                "pids": {"gateway": gc_pid},
                "backend_under": gc_pid,
            }
        )
    if with_lane_off:  # the same chain without the HTTP fast lane, for a before/after in one run
        off_url, off_pid = gateway("manifold-stdio-nolane", {"command": kitchen[0], "args": kitchen[1:]}, "off")
        targets.append(
            {
                "key": "manifold_http_stdio_nolane",
                "description": "client -> manifold (HTTP, fast lane off) -> kitchen.py (stdio)",
                "url": off_url,
                "tool": "kitchen_echo",
                "pids": {"gateway": off_pid},
                "backend_under": off_pid,
            }
        )
    if plain:  # both again without uvloop and httptools: asyncio's loop, uvicorn's h11
        folder = hidden_speedups(work)
        plain_port = free_port()
        plain_pid = start_with_path(
            processes, "kitchen-http-plain", [*kitchen, "--http", str(plain_port)], plain_port, folder
        )
        targets.insert(
            1,
            {
                "key": "direct_http_plain",
                "description": "client -> kitchen.py (HTTP), without uvloop and httptools",
                "url": f"http://127.0.0.1:{plain_port}/mcp",
                "tool": "echo",
                "pids": {"server": plain_pid},
            },
        )
        url, pid = gateway("manifold-stdio-plain", {"command": kitchen[0], "args": kitchen[1:]}, path=str(folder))
        targets.append(
            {
                "key": "manifold_http_stdio_plain",
                "description": "client -> manifold (HTTP, without uvloop and httptools) -> kitchen.py (stdio)",
                "url": url,
                "tool": "kitchen_echo",
                "pids": {"gateway": pid},
                "backend_under": pid,
            }
        )
    # the stdio-backed gateway with DIR first on its PYTHONPATH (uvloop, httptools), in front of kitchen.py or
    # of bare_echo.py (where the gateway's own cost is most of the CPU, so a change to it shows best)
    behind = bare if variant_server == "bare" else kitchen
    chain = "bare" if variant_server == "bare" else "stdio"  # in the key: never compared with the other by mistake
    for variant in variants:
        key, _, path = variant.partition("=")
        url, pid = gateway(f"manifold-{key}", {"command": behind[0], "args": behind[1:]}, path=path)
        targets.append(
            {
                "key": f"manifold_http_{chain}_{key}",
                "description": f"client -> manifold (HTTP, {path} first on its PYTHONPATH) -> "
                f"{Path(behind[1]).name} (stdio)",
                "url": url,
                "tool": "kitchen_echo",
                "pids": {"gateway": pid},
                "backend_under": pid,
            }
        )
    return targets


def print_table(era: str, rows: dict[str, dict[str, Any]]) -> None:
    direct = rows["direct_http"]
    print(f"\n{era} clients ({'SDK default Client' if ERAS[era] == 'auto' else 'mode=legacy'}):")
    print(
        f"{'target':26} {'calls/s':>8} {'ratio':>6} {'p50 ms':>7} {'p99 ms':>7}  CPU ms/call (front; ratio to direct)"
    )
    for key, row in rows.items():
        cpu = row["cpu_ms_per_call"]
        front = cpu.get("gateway", cpu.get("server", 0.0))
        others = ", ".join(f"{name} {value:.2f}" for name, value in cpu.items() if name not in ("gateway", "server"))
        ratio = front / direct["cpu_ms_per_call"]["server"] if direct["cpu_ms_per_call"]["server"] else 0.0
        print(
            f"{key:26} {row['calls_per_s']:8.0f} {row['calls_per_s'] / direct['calls_per_s']:5.2f}x "
            f"{row['p50_ms']:7.2f} {row['p99_ms']:7.2f}  {front:.2f} ({ratio:.2f}x){'; ' + others if others else ''}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per session")
    parser.add_argument("--warmup", type=int, default=5, help="calls per session before measuring")
    parser.add_argument("--workers", type=int, default=4, help="client processes the sessions are spread over")
    parser.add_argument("--eras", default="2026-07-28,session")
    parser.add_argument("--lane", choices=("on", "off"), default="on", help="the gateways' HTTP fast lane")
    parser.add_argument(
        "--with-lane-off", action="store_true", help="also the stdio-backed gateway with the fast lane off"
    )
    parser.add_argument(
        "--with-leg-off",
        action="store_true",
        help="also both gateways with their raw backend leg off (MANIFOLD_STDIO_LEG=0, MANIFOLD_HTTP_LEG=0)",
    )
    parser.add_argument(
        "--with-gc-off",
        action="store_true",
        help="also the stdio-backed gateway with the collector as CPython sets it (MANIFOLD_GC_FREEZE=0)",
    )
    parser.add_argument(
        "--with-pipes",
        action="store_true",
        help="also the gateway in front of kitchen_pipes.py: the SDK's stdio server without a worker-thread hop "
        "per line read, write and flush",
    )
    parser.add_argument(
        "--with-floor",
        action="store_true",
        help="also floor_front.py in front of kitchen.py: a front that forwards and does nothing else "
        "(2026-07-28 clients only)",
    )
    parser.add_argument(
        "--backend-protocol",
        choices=("auto", "legacy", "modern"),
        default="auto",
        help="how the HTTP-backed gateways reach kitchen.py (legacy: in a session)",
    )
    parser.add_argument("--only", default="", help="measure only direct_http and these targets (comma-separated keys)")
    parser.add_argument(
        "--with-plain",
        action="store_true",
        help="also kitchen.py and the stdio-backed gateway without uvloop and httptools",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=DIR",
        help="also the stdio-backed gateway with DIR first on its PYTHONPATH (e.g. uvloop and httptools there)",
    )
    parser.add_argument(
        "--variant-server",
        choices=("kitchen", "bare"),
        default="kitchen",
        help="the stdio server behind the --variant gateways (bare: bare_echo.py, next to no CPU per call)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    eras = [era.strip() for era in args.eras.split(",") if era.strip()]
    results: dict[str, Any] = {
        "bench": "http_throughput",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average": os.getloadavg()},
        "versions": {name: package_version(name) for name in ("mcp", "uvicorn", "uvloop", "httptools", "orjson")},
        "git": git_state(),
        "settings": {key: value for key, value in vars(args).items() if key != "output"} | {"output": str(args.output)},
        "eras": {},
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    (args.output.parent / "logs").mkdir(exist_ok=True)
    processes = Processes(args.output.parent / "logs")
    # The processes stop before their folder goes: a gateway still writing in it would fail its removal.
    with tempfile.TemporaryDirectory(prefix="manifold-http-bench-") as tmp:
        try:
            targets = start_targets(
                processes,
                Path(tmp),
                args.lane,
                args.with_lane_off,
                args.variant,
                args.with_plain,
                args.with_leg_off,
                args.backend_protocol,
                args.with_gc_off,
                args.variant_server,
                args.with_pipes,
                args.with_floor,
            )
            if args.only:
                keep = {"direct_http"} | {key.strip() for key in args.only.split(",")}  # the ratios need it
                targets = [target for target in targets if target["key"] in keep]
            for era in eras:
                rows: dict[str, dict[str, Any]] = {}
                for target in targets:
                    if era not in target.get("eras", [era]):
                        continue
                    print(f"  {era}: {target['key']} ...", flush=True)
                    if "backend_under" in target and "backend" not in target["pids"]:
                        # The stdio backend starts with the first call: warm up once, then find it.
                        subprocess.run(
                            [
                                sys.executable,
                                __file__,
                                "--worker",
                                target["url"],
                                target["tool"],
                                "legacy",
                                "1",
                                "0",
                                "1",
                            ],
                            input="go\n",
                            capture_output=True,
                            text=True,
                            check=True,
                        )
                        children = descendants(target["backend_under"])[1:]
                        if children:
                            target["pids"]["backend"] = children[0]
                    rows[target["key"]] = measure(target["url"], target["tool"], ERAS[era], target["pids"], args)
                results["eras"][era] = rows
                print_table(era, rows)
        finally:
            processes.stop_all()
    results["targets"] = {target["key"]: target["description"] for target in targets}
    args.output.write_text(json.dumps(results, indent=2))
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        url, tool, mode, sessions, calls, warmup = sys.argv[2:8]
        asyncio.run(worker(url, tool, mode, int(sessions), int(calls), int(warmup)))
    else:
        main()
