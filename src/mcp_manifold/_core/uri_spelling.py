"""Resource URIs spelled so that a server may read them as another URI, which a profile's globs cannot judge.

A profile's resource globs match the URI as the client sent it (`!file:///secret/*`), but many servers
normalise what they are asked for before they look it up: they resolve `..`, decode `%2e` and `%73`, ignore
the case of the scheme and of a web host, collapse `//`, drop a `#fragment`. `file:///public/../secret/key` then passes
the glob and reads the secret (found by a review, on every surface that reads or subscribes). The gateway
cannot know each server's rules, so a caller with a profile must name a resource the one plain way: a URI
that RFC 3986's normalisation leaves unchanged, with no empty path segment and no fragment. A URI a server
listed is taken as listed, however it is spelled.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_DNS_SCHEMES = frozenset({"file", "http", "https", "ws", "wss", "ftp"})  # their hosts' case means nothing
# %-escapes of unreserved characters (RFC 3986 2.3: decoded by normalisation), and of `/` and `\`, which
# servers decode into separators.
_ESCAPED = re.compile(r"%(?:[46][1-9a-fA-F]|[57][0-9aA]|3[0-9]|2[dDeEfF]|5[fFcC]|7[eE])")


def respelled(uri: str) -> str | None:
    """Why a server may read `uri` as another URI (a short phrase), or None for a plain spelling."""
    try:
        parts = urlsplit(uri)
    except ValueError:  # an unbalanced `[` in the host: no server reads it plainly either
        return "a malformed host"
    # After the gateway's prefix (`files+file://`, a server's name in its own case); `urlsplit` lowers it.
    scheme = uri[: len(parts.scheme)].rpartition("+")[2]
    if scheme != scheme.lower():
        return "an upper-case scheme"
    if scheme in _DNS_SCHEMES and parts.netloc != parts.netloc.lower():
        return "an upper-case host"
    if _ESCAPED.search(uri.partition("?")[0]):
        return "a %-escaped letter, digit, '-', '.', '_', '~', '/' or '\\'"
    if "\\" in parts.path:
        return "a backslash in its path"
    segments = parts.path.split("/")
    if any(segment in (".", "..") for segment in segments):
        return "a '.' or '..' path segment"
    if "" in segments[1:-1]:
        return "an empty path segment ('//')"
    if "#" in uri:
        return "a fragment ('#')"
    return None
