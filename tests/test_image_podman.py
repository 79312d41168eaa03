"""The image, the compose file and the Kubernetes manifests, run with podman (deploy/check_podman.sh,
deploy/check_kube_play.sh). check_podman.sh: the Dockerfile built
from the committed sources on stand-in base images made from Debian (no Docker Hub here), one container
serving its probes and an authenticated MCP request with its state in Redis, then docker-compose.yml as it
is, three replicas behind HAProxy, still answering with two of them stopped."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed (make containers, as root)"),
    pytest.mark.skipif(shutil.which("debootstrap") is None, reason="debootstrap not installed (make containers)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the check runs podman as root (debootstrap, chroot)"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout (it builds the committed sources)"),
]


def test_the_image_builds_and_the_compose_file_serves_behind_haproxy(tmp_path: Path) -> None:
    env = {**os.environ, "WORK": str(tmp_path / "podman")}
    done = subprocess.run(
        [str(ROOT / "deploy" / "check_podman.sh"), str(ROOT)], capture_output=True, text=True, timeout=1200, env=env
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, "\n".join(said.splitlines()[-40:])
    for step in (
        "check_podman:   uid 10001, state in Redis, HEALTHCHECK passes",
        "gateway replicas UP in HAProxy: 3 of 3; registered in Redis: 3",
        "with two replicas stopped, calls still answered through HAProxy",
    ):
        assert step in done.stdout, said[-3000:]


def test_the_kubernetes_manifests_run_under_podman_kube_play(tmp_path: Path) -> None:
    """deploy/k8s played by podman (deploy/check_kube_play.sh), with the little of the kubelet's part podman
    4.3 lacks done by deploy/kube_play_render.py: three replicas from the Deployment's template, each with
    the Secret's and the downward API's env, the ConfigMap mounted, uid 10001, a read-only root, the spill
    PVC shared, registered in Redis under its pod name, probes answered, /readyz 503 while Redis is away."""
    if subprocess.run(["podman", "image", "exists", "localhost/mcp-manifold:latest"]).returncode != 0:
        test_the_image_builds_and_the_compose_file_serves_behind_haproxy(tmp_path)  # it builds the image
    env = {**os.environ, "WORK": str(tmp_path / "kube")}
    done = subprocess.run(
        [str(ROOT / "deploy" / "check_kube_play.sh"), str(ROOT)], capture_output=True, text=True, timeout=600, env=env
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, "\n".join(said.splitlines()[-40:])
    assert "all 3 replicas in Redis under their pod names and URLs; the spill PVC shared" in done.stdout, said
    assert "/readyz 503 and /healthz 200 while Redis is stopped, /readyz 200 again after" in done.stdout, said
