"""Errors the search package raises on purpose, as part of the gateway's one error tree."""

from __future__ import annotations

from mcp_manifold._errors import ManifoldError


class SearchError(ManifoldError):
    """Base class of the search package's own errors."""


class EmbedderUnavailable(SearchError):
    """The configured embedder cannot be used here (an optional dependency is not installed)."""


class EmbedderError(SearchError):
    """The embedder was reachable but failed (HTTP error, malformed answer, wrong dimension)."""
