"""One exception tree for the whole gateway, grouped by cause.

Every error a client or CLI user can see is a `ManifoldError`; its message names what was
wrong and, where it helps, what was expected. `runtime.backend_errors.translate_backend_errors` is
the single place where SDK and transport failures from a downstream server become this tree; the
front's `McpFront._answer` the single place where this tree becomes MCP errors for clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ManifoldError(Exception):
    """Base class of every error mcp-manifold raises on purpose."""


# --- configuration --------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigProblem:
    """One problem in a config file: where it is and what is wrong."""

    file: str
    server: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.server:
            where += f": server {self.server!r}"
        if self.field:
            where += f", field {self.field!r}"
        return f"{where}: {self.message}"


class ConfigError(ManifoldError):
    """The configuration has one or more problems; all of them are in `problems`."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


# --- client input ----------------------------------------------------------------------------


class InvalidRequest(ManifoldError):
    """The client's request is malformed: a missing, unknown or ill-typed parameter."""


class NotFound(ManifoldError):
    """No tool, resource, prompt, server or file by the name the client gave."""


class AccessDenied(ManifoldError):
    """The client asked for something outside what the gateway allows (a path, a secret)."""


class Quarantined(ManifoldError):
    """The tool's definition changed since it was approved (or it is new): refused until an operator approves it."""


class RateLimited(ManifoldError):
    """The caller is over its request rate or its calls in flight; `retry_after` says when to try again."""

    def __init__(self, message: str, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(message)


# --- backends -------------------------------------------------------------------------------


class BackendError(ManifoldError):
    """A downstream server failed; the message names the server."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(f"server {server!r}: {message}")


class BackendStartError(BackendError):
    """A downstream server could not be started or did not complete initialization."""


class BackendUnavailable(BackendError):
    """A downstream server is down, disabled or cooling off after repeated failures."""


class BackendTimeout(BackendError):
    """A downstream server did not answer in time."""


class BackendClosed(BackendError):
    """A downstream server's connection closed (the process died or the peer hung up)."""


class BackendRequestError(BackendError):
    """A downstream server answered a request with an MCP error."""

    def __init__(self, server: str, message: str, code: int, data: Any = None) -> None:
        self.code = code
        self.data = data  # the error's `data`, as the server sent it (secrets hidden)
        super().__init__(server, message)
