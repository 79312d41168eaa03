"""Tokens a client pays at connect time under each surface, against the full `direct` catalog.

What is counted
---------------
"What a client sees at connect time" is the JSON of the initialize result's ``instructions`` plus the
``tools/list`` result: ``{"instructions": ..., "tools": [...]}`` with every tool dumped as the SDK puts it
on the wire (``model_dump(mode="json", by_alias=True, exclude_none=True)``), serialized compactly
(``separators=(",", ":")``, non-ASCII kept). A ``retrieve_tools`` answer is counted the same way: the JSON
of its ``CallToolResult``. Tokens are exact, offline, o200k_base (GPT-4o / o-series), from ``bpe-openai``
(tiktoken-compatible; the bench extra: ``.venv/bin/pip install -e '.[bench]'`` or ``pip install bpe-openai``).

Each measurement starts a real gateway, ``python -m mcp_manifold serve --config FILE`` over stdio, with a
temporary config (``"manifold": {"expose": [...], "data_dir": <tmpdir>}``) and connects with the SDK's
``mcp.Client(..., mode="legacy")``. Surfaces:

* ``direct``: every backend tool, namespaced (the baseline);
* ``retrieve``: ``retrieve_tools`` + ``call_tool`` (``routing: call_tool``, the default);
* ``retrieve-dynamic``: ``retrieve_tools`` only (``routing: dynamic``); after the queries, the pool of
  registered tools (at most ``tools_limit``, 15 by default) is listed again and counted too;
* ``proxy``: one ``proxy`` tool, when this build has that surface (otherwise reported as unavailable).

For the retrieve surfaces, ``retrieve_tools(query, limit=5)`` is called for each of ``QUERIES`` and the
answers' median and max are reported. Targets: retrieve at connect < 500 tokens whatever the catalog
size; a 5-result ``retrieve_tools`` answer < 1,500 tokens.

Catalogs
--------
``real``: published MCP servers that run offline without credentials, plus the project's fixture servers;
``real+500``: the same plus ``tests/servers/catalog.py --count 500`` (a synthetic large catalog).

* npm (``bench/node``): @modelcontextprotocol/server-filesystem, -memory, -sequential-thinking;
  @modelcontextprotocol/server-everything comes from ``tests/node`` (``make test`` installs it).
* PyPI (``bench/.venv-servers``, kept apart from the project's venv): mcp-server-time, mcp-server-fetch,
  mcp-server-git; mcp-server-sqlite in ``bench/.venv-servers-mcp1``, since it needs the 1.x SDK (``mcp<2``).
* fixtures: ``tests/servers/kitchen.py``, ``numbers.py``, ``words.py``.

A server that is not installed is left out and listed as skipped. ``--setup`` installs the bench servers
(npm and pip, pinned versions below) before measuring; both folders are gitignored.

Run: ``.venv/bin/python bench/tokens.py [--setup]``. Writes ``bench/results/tokens.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
FIXTURES = ROOT / "tests" / "servers"
TEST_NODE_BIN = ROOT / "tests" / "node" / "node_modules" / ".bin"
BENCH_NODE = BENCH / "node"
BENCH_NODE_BIN = BENCH_NODE / "node_modules" / ".bin"
SERVERS_VENV = BENCH / ".venv-servers"
SERVERS_VENV_BIN = SERVERS_VENV / "bin"
MCP1_VENV = BENCH / ".venv-servers-mcp1"  # servers that still need the 1.x SDK
MCP1_VENV_BIN = MCP1_VENV / "bin"
RESULTS = BENCH / "results" / "tokens.json"

ENCODING = "o200k_base"
CONNECT_TARGET = 500
ANSWER_TARGET = 1500
ANSWER_LIMIT = 5
CONNECT_TIMEOUT = 180.0
SWEEP = "2,12,32"  # server counts for the retrieve connect-tokens sweep

NPM_PACKAGES = [
    "@modelcontextprotocol/server-filesystem@2026.8.31",
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-sequential-thinking@2026.8.31",
]
PYPI_PACKAGES = [
    "mcp-server-time==2026.10.19",
    "mcp-server-fetch==2026.10.24",
    "mcp-server-git==2026.10.19",
]
MCP1_PACKAGES = ["mcp-server-sqlite==2025.4.25", "mcp<2"]

# Realistic requests an agent would search for, each aimed at one of the real servers.
QUERIES = [
    "read the contents of a text file",
    "what time is it in Tokyo right now",
    "show the recent commits in the git history",
    "remember a fact about a person in the knowledge graph",
    "download a web page and convert it to markdown",
]

SURFACES: dict[str, dict[str, Any]] = {
    "direct": {"expose": ["direct"]},
    "retrieve": {"expose": ["retrieve"], "routing": "call_tool"},
    "retrieve-dynamic": {"expose": ["retrieve"], "routing": "dynamic"},
    "proxy": {"expose": ["proxy"]},
}


# --- servers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    name: str
    source: str  # what it is, for the report: "npm @scope/pkg", "pypi name", "fixture file"
    executable: Path
    build: Callable[[Path, Path], dict[str, Any]]  # (executable, scratch dir) -> mcpServers entry

    def entry(self, scratch: Path) -> dict[str, Any]:
        return self.build(self.executable, scratch)


def _plain(*args: str) -> Callable[[Path, Path], dict[str, Any]]:
    return lambda exe, _scratch: {"command": str(exe), "args": list(args)}


def _fixture(script: str, *args: str) -> Callable[[Path, Path], dict[str, Any]]:
    return lambda _exe, _scratch: {"command": sys.executable, "args": [str(FIXTURES / script), *args]}


def _filesystem(exe: Path, scratch: Path) -> dict[str, Any]:
    root = scratch / "files"
    root.mkdir(exist_ok=True)
    return {"command": str(exe), "args": [str(root)]}


def _memory(exe: Path, scratch: Path) -> dict[str, Any]:
    return {"command": str(exe), "args": [], "env": {"MEMORY_FILE_PATH": str(scratch / "memory.jsonl")}}


def _git(exe: Path, _scratch: Path) -> dict[str, Any]:
    return {"command": str(exe), "args": ["--repository", str(ROOT)]}


def _sqlite(exe: Path, scratch: Path) -> dict[str, Any]:
    return {"command": str(exe), "args": ["--db-path", str(scratch / "bench.db")]}


REAL_SERVERS = [
    Server(
        "everything", "npm @modelcontextprotocol/server-everything", TEST_NODE_BIN / "mcp-server-everything", _plain()
    ),
    Server(
        "filesystem",
        "npm @modelcontextprotocol/server-filesystem",
        BENCH_NODE_BIN / "mcp-server-filesystem",
        _filesystem,
    ),
    Server("memory", "npm @modelcontextprotocol/server-memory", BENCH_NODE_BIN / "mcp-server-memory", _memory),
    Server(
        "thinking",
        "npm @modelcontextprotocol/server-sequential-thinking",
        BENCH_NODE_BIN / "mcp-server-sequential-thinking",
        _plain(),
    ),
    Server("time", "pypi mcp-server-time", SERVERS_VENV_BIN / "mcp-server-time", _plain("--local-timezone", "UTC")),
    Server("fetch", "pypi mcp-server-fetch", SERVERS_VENV_BIN / "mcp-server-fetch", _plain()),
    Server("git", "pypi mcp-server-git", SERVERS_VENV_BIN / "mcp-server-git", _git),
    Server("sqlite", "pypi mcp-server-sqlite", MCP1_VENV_BIN / "mcp-server-sqlite", _sqlite),
    Server("kitchen", "fixture tests/servers/kitchen.py", FIXTURES / "kitchen.py", _fixture("kitchen.py")),
    Server("numbers", "fixture tests/servers/numbers.py", FIXTURES / "numbers.py", _fixture("numbers.py")),
    Server("words", "fixture tests/servers/words.py", FIXTURES / "words.py", _fixture("words.py")),
]
SYNTHETIC = Server(
    "catalog",
    "fixture tests/servers/catalog.py --count 500",
    FIXTURES / "catalog.py",
    _fixture("catalog.py", "--count", "500"),
)
CATALOGS = {"real": REAL_SERVERS, "real+500": [*REAL_SERVERS, SYNTHETIC]}


def setup() -> None:
    """Install the bench servers: npm ones into bench/node, PyPI ones into their bench venvs."""
    BENCH_NODE.mkdir(exist_ok=True)
    subprocess.run(
        ["npm", "install", "--prefix", str(BENCH_NODE), "--no-audit", "--no-fund", "--loglevel=error", *NPM_PACKAGES],
        check=True,
    )
    for venv, packages in ((SERVERS_VENV, PYPI_PACKAGES), (MCP1_VENV, MCP1_PACKAGES)):
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *packages], check=True)


# --- measuring -------------------------------------------------------------------------------


class Tokens:
    def __init__(self) -> None:
        from bpe_openai import get_encoding  # the bench extra; imported here so --help works without it

        self.encoding = get_encoding(ENCODING)

    def __call__(self, value: Any) -> int:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return len(self.encoding.encode_ordinary(text))


@dataclass
class Measurement:
    surface: str
    available: bool = True
    error: str | None = None
    tools: int = 0
    connect_tokens: int = 0
    connect_view: str | None = None  # the counted JSON, kept for the small surfaces
    answers: list[dict[str, Any]] = field(default_factory=list)
    after_queries: dict[str, int] | None = None  # dynamic mode: what tools/list shows after the searches
    per_server: dict[str, dict[str, int]] = field(default_factory=dict)  # direct only

    def answer_stat(self, how: Callable[[list[int]], float]) -> float | None:
        counts = [answer["tokens"] for answer in self.answers]
        return how(counts) if counts else None


def _environment() -> dict[str, str]:
    """This environment without MANIFOLD_* variables, so only the temp config decides the settings."""
    return {key: value for key, value in os.environ.items() if not key.startswith("MANIFOLD_")}


async def _all_tools(client: Client) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools += [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return tools


def _view(client: Client, tools: list[dict[str, Any]]) -> dict[str, Any]:
    view: dict[str, Any] = {"tools": tools}
    if client.instructions is not None:
        view = {"instructions": client.instructions, **view}
    return view


async def measure(
    surface: str,
    servers: list[Server],
    scratch: Path,
    count: Tokens,
    queries: list[str],
    extra: dict[str, Any] | None = None,
) -> Measurement:
    data_dir = scratch / f"data-{surface}"
    settings = {**SURFACES[surface], **(extra or {}), "data_dir": str(data_dir)}
    config = {"mcpServers": {server.name: server.entry(scratch) for server in servers}, "manifold": settings}
    config_path = scratch / f"{surface}.json"
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_manifold", "serve", "--config", str(config_path)],
        env=_environment(),
        cwd=str(scratch),
    )
    result = Measurement(surface)
    stderr_path = scratch / f"{surface}.stderr"
    try:
        # The same transport Client(params) builds, with the gateway's stderr kept in a file instead of ours.
        with anyio.fail_after(CONNECT_TIMEOUT), stderr_path.open("w", encoding="utf-8") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                tools = await _all_tools(client)
                result.tools = len(tools)
                result.connect_tokens = count(_view(client, tools))
                if surface != "direct":
                    result.connect_view = json.dumps(_view(client, tools), separators=(",", ":"), ensure_ascii=False)
                if surface == "direct":
                    result.per_server = _per_server(tools, servers, count)
                if surface.startswith("retrieve"):
                    for query in queries:
                        answer = await client.call_tool("retrieve_tools", {"query": query, "limit": ANSWER_LIMIT})
                        dumped = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
                        if answer.is_error:
                            raise RuntimeError(f"retrieve_tools({query!r}) failed: {dumped}")
                        text = "\n".join(c.get("text", "") for c in dumped.get("content", []))
                        # The same answer with the full JSON schemas (include_schema), for comparison.
                        full = await client.call_tool(
                            "retrieve_tools", {"query": query, "limit": ANSWER_LIMIT, "include_schema": True}
                        )
                        full_tokens = count(full.model_dump(mode="json", by_alias=True, exclude_none=True))
                        result.answers.append(
                            {"query": query, "tokens": count(dumped), "tokens_full_schemas": full_tokens, "text": text}
                        )
                if surface == "retrieve-dynamic":
                    pool = await _all_tools(client)
                    result.after_queries = {"tools": len(pool), "tokens": count(_view(client, pool))}
    except Exception as exc:
        stderr = stderr_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        if surface != "proxy":
            raise RuntimeError(f"{surface}: {_describe(exc)}; gateway stderr: {' | '.join(stderr[-5:])}") from exc
        # The proxy surface may not exist in this build yet: report it instead of failing the run.
        result.available = False
        result.error = stderr[-1] if stderr else _describe(exc)
    return result


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}".strip()


def _per_server(tools: list[dict[str, Any]], servers: list[Server], count: Tokens) -> dict[str, dict[str, int]]:
    """The direct listing split by server (tool names start with `<server>_`), tokens of each server's tools."""
    groups: dict[str, list[dict[str, Any]]] = {server.name: [] for server in servers}
    for tool in tools:
        owner = max((name for name in groups if tool["name"].startswith(f"{name}_")), key=len, default=None)
        if owner is not None:
            groups[owner].append(tool)
    return {name: {"tools": len(group), "tokens": count(group)} for name, group in groups.items()}


# --- report ----------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def table(catalogs: dict[str, dict[str, Measurement]]) -> str:
    head = ["catalog", "surface", "tools listed", "connect tokens", "vs direct", "answer median", "answer max"]
    rows = [head]
    for catalog, results in catalogs.items():
        direct = results["direct"].connect_tokens
        for surface, m in results.items():
            if not m.available:
                rows.append([catalog, surface, "unavailable", "-", "-", "-", "-"])
                continue
            share = "100%" if surface == "direct" else f"{100 * m.connect_tokens / direct:.1f}%"
            rows.append(
                [
                    catalog,
                    surface,
                    _fmt(m.tools),
                    _fmt(m.connect_tokens),
                    share,
                    _fmt(m.answer_stat(statistics.median)),
                    _fmt(m.answer_stat(max)),
                ]
            )
            if m.after_queries is not None:
                after = m.after_queries
                share = f"{100 * after['tokens'] / direct:.1f}%"
                rows.append(
                    [
                        catalog,
                        f"{surface} (after {len(m.answers)} searches)",
                        _fmt(after["tools"]),
                        _fmt(after["tokens"]),
                        share,
                        "-",
                        "-",
                    ]
                )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append(
                "|" + "|".join("-" * (w + 2) if i < 2 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
            )
    return "\n".join(lines)


def verdicts(catalogs: dict[str, dict[str, Measurement]]) -> list[str]:
    lines = []
    for catalog, results in catalogs.items():
        for surface in ("retrieve", "retrieve-dynamic"):
            m = results[surface]
            connect = "PASS" if m.connect_tokens < CONNECT_TARGET else "FAIL"
            worst = m.answer_stat(max) or 0
            answer = "PASS" if worst < ANSWER_TARGET else "FAIL"
            lines.append(
                f"{catalog} {surface}: connect {m.connect_tokens} < {CONNECT_TARGET}: {connect}; "
                f"max {ANSWER_LIMIT}-result answer {worst:.0f} < {ANSWER_TARGET}: {answer}"
            )
    return lines


async def server_sweep(count: Tokens, sizes: list[int]) -> list[dict[str, int]]:
    """retrieve's connect tokens against the number of servers: numbers + words + (n - 2) small catalogs."""
    base = [server for server in REAL_SERVERS if server.name in ("numbers", "words")]
    points = []
    for size in sizes:
        extra = [
            Server(
                f"cat{i:02d}",
                "fixture tests/servers/catalog.py --count 5",
                FIXTURES / "catalog.py",
                _fixture("catalog.py", "--count", "5", "--tag", f"s{i:02d}"),
            )
            for i in range(1, size - len(base) + 1)
        ]
        with tempfile.TemporaryDirectory(prefix="manifold-tokens-") as scratch:
            # Many Python fixtures start at once on a small machine: give them time.
            m = await measure("retrieve", [*base, *extra], Path(scratch), count, [], {"init_timeout": 120})
        print(f"  sweep     {size:>3} servers         {m.connect_tokens:>7} tokens", file=sys.stderr)
        points.append({"servers": size, "connect_tokens": m.connect_tokens})
    return points


def sweep_table(points: list[dict[str, int]]) -> str:
    lines = [
        "| servers | retrieve connect tokens | per extra server |",
        "|--------:|-----------------------:|-----------------:|",
    ]
    for previous, point in zip([None, *points], points, strict=False):
        step = "-"
        if previous is not None:
            added = point["servers"] - previous["servers"]
            step = f"{(point['connect_tokens'] - previous['connect_tokens']) / added:.1f}"
        lines.append(f"| {point['servers']:>7} | {point['connect_tokens']:>22,} | {step:>16} |")
    return "\n".join(lines)


async def run(catalog_names: list[str], surfaces: list[str], queries: list[str], sweep: list[int]) -> dict[str, Any]:
    count = Tokens()
    catalogs: dict[str, dict[str, Measurement]] = {}
    used: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    for catalog in catalog_names:
        servers = []
        for server in CATALOGS[catalog]:
            if server.executable.exists():
                servers.append(server)
            else:
                skipped[server.name] = f"{server.source}: {server.executable} not found (run with --setup)"
        used[catalog] = [server.name for server in servers]
        catalogs[catalog] = {}
        for surface in surfaces:
            with tempfile.TemporaryDirectory(prefix="manifold-tokens-") as scratch:
                started = time.monotonic()
                m = await measure(surface, servers, Path(scratch), count, queries)
                print(
                    f"  {catalog:<9} {surface:<17} {m.connect_tokens:>7} tokens  ({time.monotonic() - started:.1f}s)",
                    file=sys.stderr,
                )
            catalogs[catalog][surface] = m
    points = await server_sweep(count, sweep) if sweep else []
    print()
    print(table(catalogs))
    if points:
        print()
        print(sweep_table(points))
    print()
    for line in verdicts(catalogs):
        print(line)
    for catalog, results in catalogs.items():
        answers = results["retrieve"].answers if "retrieve" in results else []
        if answers:
            compact = [a["tokens"] for a in answers]
            full = [a["tokens_full_schemas"] for a in answers]
            print(
                f"{catalog}: a {ANSWER_LIMIT}-result answer with each parameter's type and description: median"
                f" {statistics.median(compact):,.0f}, max {max(compact):,}; with the full JSON schemas"
                f" (include_schema): median {statistics.median(full):,.0f}, max {max(full):,}"
            )
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    empty = sorted({name for r in catalogs.values() for name, s in r["direct"].per_server.items() if not s["tools"]})
    for name in empty:
        print(f"warning: server {name} listed no tools behind the gateway (did it fail to start?)")
    for catalog, results in catalogs.items():
        if "proxy" in results and not results["proxy"].available:
            print(f"{catalog} proxy unavailable: {results['proxy'].error}")
    return {
        "encoding": ENCODING,
        "tokenizer": "bpe-openai",
        "serialization": "compact JSON of {instructions, tools} (by_alias, exclude_none)",
        "targets": {"retrieve_connect_tokens": CONNECT_TARGET, "retrieve_answer_tokens": ANSWER_TARGET},
        "answer_limit": ANSWER_LIMIT,
        "queries": queries,
        "servers": {s.name: s.source for s in [*REAL_SERVERS, SYNTHETIC]},
        "catalogs": {
            catalog: {
                "servers": used[catalog],
                "surfaces": {
                    surface: {
                        "available": m.available,
                        "error": m.error,
                        "tools": m.tools,
                        "connect_tokens": m.connect_tokens,
                        "vs_direct": round(m.connect_tokens / results["direct"].connect_tokens, 4)
                        if m.available and "direct" in results
                        else None,
                        "answer_tokens_median": m.answer_stat(statistics.median),
                        "answer_tokens_max": m.answer_stat(max),
                        "answers": m.answers,
                        "connect_view": m.connect_view,
                        "after_queries": m.after_queries,
                        "per_server": m.per_server or None,
                    }
                    for surface, m in results.items()
                },
            }
            for catalog, results in catalogs.items()
        },
        "server_sweep": points,
        "verdicts": verdicts(catalogs),
        "skipped": skipped,
        "empty_servers": empty,
    }


def _sizes(text: str) -> list[int]:
    sizes = [int(n) for n in text.split(",") if n.strip()]
    if any(size < 2 for size in sizes):
        raise argparse.ArgumentTypeError("each server count must be at least 2 (numbers + words)")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="install the bench servers (npm + bench venv) first")
    parser.add_argument("--catalog", choices=list(CATALOGS), action="append", help="catalog(s) to measure (all)")
    parser.add_argument(
        "--sweep",
        type=_sizes,
        default=SWEEP,
        metavar="N,N,...",
        help="server counts for the retrieve-vs-servers sweep ('' to skip; default %(default)s)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"JSON results (default {RESULTS})")
    args = parser.parse_args()
    if args.setup:
        setup()
    report = anyio.run(run, args.catalog or list(CATALOGS), list(SURFACES), QUERIES, args.sweep)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
