"""The Dockerfile's recipe, checked where no container engine runs (deploy/check_recipe.sh): a wheel built
from the committed sources as the image's build stage builds it (no .gitignore in the tree), installed with
the `redis` extra into a fresh venv, served as an unprivileged user with the image's environment, the
example config and a real redis-server, then asked for its probes and an authenticated MCP request."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed (make scaleout)"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout (it builds the committed sources)"),
]


def test_the_image_recipe_builds_bundles_the_model_and_serves() -> None:
    done = subprocess.run([str(ROOT / "deploy" / "check_recipe.sh")], capture_output=True, text=True, timeout=900)
    said = [line for line in (done.stdout + done.stderr).splitlines() if not line.startswith("WARNING: Location")]
    assert done.returncode == 0, "\n".join(said[-40:])
    assert "check_recipe: the search model is in the wheel" in done.stdout
    assert "check_recipe: /healthz 200" in done.stdout
    assert "check_recipe: /readyz 200" in done.stdout
    assert "check_recipe: tools/list with the key 200 (x1), without it 401" in done.stdout
