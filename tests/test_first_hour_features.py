"""A newcomer turning on the features (code mode, HTTP, profiles, API keys): `manifold config check`
says what `serve` would refuse, and a mistake is named with its fix.

Each test runs the real `manifold` command, as `tests/test_cli_first_hour.py` does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import server_entry
from tests.test_cli_first_hour import manifold


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def test_config_check_says_the_code_surface_has_no_engine_as_serve_would(
    write_config: Any, home: Path, tmp_path: Path
) -> None:
    """`config check` passed `expose: [code]` without the QuickJS engine, which `serve` then refused."""
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "quickjs.py").write_text('raise ImportError("not installed")\n')  # stands in for a missing engine
    env = {"PYTHONPATH": os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")])}
    config = write_config({"numbers": server_entry("numbers.py")}, {"expose": ["direct", "code"]})
    checked = manifold(home, "config", "check", str(config), env=env)
    assert checked.returncode == 1, checked.stdout
    assert "field 'expose': the code surface needs the QuickJS engine" in checked.stderr
    assert "pip install 'mcp-manifold[code]'" in checked.stderr and "Traceback" not in checked.stderr


def test_config_check_refuses_an_open_http_gateway_on_the_network_as_serve_would(write_config: Any, home: Path) -> None:
    """`http: true` on 0.0.0.0 without `auth`: `serve` refuses to start, and `config check` said OK."""
    config = write_config({"numbers": server_entry("numbers.py")}, {"http": True, "host": "0.0.0.0"})
    checked = manifold(home, "config", "check", str(config))
    assert checked.returncode == 1, checked.stdout
    assert "refusing to serve HTTP on 0.0.0.0 without authentication" in checked.stderr
    assert "Configure API keys or OAuth in the 'auth' section" in checked.stderr
    served = manifold(home, "serve", str(config))
    assert served.returncode != 0 and "refusing to serve HTTP on 0.0.0.0" in served.stderr  # the same refusal
    opened = write_config(
        {"numbers": server_entry("numbers.py")},
        {"http": True, "host": "0.0.0.0", "insecure_open_to_network": True},
        name="open.json",
    )
    assert manifold(home, "config", "check", str(opened)).returncode == 0  # said in so many words: allowed
