"""Per-call latency that mcp-manifold adds to `tools/call`, next to FastMCP's proxy doing the same job.

One run, one client (the SDK's ``mcp.Client``, ``mode="legacy"`` or with ``--mode auto`` the SDK's default,
which speaks MCP 2026-07-28 where the server does; response cache off), one backend tool
(``echo`` of ``tests/servers/kitchen.py``), several ways of reaching it:

stdio (the client launches the first process of the chain and talks to it over stdin/stdout)
    direct_stdio    client -> kitchen.py
    manifold_stdio  client -> ``python -m mcp_manifold serve --config CFG`` -> kitchen.py (tool ``kitchen_echo``)
    fastmcp_stdio   client -> ``bench/_fastmcp_proxy.py`` (FastMCP ``create_proxy``) -> kitchen.py

streamable HTTP (``--no-http`` skips it; one kitchen.py serves HTTP on a local port for all three)
    direct_http     client -> kitchen.py --http
    manifold_http   client -> manifold --http -> kitchen.py over HTTP
    fastmcp_http    client -> FastMCP proxy over HTTP -> kitchen.py over HTTP

a shared gateway (``--secured``): the manifold_http chain with authentication, a profile, ``pinning:
enforce`` and the audit log on, the way a team runs it
    manifold_http_apikey  the client sends an API key; its principal holds a profile (tool globs)
    manifold_http_oauth   the client sends a JWT access token (RS256, keys from a JWKS file made here)

Each leg of a chain uses the same transport, so "added" (a chain's figure minus the direct one of its
transport) is what putting the gateway in the path costs. Every backend runs on the project's Python;
only the FastMCP proxy runs on ``bench/.venv-fastmcp`` (FastMCP must not go into the project's venv).
When that venv has no ``fastmcp``, the FastMCP rows are skipped and the reason is printed and stored.

Method: every target is connected and warmed up (``--warmup`` calls each), then ``--calls`` calls per
target are made in ``--rounds`` rounds; in each round every target gets ``calls / rounds`` calls in a
row, and the order of the targets rotates from round to round, so slow drift of the machine (other
load, CPU frequency) hits every target alike. Calls are sequential (one in flight); each call is timed
with ``time.perf_counter_ns`` around ``await client.call_tool(...)`` and its result is checked.

Run: ``.venv/bin/python bench/overhead.py`` (``make bench`` also sets up the FastMCP venv).
Writes ``bench/results/overhead.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
KITCHEN = ROOT / "tests" / "servers" / "kitchen.py"
PROXY_SCRIPT = BENCH / "_fastmcp_proxy.py"
DEFAULT_FASTMCP_VENV = BENCH / ".venv-fastmcp"
DEFAULT_OUTPUT = BENCH / "results" / "overhead.json"
PAYLOAD = "the quick brown fox jumps over the lazy dog"
TARGET_RATIO = 0.5  # manifold's added p50 must stay below this share of FastMCP's


@dataclass
class Target:
    """One way of reaching the echo tool."""

    key: str
    description: str
    tool: str
    connect: Callable[[AsyncExitStack], Awaitable[Client]]
    baseline: str | None = None  # the direct target of the same transport
    client: Client | None = None
    front_pid: int | None = None  # the process the client talks to (the server, or the proxy in a chain)
    samples: list[int] = field(default_factory=list)  # nanoseconds
    round_p50s: list[float] = field(default_factory=list)  # milliseconds
    front_cpu: float = 0.0  # seconds of CPU the front process used during the measured calls


# --- processes and connections ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode} before listening on port {port}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout:g}s")


class Processes:
    """Background HTTP servers this bench starts, each in its own process group; all stopped at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, command: list[str], port: int) -> int:
        log = (self.log_dir / f"{name}.log").open("wb")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.started.append(process)
        wait_for_port(port, process)
        return process.pid

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for process in self.started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


def stdio_target(command: list[str], errlog: TextIO, mode: str) -> Callable[[AsyncExitStack], Awaitable[Client]]:
    """Launch `command` and connect to it over stdio; its stderr goes to `errlog`, not the console."""

    async def connect(stack: AsyncExitStack) -> Client:
        params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
        client = Client(stdio_client(params, errlog=errlog), mode=mode, cache=None)
        return await stack.enter_async_context(client)

    return connect


def http_target(url: str, mode: str, token: str | None = None) -> Callable[[AsyncExitStack], Awaitable[Client]]:
    async def connect(stack: AsyncExitStack) -> Client:
        if token is None:
            return await stack.enter_async_context(Client(url, mode=mode, cache=None))
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = await stack.enter_async_context(create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}))
        transport = streamable_http_client(url, http_client=http)
        return await stack.enter_async_context(Client(transport, mode=mode, cache=None))

    return connect


def write_secured_config(path: Path, kitchen: dict[str, Any], work: Path, url: str) -> tuple[Path, str, str]:
    """A shared gateway's config (an API key, an OAuth issuer, a profile, pinning: enforce, the audit log);
    returns it with the API key and an access token for the client."""
    import hashlib

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks = work / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "bench", "alg": "RS256", "use": "sig"}]}))
    issuer = "http://127.0.0.1/bench-issuer"
    now = int(time.time())
    claims = {"iss": issuer, "aud": url, "sub": "bench-oauth", "iat": now, "exp": now + 24 * 3600}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench"})
    api_key = "bench-api-key-0123456789abcdef"
    config = {
        "mcpServers": {"kitchen": kitchen},
        "manifold": {"data_dir": str(work / "data-secured"), "pinning": "enforce", "audit": True},
        "auth": {
            "api_keys": {"bench-key": {"sha256": hashlib.sha256(api_key.encode()).hexdigest()}},
            "oauth": {"issuer": issuer, "jwks_file": str(jwks), "resource_url": url},
        },
        # The key's principal is `bench-key`, the token's `oauth:bench-oauth` (token principals are namespaced).
        "profiles": {
            "bench": {
                "principals": ["bench-*", "oauth:bench-*"],
                "servers": ["kitchen"],
                "tools": ["kitchen_*", "!*crash"],
            }
        },
    }
    path.write_text(json.dumps(config))
    return path, api_key, token


def write_manifold_config(path: Path, kitchen: dict[str, Any], data_dir: Path) -> Path:
    path.write_text(json.dumps({"mcpServers": {"kitchen": kitchen}, "manifold": {"data_dir": str(data_dir)}}))
    return path


def manifold_command(config: Path, *extra: str, python: str = sys.executable) -> list[str]:
    return [python, "-m", "mcp_manifold", "serve", "--config", str(config), *extra]


def fastmcp_status(python: Path) -> tuple[str | None, str | None]:
    """(fastmcp version, None) when `python` can run the proxy, else (None, why not)."""
    if not python.exists():
        return None, f"{python} does not exist (run `make bench`, which creates the FastMCP venv)"
    probe = subprocess.run(
        [str(python), "-c", "import fastmcp; print(fastmcp.__version__)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return None, f"`import fastmcp` fails with {python}: {lines[-1] if lines else 'no output'}"
    return probe.stdout.strip(), None


def build_targets(
    args: argparse.Namespace, work: Path, processes: Processes, errlog: TextIO, fastmcp_python: Path | None
) -> list[Target]:
    kitchen_cmd = [sys.executable, str(KITCHEN)]
    kitchen_stdio = {"command": kitchen_cmd[0], "args": kitchen_cmd[1:]}

    def stdio_chain(key: str, description: str, tool: str, command: list[str]) -> Target:
        """A chain launched over stdio, compared with the direct stdio call."""
        return Target(key, description, tool, stdio_target(command, errlog, args.mode), baseline="direct_stdio")

    # Each gateway with a data dir of its own: two must not share listing caches, state files or audit logs.
    stdio_config = write_manifold_config(work / "stdio.json", kitchen_stdio, work / "data-stdio")
    targets = [
        Target("direct_stdio", "client -> kitchen.py (stdio)", "echo", stdio_target(kitchen_cmd, errlog, args.mode)),
        stdio_chain(
            "manifold_stdio",
            "client -> manifold -> kitchen.py (stdio, stdio)",
            "kitchen_echo",
            manifold_command(stdio_config),
        ),
    ]
    if args.pinned_legacy:
        pinned = {**kitchen_stdio, "protocol": "legacy"}
        pinned_config = write_manifold_config(work / "stdio-legacy.json", pinned, work / "data-stdio-legacy")
        targets.append(
            stdio_chain(
                "manifold_stdio_legacy",
                "client -> manifold -> kitchen.py pinned to `protocol: legacy` (stdio, stdio)",
                "kitchen_echo",
                manifold_command(pinned_config),
            )
        )
    if args.against is not None:
        reference_config = write_manifold_config(work / "stdio-reference.json", kitchen_stdio, work / "data-reference")
        targets.append(
            stdio_chain(
                "reference_stdio",
                f"client -> manifold run by {args.against} -> kitchen.py (stdio, stdio)",
                "kitchen_echo",
                manifold_command(reference_config, python=str(args.against)),
            )
        )
    if fastmcp_python is not None:
        targets.append(
            stdio_chain(
                "fastmcp_stdio",
                "client -> FastMCP proxy -> kitchen.py (stdio, stdio)",
                "echo",
                [str(fastmcp_python), str(PROXY_SCRIPT), "--", *kitchen_cmd],
            )
        )
    if args.no_http:
        return targets

    kitchen_port = free_port()
    kitchen_pid = processes.start("kitchen-http", [*kitchen_cmd, "--http", str(kitchen_port)], kitchen_port)
    kitchen_url = f"http://127.0.0.1:{kitchen_port}/mcp"
    direct = Target("direct_http", "client -> kitchen.py (HTTP)", "echo", http_target(kitchen_url, args.mode))
    direct.front_pid = kitchen_pid
    targets.append(direct)

    http_config = write_manifold_config(work / "http.json", {"url": kitchen_url}, work / "data-http")
    manifold_port = free_port()
    manifold_pid = processes.start(
        "manifold-http", manifold_command(http_config, "--http", "--port", str(manifold_port)), manifold_port
    )
    targets.append(
        Target(
            "manifold_http",
            "client -> manifold -> kitchen.py (HTTP, HTTP)",
            "kitchen_echo",
            http_target(f"http://127.0.0.1:{manifold_port}/mcp", args.mode),
            baseline="direct_http",
            front_pid=manifold_pid,
        )
    )
    if args.secured:
        secured_port = free_port()
        secured_url = f"http://127.0.0.1:{secured_port}/mcp"
        secured_config, api_key, token = write_secured_config(
            work / "secured.json", {"url": kitchen_url}, work, secured_url
        )
        secured_pid = processes.start(
            "manifold-secured", manifold_command(secured_config, "--http", "--port", str(secured_port)), secured_port
        )
        for key, credential, what in (("apikey", api_key, "an API key"), ("oauth", token, "a JWT")):
            targets.append(
                Target(
                    f"manifold_http_{key}",
                    f"client with {what} -> manifold (auth, profile, pinning, audit) -> kitchen.py (HTTP, HTTP)",
                    "kitchen_echo",
                    http_target(secured_url, args.mode, credential),
                    baseline="direct_http",
                    front_pid=secured_pid,
                )
            )
    if args.against is not None:
        reference_port = free_port()
        reference_http = write_manifold_config(work / "http-ref.json", {"url": kitchen_url}, work / "data-ref-http")
        reference_pid = processes.start(
            "reference-http",
            manifold_command(reference_http, "--http", "--port", str(reference_port), python=str(args.against)),
            reference_port,
        )
        targets.append(
            Target(
                "reference_http",
                f"client -> manifold run by {args.against} -> kitchen.py (HTTP, HTTP)",
                "kitchen_echo",
                http_target(f"http://127.0.0.1:{reference_port}/mcp", args.mode),
                baseline="direct_http",
                front_pid=reference_pid,
            )
        )
    if fastmcp_python is not None:
        proxy_port = free_port()
        proxy_pid = processes.start(
            "fastmcp-http",
            [str(fastmcp_python), str(PROXY_SCRIPT), "--http", str(proxy_port), "--url", kitchen_url],
            proxy_port,
        )
        targets.append(
            Target(
                "fastmcp_http",
                "client -> FastMCP proxy -> kitchen.py (HTTP, HTTP)",
                "echo",
                http_target(f"http://127.0.0.1:{proxy_port}/mcp", args.mode),
                baseline="direct_http",
                front_pid=proxy_pid,
            )
        )
    return targets


# --- measuring --------------------------------------------------------------------------------


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of one process (all its threads), from /proc; 0 where that is unavailable."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids() -> set[int]:
    """This process's direct children (Linux /proc); empty elsewhere."""
    try:
        text = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text()
    except OSError:
        return set()
    return {int(pid) for pid in text.split()}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


async def timed_calls(target: Target, count: int) -> list[int]:
    """`count` sequential calls; their durations in nanoseconds. Every result is checked after its timing."""
    client = target.client
    assert client is not None
    arguments = {"text": PAYLOAD}
    durations: list[int] = []
    for _ in range(count):
        start = time.perf_counter_ns()
        result = await client.call_tool(target.tool, arguments)
        durations.append(time.perf_counter_ns() - start)
        if result.is_error or text_of(result) != PAYLOAD:
            raise RuntimeError(f"{target.key}: unexpected result {result!r}")
    return durations


def split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if index < extra else 0) for index in range(parts)]


async def measure(targets: list[Target], calls: int, warmup: int, rounds: int) -> None:
    async with AsyncExitStack() as stack:
        for target in targets:
            started = time.perf_counter()
            before = child_pids()
            target.client = await target.connect(stack)
            spawned = child_pids() - before
            if target.front_pid is None and len(spawned) == 1:  # a stdio target: the process the client launched
                target.front_pid = spawned.pop()
            # The SDK client lists tools before the first call of a tool it has not seen listed; do it here.
            await target.client.list_tools()
            print(f"  connected {target.key} in {time.perf_counter() - started:.2f}s", flush=True)
        for target in targets:
            await timed_calls(target, warmup)
        print(f"  warmed up ({warmup} calls each); measuring {calls} calls each in {rounds} rounds", flush=True)
        for index, chunk in enumerate(split(calls, rounds)):
            order = targets[index % len(targets) :] + targets[: index % len(targets)]
            for target in order:
                gc.collect()
                cpu_before = cpu_seconds(target.front_pid)
                durations = await timed_calls(target, chunk)
                target.front_cpu += cpu_seconds(target.front_pid) - cpu_before
                target.samples.extend(durations)
                target.round_p50s.append(statistics.median(durations) / 1e6)


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an ascending list, q in [0, 100]."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    position = (len(sorted_values) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(samples_ns: list[int]) -> dict[str, float]:
    values = sorted(value / 1e6 for value in samples_ns)
    return {
        "n": len(values),
        "p50_ms": percentile(values, 50),
        "p90_ms": percentile(values, 90),
        "p99_ms": percentile(values, 99),
        "mean_ms": statistics.fmean(values),
        "stdev_ms": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min_ms": values[0],
        "max_ms": values[-1],
    }


# --- reporting --------------------------------------------------------------------------------


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None, "dirty_src": bool(git("status", "--porcelain", "--", "src"))}


def report(targets: list[Target], args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, Any]:
    by_key = {target.key: target for target in targets}
    stats: dict[str, dict[str, Any]] = {}
    for target in targets:
        stats[target.key] = summarize(target.samples)
        measured = target.front_pid is not None and target.front_cpu > 0
        stats[target.key]["front_cpu_ms_per_call"] = 1000 * target.front_cpu / len(target.samples) if measured else None
    added: dict[str, dict[str, Any]] = {}
    for target in targets:
        if target.baseline is None:
            continue
        base, mine = stats[target.baseline], stats[target.key]
        base_rounds = by_key[target.baseline].round_p50s
        per_round = [mine_p50 - base_p50 for mine_p50, base_p50 in zip(target.round_p50s, base_rounds, strict=True)]
        added[target.key] = {
            "baseline": target.baseline,
            "p50_ms": mine["p50_ms"] - base["p50_ms"],
            "p99_ms": mine["p99_ms"] - base["p99_ms"],
            "mean_ms": mine["mean_ms"] - base["mean_ms"],
            "per_round_p50_ms": {"min": min(per_round), "median": statistics.median(per_round), "max": max(per_round)},
        }

    checks: dict[str, Any] = {}
    for transport in ("stdio", "http"):
        manifold, fastmcp = added.get(f"manifold_{transport}"), added.get(f"fastmcp_{transport}")
        if manifold is None:
            continue
        if fastmcp is None:
            checks[transport] = {"ok": None, "why": "no FastMCP figure to compare with"}
            continue
        limit = TARGET_RATIO * fastmcp["p50_ms"]
        checks[transport] = {
            "manifold_added_p50_ms": manifold["p50_ms"],
            "fastmcp_added_p50_ms": fastmcp["p50_ms"],
            "limit_ms": limit,
            "ratio": manifold["p50_ms"] / fastmcp["p50_ms"] if fastmcp["p50_ms"] > 0 else None,
            "ok": manifold["p50_ms"] < limit,
        }

    columns = ("p50 ms", "p90 ms", "p99 ms", "mean ms")
    header = (
        f"{'target':<16} "
        + " ".join(f"{name:>8}" for name in columns)
        + f" {'added p50':>10} {'added mean':>11} {'front CPU/call':>15}"
    )
    print()
    print(header)
    print("-" * len(header))
    for target in targets:
        row = stats[target.key]
        extra = added.get(target.key)
        added_p50 = f"{extra['p50_ms']:+10.3f}" if extra else f"{'':>10}"
        added_mean = f"{extra['mean_ms']:+11.3f}" if extra else f"{'':>11}"
        cpu = row["front_cpu_ms_per_call"]
        cpu_text = f"{cpu:12.3f} ms" if cpu is not None else f"{'n/a':>15}"
        print(
            f"{target.key:<16} {row['p50_ms']:8.3f} {row['p90_ms']:8.3f} {row['p99_ms']:8.3f} {row['mean_ms']:8.3f} "
            f"{added_p50} {added_mean} {cpu_text}"
        )
    print()
    for transport, check in checks.items():
        if check["ok"] is None:
            print(f"target ({transport}): not checked, {check['why']}")
            continue
        verdict = "MET" if check["ok"] else "MISSED"
        print(
            f"target ({transport}): manifold adds {check['manifold_added_p50_ms']:.3f} ms at p50, FastMCP "
            f"{check['fastmcp_added_p50_ms']:.3f} ms; limit {check['limit_ms']:.3f} ms "
            f"({TARGET_RATIO:g} x FastMCP) -> {verdict}"
        )
    if meta.get("fastmcp_missing"):
        print(f"FastMCP rows skipped: {meta['fastmcp_missing']}")

    return {
        "benchmark": "tools/call overhead",
        "method": {
            "tool": "echo of tests/servers/kitchen.py",
            "payload_chars": len(PAYLOAD),
            "calls_per_target": args.calls,
            "warmup_calls_per_target": args.warmup,
            "rounds": args.rounds,
            "client": f"mcp.Client(mode={args.mode!r}, cache=None), one call in flight",
            "added": "p50/p99/mean of the chain minus that of the direct target of the same transport",
            "front_cpu_ms_per_call": "user+system CPU of the process the client talks to, per measured call "
            "(/proc, clock-tick resolution)",
            "target": f"manifold added p50 < {TARGET_RATIO:g} x FastMCP added p50",
        },
        "meta": meta,
        "targets": {
            target.key: {"description": target.description, "tool": target.tool, **stats[target.key]}
            for target in targets
        },
        "added": added,
        "target_check": checks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="measured calls per target (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured calls per target first (default 50)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds the calls are spread over (default 10)")
    parser.add_argument(
        "--mode",
        choices=("legacy", "auto"),
        default="legacy",
        help="the client's mode: legacy (a session, MCP 2025-11-25) or auto (the SDK's default, 2026-07-28)",
    )
    parser.add_argument("--no-http", action="store_true", help="skip the streamable-HTTP targets")
    parser.add_argument(
        "--pinned-legacy",
        action="store_true",
        help="also measure the stdio chain with the backend pinned to `protocol: legacy` (the handshake)",
    )
    parser.add_argument("--no-fastmcp", action="store_true", help="skip the FastMCP proxy targets")
    parser.add_argument(
        "--secured",
        action="store_true",
        help="also measure a shared gateway over HTTP: API key / OAuth token, a profile, pinning and audit on",
    )
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        help="also measure the gateway run by this Python (another checkout's venv): before/after in one run",
    )
    parser.add_argument(
        "--fastmcp-venv",
        type=Path,
        default=DEFAULT_FASTMCP_VENV,
        help=f"virtualenv with fastmcp installed (default {DEFAULT_FASTMCP_VENV.relative_to(ROOT)})",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where the JSON goes")
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1 or args.warmup < 0 or args.rounds > args.calls:
        parser.error("need --calls >= --rounds >= 1 and --warmup >= 0")

    fastmcp_version: str | None = None
    fastmcp_missing: str | None = "--no-fastmcp given" if args.no_fastmcp else None
    fastmcp_python: Path | None = None
    if not args.no_fastmcp:
        candidate = args.fastmcp_venv / "bin" / "python"
        fastmcp_version, fastmcp_missing = fastmcp_status(candidate)
        if fastmcp_version is not None:
            fastmcp_python = candidate
    if fastmcp_missing:
        print(f"FastMCP proxy not measured: {fastmcp_missing}", flush=True)

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mcp": package_version("mcp"),
        "mcp_manifold": package_version("mcp-manifold"),
        "fastmcp": fastmcp_version,
        "fastmcp_missing": fastmcp_missing,
        "git": git_state(),
        "loadavg_before": os.getloadavg(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    log_dir = args.output.parent / "logs"
    log_dir.mkdir(exist_ok=True)

    processes = Processes(log_dir)
    with (
        tempfile.TemporaryDirectory(prefix="manifold-bench-") as tmp,
        (log_dir / "overhead-stdio.log").open("w") as log,
    ):
        try:
            targets = build_targets(args, Path(tmp), processes, log, fastmcp_python)
            print(f"targets: {', '.join(target.key for target in targets)}", flush=True)
            anyio.run(measure, targets, args.calls, args.warmup, args.rounds)
        finally:
            processes.stop_all()
    meta["loadavg_after"] = os.getloadavg()
    result = report(targets, args, meta)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output}")


if __name__ == "__main__":
    main()
