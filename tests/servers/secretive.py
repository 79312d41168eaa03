"""secretive: a server that was handed a secret and says it everywhere, for the redaction tests.

It takes ``--api-key KEY`` (any other unknown arguments are ignored, as a real server's would be), prints
the key and the value of the ``SECRETIVE_TOKEN`` environment variable to stderr when it starts, and
has tools ``hello`` (answers "hello"), ``leak`` (a tool error whose message contains the key) and
``big`` (``size`` characters of text, to be spilled) and ``murmur`` (answers at once, then logs the key a
moment later, outside any request: on a handshake-era session); the resource ``secretive://status`` and the prompt
``briefing`` fail with the key in their error messages too.

Run: ``python tests/servers/secretive.py --api-key KEY`` (stdio) or with ``--http PORT``.
"""

import asyncio
import os
import sys

from _common import make_parser, run
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

parser = make_parser(__doc__.splitlines()[0])
parser.add_argument("--api-key", default="", help="the secret this server was started with")
args, _ignored = parser.parse_known_args()
KEY: str = args.api_key

server = MCPServer("secretive", version="1.0.0", log_level="WARNING")


@server.tool(structured_output=False)
def hello() -> str:
    """Say hello."""
    return "hello"


@server.tool(structured_output=False)
def leak() -> str:
    """Fail with an error message that repeats the key this server was given."""
    raise ToolError(f"the upstream refused key {KEY}")


@server.tool(structured_output=False)
def big(size: int) -> str:
    """Return `size` characters of text."""
    return "x" * size


_background: set[asyncio.Task[None]] = set()


@server.tool(structured_output=False)
async def murmur(ctx: Context) -> str:
    """Answer at once, then log a line with the key a moment later, outside any request."""
    session = ctx.session

    async def later() -> None:
        await asyncio.sleep(0.3)
        await session.send_log_message("warning", f"secretive still holds key {KEY}", logger="secretive")

    task = asyncio.get_running_loop().create_task(later())
    _background.add(task)
    task.add_done_callback(_background.discard)
    return "murmured"


@server.resource("secretive://status")
def status() -> str:
    """Fail with an error message that repeats the key (a resource read)."""
    raise MCPError(code=-32603, message=f"the upstream refused key {KEY}")


@server.prompt()
def briefing() -> str:
    """Fail with an error message that repeats the key (a prompt)."""
    raise MCPError(code=-32603, message=f"the upstream refused key {KEY}")


if __name__ == "__main__":
    print(f"secretive: starting with key {KEY} and token {os.environ.get('SECRETIVE_TOKEN', '')}", file=sys.stderr)
    sys.stderr.flush()
    run(server, args)
