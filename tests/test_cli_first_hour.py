"""What a new user meets first, through the real `manifold` command in a temporary HOME (issue 24).

A broken server named with its reason while the others serve, no silent gateway without a config, the
config argument the same everywhere, commands taken from the config's folder, client files as they are.
"""

from __future__ import annotations

import datetime
import json
import os
import pty
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SERVERS, free_port, serve_endpoint, server_entry, server_over_http, stop_process


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def manifold(
    home: Path,
    *args: str,
    cwd: Path | str | None = None,
    timeout: float = 90,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`manifold ARGS` as a user with an empty HOME runs it (no XDG or MANIFOLD_CONFIG of the machine's)."""
    env = {**{k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "MANIFOLD_CONFIG")}, **(env or {})}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "mcp_manifold", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=env,
        input=stdin if stdin is not None else "",
    )


def not_mcp() -> dict[str, Any]:
    """A server that prints its complaint on stdout, where MCP belongs, and then hangs."""
    return server_entry("not_mcp.py")


def test_a_server_that_is_not_mcp_is_named_with_what_it_wrote_while_the_others_serve(
    write_config: Any, home: Path
) -> None:
    # init_timeout far beyond the subprocess timeout: only noticing what it wrote can end its start in time.
    config = write_config({"numbers": server_entry("numbers.py"), "broken": not_mcp()}, {"init_timeout": 300})
    result = manifold(home, "tools", "--config", str(config), "--json", timeout=120)
    assert result.returncode == 1, result.stderr  # the list lacks the failed server's tools
    assert {row["name"] for row in json.loads(result.stdout)} == {"numbers_add", "numbers_multiply", "numbers_sqrt"}
    assert "'broken'" in result.stderr and "'Error: could not load settings.toml'" in result.stderr
    assert "Traceback" not in result.stderr  # the SDK's parse tracebacks are not the user's business
    servers = manifold(home, "servers", "--config", str(config), "--json", timeout=120)
    row = {row["name"]: row for row in json.loads(servers.stdout)}["broken"]
    assert row["state"] == "failed" and "could not load settings.toml" in row["last_error"]


def test_a_tool_of_a_server_that_failed_says_why_it_is_missing(write_config: Any, home: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py"), "broken": server_entry("exits_early.py")})
    result = manifold(home, "call", "broken_anything", "--config", str(config))
    assert result.returncode == 1
    assert "unknown tool" not in result.stdout, result.stdout
    assert "'broken' is not running" in result.stdout and "fatal: missing API key" in result.stdout
    assert result.stderr.count("fatal: missing API key") <= 1, result.stderr  # the warning is said once
    # A name no failed server could own is still an unknown tool, with suggestions.
    other = manifold(home, "call", "numbers_nope", "--config", str(config))
    assert "unknown tool 'numbers_nope'" in other.stdout


def test_a_server_slower_than_init_timeout_names_the_setting(write_config: Any, home: Path) -> None:
    """A server that loads a model for 40 s said only "did not finish initialization within 30s"."""
    slow = {"command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"]}  # answers nothing, ends at EOF
    config = write_config({"slow": slow}, {"init_timeout": 1})
    (row,) = json.loads(manifold(home, "servers", "--config", str(config), "--json").stdout)
    assert row["last_error"] == (
        "server 'slow': did not finish initialization within 1s (init_timeout: raise it for a server that is slow "
        "to start)"
    )


def test_servers_exits_non_zero_only_when_an_enabled_server_failed(write_config: Any, home: Path) -> None:
    fine = write_config({"numbers": server_entry("numbers.py"), "off": server_entry("exits_early.py", enabled=False)})
    assert manifold(home, "servers", "--config", str(fine), "--json").returncode == 0
    servers = {
        "numbers": server_entry("numbers.py"),
        "bad": server_entry("exits_early.py"),
        "silent": {"command": sys.executable, "args": ["-c", "pass"]},  # exits at once, saying nothing
        "typo": {"command": "no-such-command-for-manifold"},
    }
    result = manifold(home, "servers", "--config", str(write_config(servers, name="b.json")))
    assert result.returncode == 1 and "3 enabled server(s) failed: bad, silent, typo" in result.stderr
    # The exit and its code, not the SDK's "MCPError: Connection closed" (all a silent one said).
    lines = result.stderr.splitlines()
    assert (
        "  bad: initialization failed: process exited with code 2 before it answered; stderr: 'fatal: missing API key'"
        in lines
    )
    assert "  silent: initialization failed: process exited with code 0 before it answered" in lines
    # Not Python's "[Errno 2] No such file or directory": what is missing, and where it was looked for.
    assert "  typo: command 'no-such-command-for-manifold' was not found on PATH" in result.stderr.splitlines()


def test_a_python_traceback_shows_where_it_came_from(write_config: Any, home: Path, tmp_path: Path) -> None:
    """A server that needs a variable it was not given: below its error, where the traceback came from, not
    Python's `~~~^^^` marks, which point into a line no longer shown."""
    script = tmp_path / "needs_token.py"
    script.write_text('import os\n\ntoken = os.environ["API_TOKEN_FOR_MANIFOLD_TEST"]\n')
    config = write_config({"needy": {"command": sys.executable, "args": [str(script)]}})
    result = manifold(home, "servers", "--config", str(config))
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("  needy: ")]
    assert "stderr: \"KeyError: 'API_TOKEN_FOR_MANIFOLD_TEST'\"" in line
    told = [part.strip() for part in line.split("; ")[2:]]  # the lines below the error, as they come
    assert told[:2] == [f'File "{script}", line 3, in <module>', 'token = os.environ["API_TOKEN_FOR_MANIFOLD_TEST"]']
    assert len(told) == 3 and not any(set(part) <= set("~^") for part in told), told


def test_config_check_warns_about_commands_that_are_not_installed(tmp_path: Path, home: Path) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "typo": {"command": "no-such-command-for-manifold"},
        "gone": {"command": "./bin/missing-server"},
        "fine": server_entry("numbers.py"),
        # A command written with its arguments, as some READMEs show it: no client runs it through a shell.
        "joined": {"command": f"{sys.executable} -m some_server --root '/srv/my files'"},
        "npx_like": {"command": "runner -y @scope/server", "env": {"PATH": str(tmp_path / "tools")}},
    }
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "runner").write_text("#!/bin/sh\n")
    (tmp_path / "tools" / "runner").chmod(0o755)
    config.write_text(json.dumps({"mcpServers": servers}))
    result = manifold(home, "config", "check", str(config))
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr
    assert "server 'typo': command 'no-such-command-for-manifold' was not found on PATH" in result.stderr
    assert f"command '{tmp_path / 'bin' / 'missing-server'}' does not exist" in result.stderr
    assert "'fine'" not in result.stderr
    lines = result.stderr.splitlines()
    joined = {"command": sys.executable, "args": ["-m", "some_server", "--root", "/srv/my files"]}
    assert (
        f"warning: {config}: server 'joined': command {servers['joined']['command']!r} does not exist; its "
        f'arguments go in "args": {json.dumps(joined)}; it would fail to start'
    ) in lines
    # Not taken from the config's folder for the slash in its argument, and not found on PATH.
    npx_like = {"command": "runner", "args": ["-y", "@scope/server"]}
    assert (
        f"warning: {config}: server 'npx_like': command 'runner -y @scope/server' does not exist; its "
        f'arguments go in "args": {json.dumps(npx_like)}; it would fail to start'
    ) in lines


def test_a_config_that_serves_nothing_is_warned_about(tmp_path: Path, home: Path) -> None:
    """`config check` said OK of a config with no servers (an import of an empty client file): a quiet gateway."""
    cases = {
        "none.json": ({"mcpServers": {}}, "mcpServers lists none"),
        "off.json": ({"mcpServers": {"a": {"command": "x", "enabled": False}}}, "no server is enabled"),
        "hub.json": ({"mcpServers": {}, "manifold": {"expose": ["hub"]}}, None),  # instances come at run time
    }
    for name, (data, which) in cases.items():
        config = tmp_path / name
        config.write_text(json.dumps(data))
        result = manifold(home, "config", "check", str(config))
        assert result.returncode == 0 and "OK" in result.stdout, result.stderr
        warning = f"warning: {config}: no servers: {which}, so a client sees no tools (add them under mcpServers, or "
        assert (warning in result.stderr) if which else "no servers" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("given", "told"), [("127.0.0.1:8080", "--http --host 127.0.0.1 --port 8080"), ("8080", "--http --port 8080")]
)
def test_an_address_given_to_http_is_told_apart_from_a_config_file(home: Path, given: str, told: str) -> None:
    """`--http` takes no value, so `serve --http 127.0.0.1:8080` made the address the config file, and the
    error spoke of two config files (or of a missing one)."""
    result = manifold(home, "serve", "--http", given)
    assert result.returncode == 2, result.stdout + result.stderr
    shown = " ".join(result.stderr.replace("│", " ").split())
    assert f"'{given}' is an address, not a config file: serve HTTP there with {told}" in shown, shown


@pytest.mark.parametrize("command", ["tools", "servers", "serve", "call numbers_add", "config check"])
def test_without_a_config_the_command_says_where_it_looked(home: Path, command: str) -> None:
    result = manifold(home, *command.split())
    default = home / ".config" / "mcp-manifold" / "mcp.json"
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no config file" in result.stderr and str(default) in result.stderr
    assert "--config" in result.stderr


def test_the_default_config_is_used_when_none_is_given(home: Path) -> None:
    default = home / ".config" / "mcp-manifold" / "mcp.json"
    default.parent.mkdir(parents=True)
    data = {"mcpServers": {"numbers": server_entry("numbers.py")}, "manifold": {"data_dir": str(home / "data")}}
    default.write_text(json.dumps(data))
    result = manifold(home, "tools", "--json")
    assert result.returncode == 0, result.stderr
    assert "numbers_add" in {row["name"] for row in json.loads(result.stdout)}


def test_servers_shows_the_config_asked_for_not_another_gateways(write_config: Any, home: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    # A live gateway (this test's own process stands in for it) serving another config with the same data dir.
    live = Path(json.loads(config.read_text())["manifold"]["data_dir"]) / "live"
    live.mkdir(parents=True)
    other = {"pid": os.getpid(), "started_at": 0, "config": "/elsewhere/demo.json", "expose": ["direct"]}
    (live / f"{os.getpid()}.json").write_text(json.dumps({**other, "servers": [{"name": "kitchen"}]}))
    result = manifold(home, "servers", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    assert [row["name"] for row in json.loads(result.stdout)] == ["numbers"]


def test_relative_commands_and_folders_are_taken_from_the_config_folder(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "project"
    (folder / "bin").mkdir(parents=True)
    wrapper = folder / "bin" / "py"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    # Found only from its working directory, which is the config's folder (cwd ".").
    (folder / "server.py").write_text(
        f"import runpy, sys\nsys.path.insert(0, {str(SERVERS)!r})\n"
        f"runpy.run_path({str(SERVERS / 'numbers.py')!r}, run_name='__main__')\n"
    )
    config = folder / "mcp.json"
    entry = {"command": "bin/py", "args": ["server.py"], "cwd": "."}
    config.write_text(json.dumps({"mcpServers": {"numbers": entry}, "manifold": {"data_dir": str(tmp_path / "d")}}))
    result = manifold(home, "tools", "--config", str(config), "--json", cwd="/")
    assert result.returncode == 0, result.stderr
    assert "numbers_add" in {row["name"] for row in json.loads(result.stdout)}


def test_the_demo_config_names_its_commands_from_its_own_folder(home: Path) -> None:
    demo = Path(__file__).parent.parent / "examples" / "demo.json"
    from mcp_manifold import load_config

    for server in load_config(demo).servers.values():
        assert server.command == str(demo.parent / ".." / ".venv" / "bin" / "python")
        assert server.cwd == str(demo.parent / "..")


def test_the_config_argument_is_the_same_for_every_command(write_config: Any, home: Path) -> None:
    config = str(write_config({"numbers": server_entry("numbers.py")}))
    assert manifold(home, "config", "check", "--config", config).returncode == 0
    assert manifold(home, "config", "check", config).returncode == 0
    tools = manifold(home, "tools", config, "--json")
    assert tools.returncode == 0 and "numbers_add" in tools.stdout, tools.stderr
    flags_then_file = manifold(home, "tools", "--log-level", "warning", config, "--json")
    assert flags_then_file.returncode == 0 and "numbers_add" in flags_then_file.stdout, flags_then_file.stderr
    call = manifold(home, "call", "numbers_add", config, "--args", '{"a": 1, "b": 2}')
    assert call.returncode == 0 and call.stdout.startswith("3"), call.stderr
    serve = manifold(home, "serve", config)  # stdio; stdin at EOF ends it
    assert serve.returncode == 0, serve.stderr
    two = manifold(home, "tools", config, "--config", config + ".other")
    assert two.returncode != 0 and "two config files" in two.stderr


def test_client_files_are_taken_as_they_are(tmp_path: Path, home: Path) -> None:
    """Claude Desktop's `globalShortcut`; Cursor's and Cline's `disabled: true`."""
    config = tmp_path / "claude_desktop_config.json"
    servers = {"numbers": server_entry("numbers.py"), "off": {**server_entry("words.py"), "disabled": True}}
    data = {"globalShortcut": "Ctrl+Space", "mcpServers": servers, "manifold": {"data_dir": str(tmp_path / "d")}}
    config.write_text(json.dumps(data))
    check = manifold(home, "config", "check", str(config))
    assert check.returncode == 0, check.stderr
    servers_shown = manifold(home, "servers", str(config), "--json")
    states = {row["name"]: row["state"] for row in json.loads(servers_shown.stdout)}
    assert states == {"numbers": "ready", "off": "disabled"}
    contradiction = tmp_path / "both.json"
    contradiction.write_text(json.dumps({"mcpServers": {"x": {"command": "x", "enabled": True, "disabled": True}}}))
    bad = manifold(home, "config", "check", str(contradiction))
    assert bad.returncode == 1 and "field 'disabled'" in bad.stderr


def test_a_folder_given_as_the_config_is_named_as_a_folder(tmp_path: Path, home: Path) -> None:
    result = manifold(home, "tools", "--config", str(tmp_path))
    assert result.returncode == 2 and "is a directory, not a config file" in result.stderr
    assert "unsupported file type" not in result.stderr


def test_a_port_in_use_is_one_line_and_never_a_serving_line(write_config: Any, home: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = manifold(home, "serve", str(config), "--http", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot serve at http://127.0.0.1:{port}: address already in use "
        "(another gateway? pick another with --port)"
    ]


@pytest.mark.parametrize(
    ("setting", "command"),
    [
        ("data_dir", ("serve",)),
        ("data_dir", ("pins",)),
        ("audit_path", ("tools",)),
    ],
)
def test_a_folder_setting_that_cannot_be_made_is_one_line_naming_the_setting(
    write_config: Any, home: Path, tmp_path: Path, setting: str, command: tuple[str, ...]
) -> None:
    """A data dir under a file (or read-only, or another user's) ended every command in mkdir's traceback."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    config = write_config({"numbers": server_entry("numbers.py")}, {setting: str(a_file / "state")})
    result = manifold(home, *command, "--config", str(config))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"error: {setting} '{a_file / 'state'}' cannot be used: Not a directory; "
        f"set {setting} (or MANIFOLD_{setting.upper()}) to a folder you can write"
    ]


# Run as `python -c`: the real command, with another process's bind played right before uvicorn's own.
TAKE_THE_PORT_BEFORE_UVICORN = """
import runpy, socket, sys
import uvicorn

original = uvicorn.Server.startup
held = []

async def startup(self, sockets=None):
    try:
        held.append(socket.create_server((self.config.host, self.config.port)))
        print("test: took the port before uvicorn", file=sys.stderr, flush=True)
    except OSError:
        print("test: the port was already held", file=sys.stderr, flush=True)
    await original(self, sockets)

uvicorn.Server.startup = startup
sys.argv = ["manifold", *sys.argv[1:]]
runpy.run_module("mcp_manifold", run_name="__main__", alter_sys=True)
"""


def test_the_port_is_held_from_the_check_on_so_nothing_can_take_it_before_uvicorn(
    write_config: Any, home: Path
) -> None:
    """A port only checked could be taken before uvicorn bound it, and uvicorn then said so in a traceback.
    Something tries to take it right before uvicorn binds: it must find it held, and the gateway serves."""
    config = write_config({"numbers": server_entry("numbers.py")})
    port = free_port()
    env = {**os.environ, "HOME": str(home)}
    serve = ["serve", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-c", TAKE_THE_PORT_BEFORE_UVICORN, *serve],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        assert process.stderr.readline() == "test: the port was already held\n"
        line = process.stderr.readline()
        assert line.startswith(f"mcp-manifold: serving 1 server(s) at http://127.0.0.1:{port}/mcp"), line
        assert process.poll() is None
    finally:
        stop_process(process)


def test_version_short_help_and_completion(home: Path) -> None:
    from mcp_manifold._version import __version__

    version = manifold(home, "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"mcp-manifold {__version__}"
    short = manifold(home, "-h")
    assert short.returncode == 0 and "Usage" in short.stdout and "--install-completion" in short.stdout
    command_help = manifold(home, "tools", "-h")
    assert command_help.returncode == 0 and "[CONFIG]" in command_help.stdout


def test_start_up_progress_is_shown_on_a_terminal_only(write_config: Any, home: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    piped = manifold(home, "tools", str(config), "--json")
    assert piped.returncode == 0 and "ready" not in piped.stderr and "starting" not in piped.stderr
    controller, terminal = pty.openpty()
    env = {**os.environ, "HOME": str(home), "TERM": "xterm", "COLUMNS": "100"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_manifold", "tools", str(config), "--json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=terminal,
        env=env,
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(timeout=90) == 0
    assert process.stdout is not None and "numbers_add" in process.stdout.read().decode()
    text = shown.decode(errors="replace")
    assert "starting numbers" in text or "server(s) ready" in text, text


def test_a_stdio_gateway_started_in_a_terminal_says_what_it_waits_for(write_config: Any, home: Path) -> None:
    """`manifold serve mcp.json` typed in a terminal printed nothing and looked stuck; a client never sees it."""
    config = write_config({"numbers": server_entry("numbers.py")})
    said = "serving 1 server(s) over stdio, for an MCP client that runs this command"
    piped = manifold(home, "serve", str(config))  # stdin a pipe (at EOF), as a client's
    assert piped.returncode == 0 and said not in piped.stderr, piped.stderr
    controller, terminal = pty.openpty()
    env = {**os.environ, "HOME": str(home), "TERM": "xterm", "COLUMNS": "300"}
    command = [sys.executable, "-m", "mcp_manifold", "serve", str(config)]
    process = subprocess.Popen(command, stdin=terminal, stdout=subprocess.PIPE, stderr=terminal, env=env)
    os.close(terminal)
    shown = b""
    try:
        deadline = time.monotonic() + 60
        while said.encode() not in shown:
            assert time.monotonic() < deadline, shown  # quiet: it never said what it waits for
            if select.select([controller], [], [], 1)[0]:
                shown += os.read(controller, 4096)  # EIO (an OSError) if it ended without saying it
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        os.close(controller)
        stop_process(process)
    assert process.stdout is not None and process.stdout.read() == b""  # the wire stays clean


def test_http_start_line_names_the_dashboard_and_metrics_and_slash_answers(write_config: Any, home: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    port = free_port()
    env = {**os.environ, "HOME": str(home)}
    command = [sys.executable, "-m", "mcp_manifold", "serve", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        base = f"http://127.0.0.1:{port}"
        assert line.startswith(f"mcp-manifold: serving 1 server(s) at {base}/mcp"), line
        assert f"{base}/ui" in line and f"{base}/metrics" in line
        with urllib.request.urlopen(f"{base}/", timeout=30) as response:
            body = response.read().decode()
        assert response.status == 200 and "/mcp" in body and "/ui" in body and "/metrics" in body
    finally:
        stop_process(process)


def test_tables_keep_names_whole_and_leave_start_up_banners_out(write_config: Any, home: Path) -> None:
    name = "a-rather-long-server-name"
    numbers = SERVERS / "numbers.py"
    chatty = {
        "command": "sh",
        "args": ["-c", f'echo "listening, v1.2.3 banner" >&2; exec "{sys.executable}" "{numbers}"'],
    }
    config = write_config({name: chatty})
    env_80 = {"COLUMNS": "80"}
    servers = manifold(home, "servers", str(config), env=env_80)
    assert servers.returncode == 0, servers.stderr
    assert name in servers.stdout and "banner" not in servers.stdout
    tools = manifold(home, "tools", str(config), env=env_80)
    assert f"{name}_multiply" in tools.stdout, tools.stdout


def test_a_failed_servers_error_is_readable_at_80_columns(write_config: Any, home: Path) -> None:
    """In a column of its own the last error was a few characters wide at 80 columns (item 13)."""
    name = "a-rather-long-server-name"
    complaint = "could not load settings.toml from the folder it was started in; see the manual, chapter 3"
    broken = {"command": "sh", "args": ["-c", f'echo "{complaint}" >&2; exit 3']}
    config = write_config({name: broken, "numbers": server_entry("numbers.py")})
    table = manifold(home, "servers", str(config), env={"COLUMNS": "80"})
    assert table.returncode == 1, table.stderr
    lines = table.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), table.stdout
    assert any(line.split()[:1] == [name] for line in lines), table.stdout  # whole, in the table
    below = table.stdout[table.stdout.index("last error / stderr:") :]
    assert complaint in " ".join(below.split()), below  # the whole reason, in words a user can read
    assert "numbers:" not in below  # a server that runs has nothing to say there
    as_json = manifold(home, "servers", str(config), "--json")
    rows = {row["name"]: row for row in json.loads(as_json.stdout)}
    assert set(rows) == {name, "numbers"} and complaint in json.dumps(rows[name]["stderr_tail"])
    assert {"last_error", "server_info", "protocol", "breaker", "stderr_tail"} <= set(rows[name])


def test_a_remote_server_that_cannot_be_reached_is_named_by_its_address(tmp_path: Path, home: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp?token=s3cret-value"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"remote": {"url": url}}, "manifold": {"data_dir": str(tmp_path)}}))
    result = manifold(home, "servers", str(config), "--json")
    (row,) = json.loads(result.stdout)
    assert row["state"] == "failed" and f"http://127.0.0.1:{port}/mcp" in row["last_error"], row
    assert "s3cret-value" not in result.stdout + result.stderr


def test_a_remote_server_that_refuses_says_what_it_answered_and_what_that_usually_means(
    write_config: Any, home: Path
) -> None:
    """The SDK's client says only "Not Found" or "Server returned an error response" of a refusing answer,
    and the SSE client's error ended in a link to MDN: the status, the address and a likely fix instead."""
    with server_over_http("numbers.py") as url:
        base = url.removesuffix("/mcp")
        servers = {
            "wrong_path": {"url": f"{base}/wrong?token=s3cret-value"},
            "not_sse": {"url": url, "transport": "sse"},
            "fine": {"url": url},
        }
        result = manifold(home, "servers", "--config", str(write_config(servers)), "--json")
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["fine"]["state"] == "ready", rows["fine"]
    assert rows["wrong_path"]["last_error"].endswith(
        f"initialization failed: MCPError: Not Found (POST {base}/wrong?token=*** answered HTTP 404 Not Found: "
        "is the URL's path right? Streamable HTTP servers often serve /mcp)"
    )
    assert rows["not_sse"]["last_error"].endswith(
        f'GET {url} answered HTTP 400 Bad Request: it may serve streamable HTTP (drop "transport": "sse")'
    )
    assert "s3cret-value" not in result.stdout + result.stderr


class LoginPage(BaseHTTPRequestHandler):
    """A site's login page where the MCP endpoint was expected: 200 and HTML to whatever is asked."""

    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        page = b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    do_GET = do_POST = do_DELETE = answer

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def self_signed_tls(folder: Path) -> Iterator[str]:
    """An HTTPS address whose certificate nobody here trusts (made now, for localhost)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder(subject_name=name, issuer_name=name, public_key=key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    server = ThreadingHTTPServer(("127.0.0.1", 0), LoginPage)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda *args: None  # type: ignore[method-assign]  # the client's refusal, expected
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://localhost:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_remote_server_that_answers_no_mcp_says_what_it_met_and_what_to_check(
    tmp_path: Path, write_config: Any, home: Path
) -> None:
    """The SDK's "Unexpected content type: text/html" and httpx's "All connection attempts failed" named
    neither what answered nor what to look at."""
    refused = f"http://127.0.0.1:{free_port()}/mcp?token=s3cret-value"
    with serve_endpoint(LoginPage) as base, self_signed_tls(tmp_path) as untrusted:
        page = base.removesuffix("/v1") + "/mcp?token=s3cret-value"
        servers = {"page": {"url": page}, "refused": {"url": refused}, "untrusted": {"url": untrusted}}
        # An SSE client said only "Expected response with content type 'text/event-stream', got 'text/html'".
        servers["sse_page"] = {"url": page, "transport": "sse"}
        result = manifold(home, "servers", "--config", str(write_config(servers)), "--json")
    errors = {row["name"]: row["last_error"] for row in json.loads(result.stdout)}
    shown = page.replace("s3cret-value", "***")
    assert errors["page"].endswith(
        f"(POST {shown} answered HTTP 200 OK with text/html: a web page, not MCP: is the URL the server's MCP "
        "endpoint (often /mcp), or a login page that wants a credential?)"
    ), errors["page"]
    assert errors["sse_page"] == (
        f"GET {shown} answered HTTP 200 OK with text/html: a web page, not MCP: is the URL the "
        "server's MCP endpoint (often /sse), or a login page that wants a credential?"
    ), errors["sse_page"]
    assert errors["refused"] == (
        f"cannot connect to {refused.replace('s3cret-value', '***')}: connection refused "
        "(is the server running, on that port?)"
    )
    assert errors["untrusted"].startswith(f"cannot connect to {untrusted}: its TLS certificate is not trusted here (")
    assert errors["untrusted"].endswith("naming its CA's PEM file in the SSL_CERT_FILE environment variable")
    assert "s3cret-value" not in result.stdout + result.stderr


def test_a_pinned_tool_that_differs_does_not_claim_anyone_approved_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import mcp_types as types

    from mcp_manifold._core.listing import Listing
    from mcp_manifold._runtime.pin_store import PinStore

    def tool(description: str) -> types.Tool:
        return types.Tool(name="send", description=description, input_schema={"type": "object"})

    # Two configs sharing a data dir, each with a server called "mail": nobody approved either.
    store = PinStore(tmp_path, "warn")
    store.observe("mail", Listing(tools=[tool("Send mail.")]))
    with caplog.at_level("WARNING"):
        store.observe("mail", Listing(tools=[tool("Send a text message.")]))
    assert "differs from the definition pinned for it" in caplog.text
    assert "since it was approved" not in caplog.text
    store.close()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_installs_only_what_the_gateway_needs_and_says_so(tmp_path: Path) -> None:
    checkout = Path(__file__).parent.parent
    venv = tmp_path / "venv"  # not there: make plans every step (-n: prints them, runs nothing)

    def plan(target: str) -> str:
        done = subprocess.run(
            ["make", "-n", target, f"VENV={venv}"], cwd=checkout, capture_output=True, text=True, check=True
        )
        return done.stdout

    demo = plan("demo")
    assert "pip install --progress-bar on --disable-pip-version-check -e ." in demo
    assert "[dev]" not in demo and "playwright" not in demo.lower() and "npm" not in demo
    assert "echo" in demo  # says what it installs before it does
    assert "[dev]" in plan("test")  # the test tools still come with `make test`


@pytest.mark.anyio
async def test_install_puts_a_working_gateway_into_the_clients_file_with_a_backup(
    write_config: Any, home: Path
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    config = write_config({"numbers": server_entry("numbers.py")})
    desktop = home / ".config" / "Claude" / "claude_desktop_config.json"
    desktop.parent.mkdir(parents=True)
    original = {"globalShortcut": "Ctrl+Space", "mcpServers": {"numbers": {"command": "npx", "args": ["x"]}}}
    desktop.write_text(json.dumps(original))

    dry = manifold(home, "install", "claude-desktop", str(config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["mcpServers"]["manifold"]["args"][-1] == str(config.resolve())
    assert json.loads(desktop.read_text()) == original and len(list(desktop.parent.iterdir())) == 1

    done = manifold(home, "install", "claude-desktop", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "twice: numbers" in done.stderr  # a server in both the client's file and the gateway is pointed out
    (backup,) = desktop.parent.glob("claude_desktop_config.json.bak-*")
    assert json.loads(backup.read_text()) == original
    installed = json.loads(desktop.read_text())
    assert installed["globalShortcut"] == "Ctrl+Space" and installed["mcpServers"]["numbers"]["command"] == "npx"
    entry = installed["mcpServers"]["manifold"]
    again = manifold(home, "install", "claude-desktop", str(config))
    assert "nothing changed" in again.stderr and len(list(desktop.parent.glob("*.bak-*"))) == 1

    # The entry starts the gateway as the client would, and it serves the config's tools.
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=dict(os.environ))
    async with Client(params, mode="legacy") as client:
        assert "numbers_add" in {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("client, relative", [("cursor", ".cursor/mcp.json"), ("claude-code", ".claude.json")])
def test_install_writes_cursors_and_claude_codes_files(
    write_config: Any, home: Path, client: str, relative: str
) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    result = manifold(home, "install", client, str(config))
    assert result.returncode == 0, result.stderr
    entry = json.loads((home / relative).read_text())["mcpServers"]["manifold"]
    assert entry["args"] == ["-m", "mcp_manifold", "serve", "--config", str(config.resolve())]
    assert (entry.get("type") == "stdio") == (client == "claude-code")


def test_install_never_replaces_another_server_of_that_name(write_config: Any, home: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text(json.dumps({"mcpServers": {"manifold": {"command": "something-else"}}}))
    refused = manifold(home, "install", "cursor", str(config))
    assert refused.returncode == 2 and "not mcp-manifold; use --name or --force" in refused.stderr
    assert json.loads(cursor.read_text())["mcpServers"]["manifold"]["command"] == "something-else"


def test_register_help_names_the_settings_it_reads(home: Path) -> None:
    result = manifold(home, "register", "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0 and "--discovery-dir" in result.stdout and "--ping-interval" in result.stdout


def test_the_readmes_client_snippet_runs_against_a_served_gateway(write_config: Any, home: Path) -> None:
    """The README's first client example, as printed there, against `manifold serve --http` (item 15)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    start = readme.index("```python\n", readme.index("Connect any streamable-HTTP MCP client")) + len("```python\n")
    snippet = readme[start : readme.index("```", start)]
    config = write_config({"numbers": server_entry("numbers.py")})
    port = free_port()
    env = {**os.environ, "HOME": str(home)}
    command = [sys.executable, "-m", "mcp_manifold", "serve", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        assert process.stderr is not None
        assert "serving" in process.stderr.readline()
        client = snippet.replace("127.0.0.1:8765", f"127.0.0.1:{port}")
        result = subprocess.run(
            [sys.executable, "-c", client], capture_output=True, text=True, timeout=90, env=env, check=False
        )
        assert result.returncode == 0, result.stderr
        names, answer = result.stdout.splitlines()[:2]
        assert "'numbers_add'" in names and "text='3" in answer, result.stdout
    finally:
        stop_process(process)
