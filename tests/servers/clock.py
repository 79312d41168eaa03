"""clock: a small time MCP server with the tool names of Mini-A's time example, for the dispatch docs.

Tools ``get_current_time`` (``{"time": ISO 8601, "timezone": name}``), ``get_timezone`` (the server's
timezone name) and ``format_datetime`` (an ISO 8601 time rendered with a strftime format).

Run: ``python tests/servers/clock.py`` (stdio) or ``python tests/servers/clock.py --http PORT``.
"""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("clock", version="1.0.0", log_level="WARNING")


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown timezone {name!r}; use an IANA name such as 'Europe/Lisbon'") from None


@server.tool()
def get_current_time(timezone: str = "UTC") -> dict[str, str]:
    """Get the current date and time in a timezone (IANA name, default UTC)."""
    now = datetime.now(UTC).astimezone(_zone(timezone))
    stamp = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    return {"time": stamp, "timezone": timezone}


@server.tool()
def get_timezone() -> str:
    """Get the timezone this time server uses by default."""
    return "UTC"


@server.tool()
def format_datetime(datetime_iso: str, format: str = "%Y-%m-%d %H:%M") -> str:
    """Format an ISO 8601 date and time with a strftime format."""
    try:
        value = datetime.fromisoformat(datetime_iso)
    except ValueError:
        raise ToolError(f"not an ISO 8601 date and time: {datetime_iso!r}") from None
    return value.strftime(format)


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
