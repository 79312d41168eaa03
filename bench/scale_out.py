"""Several gateway replicas sharing state through Redis, behind HAProxy: throughput and the cost of state_url.

Two measurements, on loopback, with real processes (Debian's redis-server and haproxy must be installed:
`make test` installs them):

throughput
    1, 2 and 3 replicas started from one config (`state_url` set, `rate_limit` and `principal_max_calls` on,
    so every call goes through the shared limits), behind HAProxy (round robin per request). `--clients`
    SDK clients (MCP 2026-07-28, each request on its own) keep `--concurrency` calls of `kitchen_echo` in
    flight in total for `--seconds`; calls/s, and the CPU seconds the replicas (and their kitchen.py
    backends) used per call, read from /proc before and after.
admission
    the shared limits alone: one admission (the Lua script, one round trip) and its release, against the
    in-process buckets, timed in this process (what state_url adds to a call, without HTTP noise); back to
    back, and at a call's pace (one every 20 ms) beside a bare PING at the same pace;
latency
    one gateway, no balancer, one client, sequential calls: limits off and state_url unset; limits on and
    state_url unset (the in-process buckets); limits on and state_url set (one Redis round trip per call).
    The three targets take turns call by call (so a burst of other work on the machine hits all three
    alike); p50 and p99 of each, the added time of the last read two ways (the difference of the p50s, and
    the median and p99 of the paired differences, call i with state_url set minus call i without), and the
    Redis commands the shared gateway sent per call (from Redis's own `INFO commandstats`).

Each section records the machine's load average beside its figures (other people's work shares it).

Run once, niced, on a quiet machine: `nice .venv/bin/python bench/scale_out.py`. Writes
bench/results/scale_out.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.conftest import free_port, manifold_command, server_entry, stop_process, wait_for_port  # noqa: E402
from tests.scale_out import HAPROXY, REDIS, RedisServer, Replica, haproxy_config, wait_healthy  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU of `pid` and its children (stdio backends), from /proc."""
    total = 0.0
    pids = [pid]
    with suppress(OSError):
        pids += [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def write_config(folder: Path, name: str, **settings: Any) -> Path:
    data = {"mcpServers": {"kitchen": server_entry("kitchen.py")}, "manifold": {"http": True, **settings}}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


@contextmanager
def gateways(folder: Path, config: Path, count: int, *, balanced: bool) -> Iterator[tuple[str, list[Replica]]]:
    """`count` replicas of `config` (and HAProxy in front when `balanced`); the URL clients use."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        members = []
        for index in range(count):
            port = free_port()
            data_dir = folder / f"{config.stem}-{index}"
            env = {**os.environ, "MANIFOLD_REPLICA_ID": f"r{index}", "MANIFOLD_DATA_DIR": str(data_dir)}
            log = folder / f"{config.stem}-{index}.log"
            with log.open("wb") as stderr:
                process = subprocess.Popen(
                    manifold_command(config, "--http", "--port", str(port)),
                    env=env,
                    stderr=stderr,
                    start_new_session=True,
                )
            started.append(process)
            members.append(Replica(f"r{index}", port, data_dir, process, log))
        for member in members:
            wait_for_port(member.port, member.process, timeout=120)
            wait_healthy(f"http://127.0.0.1:{member.port}/healthz", timeout=120)
        if not balanced:
            yield members[0].url, members
            return
        port = free_port()
        cfg = folder / f"{config.stem}-haproxy.cfg"
        cfg.write_text(haproxy_config(port, members, sticky=False, admin=cfg.with_name("haproxy.sock")))
        assert HAPROXY is not None
        haproxy = subprocess.Popen([HAPROXY, "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL, start_new_session=True)
        started.append(haproxy)
        wait_for_port(port, haproxy)
        wait_healthy(f"http://127.0.0.1:{port}/healthz")
        yield f"http://127.0.0.1:{port}/mcp", members
    finally:
        for process in reversed(started):
            stop_process(process)


async def throughput(url: str, members: list[Replica], args: argparse.Namespace) -> dict[str, Any]:
    calls = 0
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url)) for _ in range(args.clients)]
        for client in clients:  # warm every replica's backend
            for _ in range(2 * len(members)):
                await client.call_tool("kitchen_echo", {"text": "warm"})
        before = sum(cpu_seconds(member.process.pid) for member in members)
        started = time.perf_counter()
        deadline = started + args.seconds

        async def worker(client: Client) -> None:
            nonlocal calls
            while time.perf_counter() < deadline:
                result = await client.call_tool("kitchen_echo", {"text": "x"})
                assert not result.is_error
                calls += 1

        async with anyio.create_task_group() as group:
            for index in range(args.concurrency):
                group.start_soon(worker, clients[index % len(clients)])
        elapsed = time.perf_counter() - started
        used = sum(cpu_seconds(member.process.pid) for member in members) - before
    return {
        "replicas": len(members),
        "calls": calls,
        "seconds": round(elapsed, 2),
        "calls_per_second": round(calls / elapsed, 1),
        "cpu_ms_per_call": round(used / calls * 1000, 3),
    }


async def latency(urls: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in urls}
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(Client(url)) for name, url in urls.items()}
        for client in clients.values():
            for _ in range(args.warmup):
                await client.call_tool("kitchen_echo", {"text": "warm"})
        names = list(urls)
        for number in range(args.calls):
            shift = number % len(names)  # each target goes first as often as the others
            for name in names[shift:] + names[:shift]:
                started = time.perf_counter_ns()
                result = await clients[name].call_tool("kitchen_echo", {"text": "x"})
                samples[name].append((time.perf_counter_ns() - started) / 1e6)
                assert not result.is_error

    rows: dict[str, Any] = {name: cut(values) for name, values in samples.items()}
    base = rows["limits_local"]
    shared = rows["limits_shared"]
    paired = [
        with_state - without
        for with_state, without in zip(samples["limits_shared"], samples["limits_local"], strict=True)
    ]
    rows["added_by_state_url"] = {
        "p50_difference_ms": round(shared["p50_ms"] - base["p50_ms"], 3),
        "p99_difference_ms": round(shared["p99_ms"] - base["p99_ms"], 3),
        "paired_median_ms": round(statistics.median(paired), 3),
        "paired_p99_ms": round(sorted(paired)[int(len(paired) * 0.99) - 1], 3),
    }
    return rows


def cut(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1], 3),
        "calls": len(ordered),
    }


def command_counts(redis: RedisServer) -> dict[str, int]:
    """Redis's count of each command it ran so far (`INFO commandstats`)."""
    counts = {}
    for line in redis.command("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, stats = line.removeprefix("cmdstat_").partition(":")
            counts[name] = int(stats.split(",")[0].removeprefix("calls="))
    return counts


def load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


async def admission(url: str, count: int) -> dict[str, Any]:
    """What the shared limits add to a call by themselves: one admission (the Lua script's round trip) and its
    release, against the in-process buckets, timed in this process without HTTP or MCP around them."""
    from mcp_manifold._core.limits import PrincipalLimits
    from mcp_manifold._runtime.shared_state.limits import SharedLimits
    from mcp_manifold._runtime.shared_state.store import StateStore

    store = StateStore(url, "bench")
    local = PrincipalLimits(1_000_000, 1_000_000, 10_000)
    shared = SharedLimits(store, PrincipalLimits(1_000_000, 1_000_000, 10_000), lease=60)
    timings: dict[str, list[float]] = {"local": [], "shared": []}
    try:
        async with anyio.create_task_group() as group:
            await group.start(shared.run)
            for _ in range(count):
                started = time.perf_counter_ns()
                local.acquire("bench")
                local.release("bench")
                timings["local"].append((time.perf_counter_ns() - started) / 1e6)
                started = time.perf_counter_ns()
                await shared.acquire("bench")
                shared.release("bench")
                timings["shared"].append((time.perf_counter_ns() - started) / 1e6)
            # At a call's pace (one every 20 ms) Redis sleeps between admissions, and on a loaded machine
            # waking it costs a scheduling delay: the same for an admission and for a bare PING.
            timings["shared_paced"], timings["ping_paced"] = [], []
            for _ in range(200):
                await anyio.sleep(0.02)
                started = time.perf_counter_ns()
                await shared.acquire("bench")
                shared.release("bench")
                timings["shared_paced"].append((time.perf_counter_ns() - started) / 1e6)
                await anyio.sleep(0.02)
                started = time.perf_counter_ns()
                await store.client.ping()
                timings["ping_paced"].append((time.perf_counter_ns() - started) / 1e6)
            group.cancel_scope.cancel()
    finally:
        await store.close()
    return {
        name: {
            "p50_ms": round(statistics.median(values), 4),
            "p99_ms": round(sorted(values)[int(len(values) * 0.99) - 1], 4),
        }
        for name, values in timings.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per throughput run")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight in total")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per latency target")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--no-throughput", action="store_true")
    args = parser.parse_args()
    if REDIS is None or HAPROXY is None:
        sys.exit("needs Debian's redis-server and haproxy (make test installs them)")
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]}}
    folder = Path(tempfile.mkdtemp(prefix="manifold-scale-"))
    redis = RedisServer(folder)
    redis.start()
    try:
        limits = {"rate_limit": 1_000_000, "rate_burst": 1_000_000, "principal_max_calls": 10_000}
        shared = write_config(folder, "shared", state_url=redis.url, **limits)
        before = load()
        results["admission"] = {
            **anyio.run(admission, redis.url, args.calls),
            "load_before": before,
            "load_after": load(),
        }
        print(json.dumps(results["admission"]), flush=True)
        if not args.no_throughput:
            rows = []
            for count in (1, 2, 3):
                with gateways(folder, shared, count, balanced=True) as (url, members):
                    before = load()
                    rows.append(
                        {**anyio.run(throughput, url, members, args), "load_before": before, "load_after": load()}
                    )
                print(rows[-1], flush=True)
            results["throughput"] = rows
        plain = write_config(folder, "plain")
        local = write_config(folder, "local", **limits)
        with (
            gateways(folder, plain, 1, balanced=False) as (plain_url, _),
            gateways(folder, local, 1, balanced=False) as (local_url, _),
            gateways(folder, shared, 1, balanced=False) as (shared_url, _),
        ):
            urls = {"no_limits": plain_url, "limits_local": local_url, "limits_shared": shared_url}
            load_before, commands_before = load(), command_counts(redis)
            results["latency"] = anyio.run(latency, urls, args)
            sent = {
                name: count - commands_before.get(name, 0)
                for name, count in command_counts(redis).items()
                if count > commands_before.get(name, 0)
            }
            calls = args.calls + args.warmup
            results["latency"]["redis_commands_per_call"] = {name: round(n / calls, 3) for name, n in sent.items()}
            results["latency"]["load"] = {"before": load_before, "after": load()}
        print(json.dumps(results["latency"], indent=2), flush=True)
    finally:
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)
    out = ROOT / "bench" / "results" / "scale_out.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
