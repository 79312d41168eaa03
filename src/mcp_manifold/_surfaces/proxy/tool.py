"""The proxy tool's server side: the tool definition, the engine that runs operations, and library use.

`run_proxy(target, arguments)` validates the arguments and runs them against a `ProxyTarget` (what
lists and calls the capabilities). The gateway's proxy surface supplies a target over its catalog and
backends; `add_proxy_tool(server)` supplies one over an SDK server's own handlers, so any server built
with the official SDK gets the proxy tool without running the gateway.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from mcp_manifold._core.suggestions import quoted
from mcp_manifold._errors import BackendRequestError, InvalidRequest, ManifoldError, NotFound
from mcp_manifold._sdk import lowlevel_server
from mcp_manifold._surfaces.proxy.format import (
    ACTIONS,
    BATCH,
    DEFAULT_LIMIT,
    KINDS,
    MAX_BATCH,
    MAX_LIMIT,
    MAX_TAG_CHARS,
    MAX_TAGS,
    BatchRequest,
    InvalidOperation,
    Item,
    Kind,
    ProxyOperation,
    batch_result,
    error_result,
    find_item,
    lift_wire_extras,
    parse_request,
    prompt_arguments,
    prompt_call_result,
    query_result,
    resource_call_result,
    select,
    tool_call_result,
)

logger = logging.getLogger(__name__)

DESCRIPTION = """\
Proxy to every tool, resource and prompt behind this server, through one tool.
- action "list": list capabilities of `type` (tool, resource or prompt); paginate with `limit` (1-1000, \
default 100) and `offset`; narrow with `filter_server` (a name/URI prefix such as "github_") or \
`filter` {"prefix", "tags"}.
- action "info": the full definition (e.g. input schema) of the capability named `path`.
- action "call": call the tool, read the resource (`path` is its URI) or get the prompt named `path`, \
with `args` (an object).
- action "batch": run `operations` (an array of the above) concurrently; results in order.
List and info answers are one embedded JSON resource."""


def proxy_tool(name: str = "proxy") -> types.Tool:
    """The proxy tool's definition."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": [*ACTIONS, BATCH], "description": "What to do."},
            "type": {"type": "string", "enum": list(KINDS), "description": "The kind of capability."},
            "path": {
                "type": "string",
                "description": "Name of the tool or prompt, or URI of the resource. Required for info and call; "
                "not allowed for list.",
            },
            "args": {
                "anyOf": [{"type": "object"}, {"type": "string"}],
                "description": "Arguments for call (an object, or a JSON string of one). Only for call.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": "Most items to list. Only for list.",
            },
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Items to skip. Only for list."},
            "filter_server": {"type": "string", "description": "Only names/URIs starting with this. Only for list."},
            "filter": {
                "type": "object",
                "properties": {
                    "prefix": {"type": "string", "description": "Only names/URIs starting with this."},
                    "tags": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": MAX_TAG_CHARS},
                        "maxItems": MAX_TAGS,
                        "description": "Only items matching any tag (a word of the name or description, "
                        "or a _meta tag).",
                    },
                },
                "additionalProperties": False,
                "description": "Extension: filter for list.",
            },
            "operations": {
                "type": "array",
                "items": {"type": "object"},
                "maxItems": MAX_BATCH,
                "description": "Extension: the operations of a batch, each an object of the parameters above.",
            },
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    annotations = types.ToolAnnotations(title="Proxy", read_only_hint=False, open_world_hint=True)
    return types.Tool(name=name, description=DESCRIPTION, input_schema=schema, annotations=annotations)


class ProxyTarget(Protocol):
    """What the proxy lists and calls. Failures are `ManifoldError`s, which become error results."""

    async def list_tools(self) -> Sequence[types.Tool]: ...

    async def list_resources(self) -> Sequence[types.Resource | types.ResourceTemplate]:
        """Resources and resource templates, in one list."""
        ...

    async def list_prompts(self) -> Sequence[types.Prompt]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any], *, progress: bool) -> types.CallToolResult:
        """Call a tool; `progress` False when progress must not be relayed (a batch shares one token)."""
        ...

    async def read_resource(self, uri: str) -> types.ReadResourceResult: ...

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult: ...


async def run_proxy(
    target: ProxyTarget, arguments: Mapping[str, Any]
) -> types.CallToolResult | types.InputRequiredResult:
    """Validate and run one proxy tool call. A call whose server has questions for a 2026-07-28 client
    answers `input_required` as the proxy's own result (the client calls the proxy again with answers)."""
    request = parse_request(arguments)
    if isinstance(request, BatchRequest):
        return await run_batch(target, request)
    return await run_operation(target, request)


async def run_operation(
    target: ProxyTarget, op: ProxyOperation, *, progress: bool = True
) -> types.CallToolResult | types.InputRequiredResult:
    if op.action == "list":
        page, total = select(await listing(target, op.type), op)
        return query_result(op, page, total=total)
    assert op.path is not None  # validated: info and call always have a path
    if op.action == "info":
        return query_result(op, find_item(await listing(target, op.type), op.type, op.path))
    if op.type == "tool":
        called = await target.call_tool(op.path, op.args or {}, progress=progress)
        return called if isinstance(called, types.InputRequiredResult) else tool_call_result(op, called)
    if op.type == "resource" and op.args:
        raise InvalidRequest("'args' is not used to read a resource: put everything in the URI ('path')")
    try:
        if op.type == "resource":
            read = await target.read_resource(op.path)
            return read if isinstance(read, types.InputRequiredResult) else resource_call_result(op, read)
        got = await target.get_prompt(op.path, prompt_arguments(op.args))
        return got if isinstance(got, types.InputRequiredResult) else prompt_call_result(op, got)
    except (InvalidRequest, NotFound):
        raise  # the caller's mistake: a plain (unannotated) proxy error
    except ManifoldError as exc:
        # The capability itself failed: annotated like a failed tool's result, so clients can tell.
        return error_result(str(exc), op, code=_server_code(exc))


def _server_code(exc: ManifoldError) -> int | None:
    """The MCP error code of a server's own answer, when the error is one."""
    return exc.code if isinstance(exc, BackendRequestError) else None


async def listing(target: ProxyTarget, kind: Kind) -> Sequence[Item]:
    if kind == "tool":
        return await target.list_tools()
    if kind == "resource":
        return await target.list_resources()
    return await target.list_prompts()


async def run_batch(target: ProxyTarget, batch: BatchRequest) -> types.CallToolResult:
    """Every operation at once (they are independent); a failed one is reported in place."""
    results: list[types.CallToolResult] = [types.CallToolResult(content=[])] * len(batch.operations)

    async def run(index: int, op: ProxyOperation | InvalidOperation) -> None:
        if isinstance(op, InvalidOperation):
            results[index] = error_result(op.message, op.raw)
            return
        try:
            done = await run_operation(target, op, progress=False)
            if isinstance(done, types.InputRequiredResult):  # a batch has no way to call again with answers
                done = error_result("the server has questions for the client, which a batch cannot answer", op)
            results[index] = done
        except ManifoldError as exc:
            results[index] = error_result(str(exc), op, code=_server_code(exc))
        except Exception:
            # Never let one operation sink the batch, nor leak internals into the message (spec 7.2).
            logger.exception("proxy batch operation %d failed", index)
            results[index] = error_result("internal error while running this operation", op)

    async with anyio.create_task_group() as task_group:
        for index, op in enumerate(batch.operations):
            task_group.start_soon(run, index, op)
    return batch_result(results)


def wire_middleware(tool_name: str) -> Callable[[ServerRequestContext[Any, Any], CallNext], Awaitable[HandlerResult]]:
    """Server middleware putting the proxy's annotations on the wire, after the SDK's schema sieve.

    Append it to `Server.middleware` of any server that serves the proxy tool as `tool_name`.
    """

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "tools/call" and isinstance(result, dict) and (ctx.params or {}).get("name") == tool_name:
            lift_wire_extras(result)
        return result

    return middleware


def error_text(exc: Exception) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)


# --- library use: the proxy tool on any SDK server --------------------------------------------------

_proxied: weakref.WeakKeyDictionary[Server[Any], set[str]] = weakref.WeakKeyDictionary()


def add_proxy_tool(server: MCPServer | Server[Any], name: str = "proxy") -> types.Tool:
    """Add the proxy tool to an SDK server: it lists and calls that server's own capabilities.

    Works on `MCPServer` and on the lowlevel `Server`, before it starts serving. The proxy wraps the
    server's `tools/list` and `tools/call` handlers (registered earlier), and reaches its tools,
    resources and prompts through their registered handlers with the caller's request context, so
    progress, logging and cancellation of a proxied call work as for a direct call. The proxy tool
    does not list itself. Returns the tool's definition.
    """
    low = _lowlevel(server)
    names = _proxied.setdefault(low, set())
    if name in names:
        raise ValueError(f"this server already has a proxy tool named {name!r}")
    names.add(name)
    tool = proxy_tool(name)
    list_entry = low.get_request_handler("tools/list")
    call_entry = low.get_request_handler("tools/call")

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams) -> Any:
        if list_entry is None:
            return types.ListToolsResult(tools=[tool])
        page = _as(types.ListToolsResult, await list_entry.handler(ctx, params))
        if page.next_cursor is None:  # the last (or only) page
            page = page.model_copy(update={"tools": [*page.tools, tool]})
        return page

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        if params.name == name:
            try:
                return await run_proxy(_ServerTarget(low, ctx, name), params.arguments or {})
            except ManifoldError as exc:
                return error_text(exc)
        if call_entry is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {quoted(params.name)}")
        return await call_entry.handler(ctx, params)

    low.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    low.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    low.middleware.append(wire_middleware(name))
    return tool


def _lowlevel(server: MCPServer | Server[Any]) -> Server[Any]:
    if isinstance(server, MCPServer):
        return lowlevel_server(server)  # whose handler table we wrap
    return server


def _as(model: type[Any], result: Any) -> Any:
    """A handler's return value as `model` (lowlevel handlers may return plain dicts)."""
    if isinstance(result, model):
        return result
    if isinstance(result, types.InputRequiredResult):
        raise InvalidRequest("the capability asked for client input (input_required), which the proxy cannot relay")
    if isinstance(result, BaseModel):
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return model.model_validate(result, by_name=False)


class _ServerTarget:
    """A server's own capabilities, reached through its registered request handlers."""

    def __init__(self, server: Server[Any], ctx: ServerRequestContext[Any, Any], proxy_name: str) -> None:
        self.server = server
        self.ctx = ctx
        self.proxy_name = proxy_name

    async def _request(self, method: str, params: BaseModel, result_type: type[Any], *, progress: bool = True) -> Any:
        entry = self.server.get_request_handler(method)
        if entry is None:
            raise NotFound(f"this server does not serve {method}")
        meta = self.ctx.meta
        if not progress and meta and "progress_token" in meta:
            meta = {key: value for key, value in meta.items() if key != "progress_token"}  # type: ignore[assignment]
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        ctx = dataclasses.replace(self.ctx, method=method, params=wire, meta=meta)
        try:
            return _as(result_type, await entry.handler(ctx, params))
        except MCPError as exc:
            # Same split as the gateway: bad names/params are the caller's, the rest the capability's.
            raise (InvalidRequest if exc.code == types.INVALID_PARAMS else ManifoldError)(exc.message) from None

    async def _pages(self, method: str, field: str, result_type: type[Any]) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(1000):  # a paginator that never ends must not hang the proxy
            page = await self._request(method, types.PaginatedRequestParams(cursor=cursor), result_type)
            items.extend(getattr(page, field))
            cursor = page.next_cursor
            if cursor is None:
                break
        return items

    async def list_tools(self) -> Sequence[types.Tool]:
        tools = await self._pages("tools/list", "tools", types.ListToolsResult)
        return [tool for tool in tools if tool.name != self.proxy_name]

    async def list_resources(self) -> Sequence[types.Resource | types.ResourceTemplate]:
        resources = await self._pages("resources/list", "resources", types.ListResourcesResult)
        if self.server.get_request_handler("resources/templates/list") is None:
            return resources
        templates = await self._pages(
            "resources/templates/list", "resource_templates", types.ListResourceTemplatesResult
        )
        return [*resources, *templates]

    async def list_prompts(self) -> Sequence[types.Prompt]:
        return await self._pages("prompts/list", "prompts", types.ListPromptsResult)

    async def call_tool(self, name: str, arguments: dict[str, Any], *, progress: bool) -> types.CallToolResult:
        if name == self.proxy_name:
            raise InvalidRequest("the proxy tool cannot call itself")
        params = types.CallToolRequestParams(name=name, arguments=arguments)
        return await self._request("tools/call", params, types.CallToolResult, progress=progress)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        params = types.ReadResourceRequestParams(uri=uri)
        return await self._request("resources/read", params, types.ReadResourceResult)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        params = types.GetPromptRequestParams(name=name, arguments=arguments)
        return await self._request("prompts/get", params, types.GetPromptResult)
