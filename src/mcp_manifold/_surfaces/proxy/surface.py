"""The `proxy` surface: one tool (Magg's proxy pattern) that lists, describes and calls everything.

The tool is named `settings.proxy_tool_name` ("proxy" by default). It works over the gateway's
catalog, so names and URIs are the exposed ones (`kitchen_echo`, `kitchen+kitchen://text`), and
calls go through the host's call path, which relays progress, logging, cancellation and
server-to-client requests. Validation and formatting live in `format.py`, the operations in
`tool.py`, shared with library use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mcp_types as types

from mcp_manifold._core.catalog_view import CatalogView
from mcp_manifold._core.clients import Request
from mcp_manifold._core.results import ToolAnswer
from mcp_manifold._core.router import Target, ToolCall, completion_target, prompt_target, resource_target
from mcp_manifold._surfaces.base import Host, Surface, WireMiddleware
from mcp_manifold._surfaces.proxy.tool import proxy_tool, run_proxy, wire_middleware


class ProxySurface(Surface):
    name = "proxy"
    # Listing tools shows only the proxy tool; the catalog is loaded when the tool is first used.
    needs_catalog = False

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.tool_name = host.settings.proxy_tool_name
        self.tool = proxy_tool(self.tool_name)

    def wire_middleware(self) -> WireMiddleware:
        # The SDK's outbound sieve drops the spec's extra annotation keys; this puts them back.
        return wire_middleware(self.tool_name)

    def reserved_tool_names(self) -> list[str]:
        return [self.tool_name]

    def list_tools(self, request: Request) -> list[types.Tool]:
        return [self.tool]

    def owns_tool(self, request: Request, name: str) -> bool:
        return name == self.tool_name

    def completion_target(
        self, request: Request, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> Target | None:
        # The proxy shows the catalog's prompts and templates through its tool: their arguments complete.
        return completion_target(self.host.view(request), ref, self.name)

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        return await run_proxy(_CatalogTarget(self, request), arguments)


class _CatalogTarget:
    """The gateway's catalog and call path as one inbound proxy call's caller may see them (a `ProxyTarget`).

    A list (what actions `list` and `info` read) is the gateway's own work: it goes through the policy
    as an action; calls, reads and gets go down the call path."""

    def __init__(self, surface: ProxySurface, request: Request) -> None:
        self.owner = surface
        self.host = surface.host
        self.request = request
        self.surface = surface.name

    async def _view(self) -> CatalogView:
        await self.host.ensure_catalog(self.request)
        return self.host.view(self.request)

    async def _listed(self, kind: str, items: Callable[[CatalogView], list[Any]]) -> Any:
        async def work() -> list[Any]:
            return items(await self._view())

        return await self.owner.work(self.request, self.owner.tool_name, f"list {kind}", work)

    async def list_tools(self) -> Sequence[types.Tool]:
        return await self._listed("tools", lambda view: view.tools())

    async def list_resources(self) -> Sequence[types.Resource | types.ResourceTemplate]:
        return await self._listed("resources", lambda view: [*view.resources(), *view.templates()])

    async def list_prompts(self) -> Sequence[types.Prompt]:
        return await self._listed("prompts", lambda view: view.prompts())

    async def call_tool(self, name: str, arguments: dict[str, Any], *, progress: bool) -> types.CallToolResult:
        entry = (await self._view()).model_tool(name)  # the model's call: never a tool for its app only
        target = Target(entry.server, entry.original.name, name, self.surface)
        # Concurrent operations of a batch cannot share one progress token.
        request = self.request if progress else self.request.without_progress()
        return await self.host.calls.call_tool(request, ToolCall(target, arguments))

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        target = resource_target(await self._view(), uri, self.surface)
        return await self.host.calls.read_resource(self.request, target)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        target = prompt_target(await self._view(), name, self.surface)
        return await self.host.calls.get_prompt(self.request, target, arguments)
