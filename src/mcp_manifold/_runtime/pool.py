"""The pool of backends: every configured server's `Backend`, their shared task group, and what changes it.

Leaving the pool stops every backend. A config reload swaps configured backends (`replace`, `retire`);
a hub adds and removes instances at run time (`add`, `remove`), kept apart from the configured ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._config import ServerConfig, Settings
from mcp_manifold._core.clients import Caller
from mcp_manifold._runtime.backends import Backend, BackendHooks


class BackendPool:
    """All backends, with their shared task group; leaving the context stops them all."""

    def __init__(
        self,
        configs: list[ServerConfig],
        settings: Settings,
        hooks: BackendHooks,
        child_env: Mapping[str, str] | None = None,
        client: Callable[[], Caller | None] = lambda: None,
        shared_extensions: Callable[[], dict[str, Any] | None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.child_env = dict(child_env or {})
        self.backends: dict[str, Backend] = {
            config.name: Backend(config, settings, hooks, self.child_env, client, shared_extensions)
            for config in configs
        }
        # Backends added at run time (hub instances), kept apart from the configured ones so the catalog,
        # the direct surface and `manifold servers` never list them by accident.
        self.added: dict[str, Backend] = {}
        # Configured backends a config reload replaced or removed, still finishing their calls.
        self.retiring: set[Backend] = set()
        self._hooks = hooks
        self._client = client
        self._shared_extensions = shared_extensions
        self._added_cleanup = False
        self._exit: AsyncExitStack | None = None
        self._task_group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> BackendPool:
        self._exit = AsyncExitStack()
        task_group = await self._exit.enter_async_context(anyio.create_task_group())
        self._task_group = task_group
        for backend in self.backends.values():
            backend.attach(task_group)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as stoppers:
                for backend in [*self.backends.values(), *self.retiring]:
                    stoppers.start_soon(backend.stop)
        assert self._exit is not None
        await self._exit.__aexit__(*exc_info)

    def __getitem__(self, name: str) -> Backend:
        return self.backends[name]

    # --- configured backends changed by a config reload -------------------------------------------

    def replace(self, configs: list[ServerConfig], fresh: set[str]) -> list[Backend]:
        """Take the reloaded config's servers, in its order: a new backend for each name in `fresh` (added,
        or changed so that it reaches another server), the existing one for every other name. Returns the
        backends no longer in use (removed or replaced); each must go through `retire`."""
        old = self.backends
        backends: dict[str, Backend] = {}
        for config in configs:
            current = old.get(config.name)
            if current is None or config.name in fresh:
                current = Backend(
                    config, self.settings, self._hooks, self.child_env, self._client, self._shared_extensions
                )
                if self._task_group is not None:
                    current.attach(self._task_group)
            backends[config.name] = current
        self.backends = backends
        gone = [backend for name, backend in old.items() if backends.get(name) is not backend]
        self.retiring.update(gone)
        return gone

    async def retire(self, backend: Backend, grace: float) -> None:
        """Stop a backend `replace` took out, once its calls in flight are done (at most `grace` seconds)."""
        await backend.drain(grace)  # if the gateway stops meanwhile, the pool's exit stops it with the rest
        self.retiring.discard(backend)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.backends.values())

    # --- backends added at run time (hub instances; issue 6) ----------------------------------
    # Kept apart from `backends`: they are not configured servers, so the catalog, the direct
    # surface and `manifold servers` never list them by accident.

    def add(self, config: ServerConfig, hooks: BackendHooks, task_group: anyio.abc.TaskGroup) -> Backend:
        """Add a backend at run time; its connection runs in `task_group`, whose owner must call
        `remove` or `stop_added` before that group exits (the pool's exit does it as a last resort)."""
        if self._exit is None:
            raise RuntimeError("BackendPool.add needs the pool to be entered")
        if config.name in self.backends or config.name in self.added:
            raise ValueError(f"a backend named {config.name!r} already exists")
        if not self._added_cleanup:
            self._exit.push_async_callback(self.stop_added)
            self._added_cleanup = True
        backend = Backend(config, self.settings, hooks, self.child_env)
        backend.attach(task_group)
        self.added[config.name] = backend
        return backend

    async def remove(self, name: str) -> None:
        """Stop and forget a backend added with `add` (unknown names are ignored)."""
        backend = self.added.pop(name, None)
        if backend is not None:
            with anyio.CancelScope(shield=True):
                await backend.stop()

    def all_backends(self) -> list[Backend]:
        """Configured backends, then the ones added at run time."""
        return [*self.backends.values(), *self.added.values()]

    async def stop_added(self) -> None:
        """Stop and forget every backend added at run time."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as stoppers:
                for backend in list(self.added.values()):
                    stoppers.start_soon(backend.stop)
            self.added.clear()
