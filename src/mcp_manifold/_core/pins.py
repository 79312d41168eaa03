"""Tool pinning: what a tool's definition is, how a change is judged, and how it reads as a diff.

On first sight the gateway pins a hash of each tool's definition (name, title, description, input
and output schema, annotations, icons and `_meta`, which names its MCP App) per server. A later
listing with another definition is a change: the tool is quarantined (hidden and refused) until an
operator approves it, so a server cannot quietly turn a trusted tool into something else. Plain
code: the store (`runtime/pin_store.py`) keeps the pins and asks here what a listing means.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Literal

import mcp_types as types

from mcp_manifold._core.apps import meta_without_app, names_an_app
from mcp_manifold._core.naming import UI_SCHEME

PinningMode = Literal["off", "warn", "enforce"]
NewTools = Literal["allow", "quarantine"]
# pinned: approved as it is now; changed: differs from its approved definition; new: first seen on a
# server whose tools were already pinned (with `pin_new_tools: quarantine`); rejected: an operator
# refused the definition the server now serves.
PinState = Literal["pinned", "changed", "new", "rejected"]
UNAPPROVED: frozenset[PinState] = frozenset({"changed", "new", "rejected"})

# Everything the gateway passes on about a tool that a model or a user sees: `_meta` names the tool's app
# (`ui.resourceUri`, its CSP) and carries what hosts show while it runs; `icons` are shown to the user.
_DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "_meta")
# Pins taken before `icons` and `_meta` were covered hashed only these, and their hashes carry no version.
_FIRST_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
_VERSION = "2:"


def definition(tool: types.Tool) -> dict[str, Any]:
    """The parts of a tool that tell a model what it does and what it takes: what a pin covers."""
    wire = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {key: wire[key] for key in _DEFINITION_FIELDS if key in wire}


def app_definition(uri: str, contents: list[types.TextResourceContents | types.BlobResourceContents]) -> dict[str, Any]:
    """What an MCP App (a `ui://` resource) is, as its server's `resources/read` gave it: its HTML, mime type
    and `_meta` (CSP, permissions, ...). Pinned as a tool is, under its URI, when it is read."""
    items = [item.model_dump(by_alias=True, mode="json", exclude_none=True) for item in contents]
    if len(items) == 1 and items[0].get("uri") == uri:  # the usual app: one document, shown field by field
        return {"name": uri, **{key: value for key, value in items[0].items() if key != "uri"}}
    return {"name": uri, "contents": items}


def is_app(name: str) -> bool:
    """Whether a pin is an app's (named by its `ui://` URI) rather than a tool's."""
    return name.startswith(UI_SCHEME)


def definition_hash(defined: dict[str, Any]) -> str:
    return _VERSION + _digest(defined)


def _digest(defined: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(defined, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def _rehashed(pin: Pin, served: dict[str, Any], served_hash: str) -> Pin:
    """A pin taken before `icons` and `_meta` were covered, re-taken with them where what it holds is what the
    server serves now, as judged then. Those fields were never judged, so re-taking them on sight after an
    upgrade loses no approval, and a server's approved app tools are not all quarantined by the upgrade."""
    if not any(digest and not digest.startswith(_VERSION) for digest in (pin.hash, pin.candidate_hash)):
        return pin
    first = _digest({key: served[key] for key in _FIRST_FIELDS if key in served})
    if pin.hash == first:
        pin = replace(pin, hash=served_hash, definition=served)
    if pin.candidate_hash == first:
        pin = replace(pin, candidate_hash=served_hash, candidate=served)
    return pin


@dataclass(frozen=True)
class Pin:
    """One tool of one server: its approved definition (none yet for a `new` tool) and what it serves now."""

    server: str
    tool: str
    state: PinState
    hash: str | None  # the approved definition's hash
    definition: dict[str, Any] | None
    candidate_hash: str | None = None  # what the server serves now, when it is not the approved one
    candidate: dict[str, Any] | None = None
    changed_at: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.server, self.tool)


def observe(
    pin: Pin | None, served: dict[str, Any], *, server: str, server_known: bool, new_tools: NewTools, now: float
) -> Pin:
    """The pin after the server listed the tool with definition `served`.

    `server_known`: the server had pinned tools before this listing (a new server's tools are all
    pinned as they come; only a tool that appears later on a known server counts as new).
    """
    served_hash = definition_hash(served)
    name = served.get("name", "")
    if pin is None:
        if server_known and new_tools == "quarantine":
            return Pin(server, name, "new", None, None, served_hash, served, now)
        return Pin(server, name, "pinned", served_hash, served, changed_at=now)
    pin = _rehashed(pin, served, served_hash)
    if served_hash == pin.hash or _without_its_app(pin.definition, served):  # as approved (again: a revert is fine)
        if pin.state == "pinned":
            return pin
        return replace(pin, state="pinned", candidate_hash=None, candidate=None, changed_at=now)
    if served_hash == pin.candidate_hash:
        return pin  # the same unapproved definition as before: nothing new to judge
    state: PinState = "new" if pin.hash is None else "changed"
    return replace(pin, state=state, candidate_hash=served_hash, candidate=served, changed_at=now)


def _without_its_app(approved: dict[str, Any] | None, served: dict[str, Any]) -> bool:
    """Whether `served` is the approved definition without the app it names. Apps servers name their app
    only to clients that render apps (a text-only fallback to others), so one tool is listed both ways to
    the gateway's sessions: the fallback takes nothing approved away, and is not a change."""
    if approved is None or not isinstance(meta := approved.get("_meta"), dict) or not names_an_app(meta):
        return False
    expected = {key: value for key, value in approved.items() if key != "_meta"}
    if rest := meta_without_app(meta):
        expected["_meta"] = rest
    return served == expected


def approve(pin: Pin, now: float) -> Pin:
    """The definition the server serves now becomes the approved one."""
    if pin.candidate is None:
        return pin
    return Pin(pin.server, pin.tool, "pinned", pin.candidate_hash, pin.candidate, changed_at=now)


def reject(pin: Pin, now: float) -> Pin:
    """The definition the server serves now stays refused (until it serves the approved one again)."""
    if pin.candidate is None:
        return pin
    return replace(pin, state="rejected", changed_at=now)


def blocks(pin: Pin | None, mode: PinningMode) -> bool:
    """Whether the tool is quarantined: hidden from every listing and search, refused on every path."""
    return mode == "enforce" and pin is not None and pin.state in UNAPPROVED


def describe_change(pin: Pin) -> str:
    """A readable diff of what changed: description and title (an app's HTML) as text, schemas, annotations,
    icons and `_meta` as JSON."""
    before = pin.definition or {}
    after = pin.candidate if pin.candidate is not None else before
    if pin.hash is None:
        header = f"{pin.server}/{pin.tool}: new {'app' if is_app(pin.tool) else 'tool'}, not approved yet"
    elif pin.candidate is None:
        return f"{pin.server}/{pin.tool}: unchanged since it was approved"
    else:
        header = f"{pin.server}/{pin.tool}: {pin.state}"
    parts = [header]
    others = sorted((before.keys() | after.keys()) - set(_DEFINITION_FIELDS))  # an app's: text, mimeType, ...
    for key in (*_DEFINITION_FIELDS, *others):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        old_lines = _lines(old)
        new_lines = _lines(new)
        diff = difflib.unified_diff(old_lines, new_lines, f"approved {key}", f"served {key}", lineterm="", n=3)
        parts.append("\n".join(diff))
    return "\n".join(parts)


def _lines(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines() or [""]
    return json.dumps(value, indent=2, sort_keys=True).splitlines()
