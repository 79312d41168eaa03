"""Resource URIs a server may read as another (core/uri_spelling.py): refused to callers with a profile."""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.catalog_view import resource_allowed
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.naming import namespace_uri
from mcp_manifold._core.profiles import Profile
from mcp_manifold._core.uri_spelling import respelled


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("file:///public/../secret/key", "a '.' or '..' path segment"),
        ("file:///secret/./key", "a '.' or '..' path segment"),
        ("files+file:///public/..", "a '.' or '..' path segment"),
        ("file:///public/%2E%2e/secret", "a %-escaped letter"),
        ("file:///%73ecret/key", "a %-escaped letter"),
        ("file:///public%2Fsecret", "a %-escaped letter"),
        ("file:///public%5c..%5csecret", "a %-escaped letter"),
        ("file:///public\\..\\secret", "a backslash in its path"),
        ("FILE:///secret/key", "an upper-case scheme"),
        ("files+File:///secret/key", "an upper-case scheme"),
        ("https://Example.com/key", "an upper-case host"),
        ("file:////secret/key", "an empty path segment ('//')"),
        ("file:///secret//key", "an empty path segment ('//')"),
        ("file:///secret/key#top", "a fragment ('#')"),
        # A file server reads the path alone (`urlsplit(uri).path`, pathlib): each of these is file:///secret/key.
        ("file:/secret/key", "a spelling other than 'file:///path'"),
        ("file://localhost/secret/key", "a spelling other than 'file:///path'"),
        ("files+file://anything/secret/key", "a spelling other than 'file:///path'"),
        ("file:///secret/key?x=1", "a spelling other than 'file:///path'"),
        ("file:///secret/key/", "a trailing '/'"),
        ("file:///secret/", "a trailing '/'"),
        # The SDK's templates decode every escape; RFC 3986 upper-cases an escape's hex digits.
        ("notes://a%3Ab", "a %-escaped letter"),
        ("notes://a%40b%2A", "a %-escaped letter"),
        ("file:///a%c3%a9", "a %-escape in lower case"),
        # RFC 3986 6.2.3, and the host an http client connects to.
        ("https://host:443/key", "an empty or default port"),
        ("https://host:/key", "an empty or default port"),
        ("https://host", "no path after its host"),
        ("https://user@host/key", "user info ('@') before its host"),
        ("https://host./key", "a host ending in '.'"),
        ("https://host:x/key", "a malformed host"),
    ],
)
def test_a_uri_a_server_may_read_as_another_is_named_so(uri: str, why: str) -> None:
    assert (respelled(uri) or "").startswith(why)


@pytest.mark.parametrize(
    "uri",
    [
        "file:///secret/key",
        "file:///",
        "https://host/",
        "https://host:8443/key",
        "my_files+links://item/one",  # a prefix `urlsplit` takes for no scheme ('_')
        "my_files+file:///secret/key",
        "Files+file:///a/b",  # a server's prefix in its own case
        "weather://Paris/today",  # the host of a scheme of its own is the server's to read
        "file:///a%20b/c%3Fd",  # escapes of reserved characters and spaces are the plain way to write them
        "notes://list?q=%41..",  # the query is the server's
        "ui://apps+clock/app.html",
        "kitchen+kitchen://config.json",
    ],
)
def test_a_plain_uri_passes(uri: str) -> None:
    assert respelled(uri) is None


# --- the property: what the gateway lets through, a normalising server reads as the same resource -----------
# A model of what servers do to the URI they are asked for. `rfc` is RFC 3986's normalisation (6.2.2: the case
# of the scheme, the host and the hex digits of an escape, escaped unreserved characters decoded, dot segments
# removed; 6.2.3: a default or empty port, an empty path after a host). `path_server` is a file server reading
# `urlsplit(uri).path` through `pathlib`/`normpath` (the host, query and fragment ignored; `\` a separator;
# `//`, `.`, `..` and a trailing `/` resolved away), after the official SDK's templates' `unquote`. `fetcher`
# connects to the host an http(s) URI names (its user info and a host's trailing dot dropped). Out of scope, as
# docs/security.md says: the escape of a character a URI cannot hold as itself (`%20`, non-ASCII) against its
# raw spelling, and a server's own rules (a case-blind path).

_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_RAW_IN_A_PATH = _UNRESERVED | set("!$&'()*+,;=:@")  # what a path may hold unescaped (RFC 3986 3.3)
_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}


def _escapes(text: str, decode: set[str]) -> str:
    """`text` with escapes upper-cased, and those of the characters in `decode` decoded."""

    def one(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in decode else "%" + match.group(1).upper()

    return re.sub(r"%([0-9a-fA-F]{2})", one, text)


def _remove_dot_segments(path: str) -> str:  # RFC 3986 5.2.4
    out: list[str] = []
    for segment in path.split("/")[1:] if path.startswith("/") else path.split("/"):
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    last = path.rsplit("/", 1)[-1]
    return ("/" if path.startswith("/") else "") + "/".join(out) + ("/" if last in (".", "..") and out else "")


def rfc(uri: str) -> str:
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    netloc = parts.netloc.lower() if scheme in _DNS else parts.netloc
    if scheme in _DEFAULT_PORTS:
        host, colon, port = netloc.rpartition(":")
        if colon and "]" not in port and port in ("", _DEFAULT_PORTS[scheme]):
            netloc = host
    path = _remove_dot_segments(_escapes(parts.path, _UNRESERVED))
    if scheme in _DEFAULT_PORTS and parts.netloc and not path:
        path = "/"
    rest = uri[len(parts.scheme) + 1 :]
    authority = "//" + netloc if rest.startswith("//") else ""
    query = "?" + _escapes(parts.query, _UNRESERVED) if "?" in uri.partition("#")[0] else ""
    fragment = "#" + parts.fragment if "#" in uri else ""
    return f"{scheme}:{authority}{path}{query}{fragment}" if parts.scheme else uri


def path_server(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        return rfc(uri)
    path = _escapes(parts.path, _RAW_IN_A_PATH | {"/", "\\"}).replace("\\", "/")
    path = posixpath.normpath(path) if path else path
    path = "/" + path.lstrip("/") if path.startswith("/") else path
    return f"file://{path}"


def fetcher(uri: str) -> str:
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:  # no host, nothing to connect to
        return rfc(uri)
    netloc = parts.netloc.rpartition("@")[2]
    host, colon, port = netloc.rpartition(":") if not netloc.endswith("]") else (netloc, "", "")
    host, port = (host, port) if colon else (netloc, "")
    port = "" if port in ("", _DEFAULT_PORTS[scheme]) else ":" + port
    return rfc(f"{scheme}://{host.rstrip('.')}{port}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else ""))


SERVERS = (rfc, path_server, fetcher)
_DNS = frozenset({"file", "http", "https", "ws", "wss", "ftp"})

schemes = st.sampled_from(["file", "File", "https", "HTTPS", "notes", "ui"])
authorities = st.sampled_from(
    [None, "", "localhost", "host", "Host", "host.", "host:", "host:443", "host:80", "user@host", "[::1]"]
)
segments = st.sampled_from(
    ["secret", "key", "a", "", ".", "..", "%2e", "%2E%2e", "%73", "%3a", "%3A", ":", "%2F", "%5c", "\\", "%20", "b%c3"]
)


@st.composite
def uris(draw: st.DrawFn) -> str:
    path = "/".join(draw(st.lists(segments, max_size=4)))
    authority = draw(authorities)
    start = f"//{authority}/" if authority is not None else draw(st.sampled_from(["/", ""]))
    tail = draw(st.sampled_from(["", "/", "?x=1", "#top"]))
    return f"{draw(schemes)}:{start}{path}{tail}"


def _cuts(text: str) -> st.SearchStrategy[str]:
    """Globs made of `text`: itself, or a head of it and `*`."""
    return st.one_of(st.just(text), st.integers(0, len(text)).map(lambda n: text[:n] + "*"))


@st.composite
def judged(draw: st.DrawFn) -> tuple[str, str, str, Profile]:
    """(server, exposed URI, its normal form at one of the SERVERS (exposed), a profile): deny globs taken
    from the normal form, allow globs from the spelling, so that the globs are ones the two could differ on."""
    uri = draw(uris())
    server_name = draw(st.sampled_from(["", "files", "my_files", "Files"]))
    normal = draw(st.sampled_from(SERVERS))(uri)
    exposed, normal_exposed = namespace_uri(server_name, uri), namespace_uri(server_name, normal)
    denied = draw(st.lists(_cuts(normal_exposed), max_size=2))
    allowed = draw(st.lists(st.one_of(st.just("*"), _cuts(exposed)), min_size=0 if denied else 1, max_size=2))
    return server_name, exposed, normal_exposed, Profile("p", resources=(*allowed, *(f"!{g}" for g in denied)))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(judged())
def test_a_uri_the_gateway_lets_through_is_allowed_as_the_server_reads_it(case: tuple[str, str, str, Profile]) -> None:
    server_name, exposed, normal, profile = case
    if profile.allows_resource(server_name, exposed) and respelled(exposed) is None:
        assert profile.allows_resource(server_name, normal), (exposed, normal, profile.resources)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(uris(), min_size=1, max_size=5, unique=True), st.sampled_from(["files", "my_files", "ui-apps"]))
def test_a_uri_a_server_lists_is_never_refused_however_spelled(listed: list[str], server_name: str) -> None:
    catalog = Catalog()
    resources = [types.Resource(uri=uri, name=f"r{n}") for n, uri in enumerate(listed)]
    catalog.set_backend(server_name, Listing(resources=resources), prefix=server_name)
    profile = Profile("p", resources=("*",))
    for uri in listed:
        exposed = catalog.exposed_uri(server_name, uri)
        assert resource_allowed(profile, catalog, server_name, exposed), exposed
