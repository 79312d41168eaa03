"""midcall: a server that asks its client the session-era way, in the middle of a call.

``confirm`` elicits with ``ctx.elicit`` (the SDK's long-documented idiom), ``sign_in`` with
``ctx.elicit_url`` (URL mode) and ``pick`` samples with ``ctx.session.create_message``. Built on
mcp 2.3, it answers both protocol eras, but at 2026-07-28 a
handler has no channel to its client, so both fail there (NoBackChannelError); in a session they work.
Many published Python servers look like this.

Run: ``python tests/servers/midcall.py`` (stdio) or add ``--http PORT``.
"""

from _common import make_parser, run
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import SamplingMessage, TextContent
from pydantic import BaseModel

parser = make_parser(__doc__.splitlines()[0])
args = parser.parse_args()
server = MCPServer("midcall", version="1.0.0", log_level="WARNING")


class Confirmation(BaseModel):
    ok: bool


@server.tool(structured_output=False)
async def confirm(ctx: Context, action: str) -> str:
    """Ask the user to confirm `action`; return what they said."""
    reply = await ctx.elicit(f"Really {action}?", Confirmation)
    return f"confirmed: {reply.data.ok}" if reply.action == "accept" and reply.data else reply.action


@server.tool(structured_output=False)
async def pick(ctx: Context, options: str) -> str:
    """Ask the client's model to pick one of `options`; return its answer."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Pick one: {options}"))
    result = await ctx.session.create_message([message], max_tokens=20)
    return f"picked: {getattr(result.content, 'text', '?')}"


@server.tool(structured_output=False)
async def sign_in(ctx: Context, service: str) -> str:
    """Send the user to `service`'s sign-in page (URL-mode elicitation); return what they chose."""
    reply = await ctx.elicit_url(f"Sign in to {service}", f"https://{service}.example/login", "sign-in-1")
    return f"sign-in: {reply.action}"


run(server, args)
