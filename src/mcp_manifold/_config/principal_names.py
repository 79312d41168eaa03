"""Principal names that match nobody: a warning, not a config problem.

Since token principals became `oauth:<claim>` (so that a token whose `sub` is an API key's name never
gets that key's profile), a profile's or `auth.operators`' entry written for a token's bare subject
matches no one. That fails closed (the holder is refused), but silently: `config check` says so.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from mcp_manifold._config.model import Config

TOKEN_PREFIX = "oauth:"


def principal_warnings(config: Config) -> list[str]:
    """One line for each principal entry that can match neither an API key nor a token's principal."""
    auth = config.auth
    if auth.oauth is None:
        return []  # without tokens every principal is an API key's, and those are checked as problems
    keys = {key.principal for key in auth.api_keys}
    places = [(f"profile {name!r}", profile.principals) for name, profile in config.profiles.items()]
    places.append(("auth.operators", auth.operators))
    warnings = []
    for place, entries in places:
        for entry in entries:
            if entry.startswith("claim:") or _may_name_a_token(entry) or any(fnmatchcase(k, entry) for k in keys):
                continue
            warnings.append(
                f"{place} names principal {entry!r}, which is no API key's and no token's (a token's principal "
                f"is '{TOKEN_PREFIX}<{auth.oauth.principal_claim}>'): did you mean '{TOKEN_PREFIX}{entry}'?"
            )
    return warnings


def _may_name_a_token(entry: str) -> bool:
    """Whether the glob `entry` can match some `oauth:...` principal: its literal start (before the first
    wildcard) and the prefix agree as far as both go ("*@example.com", "oauth:alice", "oa*")."""
    cut = min((entry.index(mark) for mark in "*?[" if mark in entry), default=len(entry))
    start = entry[:cut]
    return TOKEN_PREFIX.startswith(start) or start.startswith(TOKEN_PREFIX)
