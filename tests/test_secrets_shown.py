"""Nothing the gateway shows about a server carries a secret, and its files are private (issue 21).

One gateway over HTTP with every surface, started with `OPS_SECRET` in its environment and a config
that hands the secret to its servers by `${OPS_SECRET}`: in a stdio server's arguments and env, in an
HTTP server's URL password and a header; a hub instance is registered with the secret in its URL. The
servers repeat the secret on stderr and in their error messages. Then every client- and
operator-facing output is collected (every surface in both client eras, the dashboard API, /metrics,
`manifold servers` as JSON and as a table, the gateway's log and the audit file) and searched for the
secret. Each output is also checked to hold what it should (the row, the stderr line, the error), so
that an empty answer cannot pass.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from mcp_manifold._config import parse_config_data
from mcp_manifold._errors import ConfigError
from mcp_manifold._runtime import log_scrub
from mcp_manifold._runtime.discovery import write_record
from mcp_manifold._runtime.private_files import secure_data_dir
from mcp_manifold._runtime.registration import build_record
from tests.conftest import SERVERS, free_port, manifold_command, server_entry, stop_process, wait_for_port

pytestmark = pytest.mark.anyio

SECRET = "ops-Secret-4f9a2c71"
SHOWN = "${OPS_SECRET}"
ENV = {**os.environ, "OPS_SECRET": SECRET}


@dataclass
class Gateway:
    url: str
    base: str
    config: Path
    data: Path
    log: Path
    process: subprocess.Popen[bytes]
    outputs: dict[str, str] = field(default_factory=dict)  # where -> what was shown there

    def saw(self, where: str, shown: Any) -> str:
        text = shown if isinstance(shown, str) else json.dumps(shown, default=str)
        self.outputs[where] = text
        return text


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    folder = tmp_path_factory.mktemp("secrets")
    # An HTTP server that was given the secret too (it repeats it in its errors).
    remote_port = free_port()
    remote = subprocess.Popen(
        [sys.executable, str(SERVERS / "secretive.py"), "--http", str(remote_port), "--api-key", SECRET],
        start_new_session=True,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(remote_port, remote)
    # A data dir left too open by an older version: the gateway tightens it at start.
    data = folder / "data"
    (data / "audit").mkdir(parents=True)
    data.chmod(0o755)
    (data / "audit").chmod(0o755)
    (data / "audit" / "audit.jsonl").write_text("")
    (data / "audit" / "audit.jsonl").chmod(0o644)
    (data / "notes.txt").write_text("left here by hand\n")
    (data / "notes.txt").chmod(0o644)
    discovery = folder / "instances"
    discovery.mkdir(mode=0o700)
    # Refreshed once an hour: it stays live for every test of the module (this process is its pid).
    record = build_record(
        "gamma", url=f"http://tok:{SECRET}@127.0.0.1:{remote_port}/mcp", instance_id="gamma", interval=3600
    )
    write_record(discovery, record)
    servers = {
        "local": server_entry("secretive.py", "--api-key", SHOWN, env={"SECRETIVE_TOKEN": SHOWN}),
        "remote": {"url": f"http://ops:{SHOWN}@127.0.0.1:{remote_port}/mcp", "headers": {"X-Api-Key": SHOWN}},
    }
    settings = {
        "data_dir": str(data),
        "expose": ["hub", "direct", "proxy", "dispatch", "retrieve"],
        "discovery_dir": str(discovery),
        "ping_interval": 0.5,
        "log_level": "debug",
        "spill_threshold": 2000,
        "pinning": "warn",
    }
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    port = free_port()
    log = folder / "gateway.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            manifold_command(config, "--http", "--port", str(port)), start_new_session=True, stderr=stderr, env=ENV
        )
    try:
        wait_for_port(port, process, timeout=60)
        base = f"http://127.0.0.1:{port}"
        yield Gateway(f"{base}/mcp", base, config, data, log, process)
    finally:
        stop_process(process)
        stop_process(remote)


def text_of(result: types.CallToolResult) -> str:
    return "".join(
        item.text if isinstance(item, types.TextContent) else getattr(getattr(item, "resource", None), "text", "")
        for item in result.content
    )


def manifold(gateway: Gateway, *args: str) -> str:
    command = [sys.executable, "-m", "mcp_manifold", *args, "--config", str(gateway.config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=ENV)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


async def every_surface(gateway: Gateway, client: Client, era: str) -> None:
    """What a client sees of the servers on every surface."""
    tools = await client.list_tools()
    gateway.saw(f"{era} tools/list", [tool.model_dump(mode="json") for tool in tools.tools])
    direct = gateway.saw(f"{era} direct leak", text_of(await client.call_tool("local_leak", {})))
    assert f"refused key {SHOWN}" in direct, direct
    remote = gateway.saw(f"{era} direct remote leak", text_of(await client.call_tool("remote_leak", {})))
    assert f"refused key {SHOWN}" in remote, remote
    listed = text_of(await client.call_tool("proxy", {"action": "list", "type": "tool", "limit": 1000}))
    assert "local_leak" in gateway.saw(f"{era} proxy list", listed)
    info = text_of(await client.call_tool("proxy", {"action": "info", "type": "tool", "path": "local_leak"}))
    assert "leak" in gateway.saw(f"{era} proxy info", info)
    proxied = text_of(await client.call_tool("proxy", {"action": "call", "type": "tool", "path": "remote_leak"}))
    assert "refused key" in gateway.saw(f"{era} proxy call", proxied)
    dispatch = text_of(await client.call_tool("proxy-dispatch", {"action": "list", "includeTools": True}))
    assert f"--api-key {SHOWN}" in gateway.saw(f"{era} dispatch list", dispatch), dispatch
    called = await client.call_tool(
        "proxy-dispatch", {"action": "call", "tool": "leak", "connection": "local", "arguments": {}}
    )
    assert "refused key" in gateway.saw(f"{era} dispatch call", text_of(called))
    found = text_of(await client.call_tool("retrieve_tools", {"query": "fail with an error message key"}))
    assert "leak" in gateway.saw(f"{era} retrieve", found)
    rows = {row["id"]: row for row in json.loads(text_of(await client.call_tool("instances_list", {})))}
    gateway.saw(f"{era} instances_list", rows)
    assert f"--api-key {SHOWN}" in rows["local"]["endpoint"], rows["local"]
    assert rows["remote"]["endpoint"].startswith(f"http://ops:{SHOWN}@"), rows["remote"]
    assert rows["gamma"]["endpoint"].startswith("http://tok:***@"), rows["gamma"]


async def test_a_secret_from_the_environment_is_never_shown(gateway: Gateway) -> None:
    async with Client(gateway.url, mode="legacy") as client:
        await every_surface(gateway, client, "2025-11-25")
        # A hub instance whose URL carries the secret, connected and called.
        await client.call_tool("instances_connect", {"instance_id": "gamma"})
        leaked = gateway.saw("hub instance leak", text_of(await client.call_tool("leak", {})))
        assert "refused key ***" in leaked, leaked
    async with Client(gateway.url, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        await every_surface(gateway, client, "2026-07-28")

    async with httpx.AsyncClient(base_url=gateway.base, timeout=30) as http:
        overview = (await http.get("/ui/api/overview")).json()
        gateway.saw("/ui/api/overview", overview)
        servers = {row["name"]: row for row in overview["servers"]}
        assert any(SHOWN in line for line in servers["local"]["stderr_tail"]), servers["local"]
        endpoints = {row["id"]: row["endpoint"] for row in overview["instances"]}
        assert f"--api-key {SHOWN}" in endpoints["local"], endpoints
        for path in ("/ui/api/tools", "/ui/api/calls", "/ui/api/search?q=leak", "/metrics"):
            response = await http.get(path)
            assert response.status_code == 200, (path, response.text)
            gateway.saw(path, response.text)

    # The live snapshot is published every 2 s (live_status.INTERVAL): wait for the one after the calls.
    for _attempt in range(40):
        table = gateway.saw("manifold servers", manifold(gateway, "servers"))
        if "hub instances" in table:
            break
        await anyio.sleep(0.25)
    assert "hub instances" in table and "gamma" in table, table
    live = json.loads(gateway.saw("manifold servers --json", manifold(gateway, "servers", "--json")))
    assert any(SHOWN in row["endpoint"] for g in live["gateways"] for row in g["instances"]), live
    probed = gateway.saw("manifold servers --probe --json", manifold(gateway, "servers", "--probe", "--json"))
    assert "starting with key" in probed, probed
    audit = "".join(path.read_text() for path in sorted((gateway.data / "audit").glob("audit*")))
    assert '"original":"leak","outcome":"error"' in gateway.saw("audit", audit)  # a tool error: no text kept
    gateway.saw("gateway log", gateway.log.read_text())

    leaks = [where for where, text in gateway.outputs.items() if SECRET in text]
    assert not leaks, {where: _around(gateway.outputs[where]) for where in leaks}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_nothing_shown_over_stdio_either(gateway: Gateway, mode: str) -> None:
    command = manifold_command(gateway.config)
    params = StdioServerParameters(command=command[0], args=command[1:], env=ENV)
    async with Client(params, mode=mode) as client:
        await every_surface(gateway, client, f"stdio {mode}")
    leaks = [where for where, text in gateway.outputs.items() if where.startswith("stdio") and SECRET in text]
    assert not leaks, {where: _around(gateway.outputs[where]) for where in leaks}


def _around(text: str) -> str:
    at = text.index(SECRET)
    return text[max(0, at - 120) : at + 60]


async def test_every_file_in_the_data_dir_is_private(gateway: Gateway) -> None:
    async with Client(gateway.url, mode="legacy") as client:
        await client.call_tool("local_hello", {})
        spilled = await client.call_tool("local_big", {"size": 5000})  # above spill_threshold: a file
        assert "spill" in text_of(spilled) or spilled.structured_content is not None, text_of(spilled)
        await client.call_tool("retrieve_tools", {"query": "say hello"})  # the search index
    # While the gateway runs: its SQLite files are open, with their -wal and -shm files beside them.
    modes = {
        str(path.relative_to(gateway.data)): stat.S_IMODE(path.lstat().st_mode)
        for path in [gateway.data, *gateway.data.rglob("*")]
    }
    for name in ("pins.sqlite", "pins.sqlite-wal", "pins.sqlite-shm", "search.sqlite", "search.sqlite-wal"):
        assert name in modes, sorted(modes)
    assert any(name.startswith("spill/") and "result-" in name for name in modes), sorted(modes)
    assert "audit/audit.jsonl" in modes and "notes.txt" in modes, sorted(modes)
    open_to_others = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    assert not open_to_others, open_to_others
    assert modes["."] == 0o700 and modes["audit"] == 0o700 and modes["notes.txt"] == 0o600
    # The looser dir and files left by "an older version" were tightened at start, with one line saying so.
    lines = [line for line in gateway.log.read_text().splitlines() if "made the data dir" in line]
    assert len(lines) == 1, lines
    assert "notes.txt" in lines[0] and "audit/audit.jsonl" in lines[0] and "4 entries" in lines[0], lines


# --- the rules, one by one -------------------------------------------------------------------------


def test_the_redaction_rules() -> None:
    env = {"OPS_SECRET": SECRET, "SHORT": "abc", "HOST": "db.internal"}
    config = parse_config_data(
        {
            "mcpServers": {
                "local": {
                    "command": "server",
                    "args": ["--api-key", "${OPS_SECRET}", "--token=written-in-file", "--host", "${HOST}", "${SHORT}"],
                    "env": {"FROM_ENV": "${OPS_SECRET}", "WRITTEN": "in-the-file", "MIXED": "x${OPS_SECRET}"},
                },
                "remote": {
                    "url": "https://user:${OPS_SECRET}@h.example/mcp?key=literal-key&page=2",
                    "headers": {"Authorization": "Bearer ${OPS_SECRET}", "X-Written": "literal"},
                },
            }
        },
        source="test",
        env=env,
    )
    local, remote = config.servers["local"], config.servers["remote"]
    assert local.endpoint() == f"server --api-key {SHOWN} --token=*** --host ${{HOST}} abc"  # too short: as is
    assert local.redacted()["env"] == {"FROM_ENV": SHOWN, "WRITTEN": "***", "MIXED": "***"}
    assert remote.endpoint() == f"https://user:{SHOWN}@h.example/mcp?key=***&page=2"
    assert remote.redacted()["headers"] == {"Authorization": f"Bearer {SHOWN}", "X-Written": "***"}
    said = f"refused {SECRET} for written-in-file at db.internal: abc"
    assert local.scrub(said) == f"refused {SHOWN} for *** at ${{HOST}}: abc"
    assert remote.scrub(f"GET https://user:{SECRET}@h.example/mcp?key=literal-key&page=2: 401") == (
        f"GET https://user:{SHOWN}@h.example/mcp?key=***&page=2: 401"
    )
    assert SECRET not in repr(local) and SECRET not in repr(remote)

    # A config problem that quotes a value from the environment shows the variable instead.
    with pytest.raises(ConfigError) as problem:
        parse_config_data({"mcpServers": {"x": {"command": "c", "timeout": "${OPS_SECRET}"}}}, source="t", env=env)
    assert SECRET not in str(problem.value) and f"not {SHOWN!r}" in str(problem.value), str(problem.value)


def test_a_setting_with_choices_refuses_a_secret_without_showing_it() -> None:
    """A setting with choices compares its value lower-cased: its refusal quoted it so, which is not the
    variable's value (it has a capital letter), so `config check`, a reload's log and the dashboard
    printed the secret in full."""
    env = {"OPS_SECRET": SECRET}
    settings = {"log_level": "${OPS_SECRET}", "expose": ["direct", " ${OPS_SECRET}"]}
    with pytest.raises(ConfigError) as problem:
        parse_config_data({"mcpServers": {}, "manifold": settings}, source="t", env=env)
    said = str(problem.value)
    assert SECRET.lower() not in said.lower(), said
    assert f"field 'log_level': must be one of 'debug', 'info', 'warning', 'error', 'critical', not {SHOWN!r}" in said
    assert f"field 'expose': got ' {SHOWN}'; pick one or more of" in said


def test_a_secret_is_hidden_percent_encoded_too() -> None:
    # An HTTP library quotes the URL it sent in its errors, with the secret's reserved characters encoded.
    secret = "ops/Secret+4f9 a@c:ü"
    written = "in/file secret@x"
    config = parse_config_data(
        {"mcpServers": {"remote": {"url": "http://127.0.0.1:9/mcp?session=${ENCODED}", "headers": {"X-Key": written}}}},
        source="t",
        env={"ENCODED": secret},
    )
    remote = config.servers["remote"]
    sent = str(httpx.URL(remote.url))  # how httpx writes it: p%2F..., %20 or +, lower or upper hex
    assert secret not in sent
    lower_hex = re.sub("%[0-9A-F]{2}", lambda found: found.group().lower(), sent)
    for shown_url in (sent, sent.replace("%20", "+"), lower_hex, quote(remote.url, safe=":/?=")):
        said = remote.scrub(f"Client error '404 Not Found' for url '{shown_url}'")
        assert "ops" not in said.replace("http", "") and "${ENCODED}" in said, said
    said = remote.scrub(f"refused {httpx.QueryParams({'k': written})} and {quote(written, safe='')}")
    assert said == "refused k=*** and ***", said
    assert remote.endpoint() == "http://127.0.0.1:9/mcp?session=${ENCODED}"

    handler_output = io.StringIO()
    handler = logging.StreamHandler(handler_output)
    logger = logging.getLogger(log_scrub.LOGGER)
    logger.addHandler(handler)
    remove = log_scrub.install(lambda: config.servers.values())
    try:
        logger.warning("GET %s failed", sent)
    finally:
        remove()
        logger.removeHandler(handler)
    assert handler_output.getvalue() == "GET http://127.0.0.1:9/mcp?session=${ENCODED} failed\n"


def test_a_token_that_ends_in_a_newline_is_a_config_problem_that_does_not_show_it() -> None:
    """Read from a file, a token often ends in a newline. As a header no HTTP library sends it, and httpx's
    error quoted it (`Illegal header value b'Bearer <token>\\n'`) to every caller of the server's tools,
    spelled so that the secret as given was not found in it to hide."""
    env = {"OPS_SECRET": SECRET + "\n"}
    url = "https://h.example/mcp"
    for headers in ({"Authorization": "Bearer ${OPS_SECRET}"}, {"X-Key": " padded"}, {"X-Key": "a\r\nX-Injected: 1"}):
        with pytest.raises(ConfigError) as problem:
            parse_config_data({"mcpServers": {"r": {"url": url, "headers": headers}}}, source="t", env=env)
        said = str(problem.value)
        (name,) = headers
        assert f"field 'headers.{name}'" in said and "no line break" in said, said
        assert SECRET not in said and "padded" not in said and "Injected" not in said, said
    with pytest.raises(ConfigError, match="'X Key' is no HTTP header name"):
        parse_config_data({"mcpServers": {"r": {"url": url, "headers": {"X Key": "v"}}}}, source="t", env=env)


def test_a_secret_is_hidden_however_an_error_spells_it() -> None:
    """A stdio server's env may still end in a newline: an error that quotes it escaped, or without the
    newline, hides it all the same."""
    env = {"OPS_SECRET": SECRET + "\n", "ODD": "tok\u00e9n-with-\\-and-'"}
    config = parse_config_data(
        {"mcpServers": {"s": {"command": "srv", "env": {"TOKEN": "${OPS_SECRET}", "OTHER": "${ODD}"}}}},
        source="t",
        env=env,
    )
    server = config.servers["s"]
    for said in (
        f"Illegal header value {('Bearer ' + SECRET + chr(10)).encode()!r}",
        f"refused {SECRET + chr(10)!r}",
        f"refused {SECRET}.",
        f"refused {env['ODD']!r} and {env['ODD'].encode()!r}",
    ):
        shown = server.scrub(said)
        assert SECRET not in shown and "with-" not in shown, shown
        assert "${OPS_SECRET}" in shown or "${ODD}" in shown, shown


def test_an_errors_data_passed_to_the_client_shows_no_secret_in_its_values_or_keys() -> None:
    # A server's error that asks the client to act reaches it with its `data`: a secret of the server's
    # is hidden wherever it is, a key of a map (a URL the server names, say) included.
    from mcp.shared.exceptions import MCPError

    from mcp_manifold._errors import BackendRequestError
    from mcp_manifold._runtime.backend_errors import translate_backend_errors

    config = parse_config_data(
        {"mcpServers": {"local": {"command": "server", "env": {"TOKEN": "${OPS_SECRET}"}}}}, source="t", env=ENV
    )
    local = config.servers["local"]
    url = f"https://api.example/v1?key={SECRET}"
    data = {"elicitations": [{"url": url}], "tried": {url: "401"}}
    with pytest.raises(BackendRequestError) as refused, translate_backend_errors("local", "tools/call", local.scrub):
        raise MCPError(code=types.URL_ELICITATION_REQUIRED, message="open it first", data=data)
    assert SECRET not in json.dumps(refused.value.data), refused.value.data
    assert refused.value.data["elicitations"] == [{"url": f"https://api.example/v1?key={SHOWN}"}]


def test_the_log_shows_no_secret_of_any_server_even_in_a_traceback() -> None:
    config = parse_config_data(
        {"mcpServers": {"local": {"command": "server", "args": ["${OPS_SECRET}"]}}}, source="t", env=ENV
    )
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    logger = logging.getLogger(log_scrub.LOGGER)
    logger.addHandler(handler)
    remove = log_scrub.install(lambda: config.servers.values())
    try:
        logger.warning("connecting with %s", SECRET)
        try:
            raise RuntimeError(f"refused {SECRET}")
        except RuntimeError:
            logger.exception("start failed")
    finally:
        remove()
        logger.removeHandler(handler)
    log = written.getvalue()
    assert f"connecting with {SHOWN}" in log and f"RuntimeError: refused {SHOWN}" in log, log
    assert SECRET not in log, log


def test_tightening_follows_no_symlink_inside_the_data_dir(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("someone else's")
    outside.chmod(0o644)
    data = tmp_path / "data"
    (data / "listings").mkdir(parents=True)
    (data / "listings").chmod(0o755)
    (data / "link").symlink_to(outside)
    secure_data_dir(data)
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # not ours to change
    assert stat.S_IMODE((data / "listings").stat().st_mode) == 0o700
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    fresh = tmp_path / "fresh" / "deeper"
    secure_data_dir(fresh)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
