"""erring: a server whose tool answers with a JSON-RPC error of the "server error" range (-32000).

JSON-RPC reserves -32000 to -32099 for implementation-defined server errors, and servers in the wild answer
-32000 for their own failures; the SDK uses the same code for a connection that ended. Tools: ``fail(message)``
answers the call with the error -32000 and `message`; ``pid()`` says the process id (whether the server was
started again).

Run: ``python tests/servers/erring.py`` (stdio) or add ``--http PORT``.
"""

import os

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

server = MCPServer("erring", version="1.0.0", log_level="WARNING")


@server.tool(structured_output=False)
def fail(message: str = "rate limited, try later") -> str:
    """Answer with the JSON-RPC error -32000 and `message`."""
    raise MCPError(code=-32000, message=message)


@server.tool(structured_output=False)
def pid() -> str:
    """This process's id."""
    return str(os.getpid())


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
