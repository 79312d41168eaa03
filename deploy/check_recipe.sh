#!/bin/sh
# The Dockerfile's steps on this machine, for where no container engine runs (docs/scale-out.md):
# build the wheel from the committed sources as the build stage does (the hook bundles the search model),
# install it with the `redis` extra into a fresh venv as the run stage does, then run `manifold serve`
# as an unprivileged user with the image's environment, deploy/config.example.json and a private
# redis-server as `state_url`, and check the probes, the model in the wheel and an authenticated
# MCP request. What it cannot check is the base image itself (python:3.11-slim).
# Usage: deploy/check_recipe.sh   (PYTHON: the Python to use, 3.11 like the image; needs redis-server and git)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
# The serving user must be able to read the interpreter: a Python under /root (pyenv) is not, so as root
# the system's is the default.
if [ "$(id -u)" = 0 ] && [ -x /usr/bin/python3 ]; then PYTHON=${PYTHON:-/usr/bin/python3}; else PYTHON=${PYTHON:-python3}; fi
work=$(mktemp -d)
chmod 755 "$work"
cleanup() {
	[ -n "${gateway:-}" ] && kill "$gateway" 2>/dev/null || true
	[ -n "${redis:-}" ] && kill "$redis" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf 'check_recipe: %s\n' "$*"; }

say "build stage: a wheel from the committed sources"
mkdir "$work/src"
git -C "$root" archive HEAD pyproject.toml README.md hatch_build.py src | tar -x -C "$work/src"
"$PYTHON" -m venv "$work/build"
"$work/build/bin/pip" install -q --disable-pip-version-check --upgrade pip build
(cd "$work/src" && "$work/build/bin/python" -m build -q --wheel --outdir "$work/wheels" >/dev/null)
wheel=$(ls "$work"/wheels/*.whl)
say "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
python3 -c "import sys, zipfile; names = zipfile.ZipFile(sys.argv[1]).namelist(); \
assert any('/_search/model/' in n and n.endswith('model.safetensors') for n in names), 'no search model in the wheel'" "$wheel"
say "the search model is in the wheel"

say "run stage: the wheel with the redis extra in a fresh venv"
"$PYTHON" -m venv "$work/app"
"$work/app/bin/pip" install -q --disable-pip-version-check "$wheel[redis]"

port=$("$work/app/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
redis_port=$((port + 1))
redis-server --port "$redis_port" --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
redis=$!
mkdir -p "$work/data" "$work/etc"
cp "$root/deploy/config.example.json" "$work/etc/config.json"
chmod -R a+rX "$work/app" "$work/etc"
run_as=""
if [ "$(id -u)" = 0 ]; then
	chown 65534 "$work/data"
	run_as="setpriv --reuid=65534 --regid=65534 --clear-groups"  # not root, as the image's USER 10001
fi
key=recipe-check-key-0123456789abcdef
say "serving as uid $([ -n "$run_as" ] && echo 65534 || id -u) on port $port, state_url redis://127.0.0.1:$redis_port/0"
env -i PATH="$work/app/bin:/usr/bin:/bin" HOME="$work/data" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
	MANIFOLD_DATA_DIR="$work/data" MANIFOLD_HOST=127.0.0.1 MANIFOLD_PORT="$port" MANIFOLD_HTTP=true \
	MANIFOLD_STATE_URL="redis://127.0.0.1:$redis_port/0" MANIFOLD_AUDIT_PATH=- MANIFOLD_API_KEY="$key" \
	$run_as "$work/app/bin/manifold" serve --config "$work/etc/config.json" >"$work/gateway.log" 2>&1 &
gateway=$!

"$work/app/bin/python" - "$port" "$key" <<'EOF' || { tail -30 "$work/gateway.log"; exit 1; }
import json, sys, time, urllib.error, urllib.request

port, key = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"


def status(path, body=None, headers=None):
    request = urllib.request.Request(base + path, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return None, b""


deadline = time.monotonic() + 60
while status("/healthz")[0] != 200:
    assert time.monotonic() < deadline, "/healthz never answered 200"
    time.sleep(0.5)
print("check_recipe: /healthz 200")
ready = None
while time.monotonic() < deadline and ready != 200:
    ready = status("/readyz")[0]
    time.sleep(0.5)
print(f"check_recipe: /readyz {ready} (the example's server is not reachable here)")
discover = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "recipe", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {}}}}
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
code, _ = status("/mcp", json.dumps(discover).encode(), headers)
assert code == 401, f"an MCP request without the API key answered {code}, not 401"
code, body = status("/mcp", json.dumps(discover).encode(), {**headers, "Authorization": f"Bearer {key}"})
assert code == 200 and b'"tools"' in body, (code, body[:300])
print("check_recipe: an MCP request with the API key answered (tools/list), without it 401")
EOF
say "ok: the recipe builds, bundles the model, and serves as a non-root user with shared state"
