"""private: a server whose read-only answer belongs to its one client, for `session_scope: client` and the cache.

Tool ``whose`` (annotated read-only, so a server with ``cache_ttl`` may have its results reused) answers this
process's id: under ``session_scope: client`` each client has a process of its own, so two clients that get
the same id were answered from one client's session.

Run: ``python tests/servers/private.py`` (stdio; ``--http PORT`` for HTTP).
"""

import os

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("private", version="1.0.0", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def whose() -> str:
    """The id of the process answering: one per client under `session_scope: client`."""
    return str(os.getpid())


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
