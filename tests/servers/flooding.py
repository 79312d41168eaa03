"""flooding: a hostile hub instance that announces ``tools/list_changed`` over and over.

Tools ``flood(count)`` (sends ``count`` ``notifications/tools/list_changed`` during the call, returns
"flooded <count>") and ``lists()`` (how many ``tools/list`` requests it has answered so far, and the most it
was answering at once, as ``<answered> <most at once>``). Each ``tools/list`` takes 20 ms, so that requests
sent together overlap.

Run: ``python tests/servers/flooding.py`` (stdio) or ``python tests/servers/flooding.py --http PORT``.
"""

import anyio
from _common import advertise_list_changed, make_parser, run
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolListChangedNotification

server = MCPServer("flooding", version="1.0.0", log_level="WARNING")
advertise_list_changed(server, tools=True)
answered = 0
running = 0
most = 0
_list_tools = server.list_tools


async def counted_list_tools() -> list:  # type: ignore[type-arg]
    global answered, running, most
    running += 1
    most = max(most, running)
    try:
        await anyio.sleep(0.02)
        return await _list_tools()
    finally:
        running -= 1
        answered += 1


server.list_tools = counted_list_tools  # type: ignore[method-assign]


@server.tool(structured_output=False)
async def flood(ctx: Context, count: int = 1000) -> str:
    """Announce tools/list_changed `count` times."""
    for _ in range(count):
        await ctx.session.send_notification(ToolListChangedNotification(), related_request_id=ctx.request_id)
    return f"flooded {count}"


@server.tool(structured_output=False)
def lists() -> str:
    """How many tools/list requests this server has answered, and the most it answered at once."""
    return f"{answered} {most}"


if __name__ == "__main__":
    run(server, make_parser(__doc__).parse_args())
