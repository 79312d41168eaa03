"""Principal names that match nobody: a warning, not a config problem.

Since token principals became `oauth:<claim>` (so that a token whose `sub` is an API key's name never
gets that key's profile), a profile's or `auth.operators`' entry written for a token's bare subject
matches no one. That fails closed (the holder is refused), but silently: `config check` says so. So it
does of an entry that names no API key when keys are the only credential (a typo, a key not added yet),
a `claim:` matcher without OAuth, and principals named where no client authenticates at all: there a
newcomer's `principals: [alice]` restricted no one, as every client got everything.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from mcp_manifold._config.model import Config
from mcp_manifold._core.suggestions import did_you_mean

TOKEN_PREFIX = "oauth:"


def principal_warnings(config: Config) -> list[str]:
    """One line for each principal entry that can match neither an API key nor a token's principal."""
    auth = config.auth
    places = [(f"profile {name!r}", profile.principals) for name, profile in config.profiles.items()]
    places.append(("auth.operators", auth.operators))
    if not auth.enabled:
        return [
            f"{place} names principals, but no client authenticates (auth has no api_keys or oauth): none holds it "
            "by principal. Without auth, `profile` (or a /mcp/p/<profile> URL) gives clients a profile"
            for place, entries in places
            if entries
        ]
    if auth.oauth is None:
        return _key_only_warnings(places, [key.principal for key in auth.api_keys])
    keys = {key.principal for key in auth.api_keys}
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


def _key_only_warnings(places: list[tuple[str, tuple[str, ...]]], keys: list[str]) -> list[str]:
    """With API keys and no OAuth, every principal is a key's name, and no key carries claims."""
    warnings = []
    for place, entries in places:
        for entry in entries:
            if entry.startswith("claim:"):
                warnings.append(f"{place} names {entry!r}, but only tokens carry claims and no oauth is configured")
            elif not any(fnmatchcase(key, entry) for key in keys):
                known = did_you_mean(entry, keys) or f" (keys: {', '.join(keys)})"
                warnings.append(f"{place} names principal {entry!r}, which is no API key's{known}")
    return warnings


def _may_name_a_token(entry: str) -> bool:
    """Whether the glob `entry` can match some `oauth:...` principal: its literal start (before the first
    wildcard) and the prefix agree as far as both go ("*@example.com", "oauth:alice", "oa*")."""
    cut = min((entry.index(mark) for mark in "*?[" if mark in entry), default=len(entry))
    start = entry[:cut]
    return TOKEN_PREFIX.startswith(start) or start.startswith(TOKEN_PREFIX)
