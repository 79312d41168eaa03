"""The `proxy` surface: one tool (Magg's proxy pattern) that lists, describes and calls everything.

The tool is named `settings.proxy_tool_name` ("proxy" by default). It works over the gateway's
catalog, so names and URIs are the exposed ones (`kitchen_echo`, `kitchen+kitchen://text`), and
calls go through `Gateway.call_tool` / `read_resource` / `get_prompt`, which relay progress,
logging, cancellation and server-to-client requests. Validation and formatting live in
`proxy_format`, the operations in `proxy_server`, shared with library use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mcp_types as types

from mcp_manifold.surfaces.base import CallContext, Surface
from mcp_manifold.surfaces.proxy.tool import proxy_tool, run_proxy, wire_middleware

if TYPE_CHECKING:
    from mcp_manifold.runtime.gateway import Gateway


class ProxySurface(Surface):
    name = "proxy"
    # Listing tools shows only the proxy tool; the catalog is loaded when the tool is first used.
    needs_catalog = False

    def __init__(self, gateway: Gateway) -> None:
        super().__init__(gateway)
        self.tool_name = gateway.settings.proxy_tool_name
        self.tool = proxy_tool(self.tool_name)
        self._middleware_installed = False

    async def start(self) -> None:
        # The SDK's outbound sieve drops the spec's extra annotation keys; this puts them back.
        if not self._middleware_installed:
            self.gateway.server.middleware.append(wire_middleware(self.tool_name))
            self._middleware_installed = True

    def reserved_tools(self) -> list[types.Tool]:
        return [self.tool]

    def list_tools(self, call: CallContext) -> list[types.Tool]:
        return [self.tool]

    def owns_tool(self, call: CallContext, name: str) -> bool:
        return name == self.tool_name

    async def call_tool(self, call: CallContext, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await run_proxy(_GatewayTarget(self.gateway, call), arguments)


class _GatewayTarget:
    """The gateway's catalog and backends, for one inbound proxy call."""

    def __init__(self, gateway: Gateway, call: CallContext) -> None:
        self.gateway = gateway
        self.call = call

    async def list_tools(self) -> Sequence[types.Tool]:
        await self.gateway.ensure_catalog()
        return self.gateway.catalog.tools()

    async def list_resources(self) -> Sequence[types.Resource | types.ResourceTemplate]:
        await self.gateway.ensure_catalog()
        return [*self.gateway.catalog.resources(), *self.gateway.catalog.templates()]

    async def list_prompts(self) -> Sequence[types.Prompt]:
        await self.gateway.ensure_catalog()
        return self.gateway.catalog.prompts()

    async def call_tool(self, name: str, arguments: dict[str, Any], *, progress: bool) -> types.CallToolResult:
        await self.gateway.ensure_catalog()
        route = self.gateway.catalog.route_tool(name)
        call = self.call if progress else _without_progress(self.call)
        return await self.gateway.call_tool(call, route.server, route.original, arguments)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        await self.gateway.ensure_catalog()
        route = self.gateway.catalog.route_resource(uri)
        return await self.gateway.read_resource(self.call, route.server, route.original)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        await self.gateway.ensure_catalog()
        route = self.gateway.catalog.route_prompt(name)
        return await self.gateway.get_prompt(self.call, route.server, route.original, arguments)


def _without_progress(call: CallContext) -> CallContext:
    """The same call without its progress token: concurrent batch operations cannot share one."""
    meta = call.request.meta
    if not meta or "progress_token" not in meta:
        return call
    stripped: Any = {key: value for key, value in meta.items() if key != "progress_token"}
    return CallContext(dataclasses.replace(call.request, meta=stripped), call.connection)
