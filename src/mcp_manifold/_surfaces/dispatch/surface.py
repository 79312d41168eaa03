"""The `dispatch` surface: Mini-A's `proxy-dispatch`, one tool that lists, searches and calls everything.

Backends are *connections* with stable aliases (`c1`, `c2`, ..., see `connections.py`); tools keep
their own names, and `connection` is only needed when two servers offer the same name. Large
results go to files in the gateway's spill store (`resultToFile`, `resultSizeThreshold` or the
global `spill_threshold`), `readresult` reads them back in parts, and a result file can be the
`argumentsFile` of the next call, so a big payload moves between tools without entering context.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import mcp_types as types

from mcp_manifold._config import MAX_SEARCH_LIMIT
from mcp_manifold._core.arguments import integer_field, json_type_name, object_argument, string_field
from mcp_manifold._core.catalog import ToolEntry
from mcp_manifold._core.catalog_view import CatalogView
from mcp_manifold._core.clients import Request
from mcp_manifold._core.profiles import for_profile
from mcp_manifold._core.reading import DEFAULT_READ_LINES, READ_OPS
from mcp_manifold._core.results import SpillPolicy, ToolAnswer, content_size, estimate_tokens, render_result
from mcp_manifold._core.router import Target, ToolCall
from mcp_manifold._core.suggestions import did_you_mean, quoted
from mcp_manifold._errors import InvalidRequest, NotFound
from mcp_manifold._surfaces.base import Host, Surface
from mcp_manifold._surfaces.dispatch.connections import ALIASES_FILE, Connection, Connections, resolve_connection
from mcp_manifold._surfaces.retrieve import check_arguments, parameter_summary, short_description

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
MAX_ECHOED_QUERY = 200
MAX_CONTEXT_LINES = 50
_SAID_IN_NOTICE = ("byteSize", "lineCount", "estimatedTokens")
READ_HINT = (
    "Read it with action 'readresult' (resultFile, op stat/head/tail/slice/grep/read), "
    "or pass it as 'argumentsFile' to another call."
)


class DispatchSurface(Surface):
    name = "dispatch"
    # Listing tools shows only proxy-dispatch: no backend starts until an action needs it.
    needs_catalog = False

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.connections = Connections(host.servers.values(), host.state_file(ALIASES_FILE))
        # The tool's description names the connections a caller may use: one tool per such set.
        self._tools: dict[tuple[str, ...], types.Tool] = {}

    def reserved_tool_names(self) -> list[str]:
        return [TOOL_NAME]

    def list_tools(self, request: Request) -> list[types.Tool]:
        return [self._tool(self.host.view(request))]

    def _tool(self, view: CatalogView) -> types.Tool:
        shown = self._connections(view)
        key = tuple(f"{c.alias} {c.server}" for c in shown)
        tool = self._tools.get(key)
        if tool is None:
            tool = self._tools[key] = dispatch_tool(shown)
        return tool

    def owns_tool(self, request: Request, name: str) -> bool:
        return name == TOOL_NAME

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        action = _Action.parse(arguments)
        view = self.host.view(request)
        if action.action == "call":  # the call path admits the call itself
            return await self._call(request, action, view)
        if action.action == "list":
            work = partial(self._list, action, view)
        elif action.action == "search":
            work = partial(self._search, action, view)
        else:
            work = partial(self._readresult, action)
        return await self.work(request, TOOL_NAME, action.action, work)

    # --- connections -------------------------------------------------------------------------

    def _connections(self, view: CatalogView) -> list[Connection]:
        """The configured backends' connections this caller may use. (Backends a hub session adds stay
        that session's own.) A caller whose profile hides servers sees its own numbering, c1, c2, ... in the
        same order: the kept aliases' gaps would tell it how many servers it may not see, and where."""
        connections = sorted(
            (self.connections.get(config) for config in self.host.servers.values() if view.may_use_server(config.name)),
            key=lambda c: int(c.alias[1:]),
        )
        if view.profile is None:
            return connections
        return [replace(connection, alias=f"c{number}") for number, connection in enumerate(connections, start=1)]

    def _resolve(self, action: _Action, view: CatalogView) -> Connection | None:
        ref = action.string("connection")
        if ref is None:
            return None
        return resolve_connection(self._connections(view), ref)

    def _alias(self, view: CatalogView, server: str) -> str:
        """`server`'s alias for this caller; its name once a reload removed it (or took it from the caller's
        profile) while its call ran: that call's answer still comes."""
        return next((c.alias for c in self._connections(view) if c.server == server), server)

    async def _ensure_listed(self, connections: list[Connection], view: CatalogView) -> None:
        """List the backends not listed yet; lazy ones start here. Those that cannot start are skipped."""
        listed = set(view.servers)
        missing = []
        for connection in connections:
            status = self.host.backend_status(connection.server)
            waiting = (status.state == "failed" and (status.retry_in or 0) > 0) or status.breaker == "open"
            if connection.server not in listed and status.state != "disabled" and not waiting:
                missing.append(connection.server)
        if missing:
            await self.host.refresh(missing)

    def _entries(self, view: CatalogView, server: str | None = None) -> list[ToolEntry]:
        entries = view.tool_entries()
        configured = self.host.servers
        return [e for e in entries if (server is None or e.server == server) and e.server in configured]

    # --- list --------------------------------------------------------------------------------

    async def _list(self, action: _Action, view: CatalogView) -> types.CallToolResult:
        only = self._resolve(action, view)
        include_tools = action.boolean("includeTools", True)
        include_schema = action.boolean("includeInputSchema", False)
        include_annotations = action.boolean("includeAnnotations", True)
        targets = [only] if only else self._connections(view)
        if include_tools:
            await self._ensure_listed(targets, view)
        listed = set(view.servers)
        described = []
        for connection in targets:
            item = self._describe(connection)
            if connection.server in listed:
                entries = self._entries(view, connection.server)
                item["toolCount"] = len(entries)
                if include_tools:
                    item["tools"] = [_tool_info(entry, include_schema, include_annotations) for entry in entries]
            described.append(item)
        return _answer(_json({"connections": described}), {"action": "list"})

    def _describe(self, connection: Connection) -> dict[str, Any]:
        status = self.host.backend_status(connection.server)
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

    async def _search(self, action: _Action, view: CatalogView) -> types.CallToolResult:
        query = action.string("query")
        if query is None or not query.strip():
            raise InvalidRequest("action 'search' needs 'query': a non-empty string saying what the tool should do")
        only = self._resolve(action, view)
        limit = action.integer("limit", self.host.settings.search_top_k, 1, MAX_SEARCH_LIMIT)
        include_schema = action.boolean("includeInputSchema", False)
        await self._ensure_listed([only] if only else self._connections(view), view)
        matches = await view.search(query, limit=limit, server=only.server if only else None)
        results = []
        aliases = {c.server: c.alias for c in self._connections(view)}
        for match in matches:
            entry = match.entry
            if entry.server not in aliases:  # a hub session's backend, not a configured connection
                continue
            found: dict[str, Any] = {
                "connection": aliases[entry.server],
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

    async def _call(self, request: Request, action: _Action, view: CatalogView) -> ToolAnswer:
        tool = action.string("tool")
        if tool is None or not tool:
            raise InvalidRequest("action 'call' needs 'tool': a tool name from action 'list' or 'search'")
        only = self._resolve(action, view)
        arguments = action.object("arguments") or {}
        meta = action.object("meta")
        arguments_file = None
        files = self.host.result_files
        if action.given("argumentsFile"):
            arguments_file = files.resolve(action.raw["argumentsFile"], "argumentsFile")
            # Inline arguments refine the file's (e.g. a small option next to a big payload).
            arguments = {**(await files.read_arguments(arguments_file)), **arguments}
        settings = self.host.settings
        spill = SpillPolicy(
            threshold=action.integer("resultSizeThreshold", settings.spill_threshold, 0, None),
            to_file=action.boolean("resultToFile", False),
            toon=settings.toon,
            ttl=settings.spill_ttl,
            hint=READ_HINT,
        )

        server, original, entry = await self._find_tool(tool, only, view)
        if entry is not None:
            check_arguments(entry, arguments)
        if meta is not None:
            # Progress is wired by the gateway from this request's own token.
            meta = {key: value for key, value in meta.items() if key != "progressToken"}
        target = Target(server, original, entry.name if entry is not None else original, self.name)
        result = await self.host.calls.call_tool(request, ToolCall(target, arguments, meta, spill))
        if isinstance(result, types.InputRequiredResult):
            return result  # the client answers the server's questions and calls proxy-dispatch again
        facts: dict[str, Any] = {"action": "call", "tool": original, "connection": self._alias(view, server)}
        if arguments_file is not None:
            facts["arguments"] = {"_fromFile": str(arguments_file)}
        return self._shape(result, facts, spill)

    async def _find_tool(
        self, tool: str, only: Connection | None, view: CatalogView
    ) -> tuple[str, str, ToolEntry | None]:
        """(server, original name, catalog entry) for `tool`; the entry is None for an unlisted server."""
        if only is not None:
            await self._ensure_listed([only], view)
            entries = self._entries(view, only.server)
            found = next((e for e in entries if e.original.name == tool), None)
            found = found or next((e for e in entries if e.name == tool), None)
            if found is not None:
                return found.server, found.original.name, found
            if only.server not in view.catalog.servers:
                if view.profile is not None:
                    # A profile's globs judge the names the catalog gives (`unruly_fine`); a server that never
                    # listed has none, and its tool's own name (`fine`) passed `!unruly_fine`. Refused alike.
                    view.report_miss(tool)
                    raise NotFound(
                        f"connection {only.alias} ({only.server}) has listed no tools (it is not running, or its "
                        f"listing failed), and a tool it has not listed cannot be judged"
                        f"{for_profile(view.profile_name)}: call it once it lists them; see action 'list'"
                    )
                # Its tools are unknown (it did not start): call anyway, so the backend's own error shows.
                return only.server, tool, None
            view.report_miss(tool)
            names = [e.original.name for e in entries]
            raise NotFound(
                f"connection {only.alias} ({only.server}) has no tool {quoted(tool)}{did_you_mean(tool, names)}; "
                f"see action 'list' with connection '{only.alias}'"
            )
        await self._ensure_listed(self._connections(view), view)
        entries = self._entries(view)
        candidates = [e for e in entries if e.original.name == tool] or [e for e in entries if e.name == tool]
        if len(candidates) == 1:
            entry = candidates[0]
            return entry.server, entry.original.name, entry
        if candidates:
            offered = ", ".join(f"{self._alias(view, e.server)} ({e.server})" for e in candidates)
            raise InvalidRequest(f"tool {quoted(tool)} is offered by several connections: {offered}; add 'connection'")
        view.report_miss(tool)
        unknown = [c for c in self._connections(view) if c.server not in view.catalog.servers]
        missing = f" (tools of {', '.join(f'{c.alias} ({c.server})' for c in unknown)} are unknown: not running)"
        names = sorted({e.original.name for e in entries})
        raise NotFound(
            f"no connection offers a tool named {quoted(tool)}{did_you_mean(tool, names)}{missing if unknown else ''}; "
            "use action 'search' or 'list'"
        )

    def _shape(self, result: types.CallToolResult, facts: dict[str, Any], spill: SpillPolicy) -> types.CallToolResult:
        """A spill notice with the call's facts, or the result inline with `estimatedTokens`.

        By default (`dispatch_response: object`) the model is shown Mini-A's response object: the facts
        and the content together as JSON text, since clients do not show `_meta` to models. The facts
        are in `_meta` as well, for programs. The data lives only in `content`: structured content would
        carry it a second time.
        """
        shown = facts
        if result.meta is not None and "resultFile" in result.meta:  # the call path wrote it to a file
            content: list[types.ContentBlock] = list(result.content)
            facts = {**facts, **result.meta}
            # The notice already says the size; the object keeps what Mini-A's file-mode answer has.
            shown = {key: value for key, value in facts.items() if key not in _SAID_IN_NOTICE}
        else:
            if not spill.renders_toon and result.content:
                content = list(result.content)
            else:
                content = render_result(result, toon=spill.renders_toon).inline
            facts["estimatedTokens"] = estimate_tokens(content_size(content))
        if self.host.settings.dispatch_response == "object":
            content = response_object(shown, content, is_error=bool(result.is_error))
        return types.CallToolResult(content=content, is_error=result.is_error, _meta=facts)

    # --- readresult --------------------------------------------------------------------------

    async def _readresult(self, action: _Action) -> types.CallToolResult:
        if not action.given("resultFile"):
            raise InvalidRequest("action 'readresult' needs 'resultFile': the path a spilled call answered with")
        files = self.host.result_files
        path = files.resolve(action.raw["resultFile"], "resultFile")
        op = action.string("op") or "stat"
        if op not in READ_OPS:
            raise InvalidRequest(f"unknown op {op!r}: expected one of {', '.join(READ_OPS)}")
        for key, ops in OP_PARAMETERS.items():
            if action.given(key) and op not in ops:
                raise InvalidRequest(f"'{key}' is only used by op {' and '.join(ops)}, not by op '{op}'")
        facts = {"action": "readresult", "op": op, "resultFile": str(path)}
        if op == "stat":
            return _answer(_json(await files.stat(path)), facts)
        if op in ("head", "tail"):
            answer = await files.read(path, op, lines=action.integer("lines", DEFAULT_READ_LINES, 1, None))
        elif op == "slice":
            first = action.integer("fromLine", 1, 1, None)
            last = action.integer("toLine", first + DEFAULT_READ_LINES - 1, 1, None)
            answer = await files.read(path, op, first=first, last=last)
        elif op == "grep":
            pattern = action.string("pattern")
            if not pattern:
                raise InvalidRequest("op 'grep' needs 'pattern': a regular expression (case-insensitive)")
            answer = await files.read(
                path, op, pattern=pattern, context=action.integer("context", 0, 0, MAX_CONTEXT_LINES)
            )
        else:
            offset = action.integer("offset", 0, 0, None)
            answer = await files.read(path, op, offset=offset, max_bytes=action.integer("maxBytes", 0, 0, None))
        blocks = [answer.body, f"[{answer.note}]"] if answer.body else [f"[{answer.note}]"]
        return types.CallToolResult(content=[types.TextContent(type="text", text=text) for text in blocks], _meta=facts)


class _Action:
    """The tool's arguments, checked against the action: unknown or misplaced parameters are errors."""

    def __init__(self, action: str, raw: Mapping[str, Any]) -> None:
        self.action = action
        self.raw = raw

    @classmethod
    def parse(cls, arguments: Mapping[str, Any]) -> _Action:
        action = arguments.get("action")
        if action is None:
            raise InvalidRequest(f"missing required parameter 'action': one of {', '.join(ACTIONS)}")
        if action not in ACTIONS:
            shown = quoted(action) if isinstance(action, str) else json_type_name(action)
            raise InvalidRequest(f"unknown action {shown}: expected one of {', '.join(ACTIONS)}")
        allowed = PARAMETERS[action]
        for key, value in arguments.items():
            if key == "action" or value is None or key in allowed:
                continue
            owners = [name for name, keys in PARAMETERS.items() if key in keys]
            where = f"it belongs to action {' and '.join(owners)}" if owners else "unknown parameter"
            raise InvalidRequest(
                f"{quoted(key)} is not a parameter of action '{action}' ({where}); {action} takes: {', '.join(allowed)}"
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


def dispatch_tool(connections: Iterable[Connection]) -> types.Tool:
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
    # Both, as the tool accepts both: a schema-strict client would otherwise refuse a JSON string.
    object_or_json = {"anyOf": [{"type": "object"}, {"type": "string"}]}
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
            "arguments": {
                **object_or_json,
                "description": "call: the tool's arguments (an object, or a JSON string of one).",
            },
            "meta": {**object_or_json, "description": "call: _meta sent with the call (object or JSON string)."},
            "argumentsFile": {**string, "description": "call: a JSON file of arguments, e.g. a resultFile."},
            "resultToFile": {**boolean, "default": False, "description": "call: write the result to a file."},
            "resultSizeThreshold": {**integer, "description": "call: spill results over this many bytes; 0 = off."},
            "resultFile": {**string, "description": "readresult: the file to read."},
            "op": {"type": "string", "enum": list(READ_OPS), "default": "stat"},
            "lines": {**integer, "default": DEFAULT_READ_LINES, "description": "head/tail."},
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


def response_object(
    facts: dict[str, Any], content: list[types.ContentBlock], *, is_error: bool
) -> list[types.ContentBlock]:
    """Mini-A's response object as the text the model reads: the call's facts, then `content`.

    Text and embedded text stay inside the object. Binary blocks (images, audio, blobs) follow it as
    blocks of their own, so clients still render them; inside, each is named without its data.
    """
    inside: list[dict[str, Any]] = []
    attached: list[types.ContentBlock] = []
    for block in content:
        dumped = block.model_dump(mode="json", by_alias=True, exclude_none=True)
        binary = isinstance(block, types.ImageContent | types.AudioContent) or (
            isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents)
        )
        if binary:
            attached.append(block)
            dumped.pop("data", None)
            if isinstance(dumped.get("resource"), dict):
                dumped["resource"] = {key: value for key, value in dumped["resource"].items() if key != "blob"}
            dumped["attached"] = len(attached)  # its position among the blocks after this text
        inside.append(dumped)
    answer = {**facts, **({"isError": True} if is_error else {}), "content": inside}
    return [types.TextContent(type="text", text=_json(answer)), *attached]


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _answer(text: str, facts: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], _meta=facts)
