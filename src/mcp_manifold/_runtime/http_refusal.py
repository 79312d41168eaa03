"""What a remote server's HTTP answer said when its start failed.

The SDK's streamable HTTP client turns an answer of 400 or more into "Not Found" (a 404) or "Server
returned an error response" (any other), dropping the status and the URL. A wrong path or a server that
does not speak streamable HTTP is the most common first failure with a remote server, so while a server
starts, its client's answers are watched and the last refusal is told with the failure, with what it
usually means.
"""

from __future__ import annotations

from typing import Any

from mcp_manifold._config import redact_url

_OTHER_TRANSPORT = 'it may not serve streamable HTTP here (a server with an SSE endpoint wants "transport": "sse")'
_CREDENTIAL = 'it wants a credential: a "headers" entry, or "auth": {"type": "oauth"}'
_HINTS = {
    401: _CREDENTIAL,
    403: _CREDENTIAL,
    404: "is the URL's path right? Streamable HTTP servers often serve /mcp",
    405: _OTHER_TRANSPORT,
    501: _OTHER_TRANSPORT,
}
# An SSE client's GET refused: most servers today serve streamable HTTP, which answers a GET without a
# session 400 or 405.
_SSE_HINTS = {
    **_HINTS,
    400: 'it may serve streamable HTTP (drop "transport": "sse")',
    404: "is the URL's path right? SSE servers often serve /sse",
    405: 'it may serve streamable HTTP (drop "transport": "sse")',
}


def refusal(response: Any, *, sse: bool = False) -> str:
    """`GET <url> answered HTTP 404 Not Found: <what it usually means>`, the URL's secrets hidden."""
    request = response.request
    said = f"{request.method} {redact_url(str(request.url))} answered HTTP {response.status_code}"
    if response.reason_phrase:
        said = f"{said} {response.reason_phrase}"
    hint = (_SSE_HINTS if sse else _HINTS).get(response.status_code)
    return f"{said}: {hint}" if hint else said


class StartRefusals:
    """A response hook on a starting server's HTTP client, taken off once it has started."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.said: str | None = None
        client.event_hooks["response"].append(self)

    async def __call__(self, response: Any) -> None:
        if response.status_code >= 400:
            self.said = refusal(response)

    def detach(self) -> None:
        """Off the client: a started server's answers are the call path's to judge, at no cost per call."""
        hooks = self.client.event_hooks["response"]
        if self in hooks:
            hooks.remove(self)
