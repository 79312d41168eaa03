"""What the hub surface needs of the gateway's instance registry (runtime/instances.py), as a protocol.

The registry finds, connects, watches and lists instances; the surface decides what each client sees
of them. Declared here, on the surface's side, so the surface never imports the runtime.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp_manifold.core.listing import Listing


class InstanceView(Protocol):
    """One instance, as the surface reads it."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def listing(self) -> Listing | None: ...

    def label(self) -> str: ...


class Instances(Protocol):
    """The registry: `start`/`run` are driven by the surface's own lifecycle."""

    instances: dict[str, Any]  # id -> InstanceView
    gone: dict[str, str]  # id of a dropped instance -> why

    def start(self, listener: Any) -> None: ...

    async def run(self) -> None: ...

    async def scan(self) -> None: ...

    def get(self, instance_id: str) -> Any: ...

    def reserve(self, names: list[str]) -> None: ...

    def unusable(self, instance: Any) -> str | None: ...

    async def connect(self, instance: Any) -> None: ...

    async def relist(self, instance: Any) -> Listing: ...

    def after_call(self, instance: Any) -> None: ...

    def row(self, instance: Any) -> dict[str, Any]: ...
