"""apps: an MCP Apps server (the `io.modelcontextprotocol/ui` extension) built with the SDK's `Apps` helper.

Tool `show_clock` is bound to the app `ui://clock/app.html` (served as `text/html;profile=mcp-app` with a
CSP and a permission in its `_meta.ui`); it answers "apps: yes" when the client declared Apps support
(`client_supports_apps`) and "apps: no" otherwise, and its result carries `_meta.ui.resourceUri` too. Tool
`tick` is visible to the app only (`_meta.ui.visibility: ["app"]`) and answers "tick <n>". Tool `plain` has
no app. `--era legacy|modern|both` serves one era only.

Run: ``python tests/servers/apps.py`` (stdio) or ``python tests/servers/apps.py --http PORT``.
"""

from _common import add_era_argument, lowlevel, make_parser, serve
from mcp.server.apps import Apps, ResourceCsp, ResourcePermissions, client_supports_apps
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent

APP_URI = "ui://clock/app.html"
APP_HTML = "<!doctype html><title>clock</title><p id=now>clock app</p>"

apps = Apps()


@apps.tool(resource_uri=APP_URI, description="Show the time, in the clock app where the host renders apps.")
def show_clock(ctx: Context) -> CallToolResult:
    answer = "apps: yes" if client_supports_apps(ctx) else "apps: no"
    return CallToolResult(content=[TextContent(type="text", text=answer)], _meta={"ui": {"resourceUri": APP_URI}})


@apps.tool(resource_uri=APP_URI, visibility=["app"], description="Advance the clock (called by the app).")
def tick(n: int = 1) -> str:
    return f"tick {n}"


apps.add_html_resource(
    APP_URI,
    APP_HTML,
    name="clock app",
    csp=ResourceCsp(connect_domains=["https://time.example"]),
    permissions=ResourcePermissions(clipboard_write={}),
)

server = MCPServer("apps", version="1.0.0", log_level="WARNING", extensions=[apps])


@server.tool()
def plain(text: str) -> str:
    """A tool without an app."""
    return text


if __name__ == "__main__":
    parser = make_parser(__doc__.splitlines()[0])
    add_era_argument(parser)
    args = parser.parse_args()
    serve(lowlevel(server), args, args.era)
