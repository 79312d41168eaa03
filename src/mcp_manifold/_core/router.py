"""Where a call goes: from the name or URI a client used to a `Target` (server and original name).

The catalog holds the maps; these functions are the one place that turns a client's name into a
target for the call path, for every surface that exposes catalog items (`direct`, `proxy`). Surfaces
pass their caller's `CatalogView`, so a name the caller may not see is unknown here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.catalog_view import CatalogView
from mcp_manifold._core.results import SpillPolicy
from mcp_manifold._errors import NotFound


@dataclass(frozen=True, slots=True)
class Target:
    """What a call reaches, and how the client named it.

    `name` is the tool's or prompt's name on its server, or the resource's URI there; `exposed` is the
    name or URI the client used, `surface` the surface that made the call. `listed`: the backend lists the
    resource as `exposed` spells it (a hub instance's, which the catalog does not hold), so it is taken as listed.
    """

    server: str
    name: str
    exposed: str
    surface: str
    listed: bool = False


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call down the call path: where it goes, with what, and how a large result is handled.

    `meta` is sent as the request's `_meta`; `spill` replaces the gateway's spill policy (dispatch
    passes its per-call options). `wire`: the caller (the fast lane) takes a plain result in the form the
    server sent it, a `WireResult` (core/wire.py), instead of the SDK's model.
    """

    target: Target
    arguments: dict[str, Any] | None
    meta: Mapping[str, Any] | None = None
    spill: SpillPolicy | None = None
    wire: bool = False


def tool_target(catalog: Catalog | CatalogView, name: str, surface: str) -> Target:
    """The target of the exposed tool `name`; `NotFound` (with suggestions) when there is none."""
    entry = catalog.tool(name)
    return Target(entry.server, entry.original.name, name, surface)


def resource_target(catalog: Catalog | CatalogView, uri: str, surface: str) -> Target:
    route = catalog.route_resource(uri)
    return Target(route.server, route.original, uri, surface)


def prompt_target(catalog: Catalog | CatalogView, name: str, surface: str) -> Target:
    route = catalog.route_prompt(name)
    return Target(route.server, route.original, name, surface)


def completion_target(
    catalog: Catalog | CatalogView, ref: types.PromptReference | types.ResourceTemplateReference, surface: str
) -> Target | None:
    """Where completions for a catalog prompt's or resource template's arguments come from, or None."""
    try:
        if isinstance(ref, types.PromptReference):
            return prompt_target(catalog, ref.name, surface)
        return resource_target(catalog, ref.uri, surface)
    except NotFound:
        return None
