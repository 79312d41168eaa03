"""HTTP: a request whose `id` JSON-RPC does not allow is answered, not taken for a notification.

The SDK reads `{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}` as a notification (it ignores the
`id` it cannot use), answers `202 Accepted` and nothing else, and the client waits on a request no one
will answer. JSON-RPC says: an invalid request, answered with id null. This wrapper does that for
`/mcp` POSTs, before the SDK sees them; it looks closer only at a body whose quick scan finds an odd
`id`, so other requests cost one scan of their body. The stdio front does the same (stdio.py).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_manifold._core.framing import may_be_misread, misread_request_answer
from mcp_manifold._front.json_answers import send_json

_INSPECTED = 4 * 1024 * 1024  # bytes; a larger body goes to the SDK unexamined


def answering_misread_requests(app: ASGIApp) -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith("/mcp"):
            await app(scope, receive, send)
            return
        received: list[Message] = []
        size, complete = 0, False
        while size <= _INSPECTED:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                complete = True
                break
        if complete:
            body = b"".join(message.get("body", b"") for message in received)
            answer = misread_request_answer(body) if may_be_misread(body) else None
            if answer is not None:
                await send_json(send, 400, answer)
                return
        await app(scope, _replaying(received, receive), send)

    return wrapped


def _replaying(received: list[Message], receive: Receive) -> Receive:
    """`receive` again from the start: what was read ahead first, then the rest."""
    pending = list(received)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay
