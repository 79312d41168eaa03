"""An answer the HTTP front's own layers send in the SDK's place, as raw ASGI messages: JSON, whole.

The layers in front of the SDK (`misread`, `session_quota`, `large_requests`) answer some requests
themselves, before any app of Starlette's is reached; each answer is one JSON body with its length.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.types import Send


async def send_json(
    send: Send, status: int, answer: Mapping[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """`answer` as the whole response, with `status` and any further `headers`."""
    payload = json.dumps(answer).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": payload})


async def send_error(
    send: Send, status: int, code: int, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """A JSON-RPC error answering a request whose id was not read (so null), with `status`."""
    await send_json(send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, headers)
