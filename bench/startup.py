"""How long from launching the gateway to its first `tools/list` answer.

Configurations (each one the gateway run as a desktop client runs it: a subprocess on stdio):

    gateway_0_servers   ``python -m mcp_manifold serve`` with an empty ``mcpServers``
    lazy_10_servers_cold  10 copies of ``tests/servers/numbers.py`` (keys ``numbers01`` .. ``numbers10``),
                        the default ``lazy: true``, with an empty data dir before every launch: the first
                        ``tools/list`` waits for all ten servers to start and list
    lazy_10_servers     the same, launched again with the data dir of the previous launch: ``serve``
                        answers from the listings cached by the last run and starts the servers behind it
    eager_10_servers    the same 10 with ``"manifold": {"lazy": false}``: started when the gateway starts,
                        behind the cached listings (``initialize`` never waits for them)
    eager_3_servers     3 copies, eager, launched again with the data dir of the previous launch
    numbers_direct      for reference, one ``numbers.py`` on its own (no gateway)

For every run the clock starts just before the SDK client (``mcp.Client``, ``mode="legacy"``, response cache
off) launches the process, and two times are taken: when ``initialize`` has been answered (the handshake is
done) and when the first ``tools/list`` has been answered (with the expected number of tools: 3 per numbers
server). Process start-up, imports and config loading are inside both. One unmeasured warm-up round comes
first (file cache, bytecode); then ``--runs`` rounds (default 5), each launching every configuration once in
an order that rotates between rounds. The medians are reported, with min and max.

Run: ``.venv/bin/python bench/startup.py``. Writes ``bench/results/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = ROOT / "tests" / "servers" / "numbers.py"
DEFAULT_OUTPUT = ROOT / "bench" / "results" / "startup.json"
SERVERS = 10
TOOLS_PER_SERVER = 3  # numbers.py: add, multiply, sqrt


@dataclass
class Setup:
    key: str
    description: str
    command: list[str]
    expected_tools: int
    wipe: Path | None = None  # a data dir removed before every launch (no cached listings: a cold start)
    initialize_s: list[float] = field(default_factory=list)
    first_list_s: list[float] = field(default_factory=list)


def write_config(path: Path, servers: int, data_dir: Path, *, lazy: bool | None = None) -> Path:
    entries = {
        f"numbers{index:02d}": {"command": sys.executable, "args": [str(NUMBERS)]} for index in range(1, servers + 1)
    }
    settings: dict[str, Any] = {"data_dir": str(data_dir)}
    if lazy is not None:
        settings["lazy"] = lazy
    path.write_text(json.dumps({"mcpServers": entries, "manifold": settings}, indent=2))
    return path


def gateway(config: Path) -> list[str]:
    return [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]


def setups(work: Path) -> list[Setup]:
    return [
        Setup("gateway_0_servers", "gateway, no servers", gateway(write_config(work / "zero.json", 0, work / "d0")), 0),
        Setup(
            "lazy_10_servers_cold",
            f"gateway, {SERVERS} stdio servers, lazy (default), first run (no cached listings)",
            gateway(write_config(work / "cold.json", SERVERS, work / "d3")),
            SERVERS * TOOLS_PER_SERVER,
            wipe=work / "d3",
        ),
        Setup(
            "lazy_10_servers",
            f"gateway, {SERVERS} stdio servers, lazy (default), later runs (listings cached by the last run)",
            gateway(write_config(work / "lazy.json", SERVERS, work / "d1")),
            SERVERS * TOOLS_PER_SERVER,
        ),
        Setup(
            "eager_10_servers",
            f"gateway, {SERVERS} stdio servers, eager (lazy: false)",
            gateway(write_config(work / "eager.json", SERVERS, work / "d2", lazy=False)),
            SERVERS * TOOLS_PER_SERVER,
        ),
        Setup(
            "eager_3_servers",
            "gateway, 3 stdio servers, eager (lazy: false), later runs (listings cached by the last run)",
            gateway(write_config(work / "eager3.json", 3, work / "d4", lazy=False)),
            3 * TOOLS_PER_SERVER,
        ),
        Setup("numbers_direct", "numbers.py alone, no gateway", [sys.executable, str(NUMBERS)], TOOLS_PER_SERVER),
    ]


async def launch_once(setup: Setup, errlog: TextIO) -> tuple[float, float]:
    """(seconds to the initialize answer, seconds to the first tools/list answer) for one fresh launch."""
    if setup.wipe is not None:
        shutil.rmtree(setup.wipe, ignore_errors=True)
    params = StdioServerParameters(command=setup.command[0], args=setup.command[1:], env=dict(os.environ))
    start = time.perf_counter()
    async with Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None) as client:
        initialized = time.perf_counter() - start
        tools = (await client.list_tools()).tools
        listed = time.perf_counter() - start
    if len(tools) != setup.expected_tools:
        raise RuntimeError(f"{setup.key}: expected {setup.expected_tools} tools, got {len(tools)}")
    return initialized, listed


async def run_all(all_setups: list[Setup], runs: int, errlog: TextIO) -> None:
    for setup in all_setups:
        await launch_once(setup, errlog)
    print(f"  warmed up; measuring {runs} launches of each", flush=True)
    for index in range(runs):
        shift = index % len(all_setups)
        for setup in all_setups[shift:] + all_setups[:shift]:
            initialized, listed = await launch_once(setup, errlog)
            setup.initialize_s.append(initialized)
            setup.first_list_s.append(listed)
        print(f"  round {index + 1}/{runs} done", flush=True)


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "median_ms": 1000 * statistics.median(values),
        "min_ms": 1000 * min(values),
        "max_ms": 1000 * max(values),
        "runs_ms": [round(1000 * value, 1) for value in values],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="measured launches per configuration (default 5)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where the JSON goes")
    parser.add_argument("--only", action="append", default=[], help="measure only this configuration (repeatable)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    args.output.parent.mkdir(parents=True, exist_ok=True)
    (args.output.parent / "logs").mkdir(exist_ok=True)
    load_before = os.getloadavg()
    with (
        tempfile.TemporaryDirectory(prefix="manifold-startup-") as tmp,
        (args.output.parent / "logs" / "startup-stderr.log").open("w") as errlog,
    ):
        all_setups = [setup for setup in setups(Path(tmp)) if not args.only or setup.key in args.only]
        anyio.run(run_all, all_setups, args.runs, errlog)

    header = f"{'configuration':<20} {'initialize (median)':>20} {'first tools/list (median)':>26} {'min-max':>17}"
    print()
    print(header)
    print("-" * len(header))
    for setup in all_setups:
        listed = summary(setup.first_list_s)
        print(
            f"{setup.key:<20} {1000 * statistics.median(setup.initialize_s):17.0f} ms "
            f"{listed['median_ms']:23.0f} ms {listed['min_ms']:7.0f}-{listed['max_ms']:.0f} ms"
        )

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    result = {
        "benchmark": "gateway start-up to first tools/list",
        "method": {
            "runs": args.runs,
            "warmup_rounds": 1,
            "servers": SERVERS,
            "server": "tests/servers/numbers.py (stdio, 3 tools)",
            "clock": "from just before the client launches the process to the initialize / tools/list answer",
            "statistic": "median (min, max and every run also given)",
        },
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "mcp": metadata.version("mcp"),
            "git_commit": commit.stdout.strip() or None,
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
        "configurations": {
            setup.key: {
                "description": setup.description,
                "tools": setup.expected_tools,
                "initialize": summary(setup.initialize_s),
                "first_tools_list": summary(setup.first_list_s),
            }
            for setup in all_setups
        },
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    shown = args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output
    print(f"\nwrote {shown}")


if __name__ == "__main__":
    main()
