"""mcp-manifold: one MCP endpoint in front of any number of MCP servers."""

from mcp_manifold._errors import (
    AccessDenied,
    BackendClosed,
    BackendError,
    BackendRequestError,
    BackendStartError,
    BackendTimeout,
    BackendUnavailable,
    ConfigError,
    ConfigProblem,
    InvalidRequest,
    ManifoldError,
    NotFound,
)

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "BackendClosed",
    "BackendError",
    "BackendRequestError",
    "BackendStartError",
    "BackendTimeout",
    "BackendUnavailable",
    "ConfigError",
    "ConfigProblem",
    "InvalidRequest",
    "ManifoldError",
    "NotFound",
    "__version__",
]
