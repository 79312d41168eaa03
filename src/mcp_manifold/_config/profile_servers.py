"""Profile `servers` entries that match no configured server: a warning, not a config problem.

A typo there (`servers: [numbrs]`) fails closed, which is right, but silently: the profile's holders see
no tools at all, `manifold tools --profile` lists none, and `config check` said OK. The hub's instances
are found at run time, so with `hub` exposed an entry may still name one: the warning says so.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from mcp_manifold._config.model import Config
from mcp_manifold._core.suggestions import did_you_mean


def profile_server_warnings(config: Config) -> list[str]:
    """One line for each profile `servers` entry (or `!entry`) that matches no server of the config."""
    names = list(config.servers)
    warnings = []
    for profile in config.profiles.values():
        for entry in profile.servers:
            glob = entry.removeprefix("!")
            if any(fnmatchcase(name, glob) for name in names):
                continue
            line = f"profile {profile.name!r}, field 'servers': {entry!r} matches no configured server"
            if "hub" in config.settings.expose:
                line += " (a hub instance's id may still match it)"
            line += did_you_mean(glob, names) or f"; the servers are {', '.join(names) or 'none'}"
            warnings.append(line)
    return warnings
