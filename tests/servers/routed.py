"""routed: a tool whose schema mirrors an argument into a request header (`x-mcp-header`, 2026-07-28).

Tool ``locate(region, text)``: ``region`` is declared as the ``Mcp-Param-Region`` header, so a 2026-07-28
client sends it twice (argument and header) and a server refuses a call where the two disagree.

Run: ``python tests/servers/routed.py`` (stdio) or ``python tests/servers/routed.py --http PORT``.
"""

from typing import Annotated

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from pydantic import Field

server = MCPServer("routed", version="1.0.0", log_level="WARNING")


@server.tool(structured_output=False)
def locate(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], text: str) -> str:
    """Say which region the text was sent to."""
    return f"{region}: {text}"


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
