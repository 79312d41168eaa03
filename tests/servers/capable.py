"""capable: lists a tool only to clients that can do what it needs, as server-everything lists its sampling tool.

``story_writer(topic)`` ("Write a short story about a topic with your language model.", answers "story about
<topic>") is listed to a client that declared sampling, and to the others for an app only
(``_meta.ui.visibility: ["app"]``: never shown to a model); ``weather_now(city)`` ("Current weather for a
city.", answers "sunny in <city>") to every client. For sessions per client (``session_scope: client``): a
client finds and calls what its own session lists, and nothing another client's lists.

Run: ``python tests/servers/capable.py`` (stdio) or ``python tests/servers/capable.py --http PORT``.
"""

from typing import Any

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from mcp_types import ListToolsResult, PaginatedRequestParams


class Capable(MCPServer):
    async def _handle_list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        listed = await super()._handle_list_tools(ctx, params)
        declared = ctx.session.client_capabilities
        if declared is not None and declared.sampling is not None:
            return listed
        # To the others, for an app only: a tool of that name the gateway holds, but never shows a model.
        app_only = {"ui": {"visibility": ["app"]}}
        return ListToolsResult(
            tools=[
                tool.model_copy(update={"meta": app_only}) if tool.name == "story_writer" else tool
                for tool in listed.tools
            ]
        )


server = Capable("capable", version="1.0.0", log_level="WARNING")


@server.tool(description="Write a short story about a topic with your language model.")
def story_writer(topic: str) -> str:
    return f"story about {topic}"


@server.tool(description="Current weather for a city.")
def weather_now(city: str) -> str:
    return f"sunny in {city}"


if __name__ == "__main__":
    run(server, make_parser(__doc__).parse_args())
