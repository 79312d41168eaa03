"""The `direct` surface: the merged, namespaced lists, each call routed to its owning backend.

Everything goes through the caller's view of the catalog (`host.view`), so a client sees, and can
route to, only what its profile allows and nothing quarantined.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from mcp_manifold._core.clients import Request
from mcp_manifold._core.naming import sanitize_prefix
from mcp_manifold._core.results import ToolAnswer
from mcp_manifold._core.router import (
    Target,
    ToolCall,
    completion_target,
    prompt_target,
    resource_target,
    tool_target,
)
from mcp_manifold._surfaces.base import Surface


class DirectSurface(Surface):
    name = "direct"

    def list_tools(self, request: Request) -> list[types.Tool]:
        return self.host.view(request).tools()

    def owns_tool(self, request: Request, name: str) -> bool:
        return self.host.view(request).has_tool(name)

    def unknown_tool_hint(self, request: Request, name: str) -> str | None:
        # A tool of a server that could not start (one that needs an OAuth login, say): say why, and what to do.
        view = self.host.view(request)
        separator = self.host.settings.separator
        for server, config in self.host.servers.items():
            prefix = config.exposed_prefix
            if not view.may_use_server(server) or not (
                prefix and name.startswith(f"{sanitize_prefix(prefix)}{separator}")
            ):
                continue
            status = self.host.backend_status(server)
            if status.state == "failed" and status.last_error:
                return f"server {server!r} is not available: {status.last_error}"
        return None

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        target = tool_target(self.host.view(request), name, self.name)
        return await self.host.calls.call_tool(request, ToolCall(target, arguments))

    def list_resources(self, request: Request) -> list[types.Resource]:
        return self.host.view(request).resources()

    def list_resource_templates(self, request: Request) -> list[types.ResourceTemplate]:
        return self.host.view(request).templates()

    def owns_resource(self, request: Request, uri: str) -> bool:
        return self.host.view(request).has_resource(uri)

    async def read_resource(self, request: Request, uri: str) -> types.ReadResourceResult:
        target = resource_target(self.host.view(request), uri, self.name)
        return await self.host.calls.read_resource(request, target)

    def list_prompts(self, request: Request) -> list[types.Prompt]:
        return self.host.view(request).prompts()

    def owns_prompt(self, request: Request, name: str) -> bool:
        return self.host.view(request).has_prompt(name)

    async def get_prompt(self, request: Request, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        target = prompt_target(self.host.view(request), name, self.name)
        return await self.host.calls.get_prompt(request, target, arguments)

    def completion_target(
        self, request: Request, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> Target | None:
        return completion_target(self.host.view(request), ref, self.name)
