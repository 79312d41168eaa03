"""The `code` surface end to end: programs calling real backends through a real gateway, and escapes that fail.

Each test runs over stdio and HTTP, with the SDK's default client (2026-07-28) and a session-era one.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client

from mcp_manifold._config.security import hash_key
from tests.conftest import (
    TRANSPORT_MODE_IDS,
    TRANSPORT_MODES,
    answer_elicitation,
    client_over,
    free_port,
    http_gateway_url,
    keyed_client,
    server_entry,
    stdio_gateway,
    stop_process,
    wait_for_port,
    write_gateway_config,
)

pytestmark = pytest.mark.anyio

SERVERS = {"numbers": server_entry("numbers.py"), "kitchen": server_entry("kitchen.py")}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


async def run(client: Any, code: str) -> types.CallToolResult:
    return await client.call_tool("execute_code", {"code": code})


# --- one gateway per transport for the tests of SERVERS with only `code` exposed -----------------------------
# A start of a gateway and its servers costs seconds of CPU; these tests run programs that only call tools.


@dataclass
class Shared:
    """A client of the shared gateway; `url` is the HTTP gateway's (empty over stdio)."""

    transport: str
    mode: str
    client: Client
    url: str


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so the shared gateways' clients live across tests


@pytest.fixture(scope="module")
def shared_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gateway_config(tmp_path_factory.mktemp("code"), SERVERS, expose=["code"])


@pytest.fixture(scope="module")
def shared_http_url(shared_config: Path) -> Iterator[str]:
    with http_gateway_url(shared_config) as url:
        yield url


@pytest.fixture(scope="module", params=TRANSPORT_MODES, ids=TRANSPORT_MODE_IDS)
async def shared(request: pytest.FixtureRequest, shared_config: Path) -> AsyncIterator[Shared]:
    """The shared gateway over each transport and in each client mode in turn (as `connect`)."""
    transport, mode = request.param
    urls: list[str] = []

    def http_url() -> str:
        urls.append(request.getfixturevalue("shared_http_url"))
        return urls[0]

    async with client_over(transport, mode, shared_config, http_url) as client:
        yield Shared(transport, mode, client, urls[0] if urls else "")


async def test_programs_call_loop_and_catch(shared: Shared) -> None:
    client = shared.client
    assert [tool.name for tool in (await client.list_tools()).tools] == ["search_tools", "execute_code"]

    found = text_of(await client.call_tool("search_tools", {"query": "multiply two numbers", "limit": 3}))
    assert "// Multiply two numbers and return their product (a * b).\nfunction numbers_multiply(args: {a: " in found
    assert "b: number (Any real number)}): Promise<{result: number}>;" in found, found

    loop = await run(
        client,
        "let total = 0;\n"
        "for (let i = 1; i <= 5; i++) total = (await tools.numbers_add({a: total, b: i})).result;\n"
        "console.log('total', total);\n"
        "return {total};",
    )
    assert not loop.is_error and text_of(loop) == 'total 15\nReturned: {"total":15}', text_of(loop)

    together = await run(
        client,
        "return (await Promise.all([2, 3, 4].map((n) => tools.numbers_multiply({a: n, b: n})))).map(r => r.result)",
    )
    assert text_of(together) == "Returned: [4,9,16]"

    caught = await run(
        client,
        "try { await tools.kitchen_fail({message: 'no luck'}); } catch (e) { console.log('caught', e.message); }\n"
        "const echoed = await tools.kitchen_echo({text: 'hi'});\n"
        "return typeof echoed + ':' + echoed",
    )
    assert text_of(caught) == 'caught Error executing tool fail: no luck\nReturned: "string:hi"', text_of(caught)

    thrown = await run(client, "await tools.numbers_sqrt({x: -4}); console.log('never')")
    assert thrown.is_error and "Error: " in text_of(thrown) and "negative number -4" in text_of(thrown)
    assert "never" not in text_of(thrown)

    unknown = await run(client, "await tools.numbers_nope({})")
    assert unknown.is_error and "not a function" in text_of(unknown)

    bad = await client.call_tool("execute_code", {"code": ""})
    assert bad.is_error and "'code'" in text_of(bad)


async def test_a_misnamed_tool_is_named_with_the_caller_s_own_tools(shared: Shared) -> None:
    """QuickJS said only "TypeError: not a function" for tools.numbers_ad(...), and a tool called by its
    bare name was "not defined": the answer now names the wrong name and the tools the caller has."""
    misspelt = await run(shared.client, "const sum = await tools.numbers_ad({a: 1, b: 2});\nreturn sum")
    assert misspelt.is_error, text_of(misspelt)
    said = text_of(misspelt)
    assert said.startswith("Error: TypeError: not a function"), said
    assert said.endswith(
        "tools.numbers_ad is not one of this program's tools; search_tools finds tools by what they do"
    ), said  # more than ten tools: not listed
    bare = await run(shared.client, "return await numbers_add({a: 1, b: 2})")
    assert "a tool is called as tools.numbers_add(args), not by its bare name" in text_of(bare), text_of(bare)


def test_a_tool_the_caller_may_not_use_reads_like_one_that_does_not_exist() -> None:
    """No correction is guessed from the wrong name (it would differ for a hidden tool and a missing one);
    past ten tools the error says where to find them instead of listing them."""
    from mcp_manifold._surfaces.code.misnamed import with_name_hints

    many = [f"numbers_op{n}" for n in range(11)]
    hidden = with_name_hints("TypeError: not a function", "await tools['numbers_add']({})", many)
    assert hidden == (
        "TypeError: not a function: tools.numbers_add is not one of this program's tools; "
        "search_tools finds tools by what they do"
    )
    few = with_name_hints("TypeError: not a function", "await tools.numbers_ad({})", ["numbers_add", "numbers_sqrt"])
    assert few.endswith(
        "tools.numbers_ad is not one of this program's tools; its tools are tools.numbers_add, tools.numbers_sqrt"
    )
    assert with_name_hints("TypeError: x is null", "return await tools.numbers_op1({})", many) == (
        "TypeError: x is null"  # every tool it names is one of its own: nothing to add
    )


async def test_large_values_stay_in_the_program(connect: Any, write_config: Any) -> None:
    # A spill threshold that would send a 300 kB result to a file: inside a program it is a plain value.
    config = write_config(SERVERS, {"expose": ["code"], "spill_threshold": 1000})
    async with connect(config) as client:
        answer = await run(
            client,
            "const big = await tools.kitchen_huge({size: 300000});\n"
            "console.log(big.length, big.slice(0, 5) === big.slice(0, 5));\n"
            "return big.length;",
        )
        assert text_of(answer) == "300000 true\nReturned: 300000", text_of(answer)


async def test_escapes_fail_cleanly_and_the_gateway_serves_on(connect: Any, write_config: Any) -> None:
    settings = {"expose": ["code"], "code_timeout": 3, "code_memory_mb": 32, "code_output_chars": 2000}
    async with connect(write_config({"numbers": server_entry("numbers.py")}, settings)) as client:
        seen = await run(
            client,
            "return [typeof require, typeof process, typeof fetch, typeof Deno, typeof std, typeof os,"
            " typeof setTimeout, typeof XMLHttpRequest, typeof __manifold_watch]",
        )
        assert text_of(seen) == "Returned: " + json.dumps(["undefined"] * 9, separators=(",", ":"))
        for attempt in ("require('fs')", "process.exit(1)", "await fetch('http://example.com')"):
            failed = await run(client, attempt)
            assert failed.is_error and "ReferenceError" in text_of(failed), (attempt, text_of(failed))

        module = await run(client, "await import('os')")
        assert module.is_error and "could not load module" in text_of(module)

        # The Function constructor reaches the sandbox's own global object, which holds no host object.
        reached = await run(
            client,
            "const g = Function('return this')(); return Object.getOwnPropertyNames(g).filter(n => n.startsWith('__'))",
        )
        assert text_of(reached) == "Returned: []", text_of(reached)

        polluted = await run(
            client,
            "Object.prototype.numbers_secret = async () => 'pwned';\n"
            "tools.numbers_add = async () => 'replaced';\n"
            "let threw = false; try { Object.setPrototypeOf(tools, {x: 1}); } catch (e) { threw = true; }\n"
            "return [typeof tools.numbers_secret, (await tools.numbers_add({a: 1, b: 2})).result, threw]",
        )
        assert text_of(polluted) == 'Returned: ["undefined",3,true]', text_of(polluted)

        endless = await run(client, "while (true) {}")
        assert endless.is_error and "ran out of time (3 s)" in text_of(endless)

        bomb = await run(client, "const a = []; while (true) a.push('x'.repeat(100000) + a.length);")
        assert bomb.is_error and "ran out of memory (32 MB)" in text_of(bomb), text_of(bomb)

        deep = await run(client, "function f(n) { return f(n + 1) + 1 } return f(0)")
        assert deep.is_error and "Maximum call stack size exceeded" in text_of(deep), text_of(deep)

        loud = await run(client, "for (let i = 0; i < 100000; i++) console.log('y'.repeat(100)); return 'done'")
        text = text_of(loud)
        assert len(text) < 2400 and "[output cut: " in text and text.endswith('Returned: "done"'), text[-300:]

        after = await run(client, "return (await tools.numbers_add({a: 2, b: 2})).result")
        assert text_of(after) == "Returned: 4"


async def test_concurrent_programs_from_two_clients(shared: Shared) -> None:
    program = (
        "let total = 0;\n"
        "for (let i = 0; i < 10; i++) total = (await tools.numbers_add({a: total, b: %d})).result;\n"
        "return total;"
    )
    if shared.transport == "stdio":  # one stdio gateway serves one client: two programs at once from it
        answers: list[str] = ["", ""]

        async def one(index: int, step: int) -> None:
            answers[index] = text_of(await run(shared.client, program % step))

        async with anyio.create_task_group() as group:
            group.start_soon(one, 0, 1)
            group.start_soon(one, 1, 3)
        assert answers == ["Returned: 10", "Returned: 30"]
        return
    url = shared.url
    async with Client(url, mode=shared.mode) as first, Client(url, mode=shared.mode) as second:
        results: dict[str, str] = {}

        async def slow() -> None:  # a busy program does not stall the other client
            results["slow"] = text_of(await run(first, "let s = 0; for (let i = 0; i < 3e6; i++) s += i; return s > 0"))

        async def quick() -> None:
            results["quick"] = text_of(await run(second, program % 2))

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            group.start_soon(quick)
        assert results == {"slow": "Returned: true", "quick": "Returned: 20"}


async def test_a_profile_limits_what_a_program_can_reach(connect: Any, write_config: Any, tmp_path: Path) -> None:
    config = write_config(SERVERS, {"expose": ["code"], "profile": "maths"})
    data = json.loads(config.read_text())
    data["profiles"] = {"maths": {"servers": ["numbers"], "tools": ["numbers_add"]}}
    config.write_text(json.dumps(data))
    async with connect(config) as client:
        seen = await run(client, "return [typeof tools.numbers_add, typeof tools.numbers_multiply, Object.keys(tools)]")
        assert text_of(seen) == 'Returned: ["function","undefined",["numbers_add"]]', text_of(seen)
        found = text_of(await client.call_tool("search_tools", {"query": "multiply two numbers"}))
        assert "numbers_multiply" not in found

        # Reached by name past `tools` (a forged call), a denied tool fails as a name that does not exist.
        denied = await run(client, "await tools.numbers_multiply({a: 2, b: 3})")
        missing = await run(client, "await tools.numbers_missing({a: 2, b: 3})")
        assert text_of(denied).replace("multiply", "X") == text_of(missing).replace("missing", "X")
        allowed = await run(client, "return (await tools.numbers_add({a: 2, b: 3})).result")
        assert text_of(allowed) == "Returned: 5"


async def test_a_tool_that_asks_mid_call(connect: Any, write_config: Any) -> None:
    scope = {"session_scope": "client"} if connect.transport == "http" else {}
    config = write_config({"kitchen": server_entry("kitchen.py", **scope)}, {"expose": ["code"]})
    async with connect(config, elicitation_callback=answer_elicitation) as client:
        answer = await run(
            client,
            "try { return await tools.kitchen_elicit({question: 'colour?'}) }\n"
            "catch (e) { return 'failed: ' + e.message }",
        )
        if connect.mode == "legacy":  # the question reaches the session-era client as for any call
            assert text_of(answer) == 'Returned: "accepted: blue"', text_of(answer)
        else:  # a 2026-07-28 client cannot be asked in the middle of a program: the call fails, saying why
            assert "asked the client a question in the middle of the call" in text_of(answer), text_of(answer)
            assert "call this tool directly" in text_of(answer)


async def test_the_program_and_its_calls_are_audited(write_config: Any, tmp_path: Path) -> None:
    async with stdio_gateway(write_config(SERVERS, {"expose": ["code"]})) as client:
        answer = await run(client, "for (const b of [1, 2, 3]) await tools.numbers_add({a: 1, b}); return 'ok'")
        assert text_of(answer) == 'Returned: "ok"'
    lines = [json.loads(line) for line in (tmp_path / "data" / "audit" / "audit.jsonl").read_text().splitlines()]
    calls = [line for line in lines if line["kind"] == "tool"]
    programs = [line for line in lines if line["kind"] == "program"]
    assert [(line["name"], line["surface"], line["outcome"]) for line in calls] == [("numbers_add", "code", "ok")] * 3
    assert [(line["name"], line["calls"], line["outcome"]) for line in programs] == [("execute_code", 3, "ok")]


def test_without_the_engine_the_gateway_says_how_to_install_it(write_config: Any, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "quickjs.py").write_text('raise ImportError("not installed")\n')  # stands in for a missing engine
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")])}
    config = write_config({}, {"expose": ["code"]})
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]
    done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "needs the QuickJS engine" in done.stderr and "pip install 'mcp-manifold[code]'" in done.stderr


def test_with_the_older_engine_package_the_gateway_says_to_replace_it(write_config: Any, tmp_path: Path) -> None:
    """The `quickjs` package also installs a module named quickjs; its regular expressions ignore the time
    limit (a program ran for hours past code_timeout)."""
    older = tmp_path / "older" / "quickjs-1.19.4.dist-info"
    older.mkdir(parents=True)
    (older / "METADATA").write_text("Metadata-Version: 2.1\nName: quickjs\nVersion: 1.19.4\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(older.parent), os.environ.get("PYTHONPATH", "")])}
    config = write_config({}, {"expose": ["code"]})
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config)]
    done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "pip uninstall quickjs && pip install quickjs-ng" in done.stderr, done.stderr[-500:]


async def test_a_program_is_a_span_and_its_calls_are_its_children(tmp_path: Path, write_config: Any) -> None:
    pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
    from tests.test_tracing import Collector

    received: list[Any] = []
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (Collector,), {"spans": received}))
    Thread(target=receiver.serve_forever, daemon=True).start()
    config = write_config({"numbers": server_entry("numbers.py")}, {"expose": ["code"], "tracing": True})
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_address[1]}",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    port = free_port()
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        wait_for_port(port, process)
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            answer = await run(client, "await tools.numbers_add({a: 1, b: 2}); return 'ok'")
            assert text_of(answer) == 'Returned: "ok"'
        with anyio.fail_after(30):
            while not any(span.name == "tools/call numbers/add" for _service, span in received):
                await anyio.sleep(0.05)
    finally:
        stop_process(process)
        receiver.shutdown()
        receiver.server_close()
    spans = {span.name: span for _service, span in received}
    program, call = spans["code/execute execute_code"], spans["tools/call numbers/add"]
    assert call.parent_span_id == program.span_id and call.trace_id == program.trace_id


async def test_programs_are_counted_in_the_metrics(write_config: Any, http_gateway: Any) -> None:
    url = http_gateway(write_config({"numbers": server_entry("numbers.py")}, {"expose": ["code"]}))
    async with Client(url, mode="legacy") as client:
        assert text_of(await run(client, "return (await tools.numbers_add({a: 1, b: 1})).result")) == "Returned: 2"
        assert (await run(client, "throw new Error('on purpose')")).is_error
    metrics = url.removesuffix("/mcp") + "/metrics"
    scraped = await anyio.to_thread.run_sync(lambda: urllib.request.urlopen(metrics, timeout=30).read().decode())
    assert 'manifold_code_programs_total{outcome="ok"} 1.0' in scraped
    assert 'manifold_code_programs_total{outcome="error"} 1.0' in scraped
    assert 'manifold_tool_calls_total{outcome="ok",server="numbers",tool="add"} 1.0' in scraped


async def test_a_paged_task_in_one_program(connect: Any, write_config: Any) -> None:
    """The bench's first task (tests/servers/workspace.py): page through 300 files, sum the 20 largest."""
    sizes = sorted(((i * 7919) % 100_003 + 17 for i in range(300)), reverse=True)
    async with connect(write_config({"workspace": server_entry("workspace.py")}, {"expose": ["code"]})) as client:
        answer = await run(
            client,
            "let files = [], cursor, pages = 0;\n"
            "do {\n"
            "  const page = await tools.workspace_list_files({folder: '/data', cursor});\n"
            "  files.push(...page.files); cursor = page.next_cursor; pages++;\n"
            "} while (cursor);\n"
            "console.log(pages, files.length);\n"
            "return files.sort((a, b) => b.size - a.size).slice(0, 20).reduce((sum, f) => sum + f.size, 0);",
        )
        assert text_of(answer) == f"3 300\nReturned: {sum(sizes[:20])}", text_of(answer)


async def test_a_programs_calls_count_against_its_principal(write_config: Any) -> None:
    config = write_config(SERVERS, {"expose": ["code"], "rate_limit": 0.01, "rate_burst": 3})
    async with stdio_gateway(config) as client:
        answer = await run(
            client,
            "const seen = [];\n"
            "for (let i = 0; i < 5; i++) {\n"
            "  try { await tools.numbers_add({a: i, b: 0}); seen.push('ok'); } catch (e) { seen.push(e.message); }\n"
            "}\n"
            "return seen;",
        )
        # The program took the burst's last token: the next program is refused as any call would be.
        again = await client.call_tool("execute_code", {"code": "return 1"})
    seen = json.loads(text_of(answer).removeprefix("Returned: "))
    assert seen[:2] == ["ok", "ok"]  # the program itself is one of the three calls the burst allows
    assert all("over its rate limit of 0.01 call(s) per second" in said for said in seen[2:]), seen
    assert again.is_error and "over its rate limit of 0.01 call(s) per second" in text_of(again), text_of(again)


async def test_a_tool_value_that_is_no_json_throws_in_the_program_which_goes_on(
    connect: Any, write_config: Any
) -> None:
    """A server's NaN ended the whole program with a parser's error (no catch could take it)."""
    config = write_config({"garbled": server_entry("garbled.py")}, {"expose": ["code"]})
    async with connect(config) as client:
        answer = await run(
            client, "let v; try { v = await tools.garbled_nan({}); } catch (e) { v = e.message; } return ['on', v]"
        )
    said = json.loads(text_of(answer).removeprefix("Returned: "))
    assert said == ["on", "tools.garbled_nan returned a number that is not finite (NaN or Infinity)"], said


async def test_a_cancelled_program_keeps_its_slot_while_its_thread_runs(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the request gave its slot back when cancelled while its program ran on, so starting and
    cancelling programs ran any number at once (code_max_programs 1 here)."""
    from mcp_manifold._config import load_config
    from mcp_manifold._front.server import McpFront
    from mcp_manifold._runtime.gateway import Gateway
    from mcp_manifold._surfaces.code.engine_processes import IsolatedSandbox

    running: list[int] = [0, 0]  # now, most at once
    original = IsolatedSandbox.run

    def counted(self: IsolatedSandbox, *args: Any) -> Any:
        running[0] += 1
        running[1] = max(running)
        try:
            return original(self, *args)
        finally:
            running[0] -= 1

    monkeypatch.setattr(IsolatedSandbox, "run", counted)
    settings = {"expose": ["code"], "code_max_programs": 1, "code_timeout": 2}
    async with (
        Gateway(load_config(write_config(SERVERS, settings))) as gateway,
        Client(McpFront(gateway).server, mode="legacy") as client,
    ):
        assert text_of(await run(client, "return 1")) == "Returned: 1"  # the catalog ready: programs start at once
        for _ in range(3):
            with anyio.move_on_after(0.5):
                await run(client, "for (;;) {}")
        with anyio.fail_after(30):
            while running[0]:
                await anyio.sleep(0.05)
        assert running[1] == 1
        assert text_of(await run(client, "return 2")) == "Returned: 2"  # and the slot is free again


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_program_in_engine_code_that_ignores_the_time_limit_is_stopped_and_frees_its_slot(
    write_config: Any, mode: str
) -> None:
    """QuickJS looks at its time limit between bytecode steps only: turning a BigInt of a million bits into a
    string takes seconds of C, and `map(String)` over such elements chained them (21.6 s on a 1 s limit for
    four; this one's forty, about two minutes of a core, held its slot, code_max_programs 1). The program's
    engine runs in a process now, killed as long again past its deadline."""
    from mcp_manifold._config import load_config
    from mcp_manifold._front.server import McpFront
    from mcp_manifold._runtime.gateway import Gateway

    settings = {"expose": ["code"], "code_max_programs": 1, "code_timeout": 1}
    async with (
        Gateway(load_config(write_config(SERVERS, settings))) as gateway,
        Client(McpFront(gateway).server, mode=mode) as client,
    ):
        with anyio.fail_after(30):
            stopped = text_of(await run(client, "return Array(40).fill(1n << 999000n).map(String).length"))
            assert "ran out of time (1 s) and was stopped, what it printed lost" in stopped, stopped
            assert text_of(await run(client, "return 2")) == "Returned: 2"  # its slot, and a process, are free


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_principals_backlog_of_programs_does_not_hold_up_another(
    write_config: Any, http_gateway: Any, mode: str
) -> None:
    """Slots that come free go to the waiting principals in turn: before, in first-come order, another
    principal's program waited behind every program one caller had queued (code_max_programs 1 here)."""
    keys = {"busy": "busy-caller-key-0001", "other": "other-caller-key-0001"}
    kitchen = server_entry("kitchen.py", env={"KITCHEN_EXTRAS": "1"})
    config = write_config({"kitchen": kitchen}, {"expose": ["code"], "code_max_programs": 1})
    config.write_text(json.dumps({**json.loads(config.read_text()), "auth": {"api_keys": keys}}))
    url = http_gateway(config)
    ran: dict[str, int] = {}  # each program's turn: the server's counter when it ran

    async with keyed_client(url, keys["busy"], mode) as busy, keyed_client(url, keys["other"], mode) as other:
        assert text_of(await run(busy, "return 1")) == "Returned: 1"  # the catalog ready

        async def queued(caller: Any, name: str) -> None:
            answer = await run(caller, "return (await tools.kitchen_tick({})).result")
            ran[name] = int(text_of(answer).removeprefix("Returned: "))

        async with anyio.create_task_group() as group:
            group.start_soon(run, busy, "await tools.kitchen_slow({seconds: 4}); return 0")  # holds the slot
            await anyio.sleep(1)
            for name in ("busy-2", "busy-3", "busy-4"):
                group.start_soon(queued, busy, name)
            await anyio.sleep(1)  # all three wait for the slot before the other principal's comes
            group.start_soon(queued, other, "other")
    order = sorted(ran, key=ran.__getitem__)
    assert order == ["busy-2", "other", "busy-3", "busy-4"], ran


async def test_a_round_of_calls_holds_no_more_than_the_program_could(write_config: Any) -> None:
    """The answers of calls awaited together were all held by the gateway, outside the program's heap limit,
    until the last came: a thousand 8 MB values took 8 GB of its memory (1 GB measured for 250 of 4 MB).
    Past half the program's memory (its heap holds them all at once, beside its own data) the calls throw."""
    config = write_config({"kitchen": SERVERS["kitchen"]}, {"expose": ["code"], "code_memory_mb": 8})
    async with stdio_gateway(config) as client:
        answer = await run(
            client,
            "const all = await Promise.allSettled(Array.from({length: 7}, () => tools.kitchen_huge({size: 1e6})));\n"
            "return [all.filter((one) => one.status === 'fulfilled').length,"
            " [...new Set(all.filter((one) => one.reason).map((one) => one.reason.message))]]",
        )
        assert not answer.is_error, text_of(answer)
        held, said = json.loads(text_of(answer).removeprefix("Returned: "))
        assert held == 4 and said == [
            "tools.kitchen_huge: the values of the calls awaited together came to more than half the program's"
            " memory (8 MB, code_memory_mb): await fewer at a time"
        ], said
        after = await run(client, "return await tools.kitchen_echo({text: 'on'})")
        assert text_of(after) == 'Returned: "on"'


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("change", ["profile", "key"])
async def test_a_reload_that_moves_the_callers_principal_or_removes_its_key_stops_its_programs_calls(
    write_config: Any, http_gateway: Any, tmp_path: Path, mode: str, change: str
) -> None:
    """A reload that gives the principal a narrower profile refuses the session's next request; a program
    running went on calling the old profile's tools to its end (up to code_timeout, code_max_calls). So did
    one whose API key the reload removed while its principal, with another key, still held the profile."""
    key, spare, started = "alice-key-0000000001", "alice-key-0000000002", tmp_path / "started"
    kitchen = server_entry("kitchen.py", env={"KITCHEN_EXTRAS": "1"})
    config = write_config({"kitchen": kitchen}, {"expose": ["code"], "code_timeout": 15})

    def holding(wide: str, narrow: str, keys: list[str]) -> None:
        profiles = {
            "wide": {"principals": [wide], "tools": ["*"]},
            "narrow": {"principals": [narrow], "tools": ["kitchen_echo"]},
        }
        api_keys = {"alice": {"sha256": [hash_key(one) for one in keys]}}
        data = {**json.loads(config.read_text()), "auth": {"api_keys": api_keys}, "profiles": profiles}
        config.write_text(json.dumps(data))

    holding("alice", "nobody", [key, spare])
    url = http_gateway(config)
    async with keyed_client(url, key, mode) as client:
        await client.list_tools()  # known before the reload, for the SDK's check of the answer
        answer: list[types.CallToolResult] = []

        async def program() -> None:
            answer.append(
                await run(
                    client,
                    f"await tools.kitchen_note({{text: 'on', path: {json.dumps(str(started))}}});\n"
                    "for (let made = 0; ; made++) {\n"
                    "  try { await tools.kitchen_add({a: made, b: 1}); await tools.kitchen_slow({seconds: 0.05}); }\n"
                    "  catch (e) { return e.message.replace(/^tools[.]kitchen_(add|slow)/, 'tools.X'); }\n"
                    "}",
                )
            )

        with anyio.fail_after(50):
            async with anyio.create_task_group() as group:
                group.start_soon(program)
                while not started.exists():
                    await anyio.sleep(0.05)
                if change == "profile":  # the gateway watches its config: the reload follows
                    holding("nobody", "alice", [key, spare])
                else:
                    holding("alice", "nobody", [spare])
    said = text_of(answer[0])
    assert said == (
        "Returned: \"tools.X: this program's caller no longer holds profile 'wide' or its credential (an API key "
        'taken out, a token revoked: the configuration was reloaded); open a new session"'
    ), said


async def test_a_calls_arguments_are_held_to_code_value_bytes(shared: Shared) -> None:
    """A client's request is held to 4 MB over HTTP; a program sent arguments as large as its memory allowed
    (30 MB) in every call, to the server and through the gateway's event loop (another client's calls
    waited up to half a second each time). They are held to code_value_bytes, as values are."""
    answer = await run(
        shared.client,
        "let said; try { await tools.kitchen_echo({text: 'x'.repeat(8e6)}); } catch (e) { said = e.message; }\n"
        "return [said, await tools.kitchen_echo({text: 'on'})]",
    )
    assert json.loads(text_of(answer).removeprefix("Returned: ")) == [
        "tools.kitchen_echo: its arguments are 8000011 bytes as JSON, more than a program may send in a call "
        "(8000000, code_value_bytes)",
        "on",
    ], text_of(answer)[:300]


async def test_a_tools_text_is_parsed_by_the_program(shared: Shared) -> None:
    """A text was parsed as JSON and encoded again by the gateway, on its event loop (another client's calls
    waited up to 0.76 s each, for a text of 7.8 MB), and a deeply nested one raised an error that ended the
    whole program with the gateway's own failure. The program parses it now, under its own limits."""
    answer = await run(
        shared.client,
        "const deep = await tools.kitchen_echo({text: '['.repeat(5e4) + ']'.repeat(5e4)});\n"
        'const json = await tools.kitchen_echo({text: \' {"a": [1, 2.5, "é"]} \'});\n'
        "return [typeof deep, deep.length, json, await tools.kitchen_echo({text: 'NaN'})]",
    )
    assert text_of(answer) == 'Returned: ["string",100000,{"a":[1,2.5,"é"]},"NaN"]', text_of(answer)[:300]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_question_a_program_cannot_relay_does_not_hold_its_server(
    write_config: Any, tmp_path: Path, mode: str
) -> None:
    """A 2026-07-28 client's program calling a session-era server's tool that asks mid-call gets an error at
    once; but the gateway held the server's call for a retry no program can make (held_call_timeout, 300 s),
    the server waiting on its question meanwhile: noisy's `ask` blocks its whole server, so the program's next
    call of it ran out of time. The held call is given up at once, and its question refused."""
    tally = tmp_path / "tally"
    config = write_config(
        {"noisy": server_entry("noisy.py")}, {"expose": ["code"], "code_timeout": 20, "held_call_timeout": 300}
    )
    async with stdio_gateway(config, mode=mode, elicitation_callback=answer_elicitation) as client:
        answer = await run(
            client,
            f"let said; try {{ said = await tools.noisy_ask({{count: 1, tally: {json.dumps(str(tally))}}}); }}\n"
            "catch (e) { said = e.message; }\n"
            "return [said, await tools.noisy_fine({})]",
        )
    said, fine = json.loads(text_of(answer).removeprefix("Returned: "))
    if mode == "legacy":  # the question reaches the session-era client, which answers
        assert (said, fine) == ("answered 1, refused 0", "fine"), said
    else:
        assert said.startswith("tools.noisy_ask asked the client a question in the middle of the call"), said
        assert (fine, tally.read_text()) == ("fine", "1")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_programs_calls_send_no_progress_on_its_token(write_config: Any, mode: str) -> None:
    """Each call a program made reported its progress on the program's own progress token: calls made together
    interleaved theirs and each later call started over (1, 1, 2, 2, 3, 3, then 1 again), where the progress
    of one token must increase. A program's calls are made without it, as the proxy's batches are."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    config = write_config({"kitchen": SERVERS["kitchen"]}, {"expose": ["code"]})
    async with stdio_gateway(config, mode=mode) as client:
        answer = await client.call_tool(
            "execute_code",
            {
                "code": "const two = [tools.kitchen_progress({steps: 3}), tools.kitchen_progress({steps: 3})];\n"
                "return [...await Promise.all(two), await tools.kitchen_progress({steps: 2})]"
            },
            progress_callback=on_progress,
        )
        assert text_of(answer) == 'Returned: ["done 3","done 3","done 2"]', text_of(answer)
    assert all(later > earlier for earlier, later in itertools.pairwise(seen)), seen
