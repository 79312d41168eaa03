"""Everything one server offers, fetched: each list it declared, every page of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import mcp_types as types
from mcp.client.session import ClientSession

from mcp_manifold._core.listing import Listing
from mcp_manifold._errors import BackendRequestError

_MOST_PAGES = 10_000  # a server whose cursors never end cannot hang the gateway


class Lister(Protocol):
    """What fetching a server's lists needs of its backend (`Backend`)."""

    extensions: dict[str, Any] | None

    async def session(self) -> ClientSession: ...

    async def request(self, action: str, call: Callable[[ClientSession], Awaitable[Any]]) -> Any: ...


async def list_everything(backend: Lister) -> Listing:
    """The server's tools, resources, templates and prompts, following pagination, skipping the lists it
    did not declare."""
    session = await backend.session()
    caps = session.server_capabilities or types.ServerCapabilities()
    tools = await _paginate(backend, "tools/list", session.list_tools, "tools") if caps.tools else []
    resources: list[Any] = []
    templates: list[Any] = []
    if caps.resources:
        resources = await _paginate(backend, "resources/list", session.list_resources, "resources")
        templates = await _paginate(
            backend, "resources/templates/list", session.list_resource_templates, "resource_templates"
        )
    prompts = await _paginate(backend, "prompts/list", session.list_prompts, "prompts") if caps.prompts else []
    return Listing(tools, resources, templates, prompts, backend.extensions)


async def _paginate(backend: Lister, action: str, method: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(_MOST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        try:
            result = await backend.request(action, lambda _s, p=params: method(params=p))
        except BackendRequestError as exc:
            # Some servers advertise a capability but not every list of it (e.g. no templates list):
            # what they do list still counts.
            if exc.code == types.METHOD_NOT_FOUND:
                return items
            raise
        items.extend(getattr(result, field))
        cursor = result.next_cursor
        if not cursor:
            break
    return items
