"""Noticing a starting server that writes what is not MCP where MCP is expected.

A misconfigured stdio server often prints its complaint on stdout (`Error: could not load settings.toml`)
and then waits. Without this it would hold its start until `init_timeout` (30 s by default), on every
start; with it, the start fails a few seconds after the first such line, quoting it. A server that only
prints a banner before speaking MCP properly still answers within the grace and starts as usual.
"""

from __future__ import annotations

import logging

import anyio

GRACE = 3.0  # seconds a server may go on after writing what is not MCP before its start is given up


class NotMcpWatch:
    """The first line a starting server wrote that is not MCP, and the deadline it sets."""

    def __init__(self) -> None:
        self.line: str | None = None
        self._seen = anyio.Event()

    def saw(self, error: Exception) -> None:
        """The transport could not read a message (what reaches the session's message handler)."""
        if self.line is None:
            self.line = offending_text(error)
            self._seen.set()

    async def cancel_after(self, grace: float, scope: anyio.CancelScope) -> None:
        """Cancel `scope` (the wait for initialization) `grace` seconds after the first line that is not MCP."""
        await self._seen.wait()
        await anyio.sleep(grace)
        scope.cancel()


def offending_text(error: Exception) -> str:
    """What the server wrote, as the parser saw it (pydantic keeps the input), else the error's first line."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            found = errors()
        except Exception:  # not pydantic's ValidationError after all
            found = []
        for item in found:
            if isinstance(item.get("input"), str):
                return item["input"][:200]
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


class _DropParseTracebacks(logging.Filter):
    """The SDK logs a traceback for each line it cannot parse; the backend says it once, in its own words."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


logging.getLogger("mcp.client.stdio").addFilter(_DropParseTracebacks())
