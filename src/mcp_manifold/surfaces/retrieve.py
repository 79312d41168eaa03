"""The `retrieve` surface: find tools by search instead of carrying them all in context (seed 004).

Two routing modes (`manifold.routing`):

- `call_tool` (default): the client sees `retrieve_tools(query, limit)` and `call_tool(name, args)`.
- `dynamic`: `retrieve_tools` registers the top matches as real tools for that client session and
  sends `notifications/tools/list_changed`; the session's pool holds at most `tools_limit` tools and
  evicts the least relevant, least recently found first.

Answers are compact on purpose: one line per match and one per parameter (`search.compact_schema`),
enough to call the tool from the answer alone; the full JSON schemas only on request.
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types

from mcp_manifold._errors import InvalidRequest, NotFound
from mcp_manifold.catalog import ToolEntry
from mcp_manifold.proxy_format import object_argument
from mcp_manifold.search.compact_schema import parameter_lines
from mcp_manifold.summaries import bounded_list
from mcp_manifold.surfaces._base import CallContext, Surface

logger = logging.getLogger(__name__)

RETRIEVE = "retrieve_tools"
CALL = "call_tool"
_POOL_KEY = "retrieve.dynamic_pool"
_DESCRIPTION_CHARS = 140
_FRESHNESS_SECONDS = 300.0


@dataclass
class _Registered:
    entry: ToolEntry
    score: float
    found_at: float

    def priority(self, now: float) -> float:
        """Relevance fading with age: a pool keeps what was found well and recently."""
        return self.score / (1.0 + (now - self.found_at) / _FRESHNESS_SECONDS)


def short_description(text: str | None) -> str:
    first = " ".join((text or "").split())
    return first if len(first) <= _DESCRIPTION_CHARS else first[: _DESCRIPTION_CHARS - 1] + "…"


def parameter_summary(schema: dict[str, Any]) -> str:
    """`a: number*, b: string` — names, types, required marked with `*`."""
    required = set(schema.get("required") or [])
    parts = []
    for name, spec in (schema.get("properties") or {}).items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        parts.append(f"{name}: {kind}{'*' if name in required else ''}")
    return ", ".join(parts)


def check_arguments(entry: ToolEntry, arguments: dict[str, Any]) -> None:
    """Refuse unknown or missing parameters with a message that lists the valid ones."""
    schema = entry.exposed.input_schema or {}
    properties = schema.get("properties") or {}
    valid = parameter_summary(schema) or "none"
    unknown = sorted(set(arguments) - set(properties)) if properties and not schema.get("additionalProperties") else []
    missing = sorted(set(schema.get("required") or []) - set(arguments))
    problems = []
    if unknown:
        problems.append(f"unknown parameter(s) {', '.join(unknown)}")
    if missing:
        problems.append(f"missing required parameter(s) {', '.join(missing)}")
    if problems:
        raise InvalidRequest(
            f"invalid arguments for {entry.name!r}: {'; '.join(problems)}. Valid parameters (* = required): {valid}"
        )


class RetrieveSurface(Surface):
    name = "retrieve"

    @property
    def dynamic(self) -> bool:
        return self.gateway.settings.routing == "dynamic"

    # --- what the client sees --------------------------------------------------------------

    def reserved_tool_names(self) -> list[str]:
        return [RETRIEVE] if self.dynamic else [RETRIEVE, CALL]

    def reserved_tools(self) -> list[types.Tool]:
        top_k = self.gateway.settings.search_top_k
        retrieve = types.Tool(
            name=RETRIEVE,
            description=self._retrieve_description(),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in plain words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": top_k},
                    "include_schema": {"type": "boolean", "default": False, "description": "Add input schemas."},
                },
                "required": ["query"],
            },
        )
        if self.dynamic:
            return [retrieve]
        call = types.Tool(
            name=CALL,
            description=f"Call a tool found with {RETRIEVE} by its name, with its arguments.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}, "args": {"type": "object", "default": {}}},
                "required": ["name"],
            },
        )
        return [retrieve, call]

    def _retrieve_description(self) -> str:
        verb = "registers the best matches as tools you can then call" if self.dynamic else f"then use {CALL}"
        counts: dict[str, int] = {}
        for entry in self.gateway.catalog.tool_entries():
            counts[entry.server] = counts.get(entry.server, 0) + 1
        servers = [
            f"{config.name} ({counts[config.name]})" if config.name in counts else config.name
            for config in self.gateway.config.servers.values()
            if config.enabled
        ]
        return (
            f"Search the tools behind this gateway by what you want to do; {verb}. "
            f"Servers (tools): {bounded_list(servers)}."
        )

    def list_tools(self, call: CallContext) -> list[types.Tool]:
        tools = self.reserved_tools()
        if self.dynamic:
            tools += [registered.entry.exposed for registered in self._pool(call).values()]
        return tools

    def owns_tool(self, call: CallContext, name: str) -> bool:
        if name == RETRIEVE or (name == CALL and not self.dynamic):
            return True
        return self.dynamic and name in self._pool(call)

    async def call_tool(self, call: CallContext, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name == RETRIEVE:
            return await self._retrieve(call, arguments)
        if name == CALL:
            return await self._call(call, arguments)
        registered = self._pool(call)[name]
        registered.found_at = time.monotonic()
        return await self.gateway.call_tool(call, registered.entry.server, registered.entry.original.name, arguments)

    # --- retrieve_tools ----------------------------------------------------------------------

    async def _retrieve(self, call: CallContext, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("retrieve_tools needs 'query': a non-empty string saying what you want to do")
        limit = arguments.get("limit", self.gateway.settings.search_top_k)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
            raise InvalidRequest(f"'limit' must be an integer from 1 to 50, got {limit!r}")
        include_schema = bool(arguments.get("include_schema", False))
        await self.gateway.ensure_catalog()
        matches = await self.gateway.search.find(query, limit=limit)
        if self.dynamic:
            await self._register(call, matches)
        if not matches:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"No tools match {query!r}.")])
        lines = []
        for match in matches:
            entry = match.entry
            line = f"{entry.name} [{entry.server}] {match.score:.2f}: {short_description(entry.exposed.description)}"
            # Enough of the schema to fill it in: the answer may be all a client ever sees of the tool.
            params = parameter_lines(entry.exposed.input_schema or {})
            line += "".join(f"\n  {param}" for param in params) if params else "\n  (no arguments)"
            if include_schema:
                line += f"\n  schema: {json.dumps(entry.exposed.input_schema, separators=(',', ':'))}"
            lines.append(line)
        how = "They are now registered as tools." if self.dynamic else f"Call one with {CALL}(name, args)."
        lines.append(f"({how} * = required; in {{…}}, ? = optional)")
        return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(lines))])

    async def _call(self, call: CallContext, arguments: dict[str, Any]) -> types.CallToolResult:
        name = arguments.get("name")
        args = arguments.get("args", {})
        if not isinstance(name, str) or not name:
            raise InvalidRequest("call_tool needs 'name': the name of a tool found with retrieve_tools")
        args = object_argument(args, "args")
        await self.gateway.ensure_catalog()
        if not self.gateway.catalog.has_tool(name):
            close = [m.entry.name for m in await self.gateway.search.find(name.replace("_", " "), limit=3)]
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise NotFound(f"no tool named {name!r}{hint}. Use {RETRIEVE} to find tools.")
        entry = self.gateway.catalog.tool(name)
        check_arguments(entry, args)
        return await self.gateway.call_tool(call, entry.server, entry.original.name, args)

    # --- dynamic mode ------------------------------------------------------------------------

    def _pool(self, call: CallContext) -> dict[str, _Registered]:
        return call.state.setdefault(_POOL_KEY, {})

    async def _register(self, call: CallContext, matches: list[Any]) -> None:
        pool = self._pool(call)
        now = time.monotonic()
        before = set(pool)
        for match in matches:
            current = pool.get(match.entry.name)
            if current is None or current.score < match.score:
                pool[match.entry.name] = _Registered(match.entry, match.score, now)
            else:
                current.found_at = now
        limit = max(1, self.gateway.settings.tools_limit)
        while len(pool) > limit:
            weakest = min(pool, key=lambda key: pool[key].priority(now))
            del pool[weakest]
        if set(pool) != before:
            await self.gateway.notify_list_changed({"tools"}, call.connection)
            await self._run_list_changed_hook()

    async def _run_list_changed_hook(self) -> None:
        """For clients that ignore list_changed: run the configured command, bounded by a timeout."""
        command = self.gateway.settings.list_changed_exec
        if not command:
            return
        timeout = self.gateway.settings.list_changed_exec_timeout
        try:
            with anyio.fail_after(timeout):
                await anyio.run_process(shlex.split(command), check=False)
        except TimeoutError:
            logger.warning("list_changed_exec %r did not finish within %ss", command, timeout)
        except OSError as exc:
            logger.warning("list_changed_exec %r failed: %s", command, exc)
