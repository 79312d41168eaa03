"""The sealing of 2026-07-28 `requestState` by the key the replicas share: it follows the shared secret, so a
replica that adopts the store's key (`shared_secrets.py`) seals with it from then on and opens with both."""

from __future__ import annotations

from mcp.server.request_state import AESGCMRequestStateCodec

from mcp_manifold._runtime.shared_state.shared_secrets import SharedSecret


class SharedKeyCodec:
    """A `RequestStateCodec` over `secret.accepted`: the first seals, each opens."""

    def __init__(self, secret: SharedSecret) -> None:
        self.secret = secret
        self._keys = secret.accepted
        self._codec = AESGCMRequestStateCodec(self._keys)

    def _current(self) -> AESGCMRequestStateCodec:
        if self.secret.accepted != self._keys:
            self._keys = self.secret.accepted
            self._codec = AESGCMRequestStateCodec(self._keys)
        return self._codec

    def seal(self, payload: bytes) -> str:
        return self._current().seal(payload)

    def unseal(self, token: str) -> bytes:
        return self._current().unseal(token)
