"""Secrets every replica must hold alike, made once by whichever replica comes first (SET NX).

- the key that seals 2026-07-28 `requestState` (unless `request_state_keys` configures them), so any replica
  opens what another sealed;
- the token replicas show each other on their internal route (`/_manifold/held`).
"""

from __future__ import annotations

import contextlib
import secrets

import anyio

from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable


async def shared_secret(store: StateStore, name: str) -> str:
    """The secret `name`, made now if no replica made it yet."""
    key = store.key("secret", name)
    made = secrets.token_urlsafe(32)
    await store.run("shared secrets", lambda: store.client.set(key, made, nx=True))
    value = await store.run("shared secrets", lambda: store.client.get(key))
    return value.decode() if isinstance(value, bytes) else str(value)


async def keep_secrets(store: StateStore, known: dict[str, str], interval: float = 2.0) -> None:
    """Write the secrets this replica holds back where they are missing (a store restarted without its data),
    so a replica started later gets the same ones rather than making new ones."""
    while True:
        await anyio.sleep(interval)
        pipe = store.client.pipeline(transaction=False)
        for name, value in known.items():
            pipe.set(store.key("secret", name), value, nx=True)
        with contextlib.suppress(StateUnavailable):
            await store.run("shared secrets", pipe.execute)
