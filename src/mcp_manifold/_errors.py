"""One exception tree for the whole gateway, grouped by cause.

Every error a client or CLI user can see is a `ManifoldError`; its message names what was
wrong and, where it helps, what was expected. `translate_backend_errors` is the single place
where SDK and transport failures from a downstream server become this tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


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

    def __init__(self, server: str, message: str, code: int) -> None:
        self.code = code
        super().__init__(server, message)


@contextmanager
def translate_backend_errors(server: str, action: str) -> Iterator[None]:
    """Turn SDK, transport and OS errors raised while talking to `server` into `BackendError`s."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    try:
        yield
    except ManifoldError:
        raise
    except MCPError as exc:
        code = exc.error.code
        message = exc.error.message
        if code == REQUEST_TIMEOUT:
            raise BackendTimeout(server, f"{action} timed out: {message}") from exc
        if code == CONNECTION_CLOSED:
            raise BackendClosed(server, f"{action} failed: connection closed") from exc
        raise BackendRequestError(server, message, code) from exc
    except TimeoutError as exc:
        raise BackendTimeout(server, f"{action} timed out") from exc
    except (OSError, EOFError) as exc:
        raise BackendClosed(server, f"{action} failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # anyio's closed/broken stream errors and the like
        name = type(exc).__name__
        if name in {"ClosedResourceError", "BrokenResourceError", "EndOfStream"}:
            raise BackendClosed(server, f"{action} failed: connection closed") from exc
        raise
