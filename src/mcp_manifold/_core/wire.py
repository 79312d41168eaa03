"""A plain tool result kept in the form the server sent it, for the fast lane.

Most tool results are a few text, image or audio blocks. Building the SDK's models from a server's
answer, dumping them again for the client, and the checks in between were the largest part of what
a call through the gateway cost (bench/overhead.py), and for such a result they change nothing. So
the fast lane asks for the server's answer as it came (checked by the SDK's validator for the
protocol version), and `wire_result` keeps it that way when nothing on the call path needs models
for it: not an error (those are scrubbed of secrets), no resource links or embedded resources (their
URIs are rewritten), no questions (`input_required`), no app named in `_meta` (its URI is rewritten
too). Anything else becomes the model as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import mcp_types as types

from mcp_manifold._core.apps import names_an_app
from mcp_manifold._core.results import drop_server_stamp, meta_without_server_stamp

_PLAIN_BLOCKS = frozenset({"text", "image", "audio"})
_RESULT_KEYS = frozenset({"content", "structuredContent", "isError", "_meta", "resultType"})


@dataclass(frozen=True)
class WireResult:
    """A successful tool result with only text, image or audio content, as the server sent it, less the
    2026-07-28 `resultType` and the server's `serverInfo` stamp (the front adds its own where due)."""

    wire: dict[str, Any]
    is_error: ClassVar[bool] = False

    @property
    def content(self) -> list[dict[str, Any]]:
        return self.wire["content"]

    def model(self) -> types.CallToolResult:
        """The same result as the SDK's model (for a caller that did not ask for the wire form)."""
        return types.CallToolResult.model_validate(self.wire, by_name=False)


def wire_result(raw: Mapping[str, Any]) -> WireResult | types.CallToolResult | types.InputRequiredResult:
    """The server's `tools/call` answer `raw`: kept as it is when plain, else the model the call path needs."""
    result_type = raw.get("resultType")
    if result_type == "input_required":
        return types.InputRequiredResult.model_validate(raw, by_name=False)
    content = raw.get("content")
    plain = (
        result_type in (None, "complete")
        and raw.get("isError", False) is False  # the SDK's models read "true" or 1 as an error too
        and isinstance(content, list)
        and all(_plain_block(block) for block in content)
        and _RESULT_KEYS.issuperset(raw)  # other fields, and explicit nulls, are the models' to drop
        and None not in raw.values()
        and not names_an_app(raw.get("_meta"))  # its app's URI is rewritten
    )
    if not plain:
        return drop_server_stamp(types.CallToolResult.model_validate(raw, by_name=False))
    wire = {key: value for key, value in raw.items() if key != "resultType"}
    meta = wire.get("_meta")
    if isinstance(meta, dict) and types.SERVER_INFO_META_KEY in meta:
        rest = meta_without_server_stamp(meta)
        if rest is None:
            del wire["_meta"]
        else:
            wire["_meta"] = rest
    return WireResult(wire)


def _plain_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in _PLAIN_BLOCKS and None not in block.values()
