"""The surface interface, with empty defaults so each surface implements only what it shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext

if TYPE_CHECKING:
    from mcp.server.connection import Connection

    from mcp_manifold.runtime.gateway import Gateway


@dataclass
class CallContext:
    """One inbound client request: its context (for progress and back-channel) and its connection."""

    request: ServerRequestContext[Any, Any]
    connection: Connection

    @property
    def state(self) -> dict[str, Any]:
        """Per-client-session scratch state that lives as long as the connection."""
        return self.connection.state


class Surface:
    """Base class: a surface that shows nothing. Subclasses override what they expose."""

    name = "surface"

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def start(self) -> None:
        """Called once when the gateway starts (after backends are attached)."""

    # Tools
    def list_tools(self, call: CallContext) -> list[types.Tool]:
        return []

    def owns_tool(self, call: CallContext, name: str) -> bool:
        return False

    async def call_tool(self, call: CallContext, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        raise NotImplementedError

    # Resources
    def list_resources(self, call: CallContext) -> list[types.Resource]:
        return []

    def list_resource_templates(self, call: CallContext) -> list[types.ResourceTemplate]:
        return []

    def owns_resource(self, call: CallContext, uri: str) -> bool:
        return False

    async def read_resource(self, call: CallContext, uri: str) -> types.ReadResourceResult:
        raise NotImplementedError

    # Prompts
    def list_prompts(self, call: CallContext) -> list[types.Prompt]:
        return []

    def owns_prompt(self, call: CallContext, name: str) -> bool:
        return False

    async def get_prompt(self, call: CallContext, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        raise NotImplementedError

    # What this surface needs before answering lists (e.g. a full catalog).
    needs_catalog = True
