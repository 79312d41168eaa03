"""Whether the SDK server accepts a `tools/call`'s `_meta`, for the lanes that answer calls without it.

The SDK server checks a request's params twice before its handler runs: against the version's surface
(`validate_client_request`), then as the handler's params model. A 2026-07-28 client's `_meta` carries
its envelope (client info, capabilities), which those checks type; a lane must refuse, or rather leave
to the SDK, what the SDK would refuse.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp_types import methods

from mcp_manifold._core.bounded import BoundedTable


def meta_accepted(version: str, meta: dict[str, Any] | None) -> bool:
    """Whether the SDK server accepts a plain call's `_meta` at `version`: both its checks, run on the
    `_meta` alone (`plain_call` has checked the name and arguments as they would). A client sends the same
    `_meta` with every call, so the verdict is kept per form, its `repr` the key (of parsed JSON, the same
    repr is the same value)."""
    if meta is None:
        return True
    try:
        key = (version, repr(meta))
    except RecursionError:  # nested too deep for any client's envelope: the SDK's to refuse
        return False
    accepted = _meta_verdicts.get(key)
    if accepted is None:
        stub = {"name": "", "_meta": meta}
        try:
            methods.validate_client_request("tools/call", version, stub)
            types.CallToolRequestParams.model_validate(stub, by_name=False)
            accepted = True
        except (ValueError, KeyError, RecursionError):  # pydantic's ValidationError is a ValueError
            accepted = False
        if len(key[1]) <= _META_FORM_CHARS:
            _meta_verdicts.keep(key, accepted)
    return accepted


_META_FORMS = 256  # verdicts kept
_META_FORM_CHARS = 4096  # a longer `_meta` is checked afresh each time
_meta_verdicts: BoundedTable[tuple[str, str], bool] = BoundedTable(_META_FORMS)
