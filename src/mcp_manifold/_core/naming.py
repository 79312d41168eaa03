"""Exposed names for tools, prompts and resources: valid, collision-free, deterministic, reversible.

Tool and prompt names become `{prefix}{separator}{name}`, except that a name which already starts
with `{prefix}{separator}` keeps it once (`git_status` of server `git` stays `git_status`: many servers
prefix their own tools, and a doubled prefix only wastes the 64 characters). Clients and LLM APIs only accept
`^[a-zA-Z0-9_-]{1,64}$`, so invalid characters become `_`, and a name that is too long or that
clashes with another becomes a shortened form ending in `_` + a hash of its owner and original
name. Every member of a clashing group is shortened, so the result does not depend on the order
in which backends come up. The reverse direction is the assignment map itself: the catalog keeps
exposed -> (server, original).

Resource URIs become `{prefix}+{original_uri}`: reading `git+file:///repo/README` goes to server
`git` as `file:///repo/README`. Prefixes never contain `+`, so the first `+` splits them back.
When the original URI has a scheme, the result is still a valid URI (`git+file` is a valid scheme
when the prefix is letters, digits, `-` or `.`).

An MCP Apps resource (`ui://...`) keeps its scheme, since hosts render only `ui://` resources: the prefix
goes inside it, `ui://clock/app.html` of server `apps` becomes `ui://apps+clock/app.html`.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NAME_LENGTH = 64
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LENGTHS = (6, 10, 16)
URI_SEPARATOR = "+"
UI_SCHEME = "ui://"


def sanitize(text: str) -> str:
    """Replace every character outside `[a-zA-Z0-9_-]` with `_` (an empty string becomes `_`)."""
    return _INVALID_CHARS.sub("_", text) or "_"


def sanitize_prefix(prefix: str) -> str:
    """A prefix is sanitized like a name; `+` can never survive, which keeps URIs reversible."""
    return sanitize(prefix)


def _short_hash(prefix: str, name: str, length: int) -> str:
    return hashlib.sha256(f"{prefix}\0{name}".encode()).hexdigest()[:length]


def _shortened(candidate: str, prefix: str, name: str, length: int) -> str:
    suffix = "_" + _short_hash(prefix, name, length)
    return candidate[: MAX_NAME_LENGTH - len(suffix)] + suffix


def join_name(prefix: str, separator: str, name: str) -> str:
    """The natural (unshortened, sanitized) exposed name; empty prefix means no namespace, and a name
    that already starts with the prefix and separator is not prefixed again."""
    if not prefix:
        return sanitize(name)
    namespace = f"{sanitize_prefix(prefix)}{separator}"
    cleaned = sanitize(name)
    return cleaned if cleaned.startswith(namespace) else namespace + cleaned


def assign_names(
    owners: Iterable[tuple[str, str]], separator: str = "_", reserved: Iterable[str] = ()
) -> dict[tuple[str, str], str]:
    """Map each (prefix, original name) to a unique valid exposed name.

    `reserved` names (the gateway's own tools) are never handed out, so they win any clash.
    """
    unique_owners = sorted(set(owners))
    taken = set(reserved)
    natural = {owner: join_name(owner[0], separator, owner[1]) for owner in unique_owners}
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for owner, candidate in natural.items():
        groups[candidate].append(owner)

    result: dict[tuple[str, str], str] = {}
    for candidate, members in groups.items():
        if len(members) == 1 and len(candidate) <= MAX_NAME_LENGTH and candidate not in taken:
            result[members[0]] = candidate
    taken.update(result.values())
    # Shorten the rest; lengthen the hash in the (astronomically rare) case it still clashes.
    for owner in unique_owners:
        if owner in result:
            continue
        for length in _HASH_LENGTHS:
            name = _shortened(natural[owner], owner[0], owner[1], length)
            if name not in taken:
                break
        else:  # pragma: no cover - would need a sha256 collision on 16 hex digits
            raise RuntimeError(f"cannot assign a unique name to {owner!r}")
        result[owner] = name
        taken.add(name)
    return result


def namespace_uri(prefix: str, uri: str) -> str:
    """The exposed form of a resource URI or URI template."""
    if not prefix:
        return uri
    if uri.startswith(UI_SCHEME):
        return f"{UI_SCHEME}{sanitize_prefix(prefix)}{URI_SEPARATOR}{uri.removeprefix(UI_SCHEME)}"
    return f"{sanitize_prefix(prefix)}{URI_SEPARATOR}{uri}"


def split_uri(exposed: str) -> tuple[str, str] | None:
    """Split an exposed URI into (prefix, original URI), or None if it carries no prefix."""
    if exposed.startswith(UI_SCHEME):
        prefix, sep, rest = exposed.removeprefix(UI_SCHEME).partition(URI_SEPARATOR)
        if not sep or not prefix or not NAME_PATTERN.match(prefix):
            return None
        return prefix, UI_SCHEME + rest
    prefix, sep, rest = exposed.partition(URI_SEPARATOR)
    if not sep or not prefix or not NAME_PATTERN.match(prefix):
        return None
    return prefix, rest
