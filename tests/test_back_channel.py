"""`list_changed` to session-era clients: a client is told of a change it has not seen, once until it lists
again, and never of one its list already shows.

The back channel in this process, with a client that records what it is told: the order of a change, the
client's list and the notification's delivery is set here, where end to end it is a race (the catalog
filling in behind a stdio client's first `tools/list`; retrieve's dynamic tools then went unannounced).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.clients import Caller, ListKind
from mcp_manifold._runtime.back_channel import BackChannel

pytestmark = pytest.mark.anyio


class Client(Caller):
    def __init__(self) -> None:
        super().__init__()
        self.told: list[set[ListKind]] = []

    async def notify_list_changed(self, kinds: set[ListKind]) -> None:
        self.told.append(kinds)


async def nothing_to_relist(backend: object) -> None:
    pass


@pytest.fixture
async def channel() -> AsyncIterator[BackChannel]:
    channel = BackChannel(Catalog(), nothing_to_relist)
    async with anyio.create_task_group() as tasks:
        await tasks.start(channel.run)
        yield channel
        tasks.cancel_scope.cancel()


async def test_a_change_the_list_already_shows_is_not_announced(channel: BackChannel) -> None:
    client = Client()
    channel.track(client)
    channel.catalog_changed({"tools"})  # a server listed itself...
    channel.listed(client, "tools")  # ... and the client's tools/list, answered before that was announced, has it
    await anyio.wait_all_tasks_blocked()
    assert client.told == []

    # Its own list changes (a search registered tools for it): it hears of that.
    await channel.notify_list_changed({"tools"}, client)
    assert client.told == [{"tools"}]


async def test_a_change_is_announced_once_until_the_client_lists_again(channel: BackChannel) -> None:
    client = Client()
    channel.track(client)
    channel.catalog_changed({"tools"})  # before it has a list: nothing to tell it
    await anyio.wait_all_tasks_blocked()
    channel.listed(client, "tools")
    channel.listed(client, "prompts")
    channel.catalog_changed({"tools"})
    await anyio.wait_all_tasks_blocked()
    channel.catalog_changed({"tools", "resources"})  # told already, and it has no resources list
    await anyio.wait_all_tasks_blocked()
    await channel.notify_list_changed({"tools"}, client)
    assert client.told == [{"tools"}]

    channel.listed(client, "tools")
    channel.catalog_changed({"tools", "prompts"})
    await anyio.wait_all_tasks_blocked()
    assert client.told == [{"tools"}, {"tools", "prompts"}]
