#!/bin/bash
# Run deploy/k8s with `podman kube play` (podman 4.3), after deploy/check_podman.sh has made the images.
# No Kubernetes here (kind and minikube need node images from Docker Hub): the kubelet's part is played by
# podman, with kube_play_render.py doing the little of it podman 4.3 does not.
#   0. the manifests as written (kustomization order; Service/PDB/HPA included), created with --start=false:
#      reports what podman refuses (4.3: "fieldPath status.podIP is either not valid or not supported");
#   1. kube_play_render.py's per-replica Pods (what the kubelet would do that podman does not: see there),
#      the ConfigMap and the PVC, played on a network with a Redis; the Secret `mcp-manifold` made as podman
#      4.3's secretKeyRef reads it (JSON of base64 values). Then for every replica, from outside as kubelet
#      probes would: /healthz 200, /readyz 200, tools/list 401 without the key and 200 with it; inside: uid
#      10001, root read-only, no capabilities, the ConfigMap at /etc/manifold, the env (Secret, downward API,
#      expanded replica id/url), the spill PVC shared; every replica in Redis under its pod name and URL, and
#      reachable from another at that URL; /readyz 503 (and /healthz 200) while Redis is stopped, 200 again after.
# Usage (root): deploy/check_kube_play.sh [REPO]   (default: this checkout; its deploy/k8s as it is on disk).
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
here=$repo/deploy
WORK=${WORK:-/tmp/mf-kube}
k8s=$repo/deploy/k8s
net=mfkube
say() { printf 'check_kube_play: %s\n' "$*"; }
fail() { printf 'check_kube_play: FAIL: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root"
start=$(date +%s)
mkdir -p "$WORK"
python3 -c 'import yaml' 2>/dev/null || { apt-get install -y -q python3-yaml >/dev/null; }

# shellcheck source=deploy/podman_config.sh
. "$here/podman_config.sh"  # the same podman config as check_podman.sh
for image in localhost/mcp-manifold:latest docker.io/library/redis:7-alpine; do
	podman image exists "$image" || fail "no $image: run deploy/check_podman.sh first"
done
# The manifests say image: mcp-manifold:latest; podman resolves that short name to localhost/mcp-manifold:latest.

replicas=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["replicas"])' "$k8s/deployment.yaml")
pods=$(for i in $(seq 0 $((replicas - 1))); do echo "mcp-manifold-pod-$i"; done)
cleanup() {
	for p in $pods; do podman pod rm -f -t 2 "$p" >/dev/null 2>&1 || true; done
	podman rm -f -t 1 mfkube-redis mfkube-client >/dev/null 2>&1 || true
	for v in mcp-manifold mcp-manifold-spill data tmp $(for p in $pods; do echo "$p-data $p-tmp"; done); do
		podman volume rm -f "$v" >/dev/null 2>&1 || true
	done
	podman secret rm mcp-manifold >/dev/null 2>&1 || true
	podman network rm -f $net >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup

say "0. the manifests as written (podman kube play --start=false)"
python3 - "$k8s" >"$WORK/as-written.yaml" <<'EOF'
import sys, pathlib, yaml
k8s = pathlib.Path(sys.argv[1])
for f in yaml.safe_load(open(k8s / "kustomization.yaml"))["resources"]:
    print("---"); print((k8s / f).read_text())
EOF
key=kube-check-key-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
state_url=redis://mfkube-redis:6379/0
secret() {  # podman 4.3's secretKeyRef reads the secret as JSON {key: base64}; a kind: Secret it stores as YAML
	python3 -c 'import base64, json, sys; print(json.dumps({"state-url": base64.b64encode(sys.argv[1].encode()).decode(), "api-key": base64.b64encode(sys.argv[2].encode()).decode()}))' \
		"$state_url" "$key" | podman secret create mcp-manifold - >/dev/null
}
secret
podman network create $net >/dev/null  # else kube play makes podman-default-kube-network
if podman kube play --start=false --network $net "$WORK/as-written.yaml" >"$WORK/as-written.log" 2>&1; then
	say "  as written: accepted by this podman (pods created, not started)"
else
	say "  as written: refused: $(grep -m1 '^Error' "$WORK/as-written.log")"
fi
cleanup
trap cleanup EXIT

say "1. rendered per-replica Pods + ConfigMap + PVC, with a Redis on network $net"
podman network create $net >/dev/null
subnet=$(podman network inspect $net --format '{{range .Subnets}}{{.Subnet}}{{end}}')
prefix=${subnet%.*}  # a /24 (podman's default for new networks)
case $subnet in *.0/24) ;; *) fail "unexpected subnet $subnet";; esac
ips=$(for i in $(seq 1 "$replicas"); do printf '%s.%s,' "$prefix" $((200 + i)); done); ips=${ips%,}
ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(int(__import__("sys").argv[1]))]
[x.bind(("127.0.0.1", 0)) for x in s]; print(",".join(str(x.getsockname()[1]) for x in s))' "$replicas")
python3 "$here/kube_play_render.py" "$k8s" "$WORK/rendered.yaml" "$ips" "$ports" >/dev/null
podman run -d --name mfkube-redis --network $net docker.io/library/redis:7-alpine \
	redis-server --save '' --appendonly no >/dev/null
secret
ipargs=(); for ip in ${ips//,/ }; do ipargs+=(--ip "$ip"); done
podman kube play --network $net "${ipargs[@]}" "$WORK/rendered.yaml" >"$WORK/play.log" 2>&1 \
	|| { cat "$WORK/play.log"; fail "kube play"; }

i=0
for p in $pods; do
	ip=$(echo "$ips" | cut -d, -f$((i + 1))); port=$(echo "$ports" | cut -d, -f$((i + 1)))
	c=$p-gateway
	python3 "$here/probe.py" "http://$ip:8765" "$key" 2 | sed "s/check_podman: /check_kube_play: $p /" \
		|| { podman logs "$c" 2>&1 | tail -30; fail "$p probes"; }
	code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 "http://127.0.0.1:$port/healthz" || true)
	[ "$code" = 200 ] || fail "$p: /healthz on its published 127.0.0.1:$port answered $code"
	[ "$(podman exec "$c" id -u)" = 10001 ] || fail "$p not uid 10001"
	podman exec "$c" sh -c 'touch /probe-ro' 2>/dev/null && fail "$p: root filesystem writable"
	[ "$(podman inspect "$c" --format '{{.EffectiveCaps}}')" = "[]" ] || fail "$p: capabilities left"
	podman exec "$c" cat /etc/manifold/config.json | python3 -c '
import json, sys, yaml
want = json.loads(yaml.safe_load(open(sys.argv[1]))["data"]["config.json"])
assert json.load(sys.stdin) == want, "config.json differs from the ConfigMap"' "$k8s/configmap.yaml" || fail "$p: ConfigMap"
	env=$(podman exec "$c" env)
	for want in "POD_NAME=$p" "POD_IP=$ip" "MANIFOLD_REPLICA_ID=$p" "MANIFOLD_REPLICA_URL=http://$ip:8765" \
		"MANIFOLD_STATE_URL=$state_url" "MANIFOLD_API_KEY=$key" MANIFOLD_SPILL_DIR=/var/lib/manifold-spill; do
		grep -qxF "$want" <<<"$env" || fail "$p: env has no ${want%%=*}=... as expected"
	done
	podman exec "$c" sh -c "echo $p >/var/lib/manifold-spill/from-$p && touch /tmp/t /var/lib/manifold/t" \
		|| fail "$p: spill, /tmp or data dir not writable"
	say "  $p: uid 10001, read-only root, no caps, ConfigMap mounted, env as the kubelet gives it, volumes writable"
	i=$((i + 1))
done
first=$(echo "$pods" | head -1); last=$(echo "$pods" | tail -1)
for p in $pods; do
	podman exec "$first-gateway" cat "/var/lib/manifold-spill/from-$p" >/dev/null || fail "spill PVC not shared ($p)"
done
sleep 2
podman exec mfkube-redis redis-cli hgetall manifold:replicas | python3 -c '
import json, sys
lines = sys.stdin.read().split("\n")
got = dict((r["id"], r["url"]) for r in (json.loads(v) for k, v in zip(lines[0::2], lines[1::2]) if k))
want = dict(zip(sys.argv[1].split(), ("http://%s:8765" % ip for ip in sys.argv[2].split(","))))
assert got == want, (got, want)' "$pods" "$ips" || fail "replicas in Redis"
url=$(podman exec "$first-gateway" printenv MANIFOLD_REPLICA_URL)
podman exec "$last-gateway" python -c "import urllib.request; urllib.request.urlopen('$url/healthz', timeout=3)" \
	|| fail "$last cannot reach $first at its MANIFOLD_REPLICA_URL"
say "  all $replicas replicas in Redis under their pod names and URLs; the spill PVC shared; $last reaches $first at $url"

podman stop -t 1 mfkube-redis >/dev/null
ip=$(echo "$ips" | cut -d, -f1)
readyz() { curl -s -o /dev/null -w '%{http_code}' -m 8 "http://$ip:8765/readyz" || true; }
for _ in $(seq 20); do [ "$(readyz)" = 503 ] && break; sleep 0.5; done
[ "$(readyz)" = 503 ] || fail "/readyz did not turn 503 with Redis stopped"
[ "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "http://$ip:8765/healthz")" = 200 ] || fail "/healthz not 200 without Redis"
podman start mfkube-redis >/dev/null
for _ in $(seq 40); do [ "$(readyz)" = 200 ] && break; sleep 0.5; done
[ "$(readyz)" = 200 ] || fail "/readyz did not come back with Redis"
say "  $first: /readyz 503 and /healthz 200 while Redis is stopped, /readyz 200 again after"

c=$first-gateway
say "what podman made of the rest of the spec ($c):"
podman inspect "$c" --format '    liveness probe -> healthcheck {{json .Config.Healthcheck}}
    memory limit {{.HostConfig.Memory}}, cpu shares {{.HostConfig.CpuShares}}, stop timeout {{.Config.StopTimeout}}s, restart {{.HostConfig.RestartPolicy.Name}}, security opts {{.HostConfig.SecurityOpt}}'
say "    groups in the container: $(podman exec "$c" id -G) (fsGroup 10001 would add 10001)"
say "ok: $replicas replicas of deploy/k8s served under podman kube play ($(($(date +%s) - start))s in all)"
