"""The MCP conformance suite's client scenarios with the gateway as the client (what `make conformance` runs).

Needs the suite and its Node 22, installed from npm in tests/conformance/node (`make node` or `make
conformance`); skipped with the reason when they are not there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "conformance"
SUITE = HERE / "node" / "node_modules" / ".bin" / "conformance"


@pytest.mark.skipif(not SUITE.exists(), reason="the conformance suite is not installed (make conformance)")
def test_the_client_scenarios_and_the_auth_suite_pass(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "CONFORMANCE_RESULTS": str(tmp_path)}
    done = subprocess.run([str(HERE / "run.sh")], env=env, capture_output=True, text=True, timeout=1200, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert output.count("OVERALL: PASSED") == 3  # initialize, tools_call, sse-retry
    assert "0 failed" in output.split("SUITE SUMMARY")[-1]  # the auth suite
