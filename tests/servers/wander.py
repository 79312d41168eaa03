"""wander: an MCP Apps server whose one tool names another app at each listing, for the bound on pins.

Tool ``show()`` ("Show the report.", answers "shown") names the app ``ui://wander/app-<n>.html`` in
``_meta.ui.resourceUri``; ``wander()`` moves it to the next ``<n>`` and announces ``tools/list_changed``.
Every ``ui://wander/{page}`` reads as ``text/html;profile=mcp-app`` HTML naming its page.

Run: ``python tests/servers/wander.py`` (stdio) or ``python tests/servers/wander.py --http PORT``.
"""

from typing import Any

from _common import advertise_list_changed, make_parser, run
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolListChangedNotification

APP_MIME = "text/html;profile=mcp-app"

server = MCPServer("wander", version="1.0.0", log_level="WARNING")
advertise_list_changed(server, tools=True)
state: dict[str, Any] = {"n": 0}


def show() -> str:
    return "shown"


def define() -> None:
    meta = {"ui": {"resourceUri": f"ui://wander/app-{state['n']}.html"}}
    server.add_tool(show, name="show", description="Show the report.", meta=meta, structured_output=False)


define()


@server.resource("ui://wander/{page}", name="wander app", mime_type=APP_MIME)
def app_html(page: str) -> str:
    return f"<p>{page}</p>"


@server.tool(structured_output=False)
async def wander(ctx: Context) -> str:
    """Name the next app in `show`'s `_meta.ui`."""
    state["n"] += 1
    server.remove_tool("show")
    define()
    await ctx.session.send_notification(ToolListChangedNotification(), related_request_id=ctx.request_id)
    return "wandered"


if __name__ == "__main__":
    run(server, make_parser(__doc__).parse_args())
