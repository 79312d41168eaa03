"""replica_probe: tells which gateway replica started it, and records each call it runs, for the scale-out tests.

Tools: ``where`` (the process id of its parent, the gateway replica that started it over stdio), ``work``
(appends ``token`` and its parent's pid to the file ``journal`` when it starts, sleeps ``seconds``, returns
``done <token>``), so a test can count how often a call ran and where, and ``big`` (a text of ``size``
characters, for spilled results).

Run: ``python tests/servers/replica_probe.py`` (stdio; ``--http PORT`` for HTTP).
"""

import os

import anyio
from _common import make_parser, run
from mcp.server.mcpserver import MCPServer

parser = make_parser(__doc__.splitlines()[0])
args = parser.parse_args()

server = MCPServer("replica-probe", version="1.0.0", log_level="WARNING")


@server.tool(structured_output=False)
def where() -> str:
    """The process id of the gateway replica that started this server."""
    return str(os.getppid())


@server.tool(structured_output=False)
async def work(token: str, journal: str, seconds: float = 0.0) -> str:
    """Record `token` in `journal`, then take `seconds`."""
    with open(journal, "a", encoding="utf-8") as file:
        file.write(f"{token} {os.getppid()}\n")
    await anyio.sleep(seconds)
    return f"done {token}"


@server.tool(structured_output=False)
def big(size: int) -> str:
    """A text of `size` characters."""
    return ("0123456789" * (size // 10 + 1))[:size]


if __name__ == "__main__":
    run(server, args)
