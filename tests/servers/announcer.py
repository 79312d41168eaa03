"""announcer: a server that announces `tools/list_changed` late in a call.

``slow_announce(seconds=3)`` sleeps ``seconds``, announces ``tools/list_changed`` and answers "announced",
for the announcement of a server a config reload removed while that call was still draining.

Run: ``python tests/servers/announcer.py`` (stdio) or ``python tests/servers/announcer.py --http PORT``.
"""

import anyio
from _common import advertise_list_changed, make_parser, run
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

server = MCPServer("announcer", version="1.0.0", log_level="WARNING")
advertise_list_changed(server, tools=True)


@server.tool(structured_output=False)
async def slow_announce(ctx: Context, seconds: float = 3) -> str:
    """Sleep `seconds`, then announce tools/list_changed."""
    await anyio.sleep(seconds)
    await ctx.notify_tools_changed()  # 2026-07-28: on subscriptions/listen streams
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:  # the session era: on the call's own stream
        await ctx.session.send_notification(ToolListChangedNotification(), related_request_id=ctx.request_id)
    return "announced"


if __name__ == "__main__":
    run(server, make_parser(__doc__).parse_args())
