"""Everything one server offers, fetched: each list it declared, every page of it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import mcp_types as types
from mcp.client.session import ClientSession

from mcp_manifold._core.listing import Listing
from mcp_manifold._errors import BackendError, BackendRequestError

logger = logging.getLogger(__name__)

_MOST_PAGES = 10_000  # a server whose cursors never end cannot hang the gateway
# Items of one list: far beyond any real server's, and a bound on what one server's listing can take of
# the gateway's memory (a server naming the same page again and again could otherwise fill it).
MOST_ITEMS = 100_000


class Lister(Protocol):
    """What fetching a server's lists needs of its backend (`Backend`)."""

    name: str
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
    return Listing(_one_of_each(backend.name, tools), resources, templates, prompts, backend.extensions)


def _one_of_each(server: str, tools: list[types.Tool]) -> list[types.Tool]:
    """One tool per name, the last one listed (the protocol allows no more). A server that names a tool twice
    with two definitions must not have the pins judge one and a surface show the other: every surface, the
    catalog and the pins take this one."""
    last = {tool.name: tool for tool in tools}
    if len(last) == len(tools):
        return tools
    twice = sorted({tool.name for tool in tools if last[tool.name] is not tool})
    logger.warning("server %r lists tool(s) %s more than once; only the last of each is taken", server, twice)
    return [tool for tool in tools if last[tool.name] is tool]


async def _paginate(backend: Lister, action: str, method: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    cursors: set[str] = set()  # every cursor the server named: one named again would loop for ever
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
        if len(items) > MOST_ITEMS:
            raise BackendError(backend.name, f"{action}: more than {MOST_ITEMS} items; not listed")
        cursor = result.next_cursor
        if not cursor:
            break
        if cursor in cursors:
            raise BackendError(backend.name, f"{action}: a next cursor it named before (its pages loop); not listed")
        cursors.add(cursor)
    return items
