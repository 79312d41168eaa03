"""`ProxyClient`: the SDK's `mcp.Client`, plus convenient and transparent use of a server's proxy tool.

`proxy(...)` calls the proxy tool and returns its content items with the proxy annotations intact.
With `transparent=True`, `list_tools`, `list_resources`, `list_resource_templates`, `list_prompts`,
`call_tool`, `read_resource` and `get_prompt` go through the proxy tool and return the same SDK
result types as the plain client, so code written for a direct connection runs unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import mcp_types as types
from mcp import Client
from mcp.client.caching import CacheMode
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from mcp_manifold._surfaces.proxy.format import (
    ERROR_CODE_KEY,
    MAX_LIMIT,
    Item,
    Kind,
    ProxyOperation,
    check_python_type,
    decode_items,
    find_proxy_tool,
    parse_request,
    parse_tool_result,
    prompt_result_from_proxy,
    proxy_error,
    query_payload,
    read_result_from_proxy,
    tool_result_from_proxy,
)

# The raw result dict: the SDK's typed parse would drop the proxy's annotation keys.
_RAW_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
# Most pages a transparent listing reads (100,000 items): a proxy that answers full pages for ever, or a
# `totalCount` it never reaches, would otherwise be asked again for ever, every item kept.
MAX_LIST_PAGES = 100


class ProxyError(MCPError):
    """The proxy tool answered with an error; `result` is the whole tool result.

    `from_capability` tells a failure of the proxied tool, resource or prompt (its items carry
    proxy annotations) from one of the proxy itself (bad parameters, unknown name).
    """

    def __init__(
        self, message: str, result: types.CallToolResult, *, from_capability: bool, code: int | None = None
    ) -> None:
        default = types.INTERNAL_ERROR if from_capability else types.INVALID_PARAMS
        super().__init__(code or default, message)
        self.result = result
        self.from_capability = from_capability


@dataclass
class ProxyClient(Client):
    """An `mcp.Client` that speaks to a server's proxy tool.

    Example:
        ```python
        async with ProxyClient("http://127.0.0.1:8765/mcp") as client:
            [listing] = await client.proxy("tool", "list")
            items = await client.proxy("tool", "call", "kitchen_echo", {"text": "hi"})

        async with ProxyClient("http://127.0.0.1:8765/mcp", transparent=True) as client:
            tools = (await client.list_tools()).tools  # through the proxy tool
        ```
    """

    transparent: bool = field(default=False, kw_only=True)
    """Route the standard listing and calling methods through the proxy tool."""

    proxy_tool_name: str = field(default="proxy", kw_only=True)
    """Name of the server's proxy tool."""

    # --- the proxy tool itself -------------------------------------------------------------

    async def has_proxy(self) -> bool:
        """Whether the server lists a tool called `proxy_tool_name` (spec 6.1); always asks the server."""
        tools = await Client.list_tools(self, cache_mode="bypass")
        return find_proxy_tool(tools.tools, self.proxy_tool_name) is not None

    async def proxy(
        self,
        proxy_type: Kind,
        action: str,
        path: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        timeout: float | None = None,
        progress_handler: ProgressFnT | None = None,
    ) -> list[types.ContentBlock]:
        """Call the proxy tool; returns its content items as they came (annotations are `ProxyAnnotations`).

        Raises `ProxyError` when the proxy answers with an error, and `InvalidRequest` before sending
        anything when the parameters break the proxy's rules.
        """
        result = await self.proxy_result(proxy_type, action, path, arguments, timeout, progress_handler)
        if result.is_error:
            message = proxy_error(result)
            texts = [item.text for item in result.content if isinstance(item, types.TextContent)]
            raise ProxyError(message or "\n".join(texts) or "error", result, from_capability=message is None)
        return list(result.content)

    async def proxy_result(
        self,
        proxy_type: Kind,
        action: str,
        path: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        timeout: float | None = None,
        progress_handler: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        """Like `proxy`, but the whole tool result (isError, structuredContent), never raising on isError."""
        request: dict[str, Any] = {"action": action, "type": proxy_type}
        if path is not None:
            request["path"] = path
        if arguments is not None:
            request["args"] = arguments
        parse_request(request)  # fail fast, with the server's own messages
        return await self.call_proxy(request, timeout=timeout, progress_callback=progress_handler)

    async def batch(
        self, operations: Sequence[Mapping[str, Any] | ProxyOperation], timeout: float | None = None
    ) -> list[types.CallToolResult]:
        """The `batch` extension: one result per operation, in order; a failed one has `is_error` set."""
        ops = [op.to_arguments() if isinstance(op, ProxyOperation) else dict(op) for op in operations]
        result = await self.call_proxy({"action": "batch", "operations": ops}, timeout=timeout)
        if error := proxy_error(result):
            raise ProxyError(error, result, from_capability=False)
        summary = (result.structured_content or {}).get("results") or []
        results = [types.CallToolResult(content=[], is_error=bool(entry.get("isError"))) for entry in summary]
        for entry, one in zip(summary, results, strict=True):
            if "structuredContent" in entry:
                one.structured_content = entry["structuredContent"]
        for item in result.content:
            index = getattr(item.annotations, "batch_index", None)
            if index is not None and 0 <= index < len(results):
                results[index].content.append(item)
        return results

    async def call_proxy(
        self,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None = None,
        progress_callback: ProgressFnT | None = None,
        meta: types.RequestParamsMeta | None = None,
    ) -> types.CallToolResult:
        """Send raw proxy tool arguments; the result keeps the proxy annotations."""
        params = types.CallToolRequestParams(name=self.proxy_tool_name, arguments=dict(arguments), _meta=meta)
        raw = await self.session.send_request(
            types.CallToolRequest(params=params),
            _RAW_RESULT,
            request_read_timeout_seconds=timeout,
            progress_callback=progress_callback,
        )
        if raw.get("resultType") == "input_required":
            raise ProxyError(
                "the proxied capability asked for client input (input_required), which ProxyClient cannot relay",
                types.CallToolResult(content=[], is_error=True),
                from_capability=True,
            )
        return parse_tool_result(raw)

    async def _query(self, request: Mapping[str, Any], meta: types.RequestParamsMeta | None = None) -> Any:
        result = await self.call_proxy(request, meta=meta)
        if result.is_error:
            raise _transparent_error(result)
        return result

    async def _list_all(self, kind: Kind, meta: types.RequestParamsMeta | None) -> list[Item]:
        """Every item of `kind`, page by page (the proxy caps a page at 1000), at most `MAX_LIST_PAGES` pages."""
        items: list[Item] = []
        offset = 0
        for _ in range(MAX_LIST_PAGES):
            request = {"action": "list", "type": kind, "limit": MAX_LIMIT, "offset": offset}
            result = await self._query(request, meta)
            with _readable(result):
                data, annotations = query_payload(result)
            try:
                check_python_type(kind, annotations.python_type if annotations is not None else None)
            except ValueError as exc:
                raise ProxyError(str(exc), result, from_capability=False) from None
            with _readable(result):
                page = decode_items(kind, data)
            items.extend(page)
            offset += len(page)
            total = annotations.total_count if annotations is not None else None
            if not page or (offset >= total if total is not None else len(page) < MAX_LIMIT):
                return items
        raise ProxyError(
            f"the proxy listed more than {MAX_LIST_PAGES} pages of {kind}s ({offset} items) and was still not "
            "done; it pages without end",
            result,
            from_capability=False,
        )

    # --- transparent mode ------------------------------------------------------------------

    async def list_tools(
        self, *, cursor: str | None = None, meta: types.RequestParamsMeta | None = None, cache_mode: CacheMode = "use"
    ) -> types.ListToolsResult:
        if not self.transparent:
            return await super().list_tools(cursor=cursor, meta=meta, cache_mode=cache_mode)
        return types.ListToolsResult(tools=cast(list[types.Tool], await self._list_all("tool", meta)))

    async def list_resources(
        self, *, cursor: str | None = None, meta: types.RequestParamsMeta | None = None, cache_mode: CacheMode = "use"
    ) -> types.ListResourcesResult:
        if not self.transparent:
            return await super().list_resources(cursor=cursor, meta=meta, cache_mode=cache_mode)
        items = await self._list_all("resource", meta)
        return types.ListResourcesResult(resources=[item for item in items if isinstance(item, types.Resource)])

    async def list_resource_templates(
        self, *, cursor: str | None = None, meta: types.RequestParamsMeta | None = None, cache_mode: CacheMode = "use"
    ) -> types.ListResourceTemplatesResult:
        if not self.transparent:
            return await super().list_resource_templates(cursor=cursor, meta=meta, cache_mode=cache_mode)
        items = await self._list_all("resource", meta)
        templates = [item for item in items if isinstance(item, types.ResourceTemplate)]
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def list_prompts(
        self, *, cursor: str | None = None, meta: types.RequestParamsMeta | None = None, cache_mode: CacheMode = "use"
    ) -> types.ListPromptsResult:
        if not self.transparent:
            return await super().list_prompts(cursor=cursor, meta=meta, cache_mode=cache_mode)
        return types.ListPromptsResult(prompts=cast(list[types.Prompt], await self._list_all("prompt", meta)))

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
    ) -> types.CallToolResult:
        if not self.transparent or name == self.proxy_tool_name:
            return await super().call_tool(
                name,
                arguments,
                read_timeout_seconds,
                progress_callback,
                input_responses=input_responses,
                request_state=request_state,
                meta=meta,
            )
        request: dict[str, Any] = {"action": "call", "type": "tool", "path": name, "args": arguments or {}}
        result = await self.call_proxy(
            request, timeout=read_timeout_seconds, progress_callback=progress_callback, meta=meta
        )
        message = proxy_error(result)
        if message is not None:
            # As a direct tools/call answers for an unknown tool or bad arguments: a tool error result.
            return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)
        with _readable(result):
            return tool_result_from_proxy(result)

    async def read_resource(
        self,
        uri: str,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        cache_mode: CacheMode = "use",
    ) -> types.ReadResourceResult:
        if not self.transparent:
            return await super().read_resource(
                uri, input_responses=input_responses, request_state=request_state, meta=meta, cache_mode=cache_mode
            )
        result = await self._query({"action": "call", "type": "resource", "path": uri}, meta)
        with _readable(result):
            return read_result_from_proxy(result)

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
    ) -> types.GetPromptResult:
        if not self.transparent:
            return await super().get_prompt(
                name, arguments, input_responses=input_responses, request_state=request_state, meta=meta
            )
        request: dict[str, Any] = {"action": "call", "type": "prompt", "path": name}
        if arguments:
            request["args"] = arguments
        result = await self._query(request, meta)
        with _readable(result):
            return prompt_result_from_proxy(result)


@contextmanager
def _readable(result: types.CallToolResult) -> Iterator[None]:
    """An answer of the proxy's that cannot be read as what was asked for (not JSON, nested too deeply, not
    the items or result asked for) raises `ProxyError`, an `MCPError`, as a direct request's bad answer does;
    it raised ValueError, RecursionError or pydantic's ValidationError."""
    try:
        yield
    except (ValueError, RecursionError) as exc:  # JSON's and pydantic's errors are ValueErrors
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ProxyError(
            f"the proxy's answer cannot be read: {reason}", result, from_capability=False, code=types.INTERNAL_ERROR
        ) from None


def _transparent_error(result: types.CallToolResult) -> ProxyError:
    """What a direct request raises (an MCP error) for a failed proxied one."""
    message = proxy_error(result)
    texts = "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))
    code = (result.meta or {}).get(ERROR_CODE_KEY)
    return ProxyError(
        message or texts or "error",
        result,
        from_capability=message is None,
        code=code if isinstance(code, int) and not isinstance(code, bool) else None,
    )
