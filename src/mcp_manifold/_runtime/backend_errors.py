"""Where SDK, transport and OS failures from a downstream server become the gateway's error tree.

The httpx way: one context manager at the one boundary (a backend's request), so nothing above the
runtime ever sees an SDK or anyio exception from a server. What the server said passes the server's
`scrub` (`ServerConfig.scrub`, the one redaction point) on its way in: an error a server words with
its own token reaches no client, log or audit line with it, whatever the request (a read, a prompt,
a completion, a list, a ping).
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT, ErrorData
from pydantic import ValidationError

from mcp_manifold._errors import BackendClosed, BackendRequestError, BackendStartError, BackendTimeout, ManifoldError
from mcp_manifold._sdk import output_schema_refusal


def translate_backend_errors(server: str, action: str | Callable[[], str], scrub: Callable[[str], str]) -> _Translated:
    """Turn SDK, transport and OS errors raised while talking to `server` into `BackendError`s, with what
    the server or the transport said passed through `scrub`. `action` names the request in the errors (or
    words it when one needs it)."""
    return _Translated(server, action, scrub)


class _Translated:
    """`translate_backend_errors`'s context manager. A class rather than a generator: it is entered on
    every request to every server, and a generator's context manager costs several calls more."""

    __slots__ = ("action", "scrub", "server")

    def __init__(self, server: str, action: str | Callable[[], str], scrub: Callable[[str], str]) -> None:
        self.server = server
        self.action = action  # or what words it, only when an error needs it
        self.scrub = scrub

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: object) -> None:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, ManifoldError):
            return  # nothing raised, a cancellation, or already the gateway's own error: as it is
        server, scrub = self.server, self.scrub
        action = self.action if isinstance(self.action, str) else self.action()
        if isinstance(exc, MCPError):
            code = exc.error.code
            message = scrub(exc.error.message)
            if code == REQUEST_TIMEOUT:
                raise BackendTimeout(server, f"{action} timed out: {message}") from exc
            if code == CONNECTION_CLOSED and _said_by_transport(exc.error):
                raise BackendClosed(server, f"{action} failed: connection closed") from exc
            raise BackendRequestError(server, message, code, _scrubbed(exc.error.data, scrub)) from exc
        if isinstance(exc, TimeoutError):
            raise BackendTimeout(server, f"{action} timed out") from exc
        if isinstance(exc, OSError | EOFError):
            raise BackendClosed(server, f"{action} failed: {type(exc).__name__}: {scrub(str(exc))}") from exc
        if isinstance(exc, ValidationError):
            # The server's answer does not fit the protocol. Only where it went wrong, never the input
            # (pydantic quotes it, and it is the server's data).
            where = "; ".join(".".join(str(part) for part in error["loc"]) or "result" for error in exc.errors()[:3])
            message = f"{action}: the server's answer is not valid MCP (at {where})"
            raise BackendRequestError(server, message, INTERNAL_ERROR) from exc
        refusal = output_schema_refusal(exc)
        if refusal is not None:  # the server's result, refused by the SDK's client: the server's fault
            raise BackendRequestError(server, f"{action}: {refusal}", INTERNAL_ERROR) from exc
        # anyio's closed/broken stream errors and the like
        if type(exc).__name__ in {"ClosedResourceError", "BrokenResourceError", "EndOfStream"}:
            raise BackendClosed(server, f"{action} failed: connection closed") from exc


# The SDK's own words for a connection that ended (its dispatchers' and its streamable HTTP client's), under
# the code a server's own error may carry too: -32000 opens JSON-RPC's "server error" range, which servers
# use for their failures. Such an answer is the server's, its connection alive; taking it for a closed one
# restarted the server and ended every caller's calls on it.
_CLOSED_SAID = "Connection closed"
_SSE_ENDED_SAYS = "SSE stream "  # the opening of the streamable HTTP client's words for a stream it lost


def _said_by_transport(error: ErrorData) -> bool:
    return error.data is None and (error.message == _CLOSED_SAID or error.message.startswith(_SSE_ENDED_SAYS))


def _scrubbed(data: object, scrub: Callable[[str], str]) -> object:
    """An error's `data` with the server's secrets hidden in its strings (keys too), however deep."""
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, dict):
        return {_scrubbed(key, scrub): _scrubbed(value, scrub) for key, value in data.items()}
    if isinstance(data, list):
        return [_scrubbed(value, scrub) for value in data]
    return data


def first_leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group, reaching into nested exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """A one-line reason, reaching into exception groups for the first real cause."""
    exc = first_leaf(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def cut_context_loop(exc: BaseException) -> None:
    """Cut a loop in `exc`'s `__context__` chain, if it has one.

    A cancellation that unwinds an HTTP connection through several exit stacks can come out as a
    CancelledError that is its own context (the stacks' chain repair links it back to itself).
    anyio walks that chain when the task ends and would loop forever: the event loop at 100% CPU
    and the gateway deaf to SIGTERM (seen with hub instances connected at shutdown).
    """
    seen = {id(exc)}
    current: BaseException = exc
    while current.__context__ is not None:
        if id(current.__context__) in seen:
            current.__context__ = None
            return
        seen.add(id(current.__context__))
        current = current.__context__


class HandshakeRefused(BackendStartError):
    """The handshake asked for first failed (a 2026-07-28-only server); not a failure: discovery is next."""

    def __init__(self, server: str, detail: str) -> None:
        self.detail = detail
        super().__init__(server, detail)
