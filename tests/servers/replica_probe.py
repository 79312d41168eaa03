"""replica_probe: tells which gateway replica started it, and records each call it runs, for the scale-out tests.

Tools: ``where`` (the process id of its parent, the gateway replica that started it over stdio), ``work``
(appends ``token`` and its parent's pid to the file ``journal`` when it starts, then takes ``seconds``, or,
given ``gate``, waits until that file exists; returns ``done <token>``), so a test can count how often a
call ran and where, ``big`` (a text of ``size`` characters, for spilled results) and ``ask_then_report``
(asks the client's name mid-call, the session-era way, then sends ``steps`` progress notifications and
info log messages and returns ``reported to <name>``).

``--era legacy`` answers only the session era (so a 2026-07-28 client's call of ``ask_then_report`` is
held by the gateway). Run: ``python tests/servers/replica_probe.py`` (stdio; ``--http PORT`` for HTTP).
"""

import os

import anyio
from _common import add_era_argument, lowlevel, make_parser, run, serve
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

parser = make_parser(__doc__.splitlines()[0])
add_era_argument(parser)
args = parser.parse_args()

server = MCPServer("replica-probe", version="1.0.0", log_level="WARNING")


@server.tool(structured_output=False)
def where() -> str:
    """The process id of the gateway replica that started this server."""
    return str(os.getppid())


@server.tool(structured_output=False)
async def work(token: str, journal: str, seconds: float = 0.0, gate: str | None = None) -> str:
    """Record `token` in `journal`, then take `seconds` (or wait until the file `gate` exists)."""
    with open(journal, "a", encoding="utf-8") as file:
        file.write(f"{token} {os.getppid()}\n")
    if gate is None:
        await anyio.sleep(seconds)
    while gate is not None and not os.path.exists(gate):
        await anyio.sleep(0.05)
    return f"done {token}"


class Name(BaseModel):
    name: str


@server.tool(structured_output=False)
async def ask_then_report(ctx: Context, steps: int = 3) -> str:
    """Ask the client's name, then report `steps` steps of progress and log each."""
    reply = await ctx.elicit("What is your name?", Name)
    name = reply.data.name if reply.action == "accept" and reply.data else reply.action
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
        await ctx.info(f"step {step} for {name}")
    return f"reported to {name}"


@server.tool(structured_output=False)
def big(size: int) -> str:
    """A text of `size` characters."""
    return ("0123456789" * (size // 10 + 1))[:size]


if __name__ == "__main__":
    if args.era == "both":
        run(server, args)
    else:
        serve(lowlevel(server), args, args.era)
