"""Which authorization server a server's tokens belong to, so that they are only ever sent there.

The SDK learns the authorization server (AS) by discovery on a 401, and remembers it only in memory: after a
restart it refreshes stored tokens at `<MCP server's origin>/token`, sending the refresh token and client
secret to the MCP server. So the AS's metadata is kept with the tokens (`authorization_server`), and read
back before any refresh. A token record kept before that (no `authorization_server`) is completed by
looking the AS up at the issuer it must be (the configured `issuer`, else the one the stored client was
registered with), its metadata checked to name that issuer; with no such issuer to check against, its
refresh token is not used (a login is asked for when the access token expires).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    create_oauth_metadata_request,
    issuers_match,
)
from mcp.shared.auth import OAuthMetadata
from pydantic import ValidationError

from mcp_manifold._runtime.oauth_requests import Guard, OAuthRequestFailed
from mcp_manifold._sdk import create_http_client

logger = logging.getLogger(__name__)


def origin_metadata(server_url: str) -> OAuthMetadata:
    """The AS of a server that publishes no metadata: its own origin, as the SDK then uses it (2025-03-26)."""
    parts = urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    return OAuthMetadata.model_validate(
        {
            "issuer": origin,
            "authorization_endpoint": urljoin(origin, "/authorize"),
            "token_endpoint": urljoin(origin, "/token"),
        }
    )


def stored_metadata(raw: Any) -> OAuthMetadata | None:
    try:
        return OAuthMetadata.model_validate(raw) if isinstance(raw, dict) else None
    except ValidationError:
        return None


def as_stored(metadata: OAuthMetadata) -> dict[str, Any]:
    return metadata.model_dump(mode="json", exclude_none=True)


def same_issuer(metadata: OAuthMetadata, issuer: str) -> bool:
    return issuers_match(str(metadata.issuer), issuer)


async def look_up(issuer: str, server_url: str, guard: Guard) -> OAuthMetadata | None:
    """The metadata of the AS `issuer`, fetched at its own well-known addresses (never where the MCP server
    points) and checked to name it; None if it cannot be had (logged)."""
    async with create_http_client(None, network_backend=guard.network_backend()) as http:
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
            request = create_oauth_metadata_request(url)
            try:
                sent = await guard.check(request)
                response = await http.send(request, stream=True)
                try:
                    guard.cap(response, sent)
                    body = await response.aread()
                finally:
                    await response.aclose()
                if response.status_code != 200:
                    continue
                try:
                    metadata = OAuthMetadata.model_validate_json(body)
                except ValidationError:
                    raise guard.fail(sent, "HTTP 200, not valid authorization-server metadata") from None
                if not same_issuer(metadata, issuer):
                    raise guard.fail(sent, f"it names issuer {metadata.issuer}, not {issuer}")
                return metadata
            except (OAuthRequestFailed, httpx2.HTTPError) as exc:
                logger.warning("%s (looking up the authorization server of stored tokens)", exc)
                return None
    return None
