"""The `direct` surface: the merged, namespaced lists, each call routed to its owning backend."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from mcp_manifold._errors import NotFound
from mcp_manifold.surfaces.base import CallContext, Surface


class DirectSurface(Surface):
    name = "direct"

    def list_tools(self, call: CallContext) -> list[types.Tool]:
        return self.gateway.catalog.tools()

    def owns_tool(self, call: CallContext, name: str) -> bool:
        return self.gateway.catalog.has_tool(name)

    async def call_tool(self, call: CallContext, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        route = self.gateway.catalog.route_tool(name)
        return await self.gateway.call_tool(call, route.server, route.original, arguments)

    def list_resources(self, call: CallContext) -> list[types.Resource]:
        return self.gateway.catalog.resources()

    def list_resource_templates(self, call: CallContext) -> list[types.ResourceTemplate]:
        return self.gateway.catalog.templates()

    def owns_resource(self, call: CallContext, uri: str) -> bool:
        try:
            self.gateway.catalog.route_resource(uri)
        except NotFound:
            return False
        return True

    async def read_resource(self, call: CallContext, uri: str) -> types.ReadResourceResult:
        route = self.gateway.catalog.route_resource(uri)
        return await self.gateway.read_resource(call, route.server, route.original)

    def list_prompts(self, call: CallContext) -> list[types.Prompt]:
        return self.gateway.catalog.prompts()

    def owns_prompt(self, call: CallContext, name: str) -> bool:
        try:
            self.gateway.catalog.route_prompt(name)
        except NotFound:
            return False
        return True

    async def get_prompt(self, call: CallContext, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        route = self.gateway.catalog.route_prompt(name)
        return await self.gateway.get_prompt(call, route.server, route.original, arguments)
