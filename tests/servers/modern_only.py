"""modern_only: an MCP server that speaks only the 2026-07-28 protocol, for the gateway's era tests.

It answers ``server/discover`` and requests carrying the per-request ``_meta`` envelope; the ``initialize``
handshake (and any other request of the 2025 era) is refused with -32022 naming ``2026-07-28``.
Tools: ``echo``, ``fail`` (its text as the tool's error),
``add``, ``progress`` (reports progress while it works), ``add_tool`` (registers a tool
and announces ``tools/list_changed`` on ``subscriptions/listen`` streams), ``touch`` (announces
``resources/updated``), ``log`` (a log entry, delivered only to a request that opted in with the
``io.modelcontextprotocol/logLevel`` ``_meta`` key) and ``envelope`` (returns the reserved ``_meta`` keys
and ``traceparent`` the call arrived with, to show what a gateway forwards). Resource ``modern://text``
(``resources/list`` carries ``ttlMs`` 60000, ``cacheScope`` public), template ``modern://greeting/{name}``,
prompt ``greet``.

Run: ``python tests/servers/modern_only.py`` (stdio) or ``python tests/servers/modern_only.py --http PORT``.
"""

import json

import anyio
from _common import lowlevel, make_parser, serve
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import LoggingLevel

server = MCPServer(
    "modern_only",
    version="1.0.0",
    instructions="A 2026-07-28-only test fixture.",
    log_level="WARNING",
    cache_hints={"resources/list": CacheHint(ttl_ms=60_000, scope="public")},
)
ENVELOPE_KEYS = ("io.modelcontextprotocol/", "traceparent", "tracestate")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the given text unchanged."""
    return text


@server.tool(structured_output=False)
def fail(text: str) -> str:
    """Fail with `text` as the tool's error."""
    raise ToolError(text)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers (structured output: {"result": a + b})."""
    return a + b


@server.tool(structured_output=False)
async def progress(ctx: Context, steps: int = 3, delay: float = 0.05) -> str:
    """Work for `steps` x `delay` seconds, reporting progress after each step; return "done <steps>"."""
    for i in range(1, steps + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done {steps}"


@server.tool(structured_output=False)
async def add_tool(ctx: Context, name: str) -> str:
    """Register a tool called `name` (it returns "dynamic tool <name>") and announce tools/list_changed."""

    def dynamic() -> str:
        return f"dynamic tool {name}"

    server.add_tool(dynamic, name=name, description=f"Tool {name}, added at run time.", structured_output=False)
    await ctx.notify_tools_changed()  # reaches subscriptions/listen streams: the only channel at 2026-07-28
    return f"added {name}"


@server.tool(structured_output=False)
async def touch(ctx: Context, uri: str) -> str:
    """Announce notifications/resources/updated for `uri` to listen streams subscribed to it."""
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool(structured_output=False)
async def log(ctx: Context, message: str, level: LoggingLevel = "info") -> str:
    """Send `message` as a log entry at `level` (dropped unless the request opted in at that level)."""
    await ctx.log(level, message, logger_name="modern_only")
    return "logged"


@server.tool(structured_output=False)
def envelope(ctx: Context) -> str:
    """Return, as JSON, the reserved `_meta` keys and trace context this call arrived with."""
    meta = ctx.request_context.meta or {}
    return json.dumps({key: value for key, value in meta.items() if key.startswith(ENVELOPE_KEYS)}, sort_keys=True)


@server.resource("modern://text", name="text", description="A plain text resource.", mime_type="text/plain")
def text_resource() -> str:
    return "hello from modern_only"


@server.resource("modern://greeting/{name}", name="greeting", description="A greeting.", mime_type="text/plain")
def greeting_resource(name: str) -> str:
    return f"Hello, {name}!"


@server.prompt()
def greet(name: str) -> list[UserMessage]:
    """Greet someone."""
    return [UserMessage(f"Greet {name} warmly.")]


if __name__ == "__main__":
    serve(lowlevel(server), make_parser(__doc__.splitlines()[0]).parse_args(), era="modern")
