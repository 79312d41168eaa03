#!/bin/bash
# Build and run the Dockerfile and docker-compose.yml with podman, where no Docker engine runs and Docker Hub
# is out of reach: the base images (python:3.11-slim, redis:7-alpine, haproxy:2.8-alpine) are stand-ins made
# here from Debian bookworm (deb.debian.org), tagged with the names the files use. Then, as check_recipe.sh
# does for the recipe's steps:
#   1. one container of the image and a Redis: /healthz 200, /readyz 200, tools/list 401 without the API key
#      and 200 with it, its state in Redis, running as uid 10001, the image's HEALTHCHECK passing;
#   2. docker-compose.yml as it is (podman-compose): 3 gateway replicas behind HAProxy, the same requests
#      through HAProxy on 127.0.0.1:8765, every replica registered in Redis and UP in HAProxy, and calls
#      still answered with two replicas stopped.
# Usage (root, Debian 12): deploy/check_podman.sh [REPO]  (default: this checkout; its committed HEAD is built).
# WORK (default /tmp/mf-podman) holds the sources and podman's own config for this run. The stand-in base
# images are kept and reused (FRESH=1 makes them again); containers, volumes and networks are removed.
# Installs with apt: podman debootstrap runc uidmap slirp4netns fuse-overlayfs; podman-compose into WORK.
set -eu
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
WORK=${WORK:-/tmp/mf-podman}
key=podman-check-key-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
say() { printf 'check_podman: %s\n' "$*"; }
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
start=$(date +%s)

export DEBIAN_FRONTEND=noninteractive
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null; then
	say "packages"
	apt-get update -q >/dev/null
	apt-get install -y -q podman debootstrap runc uidmap slirp4netns fuse-overlayfs python3-venv python3-yaml git curl >/dev/null
fi

# shellcheck source=deploy/podman_config.sh
. "$(dirname "$0")/podman_config.sh"

have() { podman image exists "$1"; }
if [ "${FRESH:-0}" = 1 ] || ! have docker.io/library/python:3.11-slim; then
say "python:3.11-slim stand-in: debootstrap bookworm minbase + python3.11, pip"
rootfs=$WORK/rootfs
rm -rf "$rootfs"
debootstrap --variant=minbase --include=python3.11,python3-pip,python3-venv,ca-certificates \
	bookworm "$rootfs" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 || { tail "$WORK/debootstrap.log"; exit 1; }
# A TLS-intercepting egress proxy's CA (if this machine has one) must be trusted inside too, for pip.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
	chroot "$rootfs" update-ca-certificates >/dev/null
fi
# As in the official image: `python` and `pip` on PATH, and pip installs as root (into /usr/local, Debian's
# scheme) without the PEP 668 refusal: the EXTERNALLY-MANAGED marker is removed (the official image has none).
rm -f "$rootfs/usr/lib/python3.11/EXTERNALLY-MANAGED"
ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python"
ln -sf /usr/bin/pip3 "$rootfs/usr/local/bin/pip"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
tar -C "$rootfs" -c . | podman import -q \
	--change 'ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV=LANG=C.UTF-8' --change 'CMD=["python3"]' - docker.io/library/python:3.11-slim >/dev/null
rm -rf "$rootfs"
fi

if [ "${FRESH:-0}" = 1 ] || ! have docker.io/library/redis:7-alpine || ! have docker.io/library/haproxy:2.8-alpine; then
say "redis:7-alpine and haproxy:2.8-alpine stand-ins (Debian's redis-server 7.0, haproxy 2.6)"
mkdir -p "$WORK/redis" "$WORK/haproxy"
cat >"$WORK/redis/entrypoint.sh" <<'EOF'
#!/bin/sh
# As the official redis image: no config file given -> --protected-mode no (the network is the boundary).
if [ "$1" = redis-server ]; then case "${2:-}" in *.conf) ;; *) set -- "$@" --protected-mode no ;; esac; fi
exec "$@"
EOF
chmod +x "$WORK/redis/entrypoint.sh"
cat >"$WORK/redis/Containerfile" <<'EOF'
FROM docker.io/library/python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
WORKDIR /data
USER redis
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
EOF
cat >"$WORK/haproxy/Containerfile" <<'EOF'
FROM docker.io/library/python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /usr/local/etc/haproxy /var/lib/haproxy
USER haproxy
STOPSIGNAL SIGUSR1
EXPOSE 8765
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
EOF
podman build -q --format docker -t docker.io/library/redis:7-alpine "$WORK/redis" >/dev/null
podman build -q --format docker -t docker.io/library/haproxy:2.8-alpine "$WORK/haproxy" >/dev/null
fi

say "podman build -t mcp-manifold (the repo's Dockerfile, from a clean copy of HEAD)"
src=$WORK/src
rm -rf "$src" && mkdir -p "$src"
git -C "$repo" archive HEAD | tar -x -C "$src"
t0=$(date +%s)
# --format docker keeps the Dockerfile's HEALTHCHECK (the OCI format drops it).
podman build --format docker -t mcp-manifold "$src" >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; exit 1; }
say "built in $(($(date +%s) - t0))s: $(podman image inspect -f '{{.Id}}' mcp-manifold | cut -c1-12)"


pc=$WORK/pc-venv/bin/podman-compose
compose() { MANIFOLD_API_KEY=$key "$pc" -p mfcheck -f "$src/docker-compose.yml" "$@"; }
cleanup() {
	podman rm -f -t 1 mfcheck-gw mfcheck-redis >/dev/null 2>&1 || true
	podman network rm mfcheck-single >/dev/null 2>&1 || true
	[ -x "$pc" ] && [ -d "$src" ] && compose down -v -t 2 >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup

say "one container of the image with a Redis"
podman network create mfcheck-single >/dev/null
podman run -d --name mfcheck-redis --network mfcheck-single --network-alias redis \
	docker.io/library/redis:7-alpine redis-server --save '' --appendonly no >/dev/null
podman run -d --name mfcheck-gw --network mfcheck-single -p 127.0.0.1:18765:8765 \
	-e MANIFOLD_STATE_URL=redis://redis:6379/0 -e MANIFOLD_AUDIT_PATH=- -e MANIFOLD_API_KEY="$key" \
	-v "$src/deploy/config.example.json:/etc/manifold/config.json:ro" mcp-manifold >/dev/null 2>&1
python3 "$src/deploy/probe.py" http://127.0.0.1:18765 "$key" 1 || { podman logs mfcheck-gw 2>&1 | tail -30; exit 1; }
[ "$(podman exec mfcheck-gw id -u)" = 10001 ] || { echo "not uid 10001" >&2; exit 1; }
podman exec mfcheck-redis redis-cli exists manifold:replicas | grep -qx 1 || { echo "no state in Redis" >&2; exit 1; }
podman healthcheck run mfcheck-gw || { echo "the image's HEALTHCHECK failed" >&2; exit 1; }
say "  uid 10001, state in Redis, HEALTHCHECK passes"
podman rm -f -t 1 mfcheck-gw mfcheck-redis >/dev/null 2>&1; podman network rm mfcheck-single >/dev/null

say "docker-compose.yml with podman-compose: 3 replicas behind HAProxy"
[ -x "$pc" ] || { python3 -m venv "$WORK/pc-venv" && "$WORK/pc-venv/bin/pip" install -q podman-compose; }
compose up -d >"$WORK/compose-up.log" 2>&1 || { tail -30 "$WORK/compose-up.log"; exit 1; }
[ "$(podman ps --filter label=io.podman.compose.project=mfcheck --filter label=com.docker.compose.service=gateway -q | wc -l)" = 3 ] \
	|| { podman ps -a; echo "not 3 gateway replicas" >&2; exit 1; }
python3 "$src/deploy/probe.py" http://127.0.0.1:8765 "$key" 12 || { podman logs mfcheck_haproxy_1 2>&1 | tail; exit 1; }
sleep 2
up=$(podman logs mfcheck_haproxy_1 2>&1 | grep -oE 'gateways/gw[123] .* is UP' | cut -d' ' -f1 | sort -u | wc -l)
replicas=$(podman exec mfcheck_redis_1 redis-cli hlen manifold:replicas)
say "  gateway replicas UP in HAProxy: $up of 3; registered in Redis: $replicas"
[ "$up" = 3 ] && [ "$replicas" = 3 ] || exit 1
podman stop -t 2 mfcheck_gateway_1 mfcheck_gateway_2 >/dev/null
sleep 3  # HAProxy checks every 1s and takes a replica out after 2 failures
python3 "$src/deploy/probe.py" http://127.0.0.1:8765 "$key" 6 >/dev/null || { podman logs mfcheck_haproxy_1 2>&1 | tail; exit 1; }
say "  with two replicas stopped, calls still answered through HAProxy"
say "ok: image built and served, compose up with 3 replicas behind HAProxy ($(($(date +%s) - start))s in all)"
