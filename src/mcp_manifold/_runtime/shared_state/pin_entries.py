"""Reading the pins other writers left in the shared store, one entry at a time.

The hash is written by every replica and by `manifold pins` of any version: an entry this version cannot
read (a field it does not know, a truncated value, a state it has no meaning for) is logged, naming the
entry and what is wrong with it, and skipped; the others still count. A bad entry never ends a replica.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any, get_args

from mcp_manifold._core.pins import Pin, PinState

logger = logging.getLogger(__name__)

_FIELDS = {field.name for field in dataclasses.fields(Pin)}
_STATES: frozenset[str] = frozenset(get_args(PinState))


def read_pins(raw: dict[Any, Any]) -> list[Pin]:
    """The readable pins of the hash `raw` (field -> pin JSON, as Redis returns them)."""
    pins = []
    for field, text in raw.items():
        try:
            pins.append(read_pin(text))
        except ValueError as exc:
            logger.error("skipped shared pin %r: %s", _shown(field), exc)
    return pins


def read_pin(text: bytes | str) -> Pin:
    """One entry; `ValueError` names what is wrong. Fields a newer version added are ignored."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    state = data.get("state")
    if state not in _STATES:
        raise ValueError(f"state {state!r} is not one of {', '.join(sorted(_STATES))}")
    for name, kind in (("server", str), ("tool", str)):
        if not isinstance(data.get(name), kind):
            raise ValueError(f"{name} is missing or not a string")
    changed_at = data.get("changed_at")
    if changed_at is not None and (isinstance(changed_at, bool) or not isinstance(changed_at, int | float)):
        raise ValueError(f"changed_at {changed_at!r} is not a number")
    for name in ("definition", "candidate"):
        if data.get(name) is not None and not isinstance(data[name], dict):
            raise ValueError(f"{name} is not an object")
    for name in ("hash", "candidate_hash"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ValueError(f"{name} is not a string")
    return Pin(**{key: value for key, value in data.items() if key in _FIELDS})


def _shown(field: Any) -> str:
    return field.decode(errors="backslashreplace") if isinstance(field, bytes) else str(field)
