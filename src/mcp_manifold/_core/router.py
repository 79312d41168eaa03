"""Where a call goes: from the name or URI a client used to a `Target` (server and original name).

The catalog holds the maps; these functions are the one place that turns a client's name into a
target for the call path, for every surface that exposes catalog items (`direct`, `proxy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp_manifold._core.catalog import Catalog


@dataclass(frozen=True, slots=True)
class Target:
    """What a call reaches, and how the client named it.

    `name` is the tool's or prompt's name on its server, or the resource's URI there; `exposed` is the
    name or URI the client used, `surface` the surface that made the call.
    """

    server: str
    name: str
    exposed: str
    surface: str


def tool_target(catalog: Catalog, name: str, surface: str) -> Target:
    """The target of the exposed tool `name`; `NotFound` (with suggestions) when there is none."""
    entry = catalog.tool(name)
    return Target(entry.server, entry.original.name, name, surface)


def resource_target(catalog: Catalog, uri: str, surface: str) -> Target:
    route = catalog.route_resource(uri)
    return Target(route.server, route.original, uri, surface)


def prompt_target(catalog: Catalog, name: str, surface: str) -> Target:
    route = catalog.route_prompt(name)
    return Target(route.server, route.original, name, surface)
