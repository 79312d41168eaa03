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

"$work/app/bin/python" "$root/deploy/probe.py" "http://127.0.0.1:$port" "$key" 1 check_recipe: \
	|| { tail -30 "$work/gateway.log"; exit 1; }
say "ok: the recipe builds, bundles the model, and serves as a non-root user with shared state"
