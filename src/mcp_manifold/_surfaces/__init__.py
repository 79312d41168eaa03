"""Surfaces: what a client sees. Each maps client requests onto catalog, search, router and results.

The config's `expose` list picks any set of them; the gateway asks them in that order, so the
first surface that owns a tool name or URI answers for it.
"""

from __future__ import annotations

from importlib import import_module

from mcp_manifold._surfaces.base import Host, Surface

# name -> "module:Class", imported only when exposed so unused surfaces cost nothing at start.
SURFACES: dict[str, str] = {
    "direct": "mcp_manifold._surfaces.direct:DirectSurface",
    "proxy": "mcp_manifold._surfaces.proxy.surface:ProxySurface",
    "dispatch": "mcp_manifold._surfaces.dispatch.surface:DispatchSurface",
    "retrieve": "mcp_manifold._surfaces.retrieve:RetrieveSurface",
    "hub": "mcp_manifold._surfaces.hub.surface:HubSurface",
    "code": "mcp_manifold._surfaces.code.surface:CodeSurface",
}


def load_surface(name: str, host: Host) -> Surface:
    """Instantiate the surface called `name`, reaching the gateway through `host`."""
    target = SURFACES.get(name)
    if target is None:
        raise ValueError(f"unknown surface {name!r}; known: {', '.join(SURFACES)}")
    module_name, _, class_name = target.partition(":")
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"surface {name!r} is not available in this build: {exc}") from exc
    return getattr(module, class_name)(host)


__all__ = ["SURFACES", "Host", "Surface", "load_surface"]
