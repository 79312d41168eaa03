"""The image and the compose file, built and run with podman (deploy/check_podman.sh): the Dockerfile built
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
