"""What a remote server's HTTP answer said when its start failed.

The SDK's streamable HTTP client turns an answer of 400 or more into "Not Found" (a 404) or "Server
returned an error response" (any other), dropping the status and the URL. A wrong path or a server that
does not speak streamable HTTP is the most common first failure with a remote server, so while a server
starts, its client's answers are watched and the last refusal is told with the failure, with what it
usually means. So is an answer that is a web page (a login page, a site's front page: the SDK says only
"Unexpected content type"), and a connection that failed before any answer (nothing listening, a name
that does not resolve, a certificate not trusted here).
"""

from __future__ import annotations

import socket
import ssl
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


_WEB_PAGE = (
    "a web page, not MCP: is the URL the server's MCP endpoint (often {path}), or a login page that wants a credential?"
)
_WEB_TYPES = ("text/html", "application/xhtml+xml")


def web_page(response: Any, *, sse: bool = False) -> str | None:
    """`POST <url> answered HTTP 200 OK with text/html: a web page, not MCP: ...`, else None."""
    media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if response.status_code >= 300 or media_type not in _WEB_TYPES:
        return None
    request = response.request
    said = f"{request.method} {redact_url(str(request.url))} answered HTTP {response.status_code}"
    return f"{said} {response.reason_phrase} with {media_type}: {_WEB_PAGE.format(path='/sse' if sse else '/mcp')}"


def cannot_connect(exc: BaseException, url: str) -> str | None:
    """Why no answer came from `url` (its secrets hidden) and what to check, when the cause is a usual one.

    httpx says "All connection attempts failed" of a refused connection and names no address; the cause
    is further down the exception's chain."""
    causes: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(causes) < 10:
        causes.append(current)
        current = current.__cause__ or current.__context__
    where = redact_url(url)
    for cause in causes:
        if isinstance(cause, ConnectionRefusedError):
            return f"cannot connect to {where}: connection refused (is the server running, on that port?)"
        if isinstance(cause, socket.gaierror):
            return f"cannot connect to {where}: its host name does not resolve (is it spelled right?)"
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = cause.verify_message or "certificate verify failed"
            return (
                f"cannot connect to {where}: its TLS certificate is not trusted here ({why}); a private or "
                "self-signed one is trusted by naming its CA's PEM file in the SSL_CERT_FILE environment variable"
            )
    return None


def oauth_remedy(server: str, grant: str) -> str:
    """What to do when `server`, which the gateway authorizes to with OAuth `grant`, refuses its token."""
    if grant == "client_credentials":
        return 'is its client allowed this server, with the "scopes" it asks for?'
    return f'log in again with manifold auth login {server} (are the "scopes" asked for enough?)'


def refusal(response: Any, *, sse: bool = False, oauth_remedy: str | None = None) -> str:
    """`GET <url> answered HTTP 404 Not Found: <what it usually means>`, the URL's secrets hidden.
    `oauth_remedy`: what to do about a refused token, for a server the gateway authorizes to with OAuth."""
    request = response.request
    said = f"{request.method} {redact_url(str(request.url))} answered HTTP {response.status_code}"
    if response.reason_phrase:
        said = f"{said} {response.reason_phrase}"
    status = response.status_code
    if oauth_remedy is not None and status in (401, 403):
        hint: str | None = f"it refused the OAuth token the gateway holds: {oauth_remedy}"
    else:
        hint = (_SSE_HINTS if sse else _HINTS).get(status)
    return f"{said}: {hint}" if hint else said


class FirstAnswerPage:
    """A response hook on an SSE server's HTTP client: whether its first answer (the GET that opens the event
    stream) was a web page, where the SSE client says only "Expected response with content type
    'text/event-stream', got 'text/html'". It looks at that one answer only, so it costs calls nothing."""

    def __init__(self) -> None:
        self.said: str | None = None
        self._seen = False

    async def __call__(self, response: Any) -> None:
        if not self._seen and not response.is_redirect:
            self._seen = True
            self.said = web_page(response, sse=True)


class StartRefusals:
    """A response hook on a starting server's HTTP client, taken off once it has started."""

    def __init__(self, client: Any, oauth_remedy: str | None = None) -> None:
        self.client = client
        self.oauth_remedy = oauth_remedy
        self.said: str | None = None
        client.event_hooks["response"].append(self)

    async def __call__(self, response: Any) -> None:
        if response.status_code >= 400:
            self.said = refusal(response, oauth_remedy=self.oauth_remedy)
        elif (page := web_page(response)) is not None:
            self.said = page

    def detach(self) -> None:
        """Off the client: a started server's answers are the call path's to judge, at no cost per call."""
        hooks = self.client.event_hooks["response"]
        if self in hooks:
            hooks.remove(self)
