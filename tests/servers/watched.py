"""watched: a server that keeps the resource subscriptions its clients hold, and says which.

Template `watched://item/{name}`; `resources/subscribe` and `resources/unsubscribe` add and remove a URI;
tool `subscribed()` answers the URIs subscribed now (a sorted JSON list), for the tests that a gateway
releases the subscriptions of a client that went away.

Run: ``python tests/servers/watched.py`` (stdio) or ``python tests/servers/watched.py --http PORT``.
"""

import json
from typing import Any

from _common import lowlevel, make_parser, run
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

server = MCPServer("watched", version="1.0.0", log_level="WARNING")
subscriptions: set[str] = set()


@server.resource("watched://item/{name}", name="item", description="An item to watch.", mime_type="text/plain")
def item(name: str) -> str:
    return f"item {name}"


@server.tool(structured_output=False)
def subscribed() -> str:
    """The URIs subscribed now, as a sorted JSON list."""
    return json.dumps(sorted(subscriptions))


async def on_subscribe(ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
    subscriptions.add(str(params.uri))
    return EmptyResult()


async def on_unsubscribe(ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams) -> EmptyResult:
    subscriptions.discard(str(params.uri))
    return EmptyResult()


lowlevel(server).add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
lowlevel(server).add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
