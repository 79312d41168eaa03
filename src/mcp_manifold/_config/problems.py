"""How the config package words and collects problems.

Checks report instead of stopping, so that one `ConfigError` lists everything wrong in the file,
the environment and the command line and a user can fix it all in one pass: a check of one value
raises `Invalid`, and its caller records that as a `ConfigProblem` under the source it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mcp_manifold._core.suggestions import did_you_mean
from mcp_manifold._errors import ConfigProblem


class Invalid(ValueError):
    """A value failed a check; `path` names a nested location (``env.X``) when there is one."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class Problems:
    """Collects problems from one source into a shared list."""

    def __init__(self, source: str, items: list[ConfigProblem]) -> None:
        self.source = source
        self.items = items

    def add(self, server: str | None, field_name: str | None, message: str) -> None:
        self.items.append(ConfigProblem(self.source, server, field_name, message))


def kind(value: Any) -> str:
    """How a YAML/JSON value reads in a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def unknown(what: str, name: str, known: Iterable[str]) -> str:
    """The message for a key that is none of `known`: "unknown field; did you mean 'args'?"."""
    return f"unknown {what}{did_you_mean(name, known, limit=1)}"
