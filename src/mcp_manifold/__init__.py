"""mcp-manifold: one MCP endpoint in front of any number of MCP servers.

The public API is what this module exports (`__all__`): the gateway, its configuration, Magg's
`ProxyClient` and `add_proxy_tool`, and the error tree. Everything else lives in modules whose names
start with `_`; their contents may change between releases. `docs/architecture.md` says where each
behaviour lives.

    from mcp_manifold import Gateway, load_config

    async with Gateway(load_config("mcp.json")) as gateway:
        ...
"""

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
    Quarantined,
    RateLimited,
)
from mcp_manifold._version import __version__

# Imported on first use: `import mcp_manifold` stays cheap for the CLI's start-up and the grep worker,
# and the gateway and the client pull in the SDK's sessions and transports.
_LAZY = {
    "Gateway": ("mcp_manifold._runtime.gateway", "Gateway"),
    "Config": ("mcp_manifold._config", "Config"),
    "load_config": ("mcp_manifold._config", "load_config"),
    "ProxyClient": ("mcp_manifold._surfaces.proxy.client", "ProxyClient"),
    "ProxyError": ("mcp_manifold._surfaces.proxy.client", "ProxyError"),
    "add_proxy_tool": ("mcp_manifold._surfaces.proxy.tool", "add_proxy_tool"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        module, attribute = _LAZY[name]
        value = getattr(import_module(module), attribute)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'mcp_manifold' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AccessDenied",
    "BackendClosed",
    "BackendError",
    "BackendRequestError",
    "BackendStartError",
    "BackendTimeout",
    "BackendUnavailable",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "Gateway",
    "InvalidRequest",
    "ManifoldError",
    "NotFound",
    "ProxyClient",
    "ProxyError",
    "Quarantined",
    "RateLimited",
    "__version__",
    "add_proxy_tool",
    "load_config",
]
