"""What sending a response's head and body in one write saves the HTTP front (`_front/one_write.py`).

uvicorn serves an app that answers every POST with a small JSON body (the size of a plain `tools/call`
answer), once with uvicorn's own httptools protocol (the head and the body written apart: two system
calls per answer) and once with the gateway's (`OneWriteHttpToolsProtocol`: one). `--clients` processes
each send `--requests` requests one after another on a keep-alive connection, over raw sockets so that
the clients cost little. Printed per round, the two alternating: the server's CPU per response (from
/proc, Linux) and the responses per second; then the median of each.

    .venv/bin/python bench/one_write.py --rounds 8
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from multiprocessing import Process
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
DEFAULT_OUTPUT = BENCH / "results" / "one_write.json"
BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello world"}],"isError":false}}'
REQUEST = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
SERVER = """
import sys, uvicorn
from mcp_manifold._front.one_write import OneWriteHttpToolsProtocol
BODY = {body!r}
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await receive()
    await send({{"type": "http.response.start", "status": 200, "headers": HEADERS}})
    await send({{"type": "http.response.body", "body": BODY}})
http = OneWriteHttpToolsProtocol if sys.argv[2] == "one" else "httptools"
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http=http, loop="uvloop", log_level="error", access_log=False)
"""
KINDS = {"two": "uvicorn's protocol: head and body in two writes", "one": "the gateway's: one write"}


def client(port: int, requests: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(requests):
            sock.sendall(REQUEST)
            data = b""
            while not data.endswith(BODY):
                chunk = sock.recv(65536)
                if not chunk:
                    raise SystemExit("the server closed the connection")
                data += chunk


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def measure(kind: str, clients: int, requests: int) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(body=BODY), str(port), kind])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the {kind} server did not start") from None
                time.sleep(0.05)
        client(port, 200)  # warm up
        before, start = cpu_seconds(server.pid), time.perf_counter()
        workers = [Process(target=client, args=(port, requests)) for _ in range(clients)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed, used = time.perf_counter() - start, cpu_seconds(server.pid) - before
    finally:
        server.terminate()
        server.wait()
    total = clients * requests
    return {"cpu_us_per_response": used / total * 1e6, "responses_per_s": total / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=4000, help="per client and round")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for number in range(args.rounds):
        for kind in KINDS:
            row = measure(kind, args.clients, args.requests)
            runs[kind].append(row)
            print(
                f"round {number}: {kind}: {row['cpu_us_per_response']:.1f} us server CPU per response, "
                f"{row['responses_per_s']:.0f} responses/s",
                flush=True,
            )
    summary: dict[str, Any] = {}
    for kind, description in KINDS.items():
        cpu = statistics.median(row["cpu_us_per_response"] for row in runs[kind])
        rate = statistics.median(row["responses_per_s"] for row in runs[kind])
        summary[kind] = {"description": description, "median_cpu_us_per_response": cpu, "median_responses_per_s": rate}
        print(f"median, {description}: {cpu:.1f} us per response, {rate:.0f} responses/s")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"rounds": runs, "summary": summary}, indent=2))
    print(f"written to {args.output}")


if __name__ == "__main__":
    main()
