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
from mcp_manifold._version import __version__


def __getattr__(name: str) -> object:
    # The client side pulls in the SDK client; import it only when asked for.
    if name in ("ProxyClient", "ProxyError"):
        from mcp_manifold.surfaces.proxy import client as proxy_client

        return getattr(proxy_client, name)
    if name == "add_proxy_tool":
        from mcp_manifold.surfaces.proxy.tool import add_proxy_tool

        return add_proxy_tool
    raise AttributeError(f"module 'mcp_manifold' has no attribute {name!r}")


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
    "ProxyClient",
    "ProxyError",
    "__version__",
    "add_proxy_tool",
]
