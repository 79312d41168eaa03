"""Who a request comes from, as the HTTP front's `guard` (front/auth.py) tells the MCP front.

Kept apart from `auth.py` so that the stdio front, which never authenticates, does not load the
JWT and HTTP machinery. Also here: the start-up check that refuses an open gateway on a network
interface.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_manifold._config import Config
from mcp_manifold._errors import ManifoldError

logger = logging.getLogger(__name__)

SCOPE_KEY = "manifold.identity"  # where the ASGI scope carries the request's Identity


@dataclass(frozen=True)
class Identity:
    """Who a request comes from: the authenticated principal (None if it did not authenticate), its profile,
    and whether it is an operator (`_front/operators.py`; without authentication, everyone is)."""

    principal: str | None
    profile: str | None
    operator: bool = False
    # A token's claims (None for an API key): what `claim:` matchers read, again after a reload (`Access`).
    claims: Mapping[str, Any] | None = field(default=None, compare=False)
    # An API key's SHA-256 (hex), so that a stream it opened ends once a reload removes it (`standing_streams`).
    key_digest: str | None = field(default=None, compare=False)


def request_identity(request: Any) -> Identity | None:
    """The identity `guard` put on an HTTP request (a Starlette `Request`), or None (stdio, no guard)."""
    scope = getattr(request, "scope", None)
    return scope.get(SCOPE_KEY) if isinstance(scope, dict) else None


# --- refusing to start open ---------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(config: Config) -> None:
    """Refuse to serve HTTP on a non-loopback address without authentication, unless told to in so many words."""
    settings = config.settings
    if problem := exposure_problem(config):
        raise ManifoldError(problem)
    if not is_loopback(settings.host) and not config.auth.enabled:  # insecure_open_to_network, then
        logger.warning(
            "serving HTTP on %s WITHOUT AUTHENTICATION (insecure_open_to_network): anyone who can reach this "
            "port can call every tool of every server",
            settings.host,
        )


def exposure_problem(config: Config) -> str | None:
    """Why `config` may not be served over HTTP as it is, or None; `manifold config check` asks it too."""
    settings = config.settings
    if is_loopback(settings.host) or config.auth.enabled or settings.insecure_open_to_network:
        return None
    return (
        f"refusing to serve HTTP on {settings.host} without authentication: anyone who can reach it could call "
        "every tool of every server. Configure API keys or OAuth in the 'auth' section (docs/security.md), "
        "listen on 127.0.0.1, or pass --insecure-open-to-network if this is really what you want"
    )
