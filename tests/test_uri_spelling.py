"""Resource URIs a server may read as another (core/uri_spelling.py): refused to callers with a profile."""

from __future__ import annotations

import pytest

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
    ],
)
def test_a_uri_a_server_may_read_as_another_is_named_so(uri: str, why: str) -> None:
    assert (respelled(uri) or "").startswith(why)


@pytest.mark.parametrize(
    "uri",
    [
        "file:///secret/key",
        "file:///folder/",
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
