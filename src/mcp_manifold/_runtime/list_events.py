"""The listen streams' list events, carrying which items changed: a stream admits one only for a caller who may
see one of them (`BackChannel.concerns`), on the replica that saw the change and on every other (the items go
with the event through the shared store, `shared_state/listen.py`). Each is the SDK's event, so the SDK streams it
as such. An event without items (the SDK's own, a reload's, a change too large to carry) reaches every stream."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ServerEvent, ToolsListChanged

from mcp_manifold._core.catalog import Kind

Items = frozenset[tuple[str, str]]  # (server, exposed name) of each item added, removed or changed


@dataclass(frozen=True)
class _ToolsChanged(ToolsListChanged):
    changed: Items | None = None


@dataclass(frozen=True)
class _PromptsChanged(PromptsListChanged):
    changed: Items | None = None


@dataclass(frozen=True)
class _ResourcesChanged(ResourcesListChanged):
    changed: Items | None = None


_EVENTS: dict[Kind, type[_ToolsChanged] | type[_PromptsChanged] | type[_ResourcesChanged]] = {
    "tools": _ToolsChanged,
    "prompts": _PromptsChanged,
    "resources": _ResourcesChanged,
}
_KINDS: dict[type[ServerEvent], Kind] = {
    ToolsListChanged: "tools",
    PromptsListChanged: "prompts",
    ResourcesListChanged: "resources",
}


def list_changed(kind: Kind, changed: Items | None) -> ServerEvent:
    """The event that the `kind` list changed; `changed`: what changed of it, None when not known."""
    return _EVENTS[kind](changed=changed)


def list_kind(event: ServerEvent) -> Kind | None:
    """Which list `event` says changed; None for a resource update."""
    return next((kind for base, kind in _KINDS.items() if isinstance(event, base)), None)


def changed_items(event: ServerEvent) -> Items | None:
    """What changed of the list, as the event carries it; None when not known (everyone hears of it)."""
    return getattr(event, "changed", None)
