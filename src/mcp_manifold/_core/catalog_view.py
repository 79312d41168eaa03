"""One caller's view of the catalog: only what its profile allows, never a quarantined tool.

Surfaces read the catalog and search through this view (the host hands one out per request), so a
rule about what a caller may see is written once, here, and holds on every surface: listings,
`owns_*` checks, routing, search and a hub instance's lists. A name the caller may not see is
unknown to it, with the same words and suggestions drawn only from what it can see.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

import mcp_types as types

from mcp_manifold._core.apps import app_uris, for_app_only
from mcp_manifold._core.catalog import Catalog, Match, Route, ToolEntry, unknown_resource
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.profiles import Profile, for_profile
from mcp_manifold._core.suggestions import LONGEST_URI, did_you_mean, quoted
from mcp_manifold._core.uri_spelling import respelled
from mcp_manifold._errors import InvalidRequest, NotFound

# `search(query, limit, server, allowed, catalog)`: `catalog`'s tools ranked for `query`, only those `allowed`
# (a client with sessions of its own has a catalog of its own: those sessions' tools are what it searches).
Search = Callable[[str, int, str | None, Callable[[str], bool] | None, Catalog], Awaitable[list[Match]]]
Blocked = Callable[[str, str], bool]  # (server, original tool name) -> quarantined
# Told when the caller asked for something it may not see, whether it exists or not: (kind, server,
# original, exposed); server "" for a name that does not exist. Both are refusals, recorded alike, so
# that neither the time an answer takes nor its record tells a hidden name from a missing one.
Hidden = Callable[[str, str, str, str], None]


def _never(server: str, tool: str) -> bool:
    return False


def allowed_as_listed(
    profile: Profile, catalog: Catalog, kind: str, server: str, original: str, shown: str, as_listed: bool = False
) -> bool:
    """Whether `profile` also allows the item under the name the catalog lists it by, where that is not `shown`.

    A configured server's items reach the hub under the server's own names (`crash`, `kitchen://config`)
    and every other surface under the catalog's (`kitchen_crash`, `kitchen+kitchen://config`): a profile
    that denies one name denies the item under both, so no surface is a way around it.
    A resource that is an app is judged by its tools too (`app_allowed`), and its spelling (`plainly_named`), under
    the catalog's name, where the tools that name it are known and its listing is: a URI the server lists is taken
    as listed under either name. `as_listed`: its backend lists it as `shown` (a hub instance's, outside the catalog).
    """
    listed = catalog.exposed_name(kind, server, original)
    if listed is not None and listed != shown and not profile.allows_item(kind, server, listed):
        return False
    return kind != "resource" or (
        app_allowed(profile, catalog, listed or shown) and (as_listed or plainly_named(catalog, listed or shown))
    )


def resource_allowed(profile: Profile, catalog: Catalog, server: str, uri: str) -> bool:
    """Whether `profile` may see the resource `uri` (exposed) of `server`: by the resource globs, as an app, and
    named the plain way its globs can judge (`plainly_named`)."""
    return profile.allows_resource(server, uri) and app_allowed(profile, catalog, uri) and plainly_named(catalog, uri)


def plainly_named(catalog: Catalog, uri: str) -> bool:
    """Whether `uri` (exposed) is as listed, or spelled so that no server reads it as another (`uri_spelling`):
    else `file:///public/../secret/key` passed a glob `!file:///secret/*` and read the secret."""
    return catalog.lists_resource(uri) or respelled(uri) is None


def app_allowed(profile: Profile, catalog: Catalog, uri: str) -> bool:
    """Whether `profile` may see the resource `uri` (exposed) as far as it is an MCP App: an app that tools name is
    seen by a caller that may use one of them. Its HTML names and calls them, so a profile that hides a tool
    hides its app too; a resource no tool names is judged by the resource globs alone."""
    naming = catalog.tools_naming(uri)
    return not naming or any(profile.allows_tool(entry.server, entry.name) for entry in naming)


class CatalogView:
    """The catalog as one caller may see it; `profile` None and nothing blocked is the whole catalog."""

    def __init__(
        self,
        catalog: Catalog,
        profile: Profile | None,
        search: Search,
        blocked: Blocked | None = None,
        on_hidden: Hidden | None = None,
        blocked_now: Blocked | None = None,
    ) -> None:
        self.catalog = catalog
        self.profile = profile
        self._search = search
        self._blocked = blocked or _never
        # The quarantine as it is when asked, where `blocked` is None while nothing was held as the view was made:
        # what a search that waited judges its answer by.
        self._blocked_now = blocked_now or self._blocked
        self._on_hidden = on_hidden
        self.unrestricted = profile is None and blocked is None

    @property
    def profile_name(self) -> str | None:
        return self.profile.name if self.profile is not None else None

    # --- what may be seen ------------------------------------------------------------------------

    def may_use_server(self, server: str) -> bool:
        return self.profile is None or self.profile.allows_server(server)

    def may_use_tool(self, server: str, exposed: str, original: str) -> bool:
        if self._blocked(server, original):
            return False
        return self.profile is None or self.profile.allows_tool(server, exposed)

    def _visible(self, entry: ToolEntry) -> bool:
        return self.may_use_tool(entry.server, entry.name, entry.original.name)

    def _resource_visible(self, server: str, uri: str) -> bool:
        if not self._app_usable(uri):
            return False
        return self.profile is None or resource_allowed(self.profile, self.catalog, server, uri)

    def _app_usable(self, uri: str) -> bool:
        """Whether the resource `uri` (exposed), as far as it is an MCP App, is named by a tool this caller may use:
        a quarantined tool hides its app as a profile denying it does (`app_allowed`). Before, the app of a held
        tool was listed and read, and its first read pinned as approved whatever HTML the server served meanwhile."""
        naming = self.catalog.tools_naming(uri) if not self.unrestricted else ()
        return not naming or any(self._visible(entry) for entry in naming)

    def _prompt_visible(self, server: str, name: str) -> bool:
        return self.profile is None or self.profile.allows_prompt(server, name)

    # --- the catalog's read API, filtered ----------------------------------------------------------

    @property
    def servers(self) -> list[str]:
        """The listed servers this caller may use."""
        return [server for server in self.catalog.servers if self.may_use_server(server)]

    def tool_entries(self) -> list[ToolEntry]:
        entries = self.catalog.tool_entries()
        return entries if self.unrestricted else [entry for entry in entries if self._visible(entry)]

    def tools(self) -> list[types.Tool]:
        if self.unrestricted:
            return self.catalog.tools()
        return [entry.exposed for entry in self.tool_entries()]

    def entry(self, name: str) -> ToolEntry | None:
        entry = self.catalog.entry(name)
        return entry if entry is not None and (self.unrestricted or self._visible(entry)) else None

    def has_tool(self, name: str) -> bool:
        return self.entry(name) is not None

    def model_entry(self, name: str) -> ToolEntry | None:
        """`entry`, never a tool for its app only: what a tool the model calls tools through (proxy's `call`,
        retrieve's `call_tool`) may reach. An app calls its tools with `tools/call`, never through those, and a
        tool for its app only is not the model's (MCP Apps): before, either reached one by its name."""
        entry = self.entry(name)
        return None if entry is None or for_app_only(entry.original.meta) else entry

    def tool(self, name: str) -> ToolEntry:
        return self._found(name, self.entry(name))

    def model_tool(self, name: str) -> ToolEntry:
        """`tool`, never one for its app only (`model_entry`): that is unknown, in the words a missing one gets."""
        return self._found(name, self.model_entry(name))

    def _found(self, name: str, entry: ToolEntry | None) -> ToolEntry:
        if entry is None:
            self.report_miss(name)
            known = [entry.name for entry in self.tool_entries()]
            raise NotFound(f"unknown tool {quoted(name)}{for_profile(self.profile_name)}{did_you_mean(name, known)}")
        return entry

    def report_miss(self, name: str) -> None:
        """A tool the caller asked for by `name` (exposed or original) is not visible to it: tell
        `on_hidden` (the audit records the refusal), the same way whether one by that name exists or not.
        Answers nothing to the caller."""
        if self._on_hidden is None or self.unrestricted:
            return
        entry = self.catalog.entry(name)
        # The same work either way: every entry is looked at, found by its exposed name or not.
        by_original = [e for e in self.catalog.tool_entries() if e.original.name == name]
        candidates = [entry, *by_original] if entry is not None else by_original
        if any(self._visible(found) for found in candidates):
            return  # visible under that name (elsewhere): not a refusal
        if candidates:
            found = candidates[0]
            self._on_hidden("tool", found.server, found.original.name, found.name)
        else:
            self.may_use_tool("", name, name)  # the check a hidden one took, for the same work
            self._on_hidden("tool", "", name, name)

    def route_tool(self, name: str) -> Route:
        entry = self.tool(name)
        return Route(entry.server, entry.original.name)

    def resources(self) -> list[types.Resource]:
        if self.unrestricted:
            return self.catalog.resources()
        return [r for r in self.catalog.resources() if self._resource_visible(self._resource_server(r.uri), r.uri)]

    def templates(self) -> list[types.ResourceTemplate]:
        if self.unrestricted:
            return self.catalog.templates()
        return [
            t
            for t in self.catalog.templates()
            if self._resource_visible(self._resource_server(t.uri_template), t.uri_template)
        ]

    def _resource_server(self, uri: str) -> str:
        try:
            return self.catalog.route_resource(uri).server
        except NotFound:
            return ""

    def route_resource(self, uri: str) -> Route:
        if self.profile is not None and not plainly_named(self.catalog, uri):
            # Whether or not it exists: the spelling alone is refused, saying why.
            raise InvalidRequest(
                f"resource URI {quoted(uri, LONGEST_URI)} has {respelled(uri)}: a server may read it as another "
                "resource than the one this profile's resource globs judged; name it without that"
            )
        try:
            route = self.catalog.route_resource(uri)
        except NotFound:
            if self._on_hidden is not None and not self.unrestricted:
                self._on_hidden("resource", "", uri, uri)  # recorded as a hidden one is
            raise self._unknown_resource(uri) from None
        if not self._resource_visible(route.server, uri):
            if self._on_hidden is not None:
                self._on_hidden("resource", route.server, route.original, uri)
            raise self._unknown_resource(uri)
        return route

    def has_resource(self, uri: str) -> bool:
        """Whether `uri` reaches a resource this caller may read (asks quietly: no refusal is recorded)."""
        try:
            route = self.catalog.route_resource(uri)
        except NotFound:
            return False
        return self._resource_visible(route.server, uri)

    def _unknown_resource(self, uri: str) -> NotFound:
        if self.profile is None:
            return unknown_resource(uri)
        return NotFound(f"unknown resource {quoted(uri, LONGEST_URI)}{for_profile(self.profile_name)}")

    def prompts(self) -> list[types.Prompt]:
        if self.profile is None:
            return self.catalog.prompts()
        return [
            p for p in self.catalog.prompts() if self._prompt_visible(self.catalog.route_prompt(p.name).server, p.name)
        ]

    def route_prompt(self, name: str) -> Route:
        try:
            route = self.catalog.route_prompt(name)
        except NotFound:
            route = None
        if route is None or not self._prompt_visible(route.server, name):
            if self._on_hidden is not None and not self.unrestricted:  # hidden or missing: recorded alike
                self._on_hidden("prompt", route.server if route else "", route.original if route else name, name)
            known = [prompt.name for prompt in self.prompts()]
            raise NotFound(f"unknown prompt {quoted(name)}{for_profile(self.profile_name)}{did_you_mean(name, known)}")
        return route

    def has_prompt(self, name: str) -> bool:
        """Whether `name` is a prompt this caller may get (asks quietly: no refusal is recorded)."""
        try:
            route = self.catalog.route_prompt(name)
        except NotFound:
            return False
        return self._prompt_visible(route.server, name)

    def prompt(self, name: str) -> types.Prompt:
        self.route_prompt(name)
        return self.catalog.prompt(name)

    def exposed_uri(self, server: str, original_uri: str) -> str:
        return self.catalog.exposed_uri(server, original_uri)

    # --- search -----------------------------------------------------------------------------------

    async def search(self, query: str, *, limit: int, server: str | None = None) -> list[Match]:
        """The tools this caller may use, ranked for `query`: the limit counts only those."""
        if server is not None and not self.may_use_server(server):
            return []
        # A set made here on the event loop: the ranking runs in a worker thread.
        allowed = None if self.unrestricted else {entry.name for entry in self.tool_entries()}.__contains__
        matches = await self._search(query, limit, server, allowed, self.catalog)
        # Judged again as the search ends: a tool quarantined while it ran (its server changed it) was answered with
        # the definition no one approved, which is what quarantine keeps from the model.
        return [match for match in matches if not self._blocked_now(match.entry.server, match.entry.original.name)]

    # --- a hub instance's lists ----------------------------------------------------------------------

    def listing(
        self,
        server: str,
        listing: Listing,
        original: Callable[[str], str] = str,
        original_prompt: Callable[[str], str] = str,
    ) -> Listing:
        """What the caller may see of a backend listed outside the catalog (a hub instance): the profile judges
        the names shown (and, for a configured server, the names the catalog shows), the pins the backend's own
        (`original` and `original_prompt` map a shown tool or prompt name to the backend's)."""
        if self.unrestricted:
            return listing
        if not self.may_use_server(server):
            return Listing()
        profile = self.profile

        def listed(kind: str, shown: str, own: str, as_listed: bool = False) -> bool:  # by the catalog's name too
            return profile is None or allowed_as_listed(profile, self.catalog, kind, server, own, shown, as_listed)

        # `_app_usable` by the backend's own tools (a discovered instance is in no catalog): the apps they name, each
        # usable when one of its tools is (once per listing, not per resource).
        apps: dict[str, bool] = {}
        for tool in listing.tools:
            usable = self.may_use_tool(server, tool.name, original(tool.name))
            for uri in app_uris(tool.meta):
                apps[uri] = apps.get(uri, False) or usable

        def app_usable(uri: str) -> bool:
            return apps.get(uri, True)

        return replace(
            listing,
            tools=[
                tool
                for tool in listing.tools
                if self.may_use_tool(server, tool.name, original(tool.name))
                and listed("tool", tool.name, original(tool.name))
            ],
            resources=[
                r
                for r in listing.resources
                # Listed by its backend: taken as listed, however spelled (the globs still judge it); an app only
                # while a tool naming it may be used, in the catalog and in the backend's own listing.
                if self._app_usable(r.uri)
                and app_usable(r.uri)
                and (profile is None or profile.allows_resource(server, r.uri))
                and listed("resource", r.uri, r.uri, True)
            ],
            templates=[
                t
                for t in listing.templates
                if self._resource_visible(server, t.uri_template) and listed("resource", t.uri_template, t.uri_template)
            ],
            prompts=[
                p
                for p in listing.prompts
                if self._prompt_visible(server, p.name) and listed("prompt", p.name, original_prompt(p.name))
            ],
        )
