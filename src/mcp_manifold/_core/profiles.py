"""Profiles: what a client may see and use, and which profile a principal holds.

A profile names servers, tools, resources and prompts by globs (fnmatch, case-sensitive; `!glob`
takes away what the others allowed) and, optionally, the surfaces its holder may use. Tool and
prompt globs match the names the gateway exposes (`git_status`), resource globs the exposed URIs
(`git+file:///README.md`); a hub instance's items are matched by the names the hub shows. Plain
code, no I/O: the config builds profiles, the front says who is calling, the gateway asks here.

What a caller may not use, it cannot see either: listings, search and the call path all ask the
same `Profile`, and a refusal reads like an unknown name (it names the profile, never what exists).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from mcp_manifold._core.suggestions import quoted
from mcp_manifold._errors import NotFound

EVERYTHING = ("*",)
CLAIM_PREFIX = "claim:"
# A token's principal is `oauth:<its principal claim>`, so that no token subject can be an API key's principal.
TOKEN_PRINCIPAL_PREFIX = "oauth:"
# The claims whose string is a space-separated list (OAuth scopes, RFC 8693 §4.2; `scp` is Entra ID's).
SCOPE_CLAIMS = frozenset({"scope", "scp"})


def token_principal(claim: str) -> str:
    """The principal an OAuth token names: its claim's value in the token name space (`oauth:alice`)."""
    return TOKEN_PRINCIPAL_PREFIX + claim


def matches(globs: Sequence[str], value: str) -> bool:
    """Whether `value` passes `globs`: it matches a plain glob (or there are only `!` globs) and no `!glob`.

    An empty list allows nothing, so `tools: []` means no tools (not all of them).
    """
    if not globs:
        return False
    positive = [glob for glob in globs if not glob.startswith("!")]
    if positive and not any(fnmatchcase(value, glob) for glob in positive):
        return False
    return not any(fnmatchcase(value, glob[1:]) for glob in globs if glob.startswith("!"))


@dataclass(frozen=True)
class Profile:
    """What its holder may see and use; `surfaces` None means every exposed surface."""

    name: str
    servers: tuple[str, ...] = EVERYTHING
    tools: tuple[str, ...] = EVERYTHING
    resources: tuple[str, ...] = EVERYTHING
    prompts: tuple[str, ...] = EVERYTHING
    surfaces: tuple[str, ...] | None = None
    principals: tuple[str, ...] = ()  # who holds it: principal globs and `claim:NAME=VALUE`

    def allows_server(self, server: str) -> bool:
        return matches(self.servers, server)

    def allows_tool(self, server: str, name: str) -> bool:
        return matches(self.servers, server) and matches(self.tools, name)

    def allows_resource(self, server: str, uri: str) -> bool:
        return matches(self.servers, server) and matches(self.resources, uri)

    def allows_prompt(self, server: str, name: str) -> bool:
        return matches(self.servers, server) and matches(self.prompts, name)

    def allows_item(self, kind: str, server: str, name: str) -> bool:
        """`allows_tool`, `allows_resource` or `allows_prompt`, by `kind` ("tool", "resource" or "prompt")."""
        globs = self.tools if kind == "tool" else self.resources if kind == "resource" else self.prompts
        return matches(self.servers, server) and matches(globs, name)

    def allows_surface(self, surface: str) -> bool:
        return self.surfaces is None or surface in self.surfaces

    def held_by(self, principal: str, claims: Mapping[str, Any] | None = None) -> bool:
        """Whether `principal` (with its token's `claims`, if any) holds this profile."""
        return any(principal_matches(matcher, principal, claims or {}) for matcher in self.principals)


def unmatched_tool_globs(profile: Profile, names: Iterable[str]) -> list[str]:
    """The profile's `tools` entries (or `!entries`) that match none of `names`, the tools its servers list:
    a typo there (`numbers_ad`) silently hides the tool. For `manifold tools`, which lists them anyway."""
    listed = list(names)
    return [entry for entry in profile.tools if not any(fnmatchcase(name, entry.removeprefix("!")) for name in listed)]


def principal_matches(matcher: str, principal: str, claims: Mapping[str, Any]) -> bool:
    """`alice`, `*@example.com` (globs on the principal) or `claim:groups=admins` (a claim's value,
    or one of its values when the claim is a list, or one of its scopes when it is `scope` or `scp`)."""
    if not matcher.startswith(CLAIM_PREFIX):
        return fnmatchcase(principal, matcher)
    name, _, wanted = matcher[len(CLAIM_PREFIX) :].partition("=")
    value = claims.get(name)
    if isinstance(value, list | tuple):
        return any(_claim_text(item) == wanted for item in value)
    if isinstance(value, str):
        # Only a scope claim is a list of words: any string was split, so a `title` of "not an admin" (a claim
        # users may write themselves) held the profile of `claim:title=admin`.
        return value == wanted or (name in SCOPE_CLAIMS and wanted in value.split())
    return _claim_text(value) == wanted


def _claim_text(value: Any) -> str | None:
    """A claim's value as a `claim:NAME=VALUE` matcher writes it: a string as it is, a boolean or a number as
    JSON (the token's own spelling) writes it, `true`, `42`; an object or a list in a list is no one value and
    matches nothing. Python's spelling was used: `claim:admin=true` never matched `"admin": true`, and an object
    matched its Python repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def claim_matcher_problem(matcher: str) -> str | None:
    """What is wrong with a `claim:` matcher, or None."""
    if not matcher.startswith(CLAIM_PREFIX):
        return None
    name, equals, wanted = matcher[len(CLAIM_PREFIX) :].partition("=")
    if not name or not equals or not wanted:
        return f"{matcher!r} must look like 'claim:NAME=VALUE' (for example 'claim:groups=admins')"
    return None


def profile_for(profiles: Iterable[Profile], principal: str, claims: Mapping[str, Any] | None = None) -> Profile | None:
    """The first profile (in config order) that `principal` holds, or None."""
    return next((profile for profile in profiles if profile.held_by(principal, claims)), None)


def for_profile(profile: str | None) -> str:
    """` for profile 'dev'`, to name the caller's profile in an error (empty without one)."""
    return f" for profile {profile!r}" if profile else ""


def not_available(kind: str, name: str, profile: str | None) -> NotFound:
    """The refusal of something the caller may not use: worded exactly like an unknown name."""
    return NotFound(f"unknown {kind} {quoted(name)}{for_profile(profile)}")
