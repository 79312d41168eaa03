"""OAuth tokens and client registrations of remote servers, kept in the shared state store (`state_url` set).

One hash per server (`manifold:oauth:<server key>`, the key of `remote_auth.token_key`: a new URL never
reuses old tokens), with the fields `remote_auth.StoredTokens` reads and writes. A `manifold auth login`
on any replica serves them all, and a refresh one replica makes is the one the others use. Refreshes are
taken in turn: one lock per server (`manifold:oauth-refresh:<server key>`, expiring by itself if its
holder dies), so two replicas never spend the same refresh token, which a server that rotates them honours
only once.

Its own connection, opened for as long as a connection to the server lasts (or a login), rather than the
replica's `shared_state` one: the backends that need it must not depend on the shared state's modules,
which depend on them. While the store cannot be reached a server behind OAuth cannot be connected (its
tokens are there), with an error that says so; a connection already open goes on until its access token
needs refreshing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import anyio

from mcp_manifold._errors import ManifoldError

logger = logging.getLogger(__name__)

_PREFIX = "manifold:"  # every key of the store starts with it (shared_state/store.py)
_LOCK_HELD_FOR = 60.0  # seconds the refresh lock lives at most (a refresh is one HTTP round trip)
_TIMEOUT = 2.0  # seconds a command may take
T = TypeVar("T")


class TokensUnreachable(ManifoldError):
    """The shared state store, where the tokens are, cannot be reached."""


class SharedTokenFields:
    """One server's token record in the store: what `remote_auth.StoredTokens` needs of a place."""

    def __init__(self, client: Any, server_key: str) -> None:
        self.client = client
        self._key = f"{_PREFIX}oauth:{server_key}"
        self._lock = f"{_PREFIX}oauth-refresh:{server_key}"

    async def _run(self, what: str, command: Callable[[], Awaitable[T]]) -> T:
        import redis

        try:
            return await command()
        except (redis.RedisError, OSError) as exc:
            # The error names the store's address at most, never a token: nothing here is one.
            raise TokensUnreachable(f"the shared state store (state_url) is unreachable ({what}): {exc}") from None

    async def load(self) -> dict[str, Any]:
        raw = await self._run("oauth tokens", lambda: self.client.hgetall(self._key))
        fields: dict[str, Any] = {}
        for field, value in raw.items():
            try:
                fields[_text(field)] = json.loads(value)
            except ValueError:
                logger.warning("ignoring an unreadable field of %s", self.where())  # never its value
        return fields

    async def save(self, fields: dict[str, Any]) -> None:
        encoded = {field: json.dumps(value) for field, value in fields.items()}
        await self._run("oauth tokens", lambda: self.client.hset(self._key, mapping=encoded))

    @asynccontextmanager
    async def refresh_turn(self) -> AsyncIterator[None]:
        """Hold this server's refresh lock (waiting while another process refreshes)."""
        lock = self.client.lock(self._lock, timeout=_LOCK_HELD_FOR, blocking_timeout=_LOCK_HELD_FOR)
        if not await self._run("the oauth refresh lock", lock.acquire):
            logger.warning("%s: another refresh took over %gs; refreshing anyway", self.where(), _LOCK_HELD_FOR)
        try:
            yield
        finally:
            with suppress(Exception):  # expired meanwhile, or the store went away: it frees itself
                await lock.release()

    def where(self) -> str:
        return f"the shared state store (key {self._key})"


@asynccontextmanager
async def shared_token_fields(state_url: str, server_key: str) -> AsyncIterator[SharedTokenFields]:
    """A connection to the store at `state_url` for one server's tokens, closed on leaving."""
    try:
        import redis.asyncio as redis
    except ImportError:  # state_url set without the extra
        raise ManifoldError("state_url needs redis-py: pip install 'mcp-manifold[redis]'") from None
    client = redis.Redis.from_url(state_url, socket_timeout=_TIMEOUT, socket_connect_timeout=_TIMEOUT)
    try:
        yield SharedTokenFields(client, server_key)
    finally:
        with anyio.CancelScope(shield=True), suppress(Exception):
            await client.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
