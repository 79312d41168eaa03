"""Secrets every replica must hold alike, made once by whichever replica comes first (SET NX).

- the key that seals 2026-07-28 `requestState` (unless `request_state_keys` configures them), so any replica
  opens what another sealed;
- the token replicas show each other on their internal route (`/_manifold/held`).

A store restarted without its data is filled again by the running replicas (`keep_secrets`); a replica that
started in between may have made other secrets meanwhile. Every replica then adopts what the store holds,
and says so: the replicas converge on one secret each, and each still accepts the one it held before (a
state it sealed, a token a sibling may still show) until the next change.
"""

from __future__ import annotations

import logging
import secrets

import anyio

from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

logger = logging.getLogger(__name__)


class SharedSecret:
    """One secret the replicas share: `value` (what this replica uses now) and `previous` (still accepted)."""

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value
        self.previous: str | None = None

    @property
    def accepted(self) -> list[str]:
        """The values accepted now, the current one first."""
        return [self.value] if self.previous is None else [self.value, self.previous]

    def adopt(self, stored: str) -> None:
        logger.warning(
            "the shared %s in the state store is not the one this replica held (the store restarted empty and "
            "another replica made a new one): using the store's from now on, the old one still accepted",
            self.name,
        )
        self.previous, self.value = self.value, stored


async def shared_secret(store: StateStore, name: str) -> str:
    """The secret `name`, made now if no replica made it yet. Read first: a full store (`maxmemory`,
    `noeviction`) refuses even a `SET NX` that would change nothing, and a replica restarted while the store
    is full must still start on the secrets it holds."""
    key = store.key("secret", name)
    value = await store.run("shared secrets", lambda: store.client.get(key))
    if value is None:
        made = secrets.token_urlsafe(32)
        await store.run("shared secrets", lambda: store.client.set(key, made, nx=True))
        value = await store.run("shared secrets", lambda: store.client.get(key))
    return value.decode() if isinstance(value, bytes) else str(value)


async def keep_secrets(store: StateStore, known: list[SharedSecret], interval: float = 2.0) -> None:
    """Write the secrets this replica holds back where they are missing (a store restarted without its data),
    so a replica started later gets the same ones; where the store has another one, adopt it."""
    while True:
        await anyio.sleep(interval)
        try:
            await _keep(store, known)
        except StateUnavailable:
            pass
        except Exception:  # the next round tries again: this never ends the gateway
            logger.exception("could not check the shared secrets in the state store")


async def _keep(store: StateStore, known: list[SharedSecret]) -> None:
    pipe = store.client.pipeline(transaction=False)
    for secret in known:
        pipe.set(store.key("secret", secret.name), secret.value, nx=True)
        pipe.get(store.key("secret", secret.name))
    replies = await store.run("shared secrets", pipe.execute)
    for secret, stored in zip(known, replies[1::2], strict=True):
        if isinstance(stored, bytes):
            stored = stored.decode(errors="replace")
        if stored and stored != secret.value:
            secret.adopt(stored)
