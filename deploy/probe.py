"""The requests deploy/check_podman.sh and deploy/check_kube_play.sh make of a running gateway: /healthz and
/readyz until 200, an MCP tools/list without the API key (401) and with it (200, N times), each said on a
line that starts with NAME (default `check_podman:  `). Standard library only.
Usage: probe.py BASE_URL API_KEY N [NAME]"""

import json
import sys
import time
import urllib.error
import urllib.request

base, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
name = sys.argv[4] if len(sys.argv) > 4 else "check_podman:  "


def status(path, body=None, headers=None):
    request = urllib.request.Request(base + path, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return None, b""


deadline = time.monotonic() + 90
while status("/healthz")[0] != 200:
    assert time.monotonic() < deadline, "/healthz never answered 200"
    time.sleep(0.5)
print(f"{name} /healthz 200")
while status("/readyz")[0] != 200:
    assert time.monotonic() < deadline, f"/readyz answered {status('/readyz')}"
    time.sleep(0.5)
print(f"{name} /readyz 200")
discover = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "deploy-probe", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
headers = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/list",
}
code, _ = status("/mcp", json.dumps(discover).encode(), headers)
assert code == 401, f"an MCP request without the API key answered {code}, not 401"
for _ in range(n):
    code, body = status("/mcp", json.dumps(discover).encode(), {**headers, "Authorization": f"Bearer {key}"})
    assert code == 200 and b'"tools"' in body, (code, body[:300])
print(f"{name} tools/list with the key 200 (x{n}), without it 401")
