"""Resource URIs spelled so that a server may read them as another URI, which a profile's globs cannot judge.

A profile's resource globs match the URI as the client sent it (`!file:///secret/*`), but many servers
normalise what they are asked for before they look it up: they resolve `..`, decode `%2e` and `%73`, ignore
the case of the scheme and of a web host, collapse `//`, drop a `#fragment`. `file:///public/../secret/key` then passes
the glob and reads the secret (found by a review, on every surface that reads or subscribes). The gateway
cannot know each server's rules, so a caller with a profile must name a resource the one plain way: a URI
that RFC 3986's normalisation leaves unchanged, with no empty path segment, no trailing `/` and no fragment,
and a file URI as `file:///path` (a file server reads the path alone: `file://host/secret/key`, `file:/secret/key`
and `file:///secret/key?x` are the key). A URI a server listed is taken as listed, however it is spelled.
The URI judged is the server's: the gateway's `files+` prefix is its own.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from mcp_manifold._core.naming import split_uri

_DNS_SCHEMES = frozenset({"file", "http", "https", "ws", "wss", "ftp"})  # their hosts' case means nothing
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}  # RFC 3986 6.2.3: the same URI without
# %-escapes of characters a path may hold as themselves (unreserved, sub-delims, `:` and `@`: the SDK's templates
# decode every escape, RFC 3986 2.3 the unreserved), and of `/` and `\`, which servers decode into separators.
_ESCAPED = re.compile(r"%(?:[46][0-9a-fA-F]|[57][0-9aA]|3[0-9abdABD]|2[14689a-fA-F]|5[fFcC]|7[eE])")
_LOWER_HEX = re.compile(r"%(?:[a-f][0-9a-fA-F]|[0-9A-F][a-f])")  # RFC 3986 6.2.2.1: `%3a` is `%3A`


def respelled(uri: str) -> str | None:
    """Why a server may read `uri` (exposed, or a server's own) as another URI (a short phrase), or None for a
    plain spelling."""
    split = split_uri(uri)
    original = split[1] if split else uri  # `files+file:///x`: a prefix with `_` is no scheme `urlsplit` knows
    try:
        parts = urlsplit(original)
        port = parts.port
    except ValueError:  # an unbalanced `[` in the host, or a port that is no number: no server reads it plainly
        return "a malformed host"
    scheme = original[: len(parts.scheme)].rpartition("+")[2]
    if scheme != scheme.lower():
        return "an upper-case scheme"
    if scheme in _DNS_SCHEMES and (why := _respelled_host(scheme, parts, port)):
        return why
    if scheme == "file" and (not original[len(scheme) + 1 :].startswith("///") or "?" in original):
        return "a spelling other than 'file:///path' (a file server reads the path alone)"
    before_query = original.partition("?")[0]
    if _ESCAPED.search(before_query):
        return "a %-escaped letter, digit, '/', '\\' or other character a URI may hold unescaped"
    if _LOWER_HEX.search(before_query):
        return "a %-escape in lower case"
    if "\\" in parts.path:
        return "a backslash in its path"
    segments = parts.path.split("/")
    if any(segment in (".", "..") for segment in segments):
        return "a '.' or '..' path segment"
    if "" in segments[1:-1]:
        return "an empty path segment ('//')"
    if parts.path.endswith("/") and parts.path != "/":
        return "a trailing '/' (a server may drop it)"
    if "#" in original:
        return "a fragment ('#')"
    return None


def _respelled_host(scheme: str, parts: SplitResult, port: int | None) -> str | None:
    """Why a web or file URI's host names another spelling of itself, or None."""
    if parts.netloc != parts.netloc.lower():
        return "an upper-case host"
    if "@" in parts.netloc:
        return "user info ('@') before its host"
    if parts.netloc.endswith(".") or (parts.hostname or "").endswith("."):
        return "a host ending in '.'"
    if parts.netloc.endswith(":") or (port is not None and port == _DEFAULT_PORTS.get(scheme)):
        return "an empty or default port"
    if scheme != "file" and parts.netloc and not parts.path:
        return "no path after its host (a server reads '/')"
    return None
