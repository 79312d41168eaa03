"""The gateway as the client under test of the MCP conformance suite's client scenarios.

`conformance client --command "python tests/conformance/client.py"` runs this with the scenario's server
URL as its argument, the scenario's name in `MCP_CONFORMANCE_SCENARIO` and its context (client
credentials, say) in `MCP_CONFORMANCE_CONTEXT`. The URL becomes the one backend of a gateway (`prefix: ""`,
so names are the server's); `auth/*` scenarios give it an OAuth `auth` entry, and a login, when the
server asks for one, goes to a browser that follows the redirects by itself (the suite's authorization
server approves at once), as `manifold call` does for a person. Then the gateway lists the server's tools
and calls each one, as a client of it would.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx

from mcp_manifold._config import load_config
from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.remote_auth import logins_in_browser

EXAMPLE_ARGUMENTS = {"add_numbers": {"a": 2, "b": 3}}


def follow(url: str) -> bool:
    """A browser whose person clicks "allow": follow the authorization page's redirects to the loopback."""
    return httpx.get(url, follow_redirects=True, timeout=30).status_code < 400


def server_entry(url: str, scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": url, "prefix": ""}
    if not scenario.startswith("auth/"):
        return entry
    auth: dict[str, Any] = {"type": "oauth"}
    if "client_id" in context:
        auth["client_id"] = context["client_id"]
    if "client_secret" in context:
        auth["client_secret"] = context["client_secret"]
    if scenario.startswith("auth/client-credentials"):
        auth["grant"] = "client_credentials"
    entry["auth"] = auth
    return entry


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    entry = server_entry(url, scenario, context)
    with tempfile.TemporaryDirectory() as data_dir:
        path = Path(data_dir) / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"server": entry}, "manifold": {"data_dir": data_dir}}))
        config = load_config(path)
        with logins_in_browser(follow):  # as `manifold call` run by a person: the login starts when needed
            await use_tools(config)


async def use_tools(config: Any) -> None:
    async with Gateway(config) as gateway:
        request = Request(Caller("conformance"))
        for tool in await gateway.list_tools(request):
            answer = await gateway.call_tool_by_name(request, tool.name, EXAMPLE_ARGUMENTS.get(tool.name, {}))
            print(tool.name, "error" if getattr(answer, "is_error", False) else "ok")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
