"""The merged snapshot of every backend's tools, resources, templates and prompts, and the routes back.

Plain code, no I/O: backends hand in what they listed, the catalog filters, names and hashes it,
and answers "which server owns this exposed name" for the router. Each change reports which kinds
of item changed so the front only sends the `list_changed` notifications that are true.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import mcp_types as types

from mcp_manifold._core.apps import (
    app_uri,
    app_uris,
    callable_by_app,
    for_app_only,
    meta_with_exposed_app,
    meta_without_app,
)
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.naming import assign_names, namespace_uri, sanitize_prefix, split_uri
from mcp_manifold._core.suggestions import LONGEST_URI, did_you_mean, quoted
from mcp_manifold._errors import NotFound

Kind = Literal["tools", "resources", "prompts"]
KINDS: tuple[Kind, ...] = ("tools", "resources", "prompts")


def content_hash(model: types.MCPModel) -> str:
    """A stable hash of an item's wire form, for change detection and the search index."""
    wire = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return hashlib.sha256(json.dumps(wire, sort_keys=True).encode()).hexdigest()[:16]


class Route(NamedTuple):
    """Where an exposed item lives: the server key and the item's original name or URI."""

    server: str
    original: str


@dataclass(frozen=True)
class ToolEntry:
    """One tool as exposed, with its origin."""

    exposed: types.Tool
    server: str
    original: types.Tool
    hash: str
    uri_arguments: tuple[str, ...] = ()  # parameters whose schema says they hold a URI (format "uri")

    @property
    def name(self) -> str:
        return self.exposed.name


@dataclass(frozen=True)
class Match:
    """One search result: the catalog entry and its score."""

    entry: ToolEntry
    score: float


@dataclass(frozen=True)
class _Backend:
    """One backend's listing with how it is exposed: its prefix and which of its tools are shown."""

    listing: Listing
    prefix: str
    tool_filter: Callable[[str], bool]


class Catalog:
    """Merged, namespaced view over all backends' listings."""

    def __init__(self, separator: str = "_", reserved_names: Iterable[str] = ()) -> None:
        self.separator = separator
        self.reserved_names = frozenset(reserved_names)
        self._listings: dict[str, _Backend] = {}
        self._tools: dict[str, ToolEntry] = {}
        # MCP Apps (core/apps.py): tools for their app only (callable, never listed), and the tools an app
        # may call by its own server's name (the original name, when one app server alone has it).
        self._app_only: dict[str, ToolEntry] = {}
        self._app_names: dict[str, ToolEntry] = {}
        self._app_tools: dict[str, list[ToolEntry]] = {}  # an app's exposed URI -> the tools that name it
        self._prompts: dict[str, tuple[types.Prompt, Route]] = {}
        # (server, original name) -> exposed name, for tools and prompts: `exposed_name`.
        self._tool_names: dict[tuple[str, str], str] = {}
        self._prompt_names: dict[tuple[str, str], str] = {}
        self._resources: dict[str, tuple[types.Resource, Route]] = {}
        self._templates: list[tuple[types.ResourceTemplate, str]] = []
        self._prefix_owner: dict[str, str] = {}
        self._listeners: list[Callable[[set[Kind]], None]] = []
        # What the latest change changed, per kind: (server, exposed name) of each item added, removed or
        # changed. Read by listeners that tell clients of a change only
        # if they may see some of it (`back_channel`): a change behind their profile is not theirs to hear of.
        self.last_change: dict[Kind, frozenset[tuple[str, str]]] = {}

    # --- updates ---------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[set[Kind]], None]) -> Callable[[], None]:
        """Call `listener(changed_kinds)` after every change; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def set_backend(
        self, server: str, listing: Listing, *, prefix: str, tool_filter: Callable[[str], bool] = lambda _name: True
    ) -> set[Kind]:
        """Replace one backend's listing, exposed under `prefix`; returns (and announces) the kinds that changed."""
        self._listings[server] = _Backend(listing, prefix, tool_filter)
        return self._rebuild()

    def with_listings(self, listings: dict[str, Listing]) -> Catalog:
        """A copy in which these servers list what `listings` says (one client's view; no listeners)."""
        view = Catalog(self.separator, self.reserved_names)
        view._listings = {
            server: _Backend(listings[server], backend.prefix, backend.tool_filter) if server in listings else backend
            for server, backend in self._listings.items()
        }
        view._rebuild()
        return view

    def servers_listed_apart(self, shared: Catalog) -> list[str]:
        """The servers whose listing here is not `shared`'s (`with_listings` made this copy for one client)."""
        return [server for server, backend in self._listings.items() if shared._listings.get(server) is not backend]

    def remove_backend(self, server: str) -> set[Kind]:
        if self._listings.pop(server, None) is None:
            return set()
        return self._rebuild()

    def _rebuild(self) -> set[Kind]:
        before = self._fingerprints()
        self._prefix_owner = {sanitize_prefix(listing.prefix): server for server, listing in self._listings.items()}
        self._build_tools()
        self._build_prompts()
        self._build_resources()
        after = self._fingerprints()
        changed = {kind for kind in KINDS if before[kind] != after[kind]}
        if changed:
            self.last_change = {kind: _changed_items(before[kind], after[kind]) for kind in changed}
            for listener in list(self._listeners):
                listener(changed)
        return changed

    def _build_tools(self) -> None:
        owners: list[tuple[str, str]] = []
        origin: dict[tuple[str, str], tuple[str, types.Tool]] = {}
        for server, listing in self._listings.items():
            for tool in listing.listing.tools:
                if listing.tool_filter(tool.name):
                    key = (listing.prefix, tool.name)
                    owners.append(key)
                    origin[key] = (server, tool)
        names = assign_names(owners, self.separator, self.reserved_names)
        tools: dict[str, ToolEntry] = {}
        app_only: dict[str, ToolEntry] = {}
        by_app_name: dict[str, list[ToolEntry]] = {}
        app_servers = {server for server, tool in origin.values() if app_uri(tool.meta)}
        for key, exposed_name in names.items():
            server, tool = origin[key]
            update: dict[str, Any] = {"name": exposed_name}
            meta = meta_with_exposed_app(tool.meta, lambda uri, prefix=key[0]: namespace_uri(prefix, uri))
            if meta is not None:
                update["meta"] = self.without_foreign_app(meta, server)
            exposed = tool.model_copy(update=update)
            entry = ToolEntry(exposed, server, tool, content_hash(exposed), uri_parameters(tool))
            (app_only if for_app_only(tool.meta) else tools)[exposed_name] = entry
            if server in app_servers and callable_by_app(tool.meta):
                by_app_name.setdefault(tool.name, []).append(entry)
        self._tools = dict(sorted(tools.items()))
        self._tool_names = {
            (entry.server, entry.original.name): name for name, entry in [*tools.items(), *app_only.items()]
        }
        self._app_only = app_only
        self._app_names = {name: entries[0] for name, entries in by_app_name.items() if len(entries) == 1}
        app_tools: dict[str, list[ToolEntry]] = {}
        for entry in [*tools.values(), *app_only.values()]:
            for uri in app_uris(entry.exposed.meta):
                app_tools.setdefault(uri, []).append(entry)
        self._app_tools = app_tools

    def _build_prompts(self) -> None:
        owners: list[tuple[str, str]] = []
        origin: dict[tuple[str, str], tuple[str, types.Prompt]] = {}
        for server, listing in self._listings.items():
            for prompt in listing.listing.prompts:
                key = (listing.prefix, prompt.name)
                owners.append(key)
                origin[key] = (server, prompt)
        names = assign_names(owners, self.separator, self.reserved_names)
        prompts = {}
        for key, exposed_name in names.items():
            server, prompt = origin[key]
            prompts[exposed_name] = (prompt.model_copy(update={"name": exposed_name}), Route(server, prompt.name))
        self._prompts = dict(sorted(prompts.items()))
        self._prompt_names = {(route.server, route.original): name for name, (_, route) in prompts.items()}

    def _build_resources(self) -> None:
        resources: dict[str, tuple[types.Resource, Route]] = {}
        templates: list[tuple[types.ResourceTemplate, str]] = []
        for server, listing in self._listings.items():
            for resource in listing.listing.resources:
                uri = namespace_uri(listing.prefix, resource.uri)
                if not self.foreign(uri, server):
                    resources[uri] = (resource.model_copy(update={"uri": uri}), Route(server, resource.uri))
            for template in listing.listing.templates:
                exposed = namespace_uri(listing.prefix, template.uri_template)
                if not self.foreign(exposed, server):
                    templates.append((template.model_copy(update={"uri_template": exposed}), server))
        # Sorted like tools and prompts, so listings do not depend on which backend answered first.
        self._resources = dict(sorted(resources.items()))
        self._templates = sorted(templates, key=lambda pair: pair[0].uri_template)

    def without_foreign_app(self, meta: dict[str, Any], server: str) -> dict[str, Any] | None:
        """A tool's or result's `_meta` of `server`, its app already exposed, without the app reference when that
        names another server's app (`foreign`): hosts would render that app for this server's tool."""
        if any(self.foreign(uri, server) for uri in app_uris(meta)):
            return meta_without_app(meta) or None
        return meta

    def foreign(self, exposed: str, server: str) -> bool:
        """Whether an exposed URI of `server` is in another server's namespace (`ui://apps+...`, `apps+...`): only
        a server without a prefix has such URIs, and they would shadow that server's, its apps included."""
        split = split_uri(exposed)
        return split is not None and self._prefix_owner.get(split[0], server) != server

    def _fingerprints(self) -> dict[Kind, dict[tuple[str, str], str]]:
        """Per kind, (server, exposed name) of each item (a template's name: its URI template) -> its content hash."""
        return {
            "tools": {(e.server, name): e.hash for name, e in [*self._tools.items(), *self._app_only.items()]},
            "prompts": {(route.server, name): content_hash(prompt) for name, (prompt, route) in self._prompts.items()},
            "resources": {
                **{(route.server, uri): content_hash(resource) for uri, (resource, route) in self._resources.items()},
                **{(server, t.uri_template): content_hash(t) for t, server in self._templates},
            },
        }

    # --- queries ---------------------------------------------------------------------------

    @property
    def servers(self) -> list[str]:
        return list(self._listings)

    def tool_entries(self) -> list[ToolEntry]:
        return list(self._tools.values())

    def tools(self) -> list[types.Tool]:
        return [entry.exposed for entry in self._tools.values()]

    def prompts(self) -> list[types.Prompt]:
        return [prompt for prompt, _ in self._prompts.values()]

    def resources(self) -> list[types.Resource]:
        return [resource for resource, _ in self._resources.values()]

    def templates(self) -> list[types.ResourceTemplate]:
        return [template for template, _ in self._templates]

    def tool(self, name: str) -> ToolEntry:
        entry = self.entry(name)
        if entry is None:
            raise NotFound(f"unknown tool {quoted(name)}{did_you_mean(name, self._tools)}")
        return entry

    def entry(self, name: str) -> ToolEntry | None:
        """The exposed tool `name`, or None (the cheap lookup, for hot paths). Also a tool for its app only,
        and a tool an app names as its own server does (a name no listed tool has)."""
        entry = self._tools.get(name)
        if entry is None and (self._app_only or self._app_names):
            entry = self._app_only.get(name) or self._app_names.get(name)
        return entry

    def has_tool(self, name: str) -> bool:
        return self.entry(name) is not None

    def listed_entry(self, name: str) -> ToolEntry | None:
        """The listed tool `name` (one of `tool_entries`, never one for its app only), or None."""
        return self._tools.get(name)

    def tools_naming(self, uri: str) -> list[ToolEntry]:
        """The tools whose app (`_meta.ui`) is the resource `uri` (exposed), listed or for their app only."""
        return self._app_tools.get(uri, [])

    def apps_named(self, tools: Iterable[tuple[str, str]]) -> frozenset[tuple[str, str]]:
        """(server, exposed URI) of each app that the tools `tools` ((server, exposed name)) name: whether those tools
        may be used decides whether their apps are listed (`CatalogView._app_usable`), so a change of them may change
        the resources a client sees though no resource changed."""
        return frozenset(
            (server, uri)
            for server, name in tools
            if (entry := self.entry(name)) is not None and entry.server == server
            for uri in app_uris(entry.exposed.meta)
        )

    def route_tool(self, name: str) -> Route:
        entry = self.tool(name)
        return Route(entry.server, entry.original.name)

    def route_prompt(self, name: str) -> Route:
        found = self._prompts.get(name)
        if found is None:
            raise NotFound(f"unknown prompt {quoted(name)}{did_you_mean(name, self._prompts)}")
        return found[1]

    def prompt(self, name: str) -> types.Prompt:
        self.route_prompt(name)
        return self._prompts[name][0]

    def route_resource(self, uri: str) -> Route:
        """Route a concrete resource URI or one built from a namespaced template."""
        found = self._resources.get(uri)
        if found is not None:
            return found[1]
        split = split_uri(uri)
        if split is not None and split[0] in self._prefix_owner:
            return Route(self._prefix_owner[split[0]], split[1])
        # Servers with an empty prefix expose URIs unchanged.
        unprefixed = [server for server, listing in self._listings.items() if not listing.prefix]
        if len(unprefixed) == 1:
            return Route(unprefixed[0], uri)
        raise unknown_resource(uri)

    def lists_resource(self, uri: str) -> bool:
        """Whether `uri` is a listed resource's exposed URI, exactly as listed."""
        return uri in self._resources

    def exposed_uri(self, server: str, original_uri: str) -> str:
        """The exposed form of a backend's URI (in notifications, read results and tool results)."""
        listing = self._listings.get(server)
        return namespace_uri(listing.prefix, original_uri) if listing else original_uri

    def exposed_name(self, kind: str, server: str, original: str) -> str | None:
        """The name (a resource's: URI) under which this catalog shows a server's tool, prompt or resource,
        or None when it shows none such (the server is not listed, or has no such item)."""
        if kind == "tool":
            return self._tool_names.get((server, original))
        if kind == "prompt":
            return self._prompt_names.get((server, original))
        listing = self._listings.get(server)
        return namespace_uri(listing.prefix, original) if kind == "resource" and listing else None

    def original_uri(self, server: str, uri: str) -> str:
        """A URI a client sent for `server`, as that server knows it (the exposed prefix taken off)."""
        listing = self._listings.get(server)
        split = split_uri(uri) if listing and listing.prefix else None
        if split is None or self._prefix_owner.get(split[0]) != server:
            return uri
        return split[1]

    def server_of_prefix(self, prefix: str) -> str | None:
        return self._prefix_owner.get(sanitize_prefix(prefix))


def _changed_items(before: dict[tuple[str, str], str], after: dict[tuple[str, str], str]) -> frozenset[tuple[str, str]]:
    """(server, name) of each item added, removed or changed between two `_fingerprints` of one kind."""
    return frozenset(item for item in before.keys() | after.keys() if before.get(item) != after.get(item))


def uri_parameters(tool: types.Tool) -> tuple[str, ...]:
    """The top-level parameters of a tool whose schema marks them as URIs (`"format": "uri"`)."""
    properties = (tool.input_schema or {}).get("properties")
    if not isinstance(properties, dict):
        return ()
    return tuple(
        name
        for name, spec in properties.items()
        if isinstance(spec, dict) and spec.get("format") in ("uri", "uri-reference", "iri", "iri-reference")
    )


def unknown_resource(uri: str) -> NotFound:
    """The error for a URI that no server exposes, with the shape exposed URIs have."""
    return NotFound(
        f"unknown resource {quoted(uri, LONGEST_URI)}: exposed URIs look like '<prefix>+<original uri>' (an app's: 'ui://<prefix>+<rest>')"
    )
