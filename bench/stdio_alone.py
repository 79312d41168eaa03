"""What a stdio MCP server costs per `tools/call` by itself: driven over its pipes by a client that costs
next to nothing, `--window` requests in flight (as the HTTP gateway keeps 32 sessions' calls in flight on
one server), in both eras.

`http_throughput.py` puts a gateway in front of the SDK's stdio server (kitchen.py) and compares it with
the SDK's HTTP server serving the clients itself. On two shared cores the chain's calls/s can reach the
direct server's only if the gateway and the stdio server together cost no more CPU per call than the
HTTP server alone. This measures the stdio server's part of that sum, for:

- ``kitchen``: tests/servers/kitchen.py as it is (mcp 2.3's stdio transport: a worker-thread hop for every
  line read, every write and every flush);
- ``kitchen_pipes``: the same server with its stdio transport reading and writing on the event loop
  (bench/kitchen_pipes.py);
- ``bare``: bench/bare_echo.py (``--modern``: both eras), the server of a few lines without the SDK.

The era is the request's: 2026-07-28 (`server/discover`, then each call with the `_meta` envelope, as the
gateway sends it) or the session era (the `initialize` handshake, then plain calls). Best of `--rounds`
rounds of `--calls` calls, each against a fresh server; CPU from /proc (Linux).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import KITCHEN, PAYLOAD, cpu_seconds, git_state, package_version

BENCH = Path(__file__).resolve().parent
DEFAULT_OUTPUT = BENCH / "results" / "stdio_alone.json"
SERVERS = {  # each server's script and arguments
    "kitchen": [str(KITCHEN)],
    "kitchen_pipes": [str(BENCH / "kitchen_pipes.py")],
    "bare": [str(BENCH / "bare_echo.py"), "--modern"],  # --modern: it speaks both eras
}
ENVELOPE = {  # what the gateway's session stamps on each 2026-07-28 request
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp-manifold", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
SESSION_VERSION = "2025-11-25"


class Pipe:
    """One server process and the requests written to it, one JSON line each."""

    def __init__(self, command: list[str]) -> None:
        self.name = Path(command[0]).name
        self.process = subprocess.Popen(
            [sys.executable, *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self.stdout = self.process.stdout

    def send(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def answer(self) -> dict[str, Any]:
        line = self.stdout.readline()
        if not line:
            raise RuntimeError(f"the server stopped (exit {self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self._stdin.close()
        self.process.wait(timeout=30)


def opened(command: list[str], era: str) -> Pipe:
    pipe = Pipe(command)
    if era == "2026-07-28":
        pipe.send({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": ENVELOPE}})
    else:
        params = {"protocolVersion": SESSION_VERSION, "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
        pipe.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    if "error" in (first := pipe.answer()):
        raise RuntimeError(f"{pipe.name} refused the {era} opening: {first['error']}")
    if era != "2026-07-28":
        pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return pipe


def call(pipe: Pipe, number: int, era: str) -> None:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": PAYLOAD}}
    if era == "2026-07-28":
        params["_meta"] = ENVELOPE
    pipe.send({"jsonrpc": "2.0", "id": f"b-{number}", "method": "tools/call", "params": params})


def checked(answer: dict[str, Any]) -> None:
    content = (answer.get("result") or {}).get("content") or [{}]
    if content[0].get("text") != PAYLOAD:
        raise RuntimeError(f"unexpected answer {answer!r}")


def one_round(command: list[str], era: str, calls: int, window: int) -> dict[str, float]:
    pipe = opened(command, era)
    try:
        for number in range(200):  # warm: the tool's models, the validators
            call(pipe, number, era)
            checked(pipe.answer())
        pid = pipe.process.pid
        cpu_before, started = cpu_seconds(pid), time.perf_counter()
        sent = 0
        for _ in range(min(window, calls)):
            call(pipe, sent, era)
            sent += 1
        for _ in range(calls):
            checked(pipe.answer())
            if sent < calls:
                call(pipe, sent, era)
                sent += 1
        wall, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu_before
    finally:
        pipe.close()
    return {"cpu_ms_per_call": cpu * 1000 / calls, "calls_per_s": calls / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated, of: {', '.join(SERVERS)}")
    parser.add_argument("--eras", default="2026-07-28,session")
    parser.add_argument("--calls", type=int, default=4_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=32, help="requests in flight")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    names = [name.strip() for name in args.servers.split(",") if name.strip()]
    if unknown := [name for name in names if name not in SERVERS]:
        parser.error(f"unknown server(s): {', '.join(unknown)} (known: {', '.join(SERVERS)})")
    eras = [era.strip() for era in args.eras.split(",") if era.strip()]
    if unknown := [era for era in eras if era not in ("2026-07-28", "session")]:
        parser.error(f"unknown era(s): {', '.join(unknown)} (known: 2026-07-28, session)")
    results: dict[str, Any] = {
        "bench": "stdio_alone",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": {"mcp": package_version("mcp")},
        "git": git_state(),
        "settings": {"calls": args.calls, "rounds": args.rounds, "window": args.window},
        "servers": {},
    }
    print(f"{'server':14} {'era':11} {'CPU ms/call':>11} {'calls/s':>8}  (best of {args.rounds} by CPU)")
    for name in names:
        for era in eras:
            rounds = [one_round(SERVERS[name], era, args.calls, args.window) for _ in range(args.rounds)]
            best = min(rounds, key=lambda row: row["cpu_ms_per_call"])
            results["servers"].setdefault(name, {})[era] = {"best": best, "rounds": rounds}
            print(f"{name:14} {era:11} {best['cpu_ms_per_call']:11.3f} {best['calls_per_s']:8.0f}", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
