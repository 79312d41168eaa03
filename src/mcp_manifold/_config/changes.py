"""What a config reload changes: which servers start, stop, restart or only take new options, which
settings apply at once or wait for a restart, and whether the `profiles` section or the `auth` section
changed. Both apply at once, but `auth` waits for a restart when authentication is switched on or off,
or when what the gateway advertises to OAuth clients (its issuer, resource URL and scopes, served as
protected-resource metadata since start) changes: those shape the HTTP front's routes. Its API keys
and operators apply at once even then (`auth_after`): a key taken out of the config is revoked.

Plain comparison of two checked configs, no I/O; the runtime (`_runtime/reload.py`) applies it. A
server restarts only when its entry reaches another server (`identity()`: command, args, env, cwd,
URL, headers, transport) or is enabled or disabled; any other change of its entry (prefix, tool
filter, timeout, concurrency, caching, laziness) keeps its process and session.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from mcp_manifold._config.model import AuthConfig, Config, ServerConfig
from mcp_manifold._config.settings import LIVE_SETTINGS


@dataclass(frozen=True)
class ConfigChanges:
    """The difference between the running config and a newly loaded one."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()  # reaches another server now, or enabled / disabled
    reconfigured: tuple[str, ...] = ()  # same server, other options
    settings: tuple[tuple[str, Any, Any], ...] = ()  # (name, old, new) that apply at once
    needs_restart: tuple[tuple[str, Any, Any], ...] = ()  # (name, running, in the file) that cannot change live
    sections: tuple[str, ...] = ()  # "profiles" (what each client may use), "auth" (who may connect): at once
    sections_need_restart: tuple[str, ...] = ()  # "auth" when it cannot change live: kept whole until a restart

    @property
    def empty(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.restarted
            or self.reconfigured
            or self.settings
            or self.needs_restart
            or self.sections
            or self.sections_need_restart
        )

    def summary(self) -> str:
        """One line for the log: what changed, by kind."""
        parts = [
            f"{label} {', '.join(names)}"
            for label, names in (
                ("added", self.added),
                ("removed", self.removed),
                ("restarted", self.restarted),
                ("reconfigured", self.reconfigured),
                ("settings", tuple(name for name, _old, _new in self.settings)),
                ("sections", self.sections),
            )
            if names
        ]
        return "; ".join(parts) or "nothing to change"

    def as_dict(self) -> dict[str, Any]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "restarted": list(self.restarted),
            "reconfigured": list(self.reconfigured),
            "settings": [name for name, _old, _new in self.settings],
            "needs_restart": [name for name, _old, _new in self.needs_restart] + list(self.sections_need_restart),
            "sections": list(self.sections),
        }


def _restarts(old: ServerConfig, new: ServerConfig) -> bool:
    return old.identity() != new.identity() or old.enabled != new.enabled


def _auth_shapes_the_front(auth: AuthConfig) -> tuple[Any, ...]:
    """What of `auth` the HTTP front is built with: whether it checks at all, and the OAuth metadata it serves."""
    oauth = auth.oauth
    advertised = None if oauth is None else (oauth.issuer, oauth.resource_url, oauth.required_scopes)
    return auth.enabled, advertised


def auth_after(running: AuthConfig, loaded: AuthConfig) -> AuthConfig:
    """The `auth` a gateway running `running` serves once a reload has read `loaded`.

    When the front's shape changes (a restart is needed), its running OAuth settings stay, but the loaded
    API keys and operators apply, as they are checked at each request: a key taken out is refused from the
    next request on, even in an edit that switches authentication off (every credential is refused until
    the restart) or changes the OAuth metadata. Before, the running `auth` stayed whole and a revoked key
    went on working until a restart. (A front started without authentication checks none until then.)"""
    if _auth_shapes_the_front(running) == _auth_shapes_the_front(loaded):
        return loaded
    return replace(running, api_keys=loaded.api_keys, operators=loaded.operators, revoked=loaded.revoked)


def diff_configs(running: Config, loaded: Config) -> ConfigChanges:
    """What applying `loaded` to a gateway running `running` does (see the module docstring)."""
    before, after = running.servers, loaded.servers
    common = [name for name in after if name in before]
    settings: list[tuple[str, Any, Any]] = []
    needs_restart: list[tuple[str, Any, Any]] = []
    for field in fields(running.settings):
        old, new = getattr(running.settings, field.name), getattr(loaded.settings, field.name)
        if old != new:
            (settings if field.name in LIVE_SETTINGS else needs_restart).append((field.name, old, new))
    auth_changed = running.auth != loaded.auth
    auth_live = auth_changed and _auth_shapes_the_front(running.auth) == _auth_shapes_the_front(loaded.auth)
    return ConfigChanges(
        added=tuple(name for name in after if name not in before),
        removed=tuple(name for name in before if name not in after),
        restarted=tuple(name for name in common if _restarts(before[name], after[name])),
        reconfigured=tuple(
            name for name in common if not _restarts(before[name], after[name]) and before[name] != after[name]
        ),
        settings=tuple(settings),
        needs_restart=tuple(needs_restart),
        sections=(*(("profiles",) if running.profiles != loaded.profiles else ()), *(("auth",) if auth_live else ())),
        sections_need_restart=("auth",) if auth_changed and not auth_live else (),
    )
