"""Checking the arguments a client sends to the gateway's own tools: clear errors naming what was wrong.

Plain code. Every message names the parameter and what was expected, since the reader is often a model
that will try again with what the message says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_manifold._errors import InvalidRequest


def given(arguments: Mapping[str, Any], key: str) -> bool:
    # An explicit null counts as not given, as many clients send every parameter.
    return arguments.get(key) is not None


def json_type_name(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    for python_type, name in names.items():
        if isinstance(value, python_type):
            return name
    return "a number" if isinstance(value, int | float) else type(value).__name__


def object_argument(value: Any, key: str) -> dict[str, Any]:
    """An argument that must be a JSON object; a string holding one is parsed (LLMs often send those)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"'{key}' is a string but not valid JSON: {exc}") from None
        except RecursionError:  # thousands of nested brackets: the parser's own limit, not the caller's data
            raise InvalidRequest(f"'{key}' is a JSON string nested too deeply to be used as arguments") from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"'{key}' must be an object (or a JSON string of one), got {json_type_name(value)}")
    return value


def integer_field(arguments: Mapping[str, Any], key: str, default: int, low: int, high: int | None) -> int:
    if not given(arguments, key):
        return default
    value = arguments[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    bounds = f"from {low} to {high}" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise InvalidRequest(f"'{key}' must be an integer {bounds}, got {value!r}")
    return value


def string_field(arguments: Mapping[str, Any], key: str) -> str | None:
    if not given(arguments, key):
        return None
    value = arguments[key]
    if not isinstance(value, str):
        raise InvalidRequest(f"'{key}' must be a string, got {json_type_name(value)}")
    return value


# --- what a backend can be sent -----------------------------------------------------------------

# Deeper than this, a value is refused: the SDK's own JSON reader stops near 200 levels, so a server
# written with it would never see the request (and the caller would wait for its timeout).
MAX_DEPTH = 100
_SHOWN_KEY = 40  # characters of one key an error message shows
_SHOWN_PATH = 120  # characters of a path an error message shows

# Where a value sits, as a chain of (parent, segment); made into text only for an error message.
_Place = tuple[Any, str] | None


def encoding_problem(value: Any, name: str = "argument", max_depth: int = MAX_DEPTH) -> str | None:
    """Why `value` cannot be sent to a server as UTF-8 JSON, naming the first bad place; None if it can.

    What a JSON parser in Python lets through but no wire can carry: a lone surrogate in a string or a
    key (`"\\ud800"`), a number that is not finite (`NaN`, `1e400`), and nesting deeper than
    `max_depth`. `name` starts the message (`argument 'text' is not valid Unicode: ...`). The walk is
    iterative, so a value of any depth is checked in bounded stack.
    """
    # Depth counts down, so a check of a message around arguments can allow for its own levels.
    if _sendable(value, MAX_DEPTH - max_depth, _UNBOUNDED) >= 0:  # the common case, quickly
        return None
    return _first_problem(value, name, MAX_DEPTH - max_depth)  # the walk names the place


# Values a quick check walks (a few milliseconds at most); a value holding more is checked where a long
# walk holds up no other caller (`quick_verdict`).
QUICK_VALUES = 50_000


def quick_verdict(value: Any, values: int = QUICK_VALUES) -> bool | None:
    """Whether `value` can be sent (`encoding_problem` says why not), decided by a walk of at most about
    `values` values; None when it holds more (4 MB of `{}` are 1.4 million objects, a quarter of a second
    of walking): the caller checks those with `encoding_problem` off the event loop."""
    room = _sendable(value, 0, values)
    return None if room == _UNDECIDED else room >= 0


def _first_problem(value: Any, name: str, start_depth: int = 0) -> str | None:
    pending: list[tuple[_Place, Any, int]] = [(None, value, start_depth)]
    while pending:
        place, item, depth = pending.pop()
        if isinstance(item, str):
            problem = _unicode_problem(item)
            if problem is not None:
                return f"{_named(name, place)} is not valid Unicode: {problem}"
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"{_named(name, place)} is not a finite number (JSON has no NaN or Infinity)"
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return f"{_named(name, place)} is nested deeper than {MAX_DEPTH - start_depth} levels"
            children: list[tuple[_Place, Any, int]] = []
            if isinstance(item, list):
                children = [((place, f"[{index}]"), child, depth + 1) for index, child in enumerate(item)]
            else:
                for key, child in item.items():
                    segment = key if isinstance(key, str) else str(key)
                    if (problem := _unicode_problem(segment)) is not None:
                        return f"{_named(name + ' key', (place, segment))} is not valid Unicode: {problem}"
                    children.append(((place, segment), child, depth + 1))
            pending.extend(reversed(children))  # the first bad place in reading order is the one named
    return None


# What `_sendable` returns besides the room left: the value cannot be sent, or it holds more objects and
# arrays than the walk had room for.
_UNSENDABLE = -1
_UNDECIDED = -2
_UNBOUNDED = 1 << 62


def _sendable(item: Any, depth: int, room: int) -> int:
    """Whether `item` can be sent, quickly: the room left (>= 0) of `room` values to walk (a container
    counts for itself and each of its items), or _UNSENDABLE, or _UNDECIDED when it holds more. A string
    or plain child is checked inline, so the function is called once per container, not per value
    (`json.dumps` of typical arguments is several times slower)."""
    # Recursion stops at MAX_DEPTH, well within Python's own limit.
    kind = type(item)
    if kind is dict:
        if depth >= MAX_DEPTH:
            return _UNSENDABLE
        room -= 1 + len(item)
        if room < 0:
            return _UNDECIDED
        for key, child in item.items():
            if type(key) is str:
                if not key.isascii() and _unicode_problem(key) is not None:
                    return _UNSENDABLE
            elif isinstance(key, str) and _unicode_problem(key) is not None:
                return _UNSENDABLE
            kind = type(child)
            if kind is str:
                if not child.isascii() and _unicode_problem(child) is not None:
                    return _UNSENDABLE
            elif kind not in _PLAIN:
                room = _sendable(child, depth + 1, room)
                if room < 0:
                    return room
        return room
    if kind is list:
        if depth >= MAX_DEPTH:
            return _UNSENDABLE
        room -= 1 + len(item)
        if room < 0:
            return _UNDECIDED
        for child in item:
            kind = type(child)
            if kind is str:
                if not child.isascii() and _unicode_problem(child) is not None:
                    return _UNSENDABLE
            elif kind not in _PLAIN:
                room = _sendable(child, depth + 1, room)
                if room < 0:
                    return room
        return room
    if kind is str:
        return room if item.isascii() or _unicode_problem(item) is None else _UNSENDABLE
    if kind is float:
        return room if item - item == 0.0 else _UNSENDABLE  # false for NaN and the infinities
    # A subclass (never what a JSON parser makes) takes the walk.
    if kind in _PLAIN or not isinstance(item, str | dict | list | float):
        return room
    return room if _first_problem(item, "", depth) is None else _UNSENDABLE


_PLAIN = frozenset({int, bool, type(None)})  # nothing in these can be unsendable


def _unicode_problem(text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode()
    except UnicodeEncodeError as exc:  # in a Python str, only a surrogate cannot be encoded as UTF-8
        return f"lone surrogate at position {exc.start}"
    return None


def _named(name: str, place: _Place) -> str:
    """`argument 'items[2].name'`; just `name` for the value itself."""
    segments: list[str] = []
    while place is not None:
        place, segment = place
        segments.append(segment)
    path = ""
    for segment in reversed(segments):
        shown = _shown(segment)
        path += shown if segment.startswith("[") else (f".{shown}" if path else shown)
    if not path:
        return name
    if len(path) > _SHOWN_PATH:
        path = f"{path[:_SHOWN_PATH]}..."
    return f"{name} '{path}'"


def _shown(segment: str) -> str:
    """A key as an error message can quote it: surrogates escaped, long keys cut."""
    text = segment.encode("utf-8", "backslashreplace").decode()
    return text if len(text) <= _SHOWN_KEY else f"{text[:_SHOWN_KEY]}..."
