"""courteous: an MCP Apps server that names its app only to clients that render apps, as the Apps extension
advises (a text-only fallback otherwise).

Tool ``show_clock`` ("Show the time.", answers "12:00") carries ``_meta.ui.resourceUri`` =
``ui://clock/app.html`` in ``tools/list`` only when the client declared MCP Apps support; to other clients it
is listed without ``_meta``. The app is served as ``text/html;profile=mcp-app``.

Run: ``python tests/servers/courteous.py`` (stdio) or ``python tests/servers/courteous.py --http PORT``.
"""

from typing import Any

from _common import make_parser, run
from mcp.server.apps import Apps, client_supports_apps
from mcp.server.mcpserver import MCPServer
from mcp_types import ListToolsResult, PaginatedRequestParams

APP_URI = "ui://clock/app.html"
apps = Apps()


@apps.tool(resource_uri=APP_URI, description="Show the time.")
def show_clock() -> str:
    return "12:00"


apps.add_html_resource(APP_URI, "<!doctype html><title>clock</title><p>clock app</p>", name="clock app")


class Courteous(MCPServer):
    async def _handle_list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        listed = await super()._handle_list_tools(ctx, params)
        if client_supports_apps(ctx):
            return listed
        return ListToolsResult(tools=[tool.model_copy(update={"meta": None}) for tool in listed.tools])


server = Courteous("courteous", version="1.0.0", log_level="WARNING", extensions=[apps])

if __name__ == "__main__":
    run(server, make_parser(__doc__).parse_args())
