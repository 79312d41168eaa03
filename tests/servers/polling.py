"""polling: a streamable HTTP server that closes a call's answer stream before it answers (SEP-1699 polling).

Its one tool, ``later(text, seconds=0.3)``, closes the SSE stream of the request it serves, waits
``seconds`` and returns ``text``; the answer is kept in an in-memory event store and replayed to the
client that comes back with ``Last-Event-ID`` (a GET), as the SDK's client does after the ``retry``
interval the server gave (100 ms). ``closes`` counts the streams it closed. Session era only: at
2026-07-28 the SDK's server answers JSON, with no stream to close.

Run: ``python tests/servers/polling.py --http PORT``.
"""

from __future__ import annotations

import itertools

import anyio
from _common import HOST, HTTP_PATH, make_parser
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

server = MCPServer("polling", version="1.0.0", log_level="WARNING")
closed = 0


class MemoryEventStore(EventStore):
    """Every event of every stream, in order; replays a stream's events after a given one."""

    def __init__(self) -> None:
        self.events: list[tuple[StreamId, EventId, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        stream = next((stream for stream, event, _ in self.events if event == last_event_id), None)
        if stream is None:
            return None
        after = False
        for stream_id, event_id, message in self.events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


@server.tool(structured_output=False)
async def later(ctx: Context, text: str, seconds: float = 0.3) -> str:
    """Close this request's answer stream, wait `seconds`, then return `text` (replayed on the client's GET)."""
    global closed
    closed += 1
    await ctx.close_sse_stream()
    await anyio.sleep(seconds)
    return text


@server.tool(structured_output=False)
def closes() -> str:
    """How many answer streams `later` closed."""
    return str(closed)


if __name__ == "__main__":
    args = make_parser(__doc__.splitlines()[0]).parse_args()
    server.run(
        "streamable-http",
        host=HOST,
        port=args.http,
        streamable_http_path=HTTP_PATH,
        event_store=MemoryEventStore(),
        retry_interval=100,
    )
