"""A gateway on one machine: no open start on a network interface, profiles by URL and by setting, limits, pins."""

from __future__ import annotations

import json
import os
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from mcp_manifold._core.listing import Listing
from mcp_manifold._runtime.audit import audit_dir, read_entries
from mcp_manifold._runtime.pin_store import PinStore
from tests.conftest import free_port, manifold_command, server_entry, stdio_gateway, stop_process, wait_for_port

pytestmark = pytest.mark.anyio

SERVERS = {"numbers": server_entry("numbers.py"), "words": server_entry("words.py")}
PROFILES = {"maths": {"servers": ["numbers"]}, "writer": {"servers": ["words"], "tools": ["words_upper"]}}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


def write(tmp_path: Path, manifold: dict[str, Any] | None = None, **sections: Any) -> Path:
    path = tmp_path / "mcp.json"
    settings = {"data_dir": str(tmp_path / "data"), **(manifold or {})}
    path.write_text(json.dumps({"mcpServers": SERVERS, "manifold": settings, **sections}))
    return path


def test_the_gateway_refuses_to_start_open_on_a_network_interface(tmp_path: Path) -> None:
    config = write(tmp_path)
    port = free_port()
    refused = subprocess.run(
        manifold_command(config, "--http", "--host", "0.0.0.0", "--port", str(port)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0
    assert "refusing to serve HTTP on 0.0.0.0 without authentication" in refused.stderr
    assert "--insecure-open-to-network" in refused.stderr

    process = subprocess.Popen(
        manifold_command(config, "--http", "--host", "0.0.0.0", "--port", str(port), "--insecure-open-to-network"),
        start_new_session=True,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, process)  # it starts when told to in so many words (reached over loopback here)
    finally:
        stop_process(process)
        assert process.stderr is not None
        assert b"WITHOUT AUTHENTICATION" in process.stderr.read()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_gateway_on_any_loopback_address_refuses_a_rebound_host_name(tmp_path: Path, mode: str) -> None:
    """127.0.0.2 is loopback, so the gateway serves it without authentication; a web page whose name was
    rebound to it must not call tools nor read the dashboard (it did: the check was on for 127.0.0.1 only)."""
    host, port = "127.0.0.2", free_port()
    process = subprocess.Popen(
        manifold_command(write(tmp_path), "--http", "--host", host, "--port", str(port)), start_new_session=True
    )
    base = f"http://{host}:{port}"
    try:
        wait_for_port(port, process, host=host)
        async with Client(f"{base}/mcp", mode=mode) as client:  # a client of the address itself is served
            assert text_of(await client.call_tool("numbers_add", {"a": 2, "b": 3})) == "5.0"
        rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "numbers_add"}}
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(base_url=base) as http:
            assert (await http.post("/mcp", json=call, headers={**rebound, **accept})).status_code == 421
            assert (await http.get("/ui/api/overview", headers=rebound)).status_code == 421
            cross = {"Origin": "http://evil.example"}  # a cross-site request to the address itself
            assert (await http.post("/mcp", json=call, headers={**cross, **accept})).status_code == 403
            assert (await http.get("/ui/api/overview")).status_code == 200
    finally:
        stop_process(process)


async def test_a_loopback_gateway_picks_profiles_by_url(tmp_path: Path, http_gateway: Any) -> None:
    url = http_gateway(write(tmp_path, profiles=PROFILES))
    async with (
        Client(url.replace("/mcp", "/mcp/p/writer"), mode="legacy") as writer,
        Client(url, mode="legacy") as everyone,
    ):
        assert {tool.name for tool in (await writer.list_tools()).tools} == {"words_upper"}
        assert text_of(await writer.call_tool("words_upper", {"text": "hi"})) == "HI"
        refused = await writer.call_tool("words_reverse", {"text": "hi"})
        assert refused.is_error and text_of(refused).startswith("unknown tool 'words_reverse' for profile 'writer'")
        assert {"numbers_add", "words_reverse"} <= {tool.name for tool in (await everyone.list_tools()).tools}
    async with httpx2.AsyncClient() as http:
        missing = await http.post(url.replace("/mcp", "/mcp/p/nobody"), json={})
    assert missing.status_code == 404
    assert "unknown profile 'nobody' (profiles: maths, writer)" in missing.json()["error_description"]


async def test_a_profile_url_of_any_text_is_refused_with_its_name(tmp_path: Path, http_gateway: Any) -> None:
    """The refusal's WWW-Authenticate header could not carry a name that is not Latin-1: a 500 and a
    traceback in the log, for any local caller, instead of the 404 naming the profile."""
    url = http_gateway(write(tmp_path, profiles=PROFILES))
    async with httpx2.AsyncClient() as http:
        missing = await http.post(url.replace("/mcp", '/mcp/p/\u4e2d"\\'), json={})
        assert missing.status_code == 404
        assert missing.json()["error_description"].startswith("unknown profile '\u4e2d\"\\\\' (profiles:")
        assert (
            "error_description=\"unknown profile '?'??' (profiles: maths, writer)\""
            in missing.headers["www-authenticate"]
        )
        async with Client(url.replace("/mcp", "/mcp/p/writer"), mode="legacy") as writer:  # served on as before
            assert text_of(await writer.call_tool("words_upper", {"text": "hi"})) == "HI"


async def test_the_profile_setting_limits_and_the_audit_on_stdio(tmp_path: Path) -> None:
    config = write(tmp_path, {"profile": "maths", "rate_limit": 0.2, "rate_burst": 2}, profiles=PROFILES)
    async with stdio_gateway(config) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {
            "numbers_add",
            "numbers_multiply",
            "numbers_sqrt",
        }
        refused = await client.call_tool("words_upper", {"text": "x"})  # a plain direct call: the fast lane's
        assert refused.is_error and text_of(refused).startswith("unknown tool 'words_upper' for profile 'maths'")
        for _ in range(2):
            assert not (await client.call_tool("numbers_add", {"a": 1, "b": 2})).is_error
        limited = await client.call_tool("numbers_add", {"a": 1, "b": 2})
        assert limited.is_error
        assert "principal 'anonymous' is over its rate limit of 0.2 call(s) per second" in text_of(limited)
        assert "retry after" in text_of(limited)
    lines = list(read_entries(audit_dir(tmp_path / "data")))
    outcomes = [(line["name"], line["outcome"], line["profile"]) for line in lines]
    assert outcomes == [
        ("words_upper", "denied", "maths"),
        ("numbers_add", "ok", "maths"),
        ("numbers_add", "ok", "maths"),
        ("numbers_add", "rate_limited", "maths"),
    ]


async def test_calls_in_flight_are_limited_per_principal(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    settings = {"data_dir": str(tmp_path / "data"), "principal_max_calls": 1}
    path.write_text(json.dumps({"mcpServers": {"kitchen": server_entry("kitchen.py")}, "manifold": settings}))
    async with stdio_gateway(path) as client:
        results: list[types.CallToolResult] = []

        async def slow() -> None:
            results.append(await client.call_tool("kitchen_slow", {"seconds": 3}))

        assert text_of(await client.call_tool("kitchen_echo", {"text": "up"})) == "up"  # the server is running
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(slow)
            await anyio.sleep(1)  # the slow call is in flight (its request is read at once)
            refused = await client.call_tool("kitchen_echo", {"text": "x"})
            assert refused.is_error and "'anonymous' already has 1 call" in text_of(refused), text_of(refused)
        assert text_of(results[0]) == "slept"
        assert text_of(await client.call_tool("kitchen_echo", {"text": "again"})) == "again"  # released


def test_pins_survive_restarts_and_another_process_decides(tmp_path: Path) -> None:
    def tool(description: str) -> types.Tool:
        return types.Tool(name="send", description=description, input_schema={"type": "object"})

    gateway = PinStore(tmp_path, "enforce")
    assert not gateway.observe("mail", Listing(tools=[tool("Send mail.")]))
    assert gateway.observe("mail", Listing(tools=[tool("Send mail and copy it elsewhere.")]))  # quarantined
    assert gateway.blocked("mail", "send")

    again = PinStore(tmp_path, "enforce")  # a restart keeps the quarantine
    again.load()
    assert again.blocked("mail", "send") and again.get("mail", "send").state == "changed"  # type: ignore[union-attr]

    operator = PinStore(tmp_path, "enforce")  # `manifold pins approve`, in another process
    assert operator.approve("mail", "send").state == "pinned"
    operator.close()
    assert gateway.reload_if_changed() and not gateway.blocked("mail", "send")
    assert not gateway.reload_if_changed()  # nothing new since

    warned = PinStore(tmp_path / "warn", "warn")
    warned.observe("mail", Listing(tools=[tool("a")]))
    warned.observe("mail", Listing(tools=[tool("b")]))
    assert warned.get("mail", "send").state == "changed" and not warned.blocked("mail", "send")  # type: ignore[union-attr]


def test_surfaces_read_the_catalog_only_through_the_callers_view() -> None:
    # The design-out check: a surface that read the whole catalog or searched it directly could show a
    # caller what its profile hides. Surfaces get `host.view(request)` and nothing else.
    root = Path(__file__).parent.parent / "src" / "mcp_manifold" / "_surfaces"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "host.catalog" not in text and "host.search(" not in text, path  # catalog, catalog_for


def test_the_audit_log_rotates_by_size_and_reads_back_in_order(tmp_path: Path) -> None:
    from mcp_manifold._core.router import Target
    from mcp_manifold._runtime.audit import AuditLog, log_files
    from mcp_manifold._runtime.call_path import CallRecord

    log = AuditLog(tmp_path, max_bytes=600, backups=10)
    for number in range(12):
        target = Target("numbers", "add", f"numbers_add_{number}", "direct")
        log(CallRecord("tool", target, "c", 0.001, "ok", principal="alice", arguments_size=number))
    log.close()
    assert len(log_files(tmp_path)) > 2  # rotated, oldest first
    assert [line["name"] for line in read_entries(tmp_path)] == [f"numbers_add_{n}" for n in range(12)]


def test_the_audit_log_keeps_writing_when_its_file_is_moved_away_and_never_cuts_without_backups(
    tmp_path: Path,
) -> None:
    from mcp_manifold._core.router import Target
    from mcp_manifold._runtime.audit import AuditLog, log_files
    from mcp_manifold._runtime.call_path import CallRecord

    def record(number: int) -> CallRecord:
        return CallRecord("tool", Target("numbers", "add", f"numbers_add_{number}", "direct"), "c", 0.001, "ok")

    log = AuditLog(tmp_path / "a", max_bytes=600, backups=3)
    log(record(0))
    (tmp_path / "a" / "audit.jsonl").rename(tmp_path / "moved.jsonl")  # an operator's logrotate, say
    for number in range(1, 12):  # rotating finds no file to move, and goes on
        log(record(number))
    log.close()
    assert len(log_files(tmp_path / "a")) == 4  # the log and three old ones
    assert [line["name"] for line in read_entries(tmp_path / "a")][-1] == "numbers_add_11"

    kept = AuditLog(tmp_path / "b", max_bytes=600, backups=0)
    for number in range(12):
        kept(record(number))
    kept.close()
    assert log_files(tmp_path / "b") == [tmp_path / "b" / "audit.jsonl"]
    assert len(list(read_entries(tmp_path / "b"))) == 12  # nothing cut


def test_an_audit_line_left_waiting_by_a_loop_that_stopped_is_written_with_the_next(tmp_path: Path) -> None:
    """A line added on an event loop that stops before it comes round again is not stranded: the next line,
    on another loop or on none, writes it first."""
    import asyncio

    from mcp_manifold._core.clients import run_after_answer
    from mcp_manifold._core.router import Target
    from mcp_manifold._runtime.audit import AuditLog
    from mcp_manifold._runtime.call_path import CallRecord

    def record(number: int) -> CallRecord:
        return CallRecord("tool", Target("numbers", "add", f"numbers_add_{number}", "direct"), "c", 0.001, "ok")

    log = AuditLog(tmp_path, max_bytes=1_000_000, backups=1)

    for number in range(2):
        loop = asyncio.new_event_loop()

        def add_and_stop(number: int = number, loop: asyncio.AbstractEventLoop = loop) -> None:
            run_after_answer([partial(log, record(number))])  # due when this loop comes round, which it never does
            loop.stop()

        loop.call_soon(add_and_stop)
        loop.run_forever()
        loop.close()
    log(record(2))  # no loop now: what waits, then this line
    names = [line["name"] for line in read_entries(tmp_path)]
    log.close()
    assert names == ["numbers_add_0", "numbers_add_1", "numbers_add_2"]


async def test_the_audit_lines_of_one_pass_of_the_loop_are_written_together_in_order_and_none_is_lost(
    tmp_path: Path,
) -> None:
    """Calls a fast lane records after their answers, in one pass of the event loop, have their lines
    written when the loop comes round, in the order the calls ended: not before (one write for them all),
    not lost, and rotation still by size. A call recorded before its answer (the SDK's path) has its line
    in the file at once, after those still waiting: the client never has an answer before its line."""
    from mcp_manifold._core.clients import run_after_answer
    from mcp_manifold._core.router import Target
    from mcp_manifold._runtime.audit import AuditLog, log_files
    from mcp_manifold._runtime.call_path import CallRecord

    def record(number: int) -> CallRecord:
        return CallRecord("tool", Target("numbers", "add", f"numbers_add_{number}", "direct"), "c", 0.001, "ok")

    def names(folder: Path) -> list[str]:
        return [line["name"] for line in read_entries(folder)]

    path = tmp_path / "a" / "audit.jsonl"
    log = AuditLog(path.parent, max_bytes=1_000_000, backups=1)
    run_after_answer([partial(log, record(number)) for number in range(3)])
    assert path.read_bytes() == b""  # still this pass of the loop
    await anyio.sleep(0)
    assert names(path.parent) == ["numbers_add_0", "numbers_add_1", "numbers_add_2"]
    run_after_answer([partial(log, record(3))])
    log(record(4))  # recorded before its answer: at once, after the one waiting
    assert names(path.parent)[-2:] == ["numbers_add_3", "numbers_add_4"]
    run_after_answer([partial(log, record(5))])
    log.close()  # what is waiting for the loop is written before the file closes
    assert names(path.parent)[-1] == "numbers_add_5"

    rotated = AuditLog(tmp_path / "b", max_bytes=600, backups=20)
    for number in range(30):
        run_after_answer([partial(rotated, record(number))])
        if number % 4 == 3:
            await anyio.sleep(0)
    rotated.close()
    assert len(log_files(tmp_path / "b")) > 2
    assert [line["name"] for line in read_entries(tmp_path / "b")] == [f"numbers_add_{n}" for n in range(30)]


def test_an_audit_line_is_written_whatever_its_error_says(tmp_path: Path) -> None:
    """A server's error can carry a lone surrogate (a JSON escape Python's parser reads): no UTF-8 encodes
    it. The line is not lost for that, and it is written as the escape's text, which `manifold audit` can
    print. Other text stays as it is, in UTF-8."""
    from mcp_manifold._core.router import Target
    from mcp_manifold._runtime.audit import AuditLog
    from mcp_manifold._runtime.call_path import CallRecord

    errors = ["server 'remote': tools/call failed: bad \ud800 half", "café, 東京 and \u2028", None]
    log = AuditLog(tmp_path / "audit", max_bytes=1_000_000, backups=1)
    for error in errors:
        target = Target("remote", "echo", "remote_echo", "direct")
        log(CallRecord("tool", target, "c", 0.001, "error" if error else "ok", error, arguments_size=3))
    log.close()
    printed = ["server 'remote': tools/call failed: bad \\ud800 half", "café, 東京 and \u2028", None]
    assert [line.get("error") for line in read_entries(tmp_path / "audit")] == printed
    assert "café, 東京".encode() in (tmp_path / "audit" / "audit.jsonl").read_bytes()  # not escaped
    config = write(tmp_path, {"audit_path": str(tmp_path / "audit")})
    for extra in ([], ["--json"]):  # a table, and the lines as written
        shown = subprocess.run(
            [*manifold_command(config)[:3], "audit", "--config", str(config), *extra],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert shown.returncode == 0, shown.stderr
        assert "ud800 half" in shown.stdout, shown.stdout


@settings(max_examples=2000, deadline=None)
@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_an_audit_lines_time_is_datetimes_to_the_millisecond(now: float) -> None:
    """The line's time, formatted a second at a time, says what datetime's ISO format says of the instant."""
    from datetime import UTC, datetime

    from mcp_manifold._runtime.audit import timestamp

    assert timestamp(now) == datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def test_jwt_keys_from_a_file_and_a_new_key_id_reloads_them(tmp_path: Path) -> None:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    from mcp_manifold._config.model import OAuthConfig
    from mcp_manifold._front.auth import JwtVerifier, TokenRejected

    def jwks(*keys: tuple[str, Any]) -> str:
        found = [{**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(k.public_key())), "kid": kid} for kid, k in keys]
        return json.dumps({"keys": found})

    first, second = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    keys = tmp_path / "jwks.json"
    keys.write_text(jwks(("one", first)))
    config = OAuthConfig(issuer="https://issuer", audience=("https://gw/mcp",), jwks_file=str(keys))
    verifier = JwtVerifier(config)

    def token(key: Any, kid: str, **claims: Any) -> str:
        body = {"iss": "https://issuer", "aud": "https://gw/mcp", "sub": "ana", "exp": int(time.time()) + 60, **claims}
        return jwt.encode(body, key, algorithm="ES256", headers={"kid": kid})

    assert (await verifier.verify(token(first, "one", scope="a b"))).principal == "oauth:ana"
    keys.write_text(jwks(("one", first), ("two", second)))  # the issuer rotates in a new key
    verifier.keys._asked -= 60  # the last fetch is older than the retry interval
    assert (await verifier.verify(token(second, "two"))).scopes == []
    with pytest.raises(TokenRejected, match="signing key \\('three'\\) is not among the issuer's keys"):
        await verifier.verify(token(second, "three"))
    with pytest.raises(TokenRejected, match="no 'sub' claim"):
        await verifier.verify(token(first, "one", sub=""))
    # A key whose kid is not a string (the issuer's mistake) is skipped; it used to fail every request (500).
    odd = json.loads(jwks(("one", first), ("two", second)))
    odd["keys"][1]["kid"] = ["two"]
    keys.write_text(json.dumps(odd))
    verifier.keys._asked -= 60
    verifier.keys._fetched -= 600  # the keys have aged: fetched again at the next token
    with pytest.raises(TokenRejected, match="signing key \\('two'\\) is not among"):
        await verifier.verify(token(second, "two"))
    assert (await verifier.verify(token(first, "one"))).principal == "oauth:ana"


async def test_dispatch_aliases_say_nothing_of_the_servers_a_profile_hides(tmp_path: Path, http_gateway: Any) -> None:
    """The kept aliases are numbered over every configured server: the writer profile, which may use only
    `words` (the second), saw it as c2 and so learnt that a server it may not see exists. A profile that
    hides servers gets its own numbering; a client without one keeps the kept aliases."""
    url = http_gateway(write(tmp_path, {"expose": ["dispatch"]}, profiles=PROFILES))
    for mode in ("auto", "legacy"):
        async with (
            Client(url.replace("/mcp", "/mcp/p/writer"), mode=mode) as writer,
            Client(url, mode=mode) as everyone,
        ):
            listed = json.loads(text_of(await writer.call_tool("proxy-dispatch", {"action": "list"})))
            assert [(c["alias"], c["name"]) for c in listed["connections"]] == [("c1", "words")]
            called = await writer.call_tool(
                "proxy-dispatch", {"action": "call", "connection": "c1", "tool": "upper", "arguments": {"text": "hi"}}
            )
            assert json.loads(text_of(called))["connection"] == "c1" and "HI" in text_of(called)
            refused = text_of(await writer.call_tool("proxy-dispatch", {"action": "list", "connection": "c2"}))
            assert refused == "unknown connection 'c2'; known connections: c1 (words)"
            (tool,) = (await writer.list_tools()).tools
            assert "c1 words" in (tool.description or "") and "c2" not in (tool.description or "")
            listed = json.loads(text_of(await everyone.call_tool("proxy-dispatch", {"action": "list"})))
            assert [(c["alias"], c["name"]) for c in listed["connections"]] == [("c1", "numbers"), ("c2", "words")]


RESPELLED = [  # each reads file:///secret/key at a server that normalises URIs (tests/servers/lenient.py)
    "file:///public/../secret/key",
    "file:///public/%2e%2e/secret/key",
    "file:///%73ecret/key",
    "FILE:///secret/key",
    "file:////secret/key",
    "file:///./secret/key",
    "file:///secret/key#top",
    # A file server reads the path alone (`urlsplit(uri).path`): these passed `!file:///secret/*` and read it.
    "file:/secret/key",
    "file://localhost/secret/key",
    "file://anything/secret/key",
]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # resources/subscribe
async def test_a_resource_glob_is_not_passed_by_another_spelling_of_the_uri(tmp_path: Path, http_gateway: Any) -> None:
    """A profile denying `file:///secret/*`, or allowing only `file:///public/*`, read the secret as
    `file:///public/../secret/key` and the like, on every surface, from a server that normalises URIs: the
    globs judged the spelling, the server read another resource. A caller with a profile is refused such a
    spelling, saying why; one without a profile is not."""
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                # `my_links`: a prefix with `_`, which `urlsplit` takes for no scheme.
                "mcpServers": {"files": server_entry("lenient.py", prefix=""), "my_links": server_entry("links.py")},
                "manifold": {"data_dir": str(tmp_path / "data"), "expose": ["direct", "proxy"]},
                "profiles": {
                    "denied": {"resources": ["*", "!file:///secret/*"]},
                    "public": {"resources": ["file:///public/*"]},
                },
            }
        )
    )
    url = http_gateway(config)
    for mode in ("auto", "legacy"):
        # A deny glob and an allow glob: every spelling past the first, one past the second.
        for profile, spellings in (("denied", RESPELLED), ("public", RESPELLED[:1])):
            async with Client(url.replace("/mcp", f"/mcp/p/{profile}"), mode=mode) as client:
                listed = [str(r.uri) for r in (await client.list_resources()).resources]
                assert listed == ["file:///public/", "file:///public/readme"]
                for uri in spellings:
                    with pytest.raises(Exception, match=r"resource URI .* has .*: a server may read it as another"):
                        await client.read_resource(uri)
                    answer = await client.call_tool("proxy", {"action": "call", "type": "resource", "path": uri})
                    assert "a server may read it as another resource" in text_of(answer), answer
                    if mode == "legacy":
                        with pytest.raises(Exception, match="a server may read it as another"):
                            await client.subscribe_resource(uri)
                read = await client.read_resource("file:///public/readme")
                assert read.contents[0].text == "public text"  # type: ignore[union-attr]
                read = await client.read_resource("file:///public/")  # listed so: taken as listed
                assert read.contents[0].text == "the public folder"  # type: ignore[union-attr]
                if profile == "denied":  # a template's URI, read the plain way: every unlisted one was refused
                    read = await client.read_resource("my_links+links://item/one")
                    assert read.contents[0].text == "the text of item one"  # type: ignore[union-attr]
                assert text_of(await client.call_tool("subscribed", {})) == "[]"  # never asked to subscribe
        async with Client(url, mode=mode) as everyone:  # no profile: every spelling reaches the server
            read = await everyone.read_resource("file:///public/../secret/key")
            assert read.contents[0].text == "SECRET-KEY-TEXT"  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # resources/subscribe
async def test_a_change_of_a_server_the_profile_hides_is_not_announced(tmp_path: Path, http_gateway: Any) -> None:
    """`tools/list_changed` of a server its profile hides reached a client (in its session, and on its
    2026-07-28 listen stream): a hidden server exists, and changed. Now a client hears of a change only if
    it may see something that changed. A resource update of a server it sees, sent after the hidden change on
    the same stream, must come first; a change it may see is still announced."""
    kitchen = server_entry("kitchen.py")
    config = write(tmp_path, {"log_level": "error"}, profiles={"one": {"servers": ["seen"]}})
    data = json.loads(config.read_text())
    data["mcpServers"] = {"seen": kitchen, "hidden": kitchen}
    config.write_text(json.dumps(data))
    url = http_gateway(config)
    for mode in ("auto", "legacy"):
        await _a_hidden_change_is_unheard(url, mode)


async def _a_hidden_change_is_unheard(url: str, mode: str) -> None:
    heard: list[str] = []
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append("tools")
        elif isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    async def on_everyone(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async with (
        Client(url.replace("/mcp", "/mcp/p/one"), mode=mode, message_handler=on_message) as one,
        Client(url, mode="legacy", message_handler=on_everyone) as everyone,
    ):
        await one.list_tools()
        await everyone.list_tools()

        async def changes() -> None:
            await everyone.call_tool("hidden_add_tool", {"name": f"secret_{mode}"})
            with anyio.fail_after(10):
                await told.wait()  # the hidden change is announced (to every client in one pass)
            await everyone.call_tool("seen_touch", {"uri": "kitchen://text"})

        if mode == "legacy":
            await one.subscribe_resource("seen+kitchen://text")
            await changes()
            with anyio.fail_after(10):
                while not heard:
                    await anyio.sleep(0.02)
            assert heard[0] == "seen+kitchen://text", heard
            await everyone.call_tool("seen_add_tool", {"name": f"open_{mode}"})
            with anyio.fail_after(10):
                while "tools" not in heard:
                    await anyio.sleep(0.02)
        else:
            async with one.listen(tools_list_changed=True, resource_subscriptions=["seen+kitchen://text"]) as stream:
                await changes()
                with anyio.fail_after(10):
                    first = await stream.__anext__()
                assert type(first).__name__ == "ResourceUpdated", first
                await everyone.call_tool("seen_add_tool", {"name": f"open_{mode}"})
                with anyio.fail_after(10):
                    assert type(await stream.__anext__()).__name__ == "ToolsListChanged"
        assert f"seen_open_{mode}" in {tool.name for tool in (await one.list_tools()).tools}
