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
