"""The `manifold` command as a user runs it: real subprocesses, real fixture servers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_manifold._files import pid_is_alive
from tests.conftest import SERVERS, free_port, server_entry, stop_process


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


def test_tools_lists_what_started_and_exits_1_naming_a_server_that_failed(write_config: Any) -> None:
    """Before, a config whose every server failed listed "0 tools" and exited 0: a script saw success."""
    config = write_config({"numbers": server_entry("numbers.py"), "missing": {"command": "no-such-command-xyz"}})
    for json_flag in ([], ["--json"]):
        result = manifold("tools", "--config", str(config), *json_flag)
        assert result.returncode == 1, result.stderr
        assert "numbers_add" in result.stdout  # what the other servers have is still listed
        assert "1 enabled server(s) failed: missing" in result.stderr
        assert "  missing: command 'no-such-command-xyz' was not found on PATH" in result.stderr


def test_call_prints_the_result_and_fails_on_tool_errors(write_config: Any) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    ok = manifold("call", "numbers_multiply", "--args", '{"a": 6, "b": 7}', "--config", str(config))
    assert ok.returncode == 0 and ok.stdout.strip().startswith("42")
    bad = manifold("call", "numbers_sqrt", "--args", '{"x": -1}', "--config", str(config))
    assert bad.returncode == 1 and "negative" in bad.stdout
    not_json = manifold("call", "numbers_add", "--args", "{oops", "--config", str(config))
    assert not_json.returncode != 0 and "not valid JSON" in not_json.stderr


def test_call_starts_only_the_server_the_name_belongs_to(write_config: Any, tmp_path: Path) -> None:
    started = tmp_path / "words-started"
    words = {"command": "sh", "args": ["-c", f'touch "{started}"; exec "{sys.executable}" "{SERVERS / "words.py"}"']}
    config = write_config({"numbers": server_entry("numbers.py"), "words": words})
    ok = manifold("call", "numbers_add", "--args", '{"a": 1, "b": 2}', "--config", str(config))
    assert ok.returncode == 0 and ok.stdout.strip().startswith("3"), ok.stderr
    assert not started.exists()  # words was never needed, so never started
    unknown = manifold("call", "nothing_here", "--config", str(config))
    assert unknown.returncode == 1 and "nothing_here" in unknown.stdout
    assert started.exists()  # a name no prefix claims: every server is listed to look for it


def test_servers_shows_state_reason_and_stderr(write_config: Any) -> None:
    config = write_config(
        {
            "numbers": server_entry("numbers.py"),
            "broken": server_entry("exits_early.py"),
            "off": server_entry("words.py", enabled=False),
        }
    )
    result = manifold("servers", "--config", str(config), "--json")
    assert result.returncode == 1 and "1 enabled server(s) failed: broken" in result.stderr, result.stderr
    status = {row["name"]: row for row in json.loads(result.stdout)}
    assert status["numbers"]["state"] == "ready" and status["numbers"]["tools"] == 3
    assert status["broken"]["state"] == "failed"
    assert "fatal: missing API key" in "\n".join(status["broken"]["stderr_tail"])
    assert "fatal: missing API key" in status["broken"]["last_error"]
    assert status["off"]["state"] == "disabled"


def test_a_config_that_lists_the_gateway_itself_stops_after_one_level(write_config: Any, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    itself = {"command": sys.executable, "args": ["-m", "mcp_manifold", "serve", "--config", str(config)]}
    write_config({"numbers": server_entry("numbers.py"), "itself": itself})
    result = manifold("servers", "--config", str(config), "--json")
    assert result.returncode == 1, result.stderr  # an enabled server failed
    status = {row["name"]: row for row in json.loads(result.stdout)}
    assert status["numbers"]["state"] == "ready"
    assert status["itself"]["state"] == "failed"
    assert "lists mcp-manifold itself" in status["itself"]["last_error"]
    # A gateway in front of a gateway with another config is fine.
    inner = write_config({"numbers": server_entry("numbers.py")}, name="inner.json")
    outer = {"command": sys.executable, "args": ["-m", "mcp_manifold", "serve", "--config", str(inner)]}
    write_config({"inner": outer}, name="outer.json")
    nested = manifold(
        "call", "inner_numbers_add", "--args", '{"a": 2, "b": 3}', "--config", str(tmp_path / "outer.json")
    )
    assert nested.returncode == 0 and nested.stdout.strip().startswith("5"), nested.stderr


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


# A value other than the default for every setting, as a user would type it after `--flag` or in
# MANIFOLD_<SETTING>, and what it becomes. A new setting must be added here to pass.
SETTING_SAMPLES: dict[str, tuple[str, Any]] = {
    "expose": ("proxy,hub", ["proxy", "hub"]),
    "separator": ("--", "--"),
    "lazy": ("false", False),
    "init_timeout": ("7.5", 7.5),
    "call_timeout": ("9", 9.0),
    "stderr_lines": ("11", 11),
    "data_dir": ("/tmp/manifold-data", "/tmp/manifold-data"),
    "log_level": ("debug", "debug"),
    "host": ("0.0.0.0", "0.0.0.0"),
    "port": ("9999", 9999),
    "http": ("true", True),
    "proxy_tool_name": ("px", "px"),
    "spill_threshold": ("1000", 1000),
    "spill_dir": ("/tmp/spill", "/tmp/spill"),
    "spill_ttl": ("60", 60.0),
    "spill_max_bytes": ("1048576", 1048576),
    "max_answer_bytes": ("1048576", 1048576),
    "toon": ("true", True),
    "dispatch_response": ("lean", "lean"),
    "search_embedder": ("bm25", "bm25"),
    "search_models": ("minilm", ["minilm"]),
    "search_top_k": ("3", 3),
    "tools_limit": ("4", 4),
    "routing": ("dynamic", "dynamic"),
    "list_changed_exec": ("notify-send x", "notify-send x"),
    "list_changed_exec_timeout": ("2", 2.0),
    "discovery_dir": ("/tmp/discovery", "/tmp/discovery"),
    "pin_max_tools": ("50", 50),
    "ping_interval": ("0", 0.0),
    "ping_timeout": ("1", 1.0),
    "session_idle_timeout": ("0", 0.0),
    "max_http_sessions": ("2", 2),
    "request_memory_mb": ("64", 64),
    "principal_max_sessions": ("3", 3),
    "header_timeout": ("5", 5.0),
    "body_timeout": ("7", 7.0),
    "hub_max_instances": ("3", 3),
    "client_sessions_max": ("4", 4),
    "client_session_idle": ("60", 60.0),
    "held_call_timeout": ("30", 30.0),
    "request_state_keys": ("k" * 32 + "," + "m" * 40, ["k" * 32, "m" * 40]),
    "shutdown_timeout": ("3", 3.0),
    "breaker_threshold": ("5", 5),
    "breaker_cooldown": ("1", 1.0),
    "spill_allowed_dirs": ("/a,/b", ["/a", "/b"]),
    "openai_base_url": ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1"),
    "openai_model": ("m", "m"),
    "reload": ("false", False),
    "metrics": ("false", False),
    "dashboard": ("false", False),
    "tracing": ("true", True),
    "profile": ("readonly", "readonly"),
    "pinning": ("enforce", "enforce"),
    "pin_new_tools": ("quarantine", "quarantine"),
    "audit": ("false", False),
    "audit_max_bytes": ("1000", 1000),
    "audit_backups": ("0", 0),
    "rate_limit": ("2.5", 2.5),
    "rate_burst": ("3", 3),
    "principal_max_calls": ("4", 4),
    "insecure_open_to_network": ("true", True),
    "code_timeout": ("5", 5.0),
    "code_memory_mb": ("64", 64),
    "code_output_chars": ("500", 500),
    "code_max_calls": ("10", 10),
    "code_value_bytes": ("1000", 1000),
    "code_max_programs": ("2", 2),
    "state_url": ("redis://cache:6379/1", "redis://cache:6379/1"),
    "replica_id": ("edge-1", "edge-1"),
    "replica_url": ("http://10.0.0.5:8765", "http://10.0.0.5:8765"),
    "audit_path": ("-", "-"),
}
# Settings that are only valid together with another one.
SETTING_NEEDS: dict[str, tuple[str, str]] = {}
# Settings that are only valid with a section of the file (`profile` names one of `profiles`).
SETTING_SECTIONS: dict[str, dict[str, Any]] = {"profile": {"profiles": {"readonly": {}}}}


def test_every_setting_has_a_flag_and_an_environment_variable() -> None:
    from mcp_manifold._cli.common import setting_overrides
    from mcp_manifold._config import env_var, parse_config_data, settings_fields

    assert set(SETTING_SAMPLES) == {f.name for f in settings_fields()}
    for setting in settings_fields():
        text, expected = SETTING_SAMPLES[setting.name]
        assert expected != setting.default, setting.name
        flag = "--" + setting.name.replace("_", "-")
        args = ([flag] if expected else [f"--no-{flag[2:]}"]) if setting.type is bool else [flag, text]
        needed = SETTING_NEEDS.get(setting.name)
        needed_args = ["--" + needed[0].replace("_", "-"), needed[1]] if needed else []
        data = {"mcpServers": {}, **SETTING_SECTIONS.get(setting.name, {})}
        from_flag = parse_config_data(data, source="t", env={}, overrides=setting_overrides(args + needed_args))
        assert getattr(from_flag.settings, setting.name) == expected, args
        needed_env = {env_var(needed[0]): needed[1]} if needed else {}
        from_env = parse_config_data(data, source="t", env={env_var(setting.name): text, **needed_env})
        assert getattr(from_env.settings, setting.name) == expected, env_var(setting.name)


def test_flags_and_environment_reach_a_real_run(write_config: Any) -> None:
    config = str(write_config({"numbers": server_entry("numbers.py")}))
    by_flag = manifold("tools", "--config", config, "--separator", "-", "--json")
    assert "numbers-add" in {row["name"] for row in json.loads(by_flag.stdout)}, by_flag.stderr
    env = {**os.environ, "MANIFOLD_SEPARATOR": "__"}
    by_env = subprocess.run(
        [sys.executable, "-m", "mcp_manifold", "tools", "--config", config, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert "numbers__add" in {row["name"] for row in json.loads(by_env.stdout)}, by_env.stderr


def test_log_level_decides_what_reaches_stderr(write_config: Any) -> None:
    config = str(write_config({"numbers": server_entry("numbers.py"), "broken": server_entry("exits_early.py")}))
    default = manifold("tools", "--config", config, "--json")
    assert "server 'broken'" in default.stderr and "fatal: missing API key" in default.stderr
    assert "ready" not in default.stderr
    verbose = manifold("tools", "--config", config, "--json", "--log-level", "info")
    assert "server 'numbers' ready (numbers 1.0.0, pid " in verbose.stderr
    quiet = manifold("tools", "--config", config, "--json", "--log-level", "error")
    # No log line; the command's own account of the failed server stays (it exits 1 for it).
    assert quiet.returncode == 1 and "WARNING" not in quiet.stderr
    assert quiet.stderr.startswith("1 enabled server(s) failed: broken\n"), quiet.stderr


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
    # Hybrid is the default, answered by the bundled model without torch.
    assert answer["index"]["tools"] == 53 and answer["index"]["embedder"] == "local:all-MiniLM-L6-v2@0.1.0"
    assert answer["ranking"] == "hybrid" and "BM25 alone" not in result.stderr

    bm25 = manifold("search", "square root", "--config", str(config), "--search-embedder", "bm25", "--json")
    assert json.loads(bm25.stdout)["ranking"] == "bm25" and "BM25 alone" not in bm25.stderr


def test_search_explains_where_a_tool_ranks_and_what_hid_it(write_config: Any) -> None:
    config = write_config(
        {
            "numbers": server_entry("numbers.py"),
            "words": server_entry("words.py", tools={"exclude": ["reverse*"]}),
            "off": server_entry("numbers.py", enabled=False),
        },
        {"search_embedder": "bm25"},
    )
    shown = manifold("search", "add two numbers", "-n", "1", "--config", str(config), "--explain", "numbers_sqrt")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "numbers_sqrt ranks " in text and "not shown (limit 1)" in text and "ranking: bm25" in text
    assert "BM25 (words)" in text and "shown instead: numbers_add" in text
    assert "request terms: add, two, number" in text

    as_json = manifold("search", "add", "--config", str(config), "--explain", "numbers_add", "--json")
    explained = json.loads(as_json.stdout)["explain"]
    assert explained["rank"] == 1 and explained["shown"] and explained["steps"][0]["name"] == "BM25 (words)"
    assert explained["matched_terms"] == ["add"]

    disabled = manifold("search", "add", "--config", str(config), "--explain", "off_add")
    assert "off_add is not in the search index" in disabled.stdout and "'off' is disabled" in disabled.stdout
    filtered = manifold("search", "reverse", "--config", str(config), "--explain", "words_reverse", "--json")
    notes = json.loads(filtered.stdout)["explain"]["notes"]
    assert any("tools filter that leaves out 'reverse'" in note for note in notes), notes


@pytest.mark.anyio
async def test_a_live_status_that_cannot_be_taken_is_logged_and_the_next_round_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`publish` runs in the gateway's task group: a snapshot that raises (a bug, a file it reads gone bad)
    once ended the whole gateway. Now that round is logged, once, and the next one is written."""
    import anyio

    from mcp_manifold._runtime.live_status import publish

    rounds: list[int] = []

    def snapshot() -> dict[str, Any]:
        rounds.append(1)
        if len(rounds) <= 3:
            raise RuntimeError("Symlink loop from 'mcp.json'")
        return {"servers": []}

    written = tmp_path / "live" / f"{os.getpid()}.json"
    async with anyio.create_task_group() as group:
        group.start_soon(publish, tmp_path / "live", snapshot, 0.01)
        with anyio.fail_after(10):
            while not written.exists():
                await anyio.sleep(0.01)
        group.cancel_scope.cancel()
    said = [record for record in caplog.records if "could not take the live status" in record.getMessage()]
    assert len(said) == 1 and said[0].exc_info is not None  # once, with its traceback; the repeats at debug
    assert not written.exists()  # removed when publishing stops, as before


@pytest.mark.anyio
async def test_servers_shows_a_running_gateway_live(write_config: Any, http_gateway: Any) -> None:
    """Breaker, health and state exist only inside the running gateway; `servers` reads them from it."""
    from mcp import Client

    config = write_config({"numbers": server_entry("numbers.py"), "broken": server_entry("exits_early.py")})
    url = http_gateway(config)
    async with Client(url, mode="legacy") as client, Client(url) as modern:
        assert (await client.call_tool("numbers_add", {"a": 1, "b": 2})).content
        assert (await modern.call_tool("numbers_add", {"a": 1, "b": 2})).content
        deadline = time.monotonic() + 15
        while True:  # the gateway rewrites its snapshot every couple of seconds
            live = manifold("servers", "--config", str(config), "--json")
            assert live.returncode in (0, 1), live.stderr  # 1 once `broken` has failed
            (gateway,) = json.loads(live.stdout)["gateways"]
            rows = {row["name"]: row for row in gateway["servers"]}
            settled = rows["numbers"]["state"] == "ready" and gateway["clients"]["stateless_requests"]
            settled = settled and rows["broken"]["state"] == "failed" and live.returncode == 1
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert gateway["expose"] == ["direct"]
        assert rows["numbers"]["state"] == "ready" and rows["numbers"]["breaker"] == "closed"
        assert rows["numbers"]["protocol"]  # the era the gateway speaks with it
        assert rows["broken"]["state"] == "failed" and rows["broken"]["last_error"]
        assert live.returncode == 1 and "failed: broken" in live.stderr
        # Which era each client speaks: one session, and requests of a 2026-07-28 client.
        assert gateway["clients"]["sessions"] == 1 and gateway["clients"]["stateless_requests"] >= 1
        table = manifold("servers", "--config", str(config))
        assert f"gateway pid {gateway['pid']}" in table.stdout and "health" in table.stdout
        words = " ".join(table.stdout.split())  # rich wraps to the terminal's width
        assert "1 in a session" in words and "of 2026-07-28 clients" in words
        probed = manifold("servers", "--config", str(config), "--json", "--probe")
        assert isinstance(json.loads(probed.stdout), list)  # --probe starts the servers here instead


def test_a_dead_gateways_snapshot_is_ignored_and_removed(write_config: Any, tmp_path: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    live = tmp_path / "data" / "live"
    live.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = live / f"{dead.stdout.strip()}.json"
    stale.write_text(json.dumps({"pid": int(dead.stdout), "started_at": 0, "expose": ["direct"], "servers": []}))
    result = manifold("servers", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    assert [row["name"] for row in json.loads(result.stdout)] == ["numbers"]
    assert not stale.exists()


def test_secrets_a_server_echoes_never_reach_servers_output(write_config: Any) -> None:
    # argparse repeats unknown arguments on stderr, so this server prints its own --api-key value.
    config = write_config({"leaky": server_entry("exits_early.py", "--api-key", "hunter2-secret-value")})
    for extra in ((), ("--json",)):
        result = manifold("servers", "--config", str(config), *extra)
        assert result.returncode == 1, result.stderr  # it failed, as it should
        assert "hunter2-secret-value" not in result.stdout + result.stderr
        assert "***" in result.stdout


def _children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def _say_hello(process: subprocess.Popen[bytes]) -> None:
    """Open a session on a stdio gateway's pipes, as a client's first messages do."""
    assert process.stdin is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}  # the gateway meets its client at a first request
    process.stdin.write("".join(json.dumps(message) + "\n" for message in (hello, initialized, ping)).encode())
    process.stdin.flush()


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("when", ["starting", "serving"])
def test_sigterm_stops_the_gateway_cleanly(write_config: Any, tmp_path: Path, transport: str, when: str) -> None:
    """A client quitting sends SIGTERM: servers stop, the live snapshot goes, exit 0, at any moment."""
    config = write_config({"numbers": server_entry("numbers.py")}, {"lazy": False})
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]
    if transport == "http":
        command += ["--http", "--port", str(free_port())]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    process = subprocess.Popen(command, **pipes, start_new_session=True)  # pipes, as a desktop client has
    if transport == "stdio" and when == "serving":
        _say_hello(process)  # eager servers of a stdio gateway start once its one client is known
    live = tmp_path / "data" / "live"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            snapshots = [json.loads(path.read_text()) for path in live.glob("*.json")]
            if when == "starting" and snapshots:
                break
            if snapshots and snapshots[0]["servers"][0]["state"] == "ready":
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the gateway never reached {when!r}")
        servers = _children(process.pid)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0, process.stderr.read().decode() if process.stderr else ""
    finally:
        stop_process(process)
    assert not list(live.glob("*.json"))
    assert all(not pid_is_alive(pid) for pid in servers)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stdio_gateway_writing_to_a_file_stops_on_a_signal(
    write_config: Any, tmp_path: Path, stop: signal.Signals
) -> None:
    """`manifold serve > log`: with stdout a file, the SDK's transport read stdin in a thread that nothing
    stops, so SIGTERM and Ctrl-C waited until the client closed stdin."""
    config = write_config({"numbers": server_entry("numbers.py")})
    wire = tmp_path / "wire.jsonl"
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]
    with wire.open("wb") as out:
        pipes = {"stdin": subprocess.PIPE, "stdout": out, "stderr": subprocess.PIPE}
        process = subprocess.Popen(command, **pipes, start_new_session=True)
    try:
        _say_hello(process)  # and stdin stays open, as a client that has not gone keeps it
        deadline = time.monotonic() + 30
        while '"id":2' not in wire.read_text():  # the ping answered: the gateway serves
            assert time.monotonic() < deadline, "the gateway never answered the ping"
            time.sleep(0.05)
        process.send_signal(stop)
        assert process.wait(timeout=20) == 0, process.stderr.read().decode() if process.stderr else ""
    finally:
        stop_process(process)
    assert [json.loads(line)["id"] for line in wire.read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize("stdout", [subprocess.PIPE, subprocess.DEVNULL])
def test_a_stdio_gateway_whose_stdin_is_dev_null_ends_at_its_eof(write_config: Any, stdout: int) -> None:
    """`docker run` without `-i`, a service: stdin is /dev/null, which epoll refuses; the gateway hung there
    with asyncio's traceback instead of ending at EOF."""
    config = write_config({"numbers": server_entry("numbers.py")})
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE)
    try:
        assert process.wait(timeout=30) == 0
    finally:
        stop_process(process)
    assert process.stderr is not None and "Traceback" not in process.stderr.read().decode()


ESC = "\x1b"
PAINTED_TOOL = "open [link=https://evil.example]here[/link]"  # painted.py's tool, named by its server
RAW_CONTROLS = re.compile("[\x1b\x9b\u202e]")  # ESC, the C1 CSI, the right-to-left override


def test_what_a_server_writes_reaches_the_terminal_as_text_never_as_markup_or_escapes(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A description, a tool's own name, a server's version: `[/]` once ended `manifold tools` with a
    MarkupError, `[link=...]` made a hyperlink, and escape sequences acted on the terminal (even in
    `manifold pins diff`, where the operator reads a changed definition to approve it)."""
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for every cell on one line
    manifold("tools", "--config", str(write_config({"painted": server_entry("painted.py")})))  # pins it plain
    config = str(write_config({"painted": server_entry("painted.py", "--description", "hostile")}))
    shown = {}
    for command in (["tools"], ["servers"], ["pins"], ["pins", "diff", f"painted/{PAINTED_TOOL}"]):
        result = manifold(*command, "--config", config)
        assert result.returncode == 0, (command, result.stderr)
        assert not RAW_CONTROLS.search(result.stdout + result.stderr), command
        shown[command[-1]] = result.stdout
    assert "\\u202edesrever\\u202c \\x9b2J" in shown["tools"]
    for command in (["tools", "--json"], ["servers", "--json"], ["pins", "--json"]):
        result = manifold(*command, "--config", config)
        assert result.returncode == 0, (command, result.stderr)
        assert not RAW_CONTROLS.search(result.stdout), command
        json.loads(result.stdout)  # escaped as JSON escapes: the data is whole
    described = json.loads(manifold("tools", "--json", "--config", config).stdout)[0]["description"]
    assert described.endswith(" \u202edesrever\u202c \x9b2J")
    assert "[/] Opens it.\\x1b[2J" in shown["tools"]
    assert PAINTED_TOOL in shown["pins"]  # the name as the server wrote it, not a link
    assert "\\x1b]8;;https://evil.example" in shown[f"painted/{PAINTED_TOOL}"]
    assert "1.0\\x1b]0;title" in shown["servers"]


@pytest.mark.anyio
async def test_what_a_server_writes_reaches_the_gateways_log_as_one_line_of_text(tmp_path: Path) -> None:
    """The log quotes a server's name and version (`server 'x' ready (...)`), its errors, a URI: its escape
    sequences acted on the terminal the operator reads the log in, and its line breaks forged log lines."""
    from mcp import Client

    from tests.conftest import gateway_over_http

    config = tmp_path / "mcp.json"
    servers = {"painted": server_entry("painted.py", "--forge")}
    settings = {"data_dir": str(tmp_path / "data"), "log_level": "info", "ping_interval": 0}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    port = free_port()
    with (tmp_path / "stderr").open("wb") as stderr, gateway_over_http(config, port, stderr=stderr):
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            assert len((await client.list_tools()).tools) == 1  # the server started, so the log said so
    log = (tmp_path / "stderr").read_text()
    ready = [line for line in log.splitlines() if "server 'painted' ready" in line]
    # Its version, ESC ] 0 ; title ESC \ and a line break, written out: \x1b]0;title\x1b\ then \n.
    written_out = r"1.0\x1b]0;title\x1b\\nmcp-manifold ERROR mcp_manifold.forged: FORGED"
    assert len(ready) == 1 and written_out in ready[0], log
    assert not RAW_CONTROLS.search(log) and not any(line.startswith("mcp-manifold ERROR") for line in log.splitlines())


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_name_a_caller_made_up_reaches_manifold_audit_as_one_line_of_text(tmp_path: Path, mode: str) -> None:
    """The audit records the name a caller asked for, existing or not: its escapes must not act on the
    operator's terminal, nor its line breaks forge another entry."""
    from tests.conftest import stdio_gateway

    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"numbers": server_entry("numbers.py")},
                "profiles": {"everyone": {"principals": ["*"]}},
                "manifold": {"data_dir": str(tmp_path / "data"), "profile": "everyone"},
            }
        )
    )
    name = f"{ESC}[2J{ESC}]0;owned{ESC}\\numbers_add\n2026-01-01T00:00:00.000Z alice ok direct db_drop"
    async with stdio_gateway(config, mode=mode) as client:
        assert (await client.call_tool(name, {})).is_error
    shown = manifold("audit", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert ESC not in shown.stdout and len(shown.stdout.splitlines()) == 1, shown.stdout
    assert "denied - \\x1b[2J\\x1b]0;owned\\x1b\\numbers_add\\n2026-01-01" in shown.stdout
    as_json = manifold("audit", "--json", "--config", str(config))
    assert ESC not in as_json.stdout and json.loads(as_json.stdout)["name"] == name
