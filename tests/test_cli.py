"""The `manifold` command as a user runs it: real subprocesses, real fixture servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import server_entry


def manifold(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_manifold", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_tools_lists_every_server_namespaced(write_config: Any) -> None:
    config = write_config({"numbers": server_entry("numbers.py"), "words": server_entry("words.py")})
    result = manifold("tools", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    by_name = {row["name"]: row for row in rows}
    assert by_name["numbers_add"]["server"] == "numbers"
    assert by_name["words_upper"]["original"] == "upper"


def test_call_prints_the_result_and_fails_on_tool_errors(write_config: Any) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    ok = manifold("call", "numbers_multiply", "--args", '{"a": 6, "b": 7}', "--config", str(config))
    assert ok.returncode == 0 and ok.stdout.strip().startswith("42")
    bad = manifold("call", "numbers_sqrt", "--args", '{"x": -1}', "--config", str(config))
    assert bad.returncode == 1 and "negative" in bad.stdout
    not_json = manifold("call", "numbers_add", "--args", "{oops", "--config", str(config))
    assert not_json.returncode != 0 and "not valid JSON" in not_json.stderr


def test_servers_shows_state_reason_and_stderr(write_config: Any) -> None:
    config = write_config(
        {
            "numbers": server_entry("numbers.py"),
            "broken": server_entry("exits_early.py"),
            "off": server_entry("words.py", enabled=False),
        }
    )
    result = manifold("servers", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    status = {row["name"]: row for row in json.loads(result.stdout)}
    assert status["numbers"]["state"] == "ready" and status["numbers"]["tools"] == 3
    assert status["broken"]["state"] == "failed"
    assert "fatal: missing API key" in "\n".join(status["broken"]["stderr_tail"])
    assert "fatal: missing API key" in status["broken"]["last_error"]
    assert status["off"]["state"] == "disabled"


def test_bad_config_is_reported_whole(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"a": {"args": ["x"]}, "b": {"command": "x", "timeout": -1, "colour": "red"}},
                "manifold": {"expose": ["direct", "nonsense"]},
            }
        )
    )
    check = manifold("config", "check", str(config))
    assert check.returncode == 1
    for expected in ("'a'", "'b'", "timeout", "colour", "expose"):
        assert expected in check.stderr, (expected, check.stderr)
    serve = manifold("serve", "--config", str(config))
    assert serve.returncode == 2 and "timeout" in serve.stderr


def test_unknown_setting_flag_is_refused(write_config: Any) -> None:
    config = write_config({})
    result = manifold("tools", "--config", str(config), "--colour", "red")
    assert result.returncode != 0 and "--colour" in result.stderr


def test_import_claude_desktop_round_trips(tmp_path: Path) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": {"numbers": server_entry("numbers.py")}, "globalShortcut": "x"}))
    output = tmp_path / "manifold.json"
    result = manifold("import", "claude-desktop", str(source), "--output", str(output))
    assert result.returncode == 0, result.stderr
    assert json.loads(output.read_text())["mcpServers"]["numbers"]["args"][0].endswith("numbers.py")
    assert manifold("config", "check", str(output)).returncode == 0
    again = manifold("import", "claude-desktop", str(source), "--output", str(output))
    assert again.returncode != 0  # never overwrites without --force


def test_search_ranks_and_reports_the_index(write_config: Any) -> None:
    config = write_config(
        {"numbers": server_entry("numbers.py"), "catalog": server_entry("catalog.py", "--count", "50")}
    )
    result = manifold("search", "square root of a number", "--limit", "3", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["matches"][0]["name"] == "numbers_sqrt"
    assert answer["index"]["tools"] == 53 and answer["index"]["embedder"] == "bm25"
