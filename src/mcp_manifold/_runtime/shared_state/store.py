"""The connection to the shared state store (Redis 7 or Valkey, through redis-py's asyncio client).

Every key starts with `manifold:`; one store serves one gateway deployment (give another deployment
another database: `redis://host/1`). `StateStore` also notices outages: a command that cannot reach the
store marks it down and logs it once, loudly; the next command that works marks it up again and says so.
A store that answers but refuses (full under `maxmemory` with `noeviction`: OOM; a key of the wrong type:
WRONGTYPE) is reachable, and said to refuse, naming its error; the replica is not ready while any kind of
command's last run was refused. A kind refused for want of memory is tried again by the readiness check (one
write of its own), so a replica that a balancer checking readiness sends nothing is ready once there is room.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from mcp_manifold._errors import ManifoldError

logger = logging.getLogger(__name__)

PREFIX = "manifold:"
RETRY = 1.0  # seconds between tries while the store is down
PROBE = 0.5  # seconds a store that was down has to answer a PING before commands are sent to it again
ROOM_PROBE_MS = 10_000  # the key a readiness check writes to see whether a full store has room again expires
T = TypeVar("T")


class StateUnavailable(ManifoldError):
    """The shared state store cannot be reached."""


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class StateStore:
    """One Redis connection pool and the replica it speaks for."""

    def __init__(self, url: str, replica_id: str, *, timeout: float = 2.0, announce: bool = True) -> None:
        """`announce`: log the outage line (a replica's); a command run by hand says its own error instead."""
        try:
            import redis.asyncio as redis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:  # state_url set without the extra
            raise ManifoldError("state_url needs redis-py: pip install 'mcp-manifold[redis]'") from None
        self.url = url
        self.replica_id = replica_id
        self.errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self.refusals: tuple[type[BaseException], ...] = (redis.ResponseError,)  # it answered with an error
        self.full: tuple[type[BaseException], ...] = (redis.OutOfMemoryError,)  # refused for want of memory
        self.client: Any = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            health_check_interval=10,
            decode_responses=False,
            # After a store restart, a pooled connection is dead: the command is sent once more on a new one
            # (redis-py 8 otherwise raises "Connection closed by server" and a working store looks down).
            # Not on a timeout: the command may have run (an admission taken twice would spend two tokens).
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
            retry_on_error=[redis.ConnectionError],
        )
        self.up = True
        self.refused: dict[str, str] = {}  # what -> the store's error, for each kind whose last command it refused
        self._refused_full: set[str] = set()  # the kinds of `refused` refused because the store was full
        self.announce = announce
        self._retry_at = 0.0  # while down, commands fail at once until then (a hung store must not slow every call)
        self._probing = False  # a PING is finding out whether the store that was down is back

    @staticmethod
    def key(*parts: str) -> str:
        return PREFIX + ":".join(parts)

    async def run(self, what: str, command: Callable[[], Awaitable[T]]) -> T:
        """Run one command; a store that cannot be reached raises `StateUnavailable` naming `what`."""
        if not self.up and not await self._back():
            raise StateUnavailable(f"the shared state store is unreachable ({what})")
        try:
            result = await command()
        except self.refusals as exc:
            self.came_back()  # it answered
            why = _refusal(exc)
            self.refusing(what, why, full=isinstance(exc, self.full))
            raise StateUnavailable(f"the shared state store refused a command ({what}): {why}") from None
        except self.errors as exc:
            self.went_down(what, exc)
            self._retry_at = time.monotonic() + RETRY
            raise StateUnavailable(f"the shared state store is unreachable ({what}): {exc}") from None
        self.came_back()
        self.accepted(what)
        return result

    async def _back(self) -> bool:
        """While the store is down: whether it answers again. One PING at a time, once per `RETRY`, given
        `PROBE` seconds: a store that hangs (it takes connections and answers nothing) held each request that
        came after a `RETRY` for the whole socket timeout, every such request at once; now one, that long."""
        if self._probing or time.monotonic() < self._retry_at:
            return False
        self._probing = True
        answered = False
        try:
            with anyio.move_on_after(PROBE):
                await self.client.ping()
                answered = True
        except self.errors:
            pass
        finally:
            self._probing = False
            if not answered:
                self._retry_at = time.monotonic() + RETRY
        return answered

    def refusing(self, what: str, why: str, *, full: bool = False) -> None:
        first = not self.refused
        self.refused[what] = why
        if full:
            self._refused_full.add(what)
        if first and self.announce:
            logger.error(
                "SHARED STATE REFUSING: %s reaches %s but it refused a command (%s): %s; limits are per replica "
                "and this replica is not ready until it accepts them again (a full store: raise maxmemory or free "
                "memory)",
                self.replica_id,
                _safe_url(self.url),
                what,
                why,
            )

    def accepted(self, what: str) -> None:
        self._refused_full.discard(what)
        if self.refused.pop(what, None) is not None and not self.refused and self.announce:
            logger.warning("shared state store %s accepts commands again (%s)", _safe_url(self.url), self.replica_id)

    def went_down(self, what: str, exc: BaseException) -> None:
        if self.up:
            self.up = False
            if not self.announce:
                return
            logger.error(
                "SHARED STATE DOWN: %s cannot reach %s (%s); limits are per replica until it is back, see "
                "docs/scale-out.md for what else waits",
                self.replica_id,
                _safe_url(self.url),
                exc or type(exc).__name__,
            )

    def came_back(self) -> None:
        if not self.up:
            self.up = True
            logger.warning("shared state store %s reachable again from %s", _safe_url(self.url), self.replica_id)

    async def ping(self) -> bool:
        """Whether the store answers and accepts commands (a PING alone passes on a full store).

        The kinds refused because the store was full are tried again here, by one write that a full store
        refuses: some kinds run only for requests (a rate limit's admission), and a balancer that checks
        readiness sends a replica that is not ready none, so it would never be ready again."""
        try:
            await self.run("ping", self.client.ping)
            if self._refused_full:
                probe = self.key("room", self.replica_id)
                await self.run("room", lambda: self.client.set(probe, b"1", px=ROOM_PROBE_MS))
                for what in list(self._refused_full):
                    self.accepted(what)
        except StateUnavailable:
            return False
        return not self.refused

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.client.aclose()


def _refusal(exc: BaseException) -> str:
    """The store's error, with the name redis-py gives its code (it strips "OOM", keeps "WRONGTYPE")."""
    name = type(exc).__name__
    return str(exc) if name == "ResponseError" else f"{name}: {exc}"


def _safe_url(url: str) -> str:
    """The URL without its password (it may be in the logs): in the userinfo or, as redis-py also takes it, in
    the query (`?password=`)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(name.lower() == "password" for name, _value in query):
        hidden = [(name, "***" if name.lower() == "password" else value) for name, value in query]
        parts = parts._replace(query=urlencode(hidden, safe="*"))
    return urlunsplit(parts)
