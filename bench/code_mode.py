"""Code mode against direct and dispatch: tokens of two scripted tasks, program start-up, call overhead.

Tokens. Two multi-step tasks, each done three ways through a real gateway over stdio (session-era client),
the calls scripted as a model would make them (no model runs):

- *files*: "add up the sizes of the 20 largest files under /data" (300 files, 100 a page);
- *issues*: "find the issues that mention timeout and label each needs-triage" (12 of 60 issues).

`direct` calls `workspace_*` tools from the full list; `dispatch` searches with `proxy-dispatch` and calls
through it; `code` searches with `search_tools` and runs one program with `execute_code`. Counted, with
o200k_base from `bpe-openai` (the bench extra; without it, about 4 characters a token, said in the output):
the tool definitions the model is given (name, description, input and output schemas, as JSON), what the
model writes (each call's name and JSON arguments, the program's source), and what it reads back (each
result's text). The catalog behind the gateway is workspace, kitchen, numbers, words and 100 catalog tools.

Start-up: an empty program in a fresh QuickJS runtime, in process (p50 of 200 runs), and `execute_code`
of `return 1` through the gateway against a direct call of `numbers_add` (p50 of 50 each).

Call overhead: a program making 20 calls of `numbers_add` one after another, per call, against the same call
made directly by the client (p50 of 20 runs each).

Run: ``.venv/bin/python bench/code_mode.py``. Prints the tables; writes nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
sys.path.insert(0, str(ROOT / "src"))


def count_tokens() -> tuple[Callable[[str], int], str]:
    try:
        from bpe_openai import get_encoding  # the bench extra
    except ImportError:
        return (lambda text: (len(text) + 3) // 4), "approximate: characters / 4 (bpe-openai not installed)"
    encoding = get_encoding("o200k_base")
    return (lambda text: len(encoding.encode_ordinary(text))), "o200k_base (bpe-openai)"


def config(directory: Path, expose: list[str]) -> Path:
    def entry(name: str, *args: str) -> dict[str, Any]:
        return {"command": sys.executable, "args": [str(SERVERS / f"{name}.py"), *args]}

    servers = {
        "workspace": entry("workspace"),
        "kitchen": entry("kitchen"),
        "numbers": entry("numbers"),
        "words": entry("words"),
        "catalog": entry("catalog", "--count", "100"),
    }
    settings = {"expose": expose, "data_dir": str(directory / "-".join(expose)), "lazy": False}
    path = directory / f"{'-'.join(expose)}.json"
    path.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    return path


def shown(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def definitions(tools: list[types.Tool]) -> str:
    return json.dumps(
        [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools], separators=(",", ":")
    )


class Transcript:
    """What the model writes and reads in one task."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.written: list[str] = []
        self.read: list[str] = []

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.written.append(json.dumps({"name": name, "arguments": arguments}, separators=(",", ":")))
        result = await self.client.call_tool(name, arguments)
        assert not result.is_error, shown(result)
        self.read.append(shown(result))
        return result


# --- the tasks, three ways -----------------------------------------------------------------------------

FILES_PROGRAM = """let files = [], cursor;
do {
  const page = await tools.workspace_list_files({folder: "/data", cursor});
  files.push(...page.files); cursor = page.next_cursor;
} while (cursor);
const top = files.sort((a, b) => b.size - a.size).slice(0, 20);
return top.reduce((sum, f) => sum + f.size, 0);"""

ISSUES_PROGRAM = """const {issues} = await tools.workspace_search_issues({query: "timeout"});
for (const issue of issues) await tools.workspace_add_label({number: issue.number, label: "needs-triage"});
return issues.map((issue) => issue.number);"""


async def files_task(way: str, t: Transcript) -> None:
    if way == "code":
        await t.call("search_tools", {"query": "list files in a folder with sizes", "limit": 3})
        await t.call("execute_code", {"code": FILES_PROGRAM})
        return
    cursor = None
    while True:
        arguments = {"folder": "/data", **({"cursor": cursor} if cursor else {})}
        if way == "direct":
            result = await t.call("workspace_list_files", arguments)
        else:
            if cursor is None:
                await t.call("proxy-dispatch", {"action": "search", "query": "list files in a folder with sizes"})
            result = await t.call(
                "proxy-dispatch", {"action": "call", "tool": "workspace_list_files", "arguments": arguments}
            )
        cursor = _page_of(result).get("next_cursor")
        if not cursor:
            return


async def issues_task(way: str, t: Transcript) -> None:
    if way == "code":
        await t.call("search_tools", {"query": "search issues and add a label", "limit": 3})
        await t.call("execute_code", {"code": ISSUES_PROGRAM})
        return
    if way == "direct":
        found = await t.call("workspace_search_issues", {"query": "timeout"})
    else:
        await t.call("proxy-dispatch", {"action": "search", "query": "search issues and add a label"})
        found = await t.call(
            "proxy-dispatch", {"action": "call", "tool": "workspace_search_issues", "arguments": {"query": "timeout"}}
        )
    for issue in _page_of(found)["issues"]:
        arguments = {"number": issue["number"], "label": "needs-triage"}
        if way == "direct":
            await t.call("workspace_add_label", arguments)
        else:
            await t.call("proxy-dispatch", {"action": "call", "tool": "workspace_add_label", "arguments": arguments})


def _page_of(result: types.CallToolResult) -> dict[str, Any]:
    """The tool's data: its structured content (direct), or the text a dispatch answer wraps it in."""
    if result.structured_content is not None and "action" not in result.structured_content:
        return result.structured_content
    answer = json.loads(shown(result))
    return json.loads(answer["content"][0]["text"])


def gateway(path: Path) -> StdioServerParameters:
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return StdioServerParameters(command=command[0], args=command[1:], env=env)


async def tokens(directory: Path, count: Callable[[str], int]) -> list[tuple[str, str, int, int, int, int]]:
    rows = []
    for way, expose in (("direct", ["direct"]), ("dispatch", ["dispatch"]), ("code", ["code"])):
        async with Client(gateway(config(directory, expose)), mode="legacy") as client:
            listed = definitions((await client.list_tools()).tools)
            for task_name, task in (("files", files_task), ("issues", issues_task)):
                transcript = Transcript(client)
                await task(way, transcript)
                written = sum(count(text) for text in transcript.written)
                read = sum(count(text) for text in transcript.read)
                rows.append((task_name, way, count(listed), written, read, len(transcript.written)))
    return rows


# --- start-up and overhead -----------------------------------------------------------------------------


def p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def empty_program_p50(runs: int = 200) -> float:
    from mcp_manifold._surfaces.code.sandbox import Limits, Sandbox

    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        Sandbox([], Limits()).run("", lambda calls, left: [])
        samples.append(time.perf_counter() - started)
    return p50(samples)


async def timed(action: Callable[[], Any], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - started)
    return p50(samples)


async def overhead(directory: Path) -> dict[str, float]:
    path = directory / "overhead.json"
    servers = {"numbers": {"command": sys.executable, "args": [str(SERVERS / "numbers.py")]}}
    settings = {"expose": ["direct", "code"], "data_dir": str(directory / "overhead"), "lazy": False}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    twenty = "for (let i = 0; i < 20; i++) await tools.numbers_add({a: i, b: 1}); return 1"
    async with Client(gateway(path), mode="legacy") as client:
        await client.call_tool("numbers_add", {"a": 1, "b": 1})  # warm: the server is up, its list known
        await client.call_tool("execute_code", {"code": "return 1"})
        direct = await timed(lambda: client.call_tool("numbers_add", {"a": 1, "b": 2}), 50)
        empty = await timed(lambda: client.call_tool("execute_code", {"code": "return 1"}), 50)
        program = await timed(lambda: client.call_tool("execute_code", {"code": twenty}), 20)
    return {"direct": direct, "empty": empty, "twenty": program, "per_call": (program - empty) / 20}


async def main() -> None:
    count, how = count_tokens()
    with tempfile.TemporaryDirectory(prefix="manifold-code-mode-") as tmp:
        rows = await tokens(Path(tmp), count)
        timings = await overhead(Path(tmp))
    print(f"tokens: {how}")
    print(f"{'task':<7} {'surface':<9} {'definitions':>11} {'written':>8} {'read':>7} {'total':>7} {'calls':>6}")
    for task, way, listed, written, read, calls in rows:
        total = listed + written + read
        print(f"{task:<7} {way:<9} {listed:>11} {written:>8} {read:>7} {total:>7} {calls:>6}")
    print()
    print(f"empty program, in process, fresh runtime: p50 {empty_program_p50():.2f} ms")
    print(f"direct call of numbers_add through the gateway: p50 {timings['direct']:.2f} ms")
    print(f"execute_code 'return 1' through the gateway: p50 {timings['empty']:.2f} ms")
    print(f"execute_code with 20 calls of numbers_add: p50 {timings['twenty']:.2f} ms")
    print(f"a call inside a program: {timings['per_call']:.2f} ms each (a direct call: {timings['direct']:.2f} ms)")


if __name__ == "__main__":
    anyio.run(main)
