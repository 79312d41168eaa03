"""The `dispatch` surface: Mini-A's `proxy-dispatch`, one tool that lists, searches and calls everything.

Backends are *connections* with stable aliases (`c1`, `c2`, ..., see `connections.py`); tools keep
their own names, and `connection` is only needed when two servers offer the same name. Large
results go to files in the gateway's spill store (`resultToFile`, `resultSizeThreshold` or the
global `spill_threshold`), `readresult` reads them back in parts, and a result file can be the
`argumentsFile` of the next call, so a big payload moves between tools without entering context.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from mcp_manifold._errors import InvalidRequest, ManifoldError, NotFound
from mcp_manifold.core.arguments import integer_field, json_type_name, object_argument, string_field
from mcp_manifold.core.catalog import ToolEntry
from mcp_manifold.core.results import content_size, estimate_tokens, render_result, spill_facts, spill_notice
from mcp_manifold.runtime import result_files as readresult
from mcp_manifold.runtime.spill import read_arguments
from mcp_manifold.surfaces.base import CallContext, Surface
from mcp_manifold.surfaces.dispatch.connections import Connection, Connections
from mcp_manifold.surfaces.retrieve import check_arguments, parameter_summary, short_description

if TYPE_CHECKING:
    from mcp_manifold.runtime.gateway import Gateway

TOOL_NAME = "proxy-dispatch"
ACTIONS = ("list", "search", "call", "readresult")
PARAMETERS: dict[str, tuple[str, ...]] = {
    "list": ("connection", "includeTools", "includeInputSchema", "includeAnnotations"),
    "search": ("query", "connection", "limit", "includeInputSchema"),
    "call": ("tool", "connection", "arguments", "meta", "argumentsFile", "resultToFile", "resultSizeThreshold"),
    "readresult": ("resultFile", "op", "lines", "fromLine", "toLine", "pattern", "context", "maxBytes", "offset"),
}
# Which readresult op uses which parameter, so a misplaced one gets a clear error.
OP_PARAMETERS: dict[str, tuple[str, ...]] = {
    "lines": ("head", "tail"),
    "fromLine": ("slice",),
    "toLine": ("slice",),
    "pattern": ("grep",),
    "context": ("grep",),
    "maxBytes": ("read",),
    "offset": ("read",),
}
MAX_SEARCH_LIMIT = 50
MAX_ECHOED_QUERY = 200
MAX_CONTEXT_LINES = 50
GREP_TIMEOUT = 10.0  # seconds a grep may run before its child process is killed
_GREP_WORKER = "from mcp_manifold.runtime.result_files import grep_worker; grep_worker()"
READ_HINT = (
    "Read it with action 'readresult' (resultFile, op stat/head/tail/slice/grep/read), "
    "or pass it as 'argumentsFile' to another call."
)


class DispatchSurface(Surface):
    name = "dispatch"
    # Listing tools shows only proxy-dispatch: no backend starts until an action needs it.
    needs_catalog = False
    # The gateway's global spill leaves this surface alone: it spills calls itself, and readresult never spills.
    spills_results = True

    def __init__(self, gateway: Gateway) -> None:
        super().__init__(gateway)
        self.connections = Connections(gateway.config.servers.values(), gateway.settings.data_dir)
        self.tool = dispatch_tool(self.connections)

    def reserved_tools(self) -> list[types.Tool]:
        return [self.tool]

    def list_tools(self, call: CallContext) -> list[types.Tool]:
        return [self.tool]

    def owns_tool(self, call: CallContext, name: str) -> bool:
        return name == TOOL_NAME

    async def call_tool(self, call: CallContext, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        request = _Request.parse(arguments)
        if request.action == "list":
            return await self._list(request)
        if request.action == "search":
            return await self._search(request)
        if request.action == "call":
            return await self._call(call, request)
        return await self._readresult(request)

    # --- connections -------------------------------------------------------------------------

    def _connections(self) -> list[Connection]:
        """Every configured backend's connection. (Backends a hub session adds stay that session's own.)"""
        connections = [self.connections.get(backend.config) for backend in self.gateway.backends.values()]
        return sorted(connections, key=lambda c: int(c.alias[1:]))

    def _resolve(self, request: _Request) -> Connection | None:
        ref = request.string("connection")
        if ref is None:
            return None
        self._connections()  # registers backends added since start
        return self.connections.resolve(ref)

    def _alias(self, server: str) -> str:
        return self.connections.get(self.gateway.backends[server].config).alias

    async def _ensure_listed(self, connections: list[Connection]) -> None:
        """List the backends not listed yet; lazy ones start here. Those that cannot start are skipped."""
        listed = set(self.gateway.catalog.servers)
        missing = []
        for connection in connections:
            status = self.gateway.backends[connection.server].status()
            waiting = (status.state == "failed" and (status.retry_in or 0) > 0) or status.breaker == "open"
            if connection.server not in listed and status.state != "disabled" and not waiting:
                missing.append(connection.server)
        if missing:
            await self.gateway.refresh(missing)

    def _entries(self, server: str | None = None) -> list[ToolEntry]:
        entries = self.gateway.catalog.tool_entries()
        configured = self.gateway.backends
        return [e for e in entries if (server is None or e.server == server) and e.server in configured]

    # --- list --------------------------------------------------------------------------------

    async def _list(self, request: _Request) -> types.CallToolResult:
        only = self._resolve(request)
        include_tools = request.boolean("includeTools", True)
        include_schema = request.boolean("includeInputSchema", False)
        include_annotations = request.boolean("includeAnnotations", True)
        targets = [only] if only else self._connections()
        if include_tools:
            await self._ensure_listed(targets)
        listed = set(self.gateway.catalog.servers)
        described = []
        for connection in targets:
            item = self._describe(connection)
            if connection.server in listed:
                entries = self._entries(connection.server)
                item["toolCount"] = len(entries)
                if include_tools:
                    item["tools"] = [_tool_info(entry, include_schema, include_annotations) for entry in entries]
            described.append(item)
        return _answer(_json({"connections": described}), {"action": "list"})

    def _describe(self, connection: Connection) -> dict[str, Any]:
        status = self.gateway.backends[connection.server].status()
        item = connection.describe()
        item["state"] = status.state
        if status.server_info:
            item["serverInfo"] = status.server_info
        if status.breaker != "closed":
            item["breaker"] = status.breaker
            if status.breaker_retry_in is not None:
                item["breakerRetryIn"] = round(status.breaker_retry_in, 1)
        if status.last_error and status.state == "failed":
            item["lastError"] = connection.scrub(status.last_error)
        return item

    # --- search ------------------------------------------------------------------------------

    async def _search(self, request: _Request) -> types.CallToolResult:
        query = request.string("query")
        if query is None or not query.strip():
            raise InvalidRequest("action 'search' needs 'query': a non-empty string saying what the tool should do")
        only = self._resolve(request)
        limit = request.integer("limit", self.gateway.settings.search_top_k, 1, MAX_SEARCH_LIMIT)
        include_schema = request.boolean("includeInputSchema", False)
        await self._ensure_listed([only] if only else self._connections())
        matches = await self.gateway.search.find(query, limit=limit, server=only.server if only else None)
        results = []
        for match in matches:
            entry = match.entry
            if entry.server not in self.gateway.backends:
                continue
            found: dict[str, Any] = {
                "connection": self._alias(entry.server),
                "server": entry.server,
                "tool": entry.original.name,
                "score": round(match.score, 3),
                "description": short_description(entry.original.description),
                "args": parameter_summary(entry.original.input_schema or {}) or "none",
            }
            if include_schema:
                found["inputSchema"] = entry.original.input_schema
            results.append(found)
        # The query is echoed so the answer reads on its own, but never a long one back into context.
        shown = query if len(query) <= MAX_ECHOED_QUERY else query[:MAX_ECHOED_QUERY] + "..."
        answer: dict[str, Any] = {"query": shown, "results": results}
        if results:
            answer["note"] = "args: * = required. Call one with action 'call', 'tool' and 'arguments'."
        return _answer(_json(answer), {"action": "search"})

    # --- call --------------------------------------------------------------------------------

    async def _call(self, call: CallContext, request: _Request) -> types.CallToolResult:
        tool = request.string("tool")
        if tool is None or not tool:
            raise InvalidRequest("action 'call' needs 'tool': a tool name from action 'list' or 'search'")
        only = self._resolve(request)
        arguments = request.object("arguments") or {}
        meta = request.object("meta")
        arguments_file = None
        if request.given("argumentsFile"):
            arguments_file = self.gateway.spill.resolve(request.raw["argumentsFile"], "argumentsFile")
            # Inline arguments refine the file's (e.g. a small option next to a big payload).
            arguments = {**read_arguments(arguments_file), **arguments}
        to_file = request.boolean("resultToFile", False)
        threshold = request.integer("resultSizeThreshold", self.gateway.settings.spill_threshold, 0, None)

        server, original, entry = await self._find_tool(tool, only)
        if entry is not None:
            check_arguments(entry, arguments)
        if meta is not None:
            # Progress is wired by the gateway from this request's own token.
            meta = {key: value for key, value in meta.items() if key != "progressToken"}
        result = await self.gateway.call_tool(call, server, original, arguments, meta=meta)
        connection = self.connections.get(self.gateway.backends[server].config)
        if result.is_error:
            # Errors can quote a server's stderr or URL, where its secrets may appear.
            result = _scrubbed(result, connection)

        facts: dict[str, Any] = {"action": "call", "tool": original, "connection": connection.alias}
        if arguments_file is not None:
            facts["arguments"] = {"_fromFile": str(arguments_file)}
        return self._shape(result, facts, to_file=to_file and not result.is_error, threshold=threshold)

    async def _find_tool(self, tool: str, only: Connection | None) -> tuple[str, str, ToolEntry | None]:
        """(server, original name, catalog entry) for `tool`; the entry is None for an unlisted server."""
        if only is not None:
            await self._ensure_listed([only])
            entries = self._entries(only.server)
            found = next((e for e in entries if e.original.name == tool), None)
            found = found or next((e for e in entries if e.name == tool), None)
            if found is not None:
                return found.server, found.original.name, found
            if only.server not in self.gateway.catalog.servers:
                # Its tools are unknown (it did not start): call anyway, so the backend's own error shows.
                return only.server, tool, None
            names = [e.original.name for e in entries]
            raise NotFound(
                f"connection {only.alias} ({only.server}) has no tool {tool!r}{_close(tool, names)}; "
                f"see action 'list' with connection '{only.alias}'"
            )
        await self._ensure_listed(self._connections())
        entries = self._entries()
        candidates = [e for e in entries if e.original.name == tool] or [e for e in entries if e.name == tool]
        if len(candidates) == 1:
            entry = candidates[0]
            return entry.server, entry.original.name, entry
        if candidates:
            offered = ", ".join(f"{self._alias(e.server)} ({e.server})" for e in candidates)
            raise InvalidRequest(f"tool {tool!r} is offered by several connections: {offered}; add 'connection'")
        unknown = [c for c in self._connections() if c.server not in self.gateway.catalog.servers]
        missing = f" (tools of {', '.join(f'{c.alias} ({c.server})' for c in unknown)} are unknown: not running)"
        names = sorted({e.original.name for e in entries})
        raise NotFound(
            f"no connection offers a tool named {tool!r}{_close(tool, names)}{missing if unknown else ''}; "
            "use action 'search' or 'list'"
        )

    def _shape(
        self, result: types.CallToolResult, facts: dict[str, Any], *, to_file: bool, threshold: int
    ) -> types.CallToolResult:
        """Inline (with `estimatedTokens`), or written to a file and answered with a short notice."""
        settings = self.gateway.settings
        if not (to_file or threshold or settings.toon) and result.content:
            content: list[types.ContentBlock] = list(result.content)
        else:
            rendered = render_result(result, toon=settings.toon)
            auto = not to_file and threshold > 0 and rendered.inline_size > threshold
            if to_file or auto:
                try:
                    spilled = self.gateway.spill.write(rendered.text, rendered.suffix)
                except OSError as exc:
                    raise ManifoldError(f"could not write the result file: {exc}") from None
                notice = spill_notice(spilled, rendered, threshold=threshold if auto else None, ttl=settings.spill_ttl)
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=f"{notice}\n{READ_HINT}")],
                    is_error=result.is_error,
                    _meta={**facts, **spill_facts(spilled, auto=auto)},
                )
            content = rendered.inline
        facts["estimatedTokens"] = estimate_tokens(content_size(content))
        # The data lives only in `content`: structured content would carry it a second time.
        return types.CallToolResult(content=content, is_error=result.is_error, _meta=facts)

    # --- readresult --------------------------------------------------------------------------

    async def _readresult(self, request: _Request) -> types.CallToolResult:
        if not request.given("resultFile"):
            raise InvalidRequest("action 'readresult' needs 'resultFile': the path a spilled call answered with")
        path = self.gateway.spill.resolve(request.raw["resultFile"], "resultFile")
        op = request.string("op") or "stat"
        if op not in readresult.OPS:
            raise InvalidRequest(f"unknown op {op!r}: expected one of {', '.join(readresult.OPS)}")
        for key, ops in OP_PARAMETERS.items():
            if request.given(key) and op not in ops:
                raise InvalidRequest(f"'{key}' is only used by op {' and '.join(ops)}, not by op '{op}'")
        facts = {"action": "readresult", "op": op, "resultFile": str(path)}
        if op == "stat":
            return _answer(_json(await _in_thread(readresult.stat, path)), facts)
        if op in ("head", "tail"):
            count = request.integer("lines", readresult.DEFAULT_LINES, 1, None)
            answer = await _in_thread(readresult.head if op == "head" else readresult.tail, path, count)
        elif op == "slice":
            first = request.integer("fromLine", 1, 1, None)
            last = request.integer("toLine", first + readresult.DEFAULT_LINES - 1, 1, None)
            answer = await _in_thread(readresult.slice_lines, path, first, last)
        elif op == "grep":
            pattern = request.string("pattern")
            if not pattern:
                raise InvalidRequest("op 'grep' needs 'pattern': a regular expression (case-insensitive)")
            answer = await _grep(path, pattern, request.integer("context", 0, 0, MAX_CONTEXT_LINES))
        else:
            offset = request.integer("offset", 0, 0, None)
            answer = await _in_thread(readresult.read, path, offset, request.integer("maxBytes", 0, 0, None))
        blocks = [answer.body, f"[{answer.note}]"] if answer.body else [f"[{answer.note}]"]
        return types.CallToolResult(content=[types.TextContent(type="text", text=text) for text in blocks], _meta=facts)


class _Request:
    """The tool's arguments, checked against the action: unknown or misplaced parameters are errors."""

    def __init__(self, action: str, raw: Mapping[str, Any]) -> None:
        self.action = action
        self.raw = raw

    @classmethod
    def parse(cls, arguments: Mapping[str, Any]) -> _Request:
        action = arguments.get("action")
        if action is None:
            raise InvalidRequest(f"missing required parameter 'action': one of {', '.join(ACTIONS)}")
        if action not in ACTIONS:
            raise InvalidRequest(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        allowed = PARAMETERS[action]
        for key, value in arguments.items():
            if key == "action" or value is None or key in allowed:
                continue
            owners = [name for name, keys in PARAMETERS.items() if key in keys]
            where = f"it belongs to action {' and '.join(owners)}" if owners else "unknown parameter"
            raise InvalidRequest(
                f"'{key}' is not a parameter of action '{action}' ({where}); {action} takes: {', '.join(allowed)}"
            )
        return cls(action, arguments)

    def given(self, key: str) -> bool:
        return self.raw.get(key) is not None  # an explicit null counts as not given

    def string(self, key: str) -> str | None:
        return string_field(self.raw, key)

    def integer(self, key: str, default: int, low: int, high: int | None) -> int:
        return integer_field(self.raw, key, default, low, high)

    def boolean(self, key: str, default: bool) -> bool:
        if not self.given(key):
            return default
        value = self.raw[key]
        if not isinstance(value, bool):
            raise InvalidRequest(f"'{key}' must be true or false, got {json_type_name(value)}")
        return value

    def object(self, key: str) -> dict[str, Any] | None:
        return object_argument(self.raw[key], key) if self.given(key) else None


def dispatch_tool(connections: Connections) -> types.Tool:
    """The one tool the client sees; its description names the connections (a line each, no secrets)."""
    listed = ", ".join(f"{c.alias} {c.server}" for c in connections) or "none configured"
    description = (
        "Reach every tool of the MCP servers behind this gateway.\n"
        "- action 'list': connections and their tools.\n"
        "- action 'search': find tools by what they do (query).\n"
        "- action 'call': call 'tool' with 'arguments' (or 'argumentsFile'); give 'connection' when two "
        "connections have the tool. 'resultToFile' (or a result over 'resultSizeThreshold' bytes) puts the "
        "result in a file and answers with its path and a preview.\n"
        "- action 'readresult': read such a file: op stat (default), head, tail, slice, grep or read. "
        "Use this, not another tool, to read result files.\n"
        f"Connections: {listed}."
    )
    string = {"type": "string"}
    integer = {"type": "integer", "minimum": 0}
    boolean = {"type": "boolean"}
    schema = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "connection": {**string, "description": "Alias (c1), id or server name; list/search/call."},
            "includeTools": {**boolean, "default": True, "description": "list: include each connection's tools."},
            "includeInputSchema": {**boolean, "default": False, "description": "list/search: add input schemas."},
            "includeAnnotations": {**boolean, "default": True, "description": "list: add tool annotations."},
            "query": {**string, "description": "search: what the tool should do."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "description": "search."},
            "tool": {**string, "description": "call: the tool's name."},
            "arguments": {"type": "object", "description": "call: the tool's arguments."},
            "meta": {"type": "object", "description": "call: _meta sent with the call."},
            "argumentsFile": {**string, "description": "call: a JSON file of arguments, e.g. a resultFile."},
            "resultToFile": {**boolean, "default": False, "description": "call: write the result to a file."},
            "resultSizeThreshold": {**integer, "description": "call: spill results over this many bytes; 0 = off."},
            "resultFile": {**string, "description": "readresult: the file to read."},
            "op": {"type": "string", "enum": list(readresult.OPS), "default": "stat"},
            "lines": {**integer, "default": readresult.DEFAULT_LINES, "description": "head/tail."},
            "fromLine": {**integer, "description": "slice: first line (1-based)."},
            "toLine": {**integer, "description": "slice: last line (inclusive)."},
            "pattern": {**string, "description": "grep: case-insensitive regular expression."},
            "context": {**integer, "default": 0, "description": "grep: lines around each match."},
            "maxBytes": {**integer, "default": 0, "description": "read: at most this many bytes; 0 = all."},
            "offset": {**integer, "default": 0, "description": "read: start at this byte."},
        },
        "required": ["action"],
    }
    return types.Tool(name=TOOL_NAME, description=description, input_schema=schema)


async def _in_thread(op: Callable[..., Any], path: Path, *args: Any) -> Any:
    """A readresult op off the event loop (a large file takes a while), with file errors made clear."""
    try:
        return await anyio.to_thread.run_sync(functools.partial(op, path, *args))
    except FileNotFoundError:
        raise NotFound(f"'resultFile': {path} no longer exists (spilled files are deleted after a while)") from None
    except OSError as exc:
        raise ManifoldError(f"'resultFile': cannot read {path}: {exc.strerror or exc}") from None


async def _grep(path: Path, pattern: str, context: int, timeout: float = GREP_TIMEOUT) -> readresult.Answer:
    """`readresult.grep` in a child process that is killed after `timeout` seconds.

    A pattern with nested repetition (`(a+)+$`) can backtrack for hours on one line, and Python's
    `re` holds the interpreter meanwhile: run in the gateway, it would stall every client's calls.
    """
    readresult.compile_pattern(pattern)  # a malformed pattern fails here, without a process
    request = json.dumps({"path": str(path), "pattern": pattern, "context": context}).encode()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry)}
    try:
        with anyio.fail_after(timeout):
            done = await anyio.run_process([sys.executable, "-c", _GREP_WORKER], input=request, env=env, check=False)
    except TimeoutError:
        raise InvalidRequest(
            f"op 'grep' stopped after {timeout:g}s: the pattern {pattern!r} takes too long (nested repetition such "
            "as '(a+)+' backtracks without end); use a simpler pattern"
        ) from None
    except OSError as exc:
        raise ManifoldError(f"op 'grep' could not start its worker process: {exc}") from None
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        detail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise ManifoldError(f"op 'grep' failed: {detail[-1] if detail else f'exit code {done.returncode}'}") from None
    if "error" in reply:
        raise InvalidRequest(reply["error"])
    return readresult.Answer(reply["body"], reply["note"])


def _tool_info(entry: ToolEntry, include_schema: bool, include_annotations: bool) -> dict[str, Any]:
    tool = entry.original
    info: dict[str, Any] = {"name": tool.name}
    if tool.title:
        info["title"] = tool.title
    info["description"] = tool.description or ""
    if include_annotations and tool.annotations is not None:
        info["annotations"] = tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
    if include_schema:
        info["inputSchema"] = tool.input_schema
    return info


def _scrubbed(result: types.CallToolResult, connection: Connection) -> types.CallToolResult:
    content = [
        block.model_copy(update={"text": connection.scrub(block.text)})
        if isinstance(block, types.TextContent)
        else block
        for block in result.content
    ]
    return result.model_copy(update={"content": content})


def _close(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _answer(text: str, facts: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], _meta=facts)
