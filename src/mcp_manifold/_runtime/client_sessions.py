"""Sessions of one client's own, to the servers whose behaviour depends on the client (`session_scope: client`).

A shared session serves every client, so it can tell its server nothing about any of them: no roots
(a filesystem server would show one client's folders to another), no sampling or elicitation (a later
client may not declare them). A server configured with `session_scope: client` instead gets one session
per client (an HTTP session, or an authenticated 2026-era principal), told exactly what that client
declared, answered by that client only (its roots, its model, its user), and listed for that client
only (a server may list more tools to a client that can sample). The sessions are capped per server
(`client_sessions_max`: the least recently used idle one makes room), closed after
`client_session_idle` seconds unused, and closed when their client goes away.

A gateway with one client (stdio) needs none of this: its shared sessions are that client's.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Mapping

import anyio
import anyio.abc

from mcp_manifold._config import ServerConfig, Settings
from mcp_manifold._core.clients import Caller
from mcp_manifold._core.listing import Listing
from mcp_manifold._errors import BackendUnavailable, ManifoldError
from mcp_manifold._runtime.backends import Backend, BackendHooks

logger = logging.getLogger(__name__)

_SWEEP_EVERY = 30.0  # seconds between looks for idle sessions (at most; less when the idle time is short)
# In a client's `state`: the sessions that end its own when it goes. Before, a session-era client was told once
# more each time one of its sessions was reopened (idled out, a reload), for as long as it stayed connected.
_WATCHED = "manifold.client_sessions"


class ClientSessions:
    """The per-client sessions of one gateway, by (server, client key)."""

    def __init__(
        self, settings: Settings, hooks: BackendHooks, child_env: Mapping[str, str], *, single_client: bool
    ) -> None:
        self.settings = settings
        self.hooks = hooks
        self.child_env = dict(child_env)
        self.single_client = single_client
        self._sessions: dict[tuple[str, str], Backend] = {}
        self._listings: dict[str, dict[str, Listing]] = {}  # client key -> server -> what its session listed
        self._closing: set[str] = set()
        self._task_group: anyio.abc.TaskGroup | None = None
        self.version = 0  # changes whenever a client's listing does (views of the catalog follow it)
        # See each listing first, by server and client, and each client's session that closes (the pins).
        self.on_listing: Callable[[str, Listing, str], object] | None = None
        self.on_closed: Callable[[str, str], object] | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the sessions until the gateway stops: close idle ones on the way, all of them at the end."""
        try:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                task_status.started()
                every = min(_SWEEP_EVERY, self.settings.client_session_idle / 2)
                while True:
                    await anyio.sleep(every)
                    await self._close_idle()
        finally:
            self._task_group = None
            with anyio.CancelScope(shield=True):
                for backend in list(self._sessions.values()):
                    await backend.stop()
                self._sessions.clear()

    def serves(self, config: ServerConfig, caller: Caller) -> bool:
        """Whether `caller`'s requests to this server go to a session of its own."""
        return config.session_scope == "client" and caller.identified and not self.single_client

    def session(self, config: ServerConfig, caller: Caller) -> Backend:
        """`caller`'s session to the server, made (not yet started) when it has none."""
        key = (config.name, caller.key)
        backend = self._sessions.get(key)
        if backend is not None and not self._outgrown(backend, caller):
            return backend
        if backend is not None:
            self._close(key, "another client of this principal can answer more than the session was told")
        if self._task_group is None:
            raise BackendUnavailable(config.name, "the gateway is not running")
        self._make_room(config.name)
        owner = weakref.ref(caller)
        backend = Backend(config, self.settings, self.hooks, self.child_env, client=owner)
        backend.owner = owner
        backend.attach(self._task_group)
        self._sessions[key] = backend
        if caller.state.get(_WATCHED) is not self:  # once per client, however often its sessions are reopened
            caller.state[_WATCHED] = self
            caller.on_close(lambda: self._client_gone(caller.key))
        return backend

    @staticmethod
    def _outgrown(backend: Backend, caller: Caller) -> bool:
        """Whether `caller`, a client under the key of `backend`'s owner, needs the session opened again.

        A 2026-07-28 principal's requests come from any of its clients, each with its own capabilities,
        one `Caller` per request. The session serves the latest one from now on; it is reopened, when no
        call is running on it, if this client can answer what the session never told its server it could
        (its first client could not elicit, this one can): else the server would never ask it."""
        owner = backend.owner() if backend.owner is not None else None
        if owner is caller:
            return False
        if caller.asks - backend.declared and not backend.callers:
            return True
        backend.owner = backend.client = weakref.ref(caller)
        return False

    def _make_room(self, server: str) -> None:
        mine = [(key, backend) for key, backend in self._sessions.items() if key[0] == server]
        if len(mine) < self.settings.client_sessions_max:
            return
        idle = [(backend.last_used, key) for key, backend in mine if not backend.callers]
        if not idle:
            raise BackendUnavailable(
                server,
                f"all {len(mine)} of its client sessions are busy (client_sessions_max); try again in a moment",
            )
        _, key = min(idle)
        self._close(key, "the least recently used, to make room for another client")

    def _close(self, key: tuple[str, str], why: str) -> None:
        backend = self._sessions.pop(key, None)
        listings = self._listings.get(key[1])
        if listings is not None:
            listings.pop(key[0], None)
            if not listings:  # a 2026-07-28 principal never says it has gone: its key must not stay for good
                del self._listings[key[1]]
        self.version += 1
        if self.on_closed is not None:
            self.on_closed(*key)
        if backend is not None and self._task_group is not None:
            logger.info("server %r: closing the session of client %s (%s)", key[0], key[1], why)
            self._task_group.start_soon(backend.stop)

    def close_server(self, server: str, why: str) -> None:
        """Close every client's session to `server` (a config reload changed or removed it); the next
        request of a client opens one with the new config."""
        for key in [key for key in self._sessions if key[0] == server]:
            self._close(key, why)

    def _client_gone(self, client: str) -> None:
        for key in [key for key in self._sessions if key[1] == client]:
            self._close(key, "its client went away")
        self._listings.pop(client, None)

    async def _close_idle(self) -> None:
        deadline = time.monotonic() - self.settings.client_session_idle
        for key, backend in list(self._sessions.items()):
            if not backend.callers and backend.last_used < deadline:
                self._close(key, f"unused for {self.settings.client_session_idle:g}s")

    def sessions(self, caller: Caller | None = None) -> list[Backend]:
        """Every per-client session, or `caller`'s."""
        return [b for (_server, client), b in self._sessions.items() if caller is None or client == caller.key]

    # --- listings --------------------------------------------------------------------------------

    def listed_clients(self) -> int:
        """How many clients have listings of their own sessions kept (no more than have sessions open)."""
        return len(self._listings)

    def listings(self, caller: Caller) -> dict[str, Listing]:
        """What `caller`'s own sessions listed, by server (empty when it has none)."""
        return self._listings.get(caller.key, {})

    async def ensure_listed(self, configs: list[ServerConfig], caller: Caller) -> None:
        """List the servers `caller` has a session of its own to, where it has not yet (concurrently)."""
        wanted = [c for c in configs if c.enabled and self.serves(c, caller) and c.name not in self.listings(caller)]
        if wanted:
            async with anyio.create_task_group() as group:
                for config in wanted:
                    group.start_soon(self._list, config, caller)

    async def relist(self, backend: Backend) -> Caller | None:
        """List a client's session again (its server said its lists changed); the client, to be told."""
        owner = backend.owner() if backend.owner is not None else None
        if owner is not None and self._sessions.get((backend.name, owner.key)) is backend:
            await self._list(backend.config, owner)
        return owner

    async def _list(self, config: ServerConfig, caller: Caller) -> None:
        try:
            backend = self.session(config, caller)
            listing = await backend.list_all()
        except ManifoldError as exc:
            # The client sees the shared listing of this server meanwhile; its calls say what failed.
            logger.warning("%s (the session of client %s)", exc, caller.key)
            return
        if self._sessions.get((config.name, caller.key)) is not backend:
            return  # closed while it listed: what it was served is served no more
        if self.on_listing is not None:
            self.on_listing(config.name, listing, caller.key)
        self._listings.setdefault(caller.key, {})[config.name] = listing
        self.version += 1
