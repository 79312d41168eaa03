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
import time
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from mcp_manifold._config import MAX_SEARCH_LIMIT
from mcp_manifold._core.arguments import object_argument
from mcp_manifold._core.catalog import ToolEntry
from mcp_manifold._core.catalog_view import CatalogView
from mcp_manifold._core.clients import Request
from mcp_manifold._core.naming import MAX_NAME_LENGTH
from mcp_manifold._core.profiles import for_profile
from mcp_manifold._core.results import ToolAnswer
from mcp_manifold._core.router import Target, ToolCall
from mcp_manifold._core.suggestions import quoted
from mcp_manifold._core.summaries import bounded_list
from mcp_manifold._errors import InvalidRequest, NotFound
from mcp_manifold._search.compact_schema import parameter_lines
from mcp_manifold._surfaces.base import Surface

logger = logging.getLogger(__name__)

RETRIEVE = "retrieve_tools"
CALL = "call_tool"
_POOL_KEY = "retrieve.dynamic_pool"
_DESCRIPTION_CHARS = 140
_FRESHNESS_SECONDS = 300.0


@dataclass
class _Registered:
    """A tool in a session's pool: by name only, so its definition and where a call goes are always the
    catalog's now (its server may have changed the tool, a reload may have given the name to another)."""

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
        return self.host.settings.routing == "dynamic"

    def _registers(self, request: Request) -> bool:
        """Whether a search adds tools to this client's list: dynamic routing, for a session-era client.

        A 2026-07-28 client has no session to hold them, and its lists may not change as a side effect
        of its calls (SEP-2567): it gets what call_tool routing gives, and the answer says why.
        """
        return self.dynamic and request.caller.era == "session"

    # --- what the client sees --------------------------------------------------------------

    def reserved_tool_names(self) -> list[str]:
        return [RETRIEVE, CALL]  # call_tool too in dynamic routing: 2026-07-28 clients call through it

    def _own_tools(self, request: Request, view: CatalogView) -> list[types.Tool]:
        top_k = self.host.settings.search_top_k
        retrieve = types.Tool(
            name=RETRIEVE,
            description=self._retrieve_description(self._registers(request), view),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in plain words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "default": top_k},
                    "include_schema": {"type": "boolean", "default": False, "description": "Add input schemas."},
                },
                "required": ["query"],
            },
        )
        if self._registers(request):
            return [retrieve]
        call = types.Tool(
            name=CALL,
            description=f"Call a tool found with {RETRIEVE} by its name, with its arguments.",
            input_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    # Both, as it accepts both: a schema-strict client would refuse a JSON string.
                    "args": {"anyOf": [{"type": "object"}, {"type": "string"}], "default": {}},
                    # MCP's own word for them, which models write as often: the same thing.
                    "arguments": {"anyOf": [{"type": "object"}, {"type": "string"}], "description": "Same as args."},
                },
                "required": ["name"],
            },
        )
        return [retrieve, call]

    def _retrieve_description(self, registers: bool, view: CatalogView) -> str:
        verb = "registers the best matches as tools you can then call" if registers else f"then use {CALL}"
        counts: dict[str, int] = {}
        for entry in view.tool_entries():
            counts[entry.server] = counts.get(entry.server, 0) + 1
        servers = [
            f"{config.name} ({counts[config.name]})" if config.name in counts else config.name
            for config in self.host.servers.values()
            if config.enabled and view.may_use_server(config.name)
        ]
        return (
            f"Search the tools behind this gateway by what you want to do; {verb}. "
            f"Servers (tools): {bounded_list(servers)}."
        )

    def list_tools(self, request: Request) -> list[types.Tool]:
        view = self.host.view(request)
        tools = self._own_tools(request, view)
        if self._registers(request):
            # As the catalog has it now; a registered tool quarantined since (or no longer allowed, or for its app
            # only: `model_entry`) leaves the list. Before, one its server made app-only stayed listed and called.
            tools += [entry.exposed for name in self._pool(request) if (entry := view.model_entry(name)) is not None]
        return tools

    def owns_tool(self, request: Request, name: str) -> bool:
        if name == RETRIEVE or (name == CALL and not self._registers(request)):
            return True
        registered = self._registers(request) and name in self._pool(request)
        return registered and self.host.view(request).model_entry(name) is not None

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        if name == RETRIEVE:
            return await self.work(request, RETRIEVE, "search", lambda: self._retrieve(request, arguments))
        if name == CALL:
            return await self._call(request, arguments)
        self._pool(request)[name].found_at = time.monotonic()
        entry = self.host.view(request).model_tool(name)  # `owns_tool` found it visible: the catalog's entry now
        return await self.host.calls.call_tool(request, ToolCall(self._target(entry), arguments))

    # --- retrieve_tools ----------------------------------------------------------------------

    async def _retrieve(self, request: Request, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("retrieve_tools needs 'query': a non-empty string saying what you want to do")
        limit = arguments.get("limit", self.host.settings.search_top_k)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise InvalidRequest(f"'limit' must be an integer from 1 to {MAX_SEARCH_LIMIT}, got {limit!r}")
        registers = self._registers(request)
        # A 2026-07-28 client of dynamic routing expected tools in its list: it gets their schemas instead.
        include_schema = bool(arguments.get("include_schema", False)) or (self.dynamic and not registers)
        await self.host.ensure_catalog(request)
        matches = await self.host.view(request).search(query, limit=limit)
        registration = await self._register(request, matches) if registers else {}
        if not matches:
            nothing = f"No tools match {quoted(query)}."
            return types.CallToolResult(content=[types.TextContent(type="text", text=nothing)])
        lines = []
        for match in matches:
            entry = match.entry
            status = f" ({registration[entry.name]})" if entry.name in registration else ""
            line = f"{entry.name}{status} [{entry.server}] {match.score:.2f}: "
            line += short_description(entry.exposed.description)
            # Enough of the schema to fill it in: the answer may be all a client ever sees of the tool.
            params = parameter_lines(entry.exposed.input_schema or {})
            line += "".join(f"\n  {param}" for param in params) if params else "\n  (no arguments)"
            if include_schema:
                line += f"\n  schema: {json.dumps(entry.exposed.input_schema, separators=(',', ':'))}"
            lines.append(line)
        how = _registration_summary(registration) if registers else f"Call one with {CALL}(name, args)."
        lines.append(f"({how} * = required; in {{…}}, ? = optional)")
        if self.dynamic and not registers:
            lines.append(
                f"(This client speaks MCP 2026-07-28, where a search cannot add tools to your list: call them "
                f"with {CALL}.)"
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(lines))])

    async def _call(self, request: Request, arguments: dict[str, Any]) -> ToolAnswer:
        name = arguments.get("name")
        unknown = sorted(set(arguments) - {"name", "args", "arguments"})
        if unknown:
            raise InvalidRequest(f"call_tool takes 'name' and 'args' (or 'arguments'), not {', '.join(unknown)}")
        if "args" in arguments and "arguments" in arguments:
            raise InvalidRequest("call_tool takes the tool's arguments once: as 'args' or as 'arguments', not both")
        args = arguments.get("args", arguments.get("arguments", {}))
        if not isinstance(name, str) or not name:
            raise InvalidRequest("call_tool needs 'name': the name of a tool found with retrieve_tools")
        args = object_argument(args, "args")
        await self.host.ensure_catalog(request)
        view = self.host.view(request)
        entry = view.model_entry(name)  # the model's call: never a tool for its app only
        if entry is None:
            view.report_miss(name)
            # No tool has a longer name: nothing to suggest, and no search of a name that is really a page.
            # The suggestions are a search, the caller's work as retrieve_tools' is: within its rate and calls in
            # flight, and audited (a key over its rate limit searched here without end, unrecorded).
            long, words = len(name) > MAX_NAME_LENGTH, name.replace("_", " ")
            found = [] if long else await self.work(request, CALL, "search", lambda: view.search(words, limit=3))
            close = [match.entry.name for match in found]
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise NotFound(
                f"no tool named {quoted(name)}{for_profile(view.profile_name)}{hint}. Use {RETRIEVE} to find tools."
            )
        check_arguments(entry, args)
        return await self.host.calls.call_tool(request, ToolCall(self._target(entry), args))

    def _target(self, entry: ToolEntry) -> Target:
        return Target(entry.server, entry.original.name, entry.name, self.name)

    # --- dynamic mode ------------------------------------------------------------------------

    def _pool(self, request: Request) -> dict[str, _Registered]:
        pool: dict[str, _Registered] = request.caller.state.setdefault(_POOL_KEY, {})
        # Within tools_limit as it is now: a reload may lower it (it is live), and the pool must not wait for
        # the session's next search to shrink (before, it listed and called the old limit's tools till then).
        _evict_weakest(pool, self.host.settings.tools_limit, time.monotonic())
        return pool

    async def _register(self, request: Request, matches: list[Any]) -> dict[str, str]:
        """Put the matches in the session's pool; each match's status: `newly registered`,
        `already registered`, or `not registered` (the pool is full of better ones, `tools_limit`)."""
        # Not through `_pool`: trimming the pool to a tools_limit a reload lowered is a change this search tells.
        pool = request.caller.state.setdefault(_POOL_KEY, {})
        now = time.monotonic()
        view = self.host.view(request)
        for gone in [name for name in pool if view.model_entry(name) is None]:
            del pool[gone]  # left the catalog, or the caller's view, since: its place is for what is there
        before = set(pool)
        for match in matches:
            current = pool.get(match.entry.name)
            if current is None or current.score < match.score:
                pool[match.entry.name] = _Registered(match.score, now)
            else:
                current.found_at = now
        _evict_weakest(pool, self.host.settings.tools_limit, now)
        if set(pool) != before:
            await self.host.notify_list_changed({"tools"}, request.caller)
            # For clients that ignore list_changed: the operator's command, after the notification and
            # in the background (as smart-mcp-proxy runs it), so the answer never waits for it.
            command = self.host.settings.list_changed_exec
            if command:
                self.host.start_command(command, timeout=self.host.settings.list_changed_exec_timeout)
        return {
            match.entry.name: NOT_REGISTERED
            if match.entry.name not in pool
            else ALREADY
            if match.entry.name in before
            else NEWLY
            for match in matches
        }


NEWLY, ALREADY, NOT_REGISTERED = "newly registered", "already registered", "not registered"


def _evict_weakest(pool: dict[str, _Registered], tools_limit: int, now: float) -> None:
    """Drop the pool's weakest tools (the least relevant, least recently found) until `tools_limit` remain."""
    limit = max(1, tools_limit)
    while len(pool) > limit:
        weakest = min(pool, key=lambda key: pool[key].priority(now))
        del pool[weakest]


def _registration_summary(registration: dict[str, str]) -> str:
    """The last line of a dynamic answer: which matches became tools now and which already were."""
    parts = []
    for status, label in ((NEWLY, "Newly registered"), (ALREADY, "Already registered"), (NOT_REGISTERED, "Not")):
        names = [name for name, said in registration.items() if said == status]
        if names:
            what = "registered (tools_limit reached)" if status == NOT_REGISTERED else "as tools"
            parts.append(f"{label} {what}: {', '.join(names)}.")
    return " ".join([*parts, "Call them by name."])
