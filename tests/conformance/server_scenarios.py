"""The MCP conformance suite's server scenarios, against a server directly and through the gateway.

`python tests/conformance/server_scenarios.py [--json PATH]` starts the fixture
`tests/servers/conformance_everything.mjs` (what the scenarios expect of a server, on the TypeScript SDK
1.32.2, as the suite's reference server is), runs every server scenario (`conformance server --suite
all`) against it, then against a gateway (`manifold serve --http`) that has it as its one backend
(`prefix: ""`, so names and URIs are the server's), and compares the checks. It prints, for each way,
the checks passed and failed, and every check that passed directly but not through the gateway; the
exit status is 1 when there is one. `--json PATH` writes the same as JSON (for tests/test_conformance.py).

Needs the suite with its Node 22 in tests/conformance/node and the SDK in tests/node (`make node`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
NODE_BIN = HERE / "node" / "node_modules" / ".bin"
FIXTURE = TESTS / "servers" / "conformance_everything.mjs"
# Checks of the pending scenarios (`--suite all` runs them) that only say what a server SHOULD do.
NOT_COUNTED = ("INFO", "WARNING")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode} before listening on {port}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout:g}s")


def start(command: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for_port(port, process, timeout=60)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def run_suite(url: str, out: Path) -> dict[str, str]:
    """Every server scenario against `url`: each check's status, keyed `scenario/check`."""
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(NODE_BIN / "conformance"), "server", "--url", url, "--suite", "all", "-o", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    checks: dict[str, str] = {}
    for path in sorted(out.glob("server-*/checks.json")):
        # server-<scenario>-2026-11-26T08-05-43-585Z
        scenario = path.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        for check in json.loads(path.read_text()):
            if check["status"] not in NOT_COUNTED:
                checks[f"{scenario}/{check['id']}"] = check["status"]
    if not checks:
        raise RuntimeError(f"the suite reported nothing (exit {done.returncode}): {done.stdout[-2000:]}{done.stderr}")
    return checks


def counts(checks: dict[str, str]) -> dict[str, int]:
    passed = sum(status == "SUCCESS" for status in checks.values())
    return {"passed": passed, "failed": len(checks) - passed}


def compare(work: Path, python: str) -> dict[str, Any]:
    server_port, gateway_port = free_port(), free_port()
    node = str(NODE_BIN / "node")
    server = start([node, str(FIXTURE), "--port", str(server_port)], server_port, work / "server.log")
    try:
        direct = run_suite(f"http://127.0.0.1:{server_port}/mcp", work / "direct")
        config = work / "mcp.json"
        entry = {"url": f"http://127.0.0.1:{server_port}/mcp", "prefix": ""}
        settings = {"data_dir": str(work / "data")}
        config.write_text(json.dumps({"mcpServers": {"everything": entry}, "manifold": settings}))
        serve = [python, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(gateway_port)]
        gateway = start(serve, gateway_port, work / "gateway.log")
        try:
            through = run_suite(f"http://127.0.0.1:{gateway_port}/mcp", work / "gateway")
        finally:
            stop(gateway)
    finally:
        stop(server)
    lost = sorted(key for key, status in direct.items() if status == "SUCCESS" and through.get(key) != "SUCCESS")
    return {
        "direct": counts(direct),
        "gateway": counts(through),
        "lost": {key: through.get(key, "missing") for key in lost},
        "gateway_failures": sorted(key for key, status in through.items() if status != "SUCCESS"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the comparison to this file")
    parser.add_argument("--keep", type=Path, help="keep the suite's results and the logs in this directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="conformance-servers-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        report = compare(work, os.environ.get("PYTHON", sys.executable))
    for way in ("direct", "gateway"):
        print(f"server scenarios, {way}: {report[way]['passed']} passed, {report[way]['failed']} failed")
    for key, status in report["lost"].items():
        print(f"  passes directly, not through the gateway: {key} ({status})")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 1 if report["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
