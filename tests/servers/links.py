"""links: resources a tool points to, and a tool that takes a resource's URI as its argument.

Tool ``link(item)`` answers with a ``resource_link`` to ``links://item/{item}`` and the same resource
embedded; tool ``describe(uri)`` (its schema says ``format: uri``) answers with the URI it was given and
that resource's text; template ``links://item/{item}``.

Run: ``python tests/servers/links.py`` (stdio) or ``python tests/servers/links.py --http PORT``.
"""

from typing import Annotated

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from mcp_types import EmbeddedResource, ResourceLink, TextContent, TextResourceContents
from pydantic import AnyUrl, Field

server = MCPServer("links", version="1.0.0", log_level="WARNING")


def item_text(item: str) -> str:
    return f"the text of item {item}"


@server.resource("links://item/{item}", name="item", description="One item's text.", mime_type="text/plain")
def item_resource(item: str) -> str:
    return item_text(item)


@server.tool(structured_output=False)
def link(item: str) -> list[ResourceLink | EmbeddedResource]:
    """Point to item `item`: a resource link to it, and the resource embedded."""
    uri = f"links://item/{item}"
    return [
        ResourceLink(type="resource_link", name=f"item {item}", uri=uri, mime_type="text/plain"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri=uri, text=item_text(item))),
    ]


@server.tool(structured_output=False)
def describe(uri: Annotated[AnyUrl, Field(description="An item's URI, links://item/<item>.")]) -> list[TextContent]:
    """Say which URI was given and that item's text."""
    item = str(uri).removeprefix("links://item/")
    return [TextContent(type="text", text=f"got {uri}: {item_text(item)}")]


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
