"""What a config that loads may still get wrong without a word: one list, for `config check`, `serve`'s
start and each reload (a reload that brings a new mistake logs it, as a start would have said it)."""

from __future__ import annotations

from mcp_manifold._config.model import Config
from mcp_manifold._config.principal_names import principal_warnings
from mcp_manifold._config.profile_servers import profile_server_warnings
from mcp_manifold._config.secret_destinations import unbound_secret_warnings


def config_warnings(cfg: Config) -> list[str]:
    """Mistakes that fail closed, or serve nothing, silently (each a line of its own)."""
    empty = no_servers_warning(cfg)
    return [
        *([empty] if empty else []),
        *principal_warnings(cfg),
        *profile_server_warnings(cfg),
        *unbound_secret_warnings(cfg),
    ]


def no_servers_warning(cfg: Config) -> str | None:
    """`no servers: ...` for a config that would serve nothing (an import of an empty client file, every
    server disabled), which is otherwise a quiet gateway of no tools; None when it serves some, or the hub
    finds them at run time."""
    if cfg.enabled_servers or "hub" in cfg.settings.expose:
        return None
    which = "no server is enabled" if cfg.servers else "mcpServers lists none"
    return f"no servers: {which}, so a client sees no tools (add them under mcpServers, or `manifold import`)"
