"""MCP Apps (the `io.modelcontextprotocol/ui` extension) as the gateway sees it.

A tool names its app in `_meta.ui.resourceUri` (older servers: the flat key `_meta["ui/resourceUri"]`),
a `ui://` resource the host renders in a sandboxed frame; a tool result may name it too. Through the
gateway that URI is the exposed one (naming.py keeps the `ui://` scheme, which hosts require), so the
host reads the app back through the gateway. `_meta.ui.visibility` says who may call the tool: `model`
(listed to the model), `app` (called by its app); absent means both. A tool for its app only is kept
out of every listing, yet stays callable, and an app's calls name tools as its own server does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

EXTENSION_ID = "io.modelcontextprotocol/ui"
_UI = "ui"
_FLAT_KEY = "ui/resourceUri"  # the key before `_meta.ui` (hosts still read it)


def app_uri(meta: Mapping[str, Any] | None) -> str | None:
    """The app a tool's or result's `_meta` names, if any."""
    if not meta:
        return None
    ui = meta.get(_UI)
    uri = ui.get("resourceUri") if isinstance(ui, Mapping) else None
    if not isinstance(uri, str):
        uri = meta.get(_FLAT_KEY)
    return uri if isinstance(uri, str) else None


def app_uris(meta: Mapping[str, Any] | None) -> set[str]:
    """Every app a tool's `_meta` names: `ui.resourceUri` and the flat key may name two, and a host reads either
    (the gateway rewrites both), so each is the tool's app to pin."""
    if not meta:
        return set()
    ui = meta.get(_UI)
    named = (ui.get("resourceUri") if isinstance(ui, Mapping) else None, meta.get(_FLAT_KEY))
    return {uri for uri in named if isinstance(uri, str)}


def names_an_app(meta: Mapping[str, Any] | None) -> bool:
    """Whether `_meta` carries an app reference the gateway must rewrite."""
    return bool(meta) and (_UI in meta or _FLAT_KEY in meta)  # type: ignore[operator]


def meta_with_exposed_app(meta: Mapping[str, Any] | None, exposed: Callable[[str], str]) -> dict[str, Any] | None:
    """`meta` with the app URIs it names in their exposed form, or None when it names none."""
    if not names_an_app(meta):
        return None
    assert meta is not None
    rewritten = dict(meta)
    ui = meta.get(_UI)
    if isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str):
        rewritten[_UI] = {**ui, "resourceUri": exposed(ui["resourceUri"])}
    flat = meta.get(_FLAT_KEY)
    if isinstance(flat, str):
        rewritten[_FLAT_KEY] = exposed(flat)
    return rewritten


def meta_without_app(meta: Mapping[str, Any]) -> dict[str, Any]:
    """`meta` without its app (`ui` and the flat key): what a server lists to a client that renders no apps."""
    return {key: value for key, value in meta.items() if key not in (_UI, _FLAT_KEY)}


def for_app_only(meta: Mapping[str, Any] | None) -> bool:
    """Whether a tool is for its app only (`visibility` without `model`): never listed to the model."""
    ui = meta.get(_UI) if meta else None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return isinstance(visibility, list) and "model" not in visibility


def callable_by_app(meta: Mapping[str, Any] | None) -> bool:
    """Whether an app may call the tool (`visibility` absent, or with `app`)."""
    ui = meta.get(_UI) if meta else None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return not isinstance(visibility, list) or "app" in visibility
