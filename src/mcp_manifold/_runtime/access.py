"""Who may see and use what: the caller's profile, quarantined tools and per-principal limits.

One object answers both questions the gateway asks: "what may this caller see?" (a `CatalogView`
per request, which every surface lists, routes and searches through) and "may this call go
ahead?" (the call path's policy step, `admit` / `release`). Both read the same profile and the
same pins, so what a caller cannot see it cannot call, on any surface or lane.
"""

from __future__ import annotations

from collections.abc import Callable

import mcp_types as types

from mcp_manifold._config import Config
from mcp_manifold._core.catalog import Catalog, Kind
from mcp_manifold._core.catalog_view import CatalogView, Search, allowed_as_listed, resource_allowed
from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._core.limits import Limits
from mcp_manifold._core.pins import app_definition
from mcp_manifold._core.profiles import Profile, not_available, profile_for
from mcp_manifold._core.router import Target
from mcp_manifold._errors import ManifoldError, Quarantined
from mcp_manifold._runtime.call_path import CallKind
from mcp_manifold._runtime.pin_store import PinStore

Refused = Callable[[Request, CallKind, Target, ManifoldError], None]


def nothing(name: str) -> Profile:
    """What a caller whose profile is not (or no longer) defined may use: nothing, so a removed profile fails closed."""
    return Profile(name, servers=(), tools=(), resources=(), prompts=(), surfaces=())


def quarantined(target: Target) -> Quarantined:
    return Quarantined(
        f"tool {target.exposed!r} is quarantined: server {target.server!r} changed its definition since it was "
        f"approved (or added it since its tools were pinned); an operator can review it with "
        f"`manifold pins diff {target.server}/{target.name}` and `manifold pins approve`"
    )


def quarantined_app(target: Target) -> Quarantined:
    return Quarantined(
        f"app {target.exposed!r} is quarantined: server {target.server!r} changed it since it was approved (or has "
        f"pin_max_tools pins, none of them this app's); an operator can review it with "
        f"`manifold pins diff {target.server}/{target.name}` and `manifold pins approve`"
    )


class Access:
    """Profiles, pins and limits for one gateway; `config` is read on each request, so a reload applies at once."""

    def __init__(
        self,
        config: Callable[[], Config],
        catalog: Catalog,
        pins: PinStore,
        limits: Limits,
        search: Search,
    ) -> None:
        self._config = config
        self.catalog = catalog
        self.pins = pins
        self.limits = limits
        # Shared limits (several replicas) are a round trip away: the call path awaits `acquire` after `admit`.
        self.waits = limits.active and limits.waits
        self._search = search
        self.refused: Refused | None = None  # the call path's, to record refusals found outside it

    # --- who the caller is ------------------------------------------------------------------------

    def profile(self, caller: Caller) -> Profile | None:
        """The caller's profile; None: it may use everything."""
        name = caller.profile
        config = self._config()
        if name is None:
            # An authenticated principal only lacks a profile when none are configured (the front
            # refuses it otherwise); a client that did not authenticate gets the `profile` setting.
            name = config.settings.profile if caller.principal is None else None
            if name is None:
                return None
        return config.profiles.get(name) or nothing(name)

    def profile_name(self, request: Request) -> str | None:
        profile = self.profile(request.caller)
        return profile.name if profile is not None else None

    def holds_profile(self, caller: Caller) -> bool:
        """Whether an authenticated caller's principal still holds the profile its session was opened with,
        and the API key it came with (if it came with one) is still configured for it, or its token is not
        revoked.

        A reload may give it another profile, or none, or take its key away: the front then refuses the
        session's requests, and what servers send unasked (`may_see_server`, `may_read_resource`) must not
        reach it either, though its old profile may still exist and allow it. A code-mode program asks
        here before each call: before, one whose key was removed went on calling tools to its end."""
        if caller.principal is None:
            return True
        config = self._config()
        if not config.auth.still_accepts(caller.principal, caller.claims, caller.key_digest):
            return False
        profiles = config.profiles
        held = profile_for(profiles.values(), caller.principal, caller.claims) if profiles else None
        return (held.name if held is not None else None) == caller.profile

    def may_see_server(self, caller: Caller, server: str) -> bool:
        """Whether the caller's profile lets it see `server` at all (for what a server sends unasked)."""
        profile = self.profile(caller)
        return (profile is None or profile.allows_server(server)) and self.holds_profile(caller)

    def may_read_resource(self, caller: Caller, server: str, uri: str) -> bool:
        """Whether the caller's profile lets it read resource `uri` (exposed) of `server`, for its updates: a
        subscription outlives a reload that takes the resource away."""
        profile = self.profile(caller)
        allowed = profile is None or resource_allowed(profile, self.catalog, server, uri)
        return allowed and self.holds_profile(caller)

    def may_see_item(self, caller: Caller, kind: Kind, server: str, name: str) -> bool:
        """Whether the caller's profile lets it see the item `name` (exposed) of a `kind` list, for the
        `list_changed` that a change of it causes."""
        profile = self.profile(caller)
        if profile is None:
            return True
        if kind == "resources":
            allowed = resource_allowed(profile, self.catalog, server, name)
        else:
            allowed = profile.allows_item("tool" if kind == "tools" else "prompt", server, name)
        return allowed and self.holds_profile(caller)

    def allows_surface(self, request: Request, surface: str) -> bool:
        profile = self.profile(request.caller)
        return profile is None or profile.allows_surface(surface)

    # --- what it may see --------------------------------------------------------------------------

    def view(self, request: Request, catalog: Catalog | None = None) -> CatalogView:
        """What the caller may see of `catalog` (default: the shared one; a client with sessions of its own
        has its own, `Gateway.catalog_for`)."""
        profile = self.profile(request.caller)
        blocked = self.pins.blocked if self.pins.any_blocked else None

        def hidden(kind: str, server: str, original: str, exposed: str) -> None:
            # A missing name (no server) is refused as a hidden one is: the same record, the same work.
            target = Target(server, original, exposed, "")
            try:
                self._check(profile, kind, target)  # type: ignore[arg-type]
                if not server:  # nothing by that name: the check above is done for the same work
                    raise not_available(kind, exposed, profile.name if profile is not None else None)
            except ManifoldError as exc:
                if self.refused is not None:
                    self.refused(request, kind, target, exc)  # type: ignore[arg-type]

        return CatalogView(catalog or self.catalog, profile, self._search, blocked, hidden, self.pins.blocked)

    # --- what it may call (CallPolicy) ------------------------------------------------------------

    def admit(self, request: Request, kind: CallKind, target: Target) -> None:
        self._check(self.profile(request.caller), kind, target)
        if self.limits.active and not self.waits:
            self.limits.acquire(request.caller.principal)

    async def acquire(self, request: Request) -> None:
        """The limits' part of `admit` when they are shared (`waits`)."""
        await self.limits.acquire(request.caller.principal)  # type: ignore[misc]

    def release(self, request: Request) -> None:
        if self.limits.active:
            self.limits.release(request.caller.principal)

    async def settle(self, request: Request) -> None:
        """After `release` when the limits are shared (`waits`), before the call's answer goes out."""
        await self.limits.settle(request.caller.principal)  # type: ignore[attr-defined]

    def _check(self, profile: Profile | None, kind: CallKind, target: Target) -> None:
        if profile is not None and not (
            self._allows(profile, kind, target)
            and (kind not in ("tool", "resource", "prompt") or self._allows_as_listed(profile, kind, target))
        ):
            raise not_available(kind, target.exposed, profile.name)
        if kind == "tool" and self.pins.blocked(target.server, target.name):
            raise quarantined(target)

    def judge_app(self, target: Target, result: types.ReadResourceResult) -> None:
        """An MCP App's contents as its server served them now: pinned on first read, refused (`Quarantined`)
        under `pinning: enforce` when they differ from the approved ones."""
        if self.pins.observe_app(target.server, target.name, app_definition(target.name, list(result.contents))):
            raise quarantined_app(target)

    def _allows_as_listed(self, profile: Profile, kind: CallKind, target: Target) -> bool:
        # A hub call of a configured server's item names it as the server does: judged by the catalog's name too
        # (and the app of a tool it may not use is not its to read).
        return allowed_as_listed(
            profile, self.catalog, kind, target.server, target.name, target.exposed, as_listed=target.listed
        )

    @staticmethod
    def _allows(profile: Profile, kind: CallKind, target: Target) -> bool:
        if target.surface and not profile.allows_surface(target.surface):
            return False
        if kind == "tool":
            return profile.allows_tool(target.server, target.exposed)
        if kind == "resource":
            return profile.allows_resource(target.server, target.exposed)
        if kind == "prompt":
            return profile.allows_prompt(target.server, target.exposed)
        if kind == "action":  # a surface's own work: the surface is what the profile names
            return True
        # The call path checks a completion as the prompt or resource template it names; without that
        # knowledge, only a caller allowed both kinds of names passes.
        return profile.allows_prompt(target.server, target.exposed) and profile.allows_resource(
            target.server, target.exposed
        )
