"""An input schema as a few short lines a model can fill in: names, types, required, enums, defaults.

Clients on the 2026-07-28 protocol cannot have found tools registered for them, so a search answer is
all a model sees of a tool before it calls it through `call_tool`. The full JSON Schema carries that,
but spends most of its tokens on JSON syntax and on keywords that do not change what to send
(`title`, `additionalProperties`, `$schema`, repeated `"type": "object"`). This keeps what a model
needs to build valid arguments, one line per top-level parameter:

    path: string* — Path to the file
    mode: "read"|"write" = "read"
    options: {recursive?: boolean, depth?: integer}

`*` marks a required parameter; inside `{…}`, `?` marks an optional field. Nesting is written inline
up to `MAX_DEPTH`; deeper values, long enum lists and long descriptions are cut, and say so ("…").
A schema is a server's to write: one whose `$ref`s loop, or fan out (each definition naming the next
twice), is written as far as `MAX_NODES` of it and cut there, never followed until the stack or the
event loop gives out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 3  # inline nesting levels before a value is just "object"
MAX_ENUM = 8  # enum values listed before "…"
DESCRIPTION_CHARS = 100  # of each parameter's description (first sentence, whitespace folded)
_NESTED_DESCRIPTION_CHARS = 60
MAX_NODES = 300  # schema nodes written per tool (a real tool's schema takes a few dozen)
VALUE_CHARS = 40  # of a `const` or an enum value, a type or a format (a server's to make huge)
NAME_CHARS = 64  # of a parameter's or a field's name


class _Budget:
    """The schema nodes one writing may still visit, shared by every branch of it."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_NODES

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def parameter_lines(schema: Mapping[str, Any]) -> list[str]:
    """One line per top-level parameter: `name: type* = default — description`."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = set(schema.get("required") or [])
    lines = []
    budget = _Budget()
    for name, spec in properties.items():
        spec = _resolve(spec, schema)
        line = f"{_cut(name, NAME_CHARS)}: {type_text(spec, schema, budget=budget)}{'*' if name in required else ''}"
        line += _default(spec)
        described = _short(spec.get("description") if isinstance(spec, Mapping) else None, DESCRIPTION_CHARS)
        lines.append(f"{line} — {described}" if described else line)
    return lines


def type_text(spec: Any, root: Mapping[str, Any], depth: int = 0, budget: _Budget | None = None) -> str:
    """The value a schema accepts, written compactly: string, "a"|"b", integer[], {x: number, y?: string};
    "…" where `budget` (default: `MAX_NODES` of its own) ran out."""
    if budget is None:
        budget = _Budget()
    if not budget.take():
        return "…"
    spec = _resolve(spec, root)
    if not isinstance(spec, Mapping):
        return "any"
    if "const" in spec:
        return _value(spec["const"])
    if isinstance(spec.get("enum"), list):
        values = [_value(v) for v in spec["enum"][:MAX_ENUM]]
        return "|".join(values) + ("|…" if len(spec["enum"]) > MAX_ENUM else "")
    for combinator in ("anyOf", "oneOf"):
        if isinstance(spec.get(combinator), list):
            options = [type_text(option, root, depth, budget) for option in spec[combinator]]
            return "|".join(dict.fromkeys(options))
    if isinstance(spec.get("allOf"), list) and len(spec["allOf"]) == 1:
        return type_text(spec["allOf"][0], root, depth, budget)
    kind = spec.get("type")
    if isinstance(kind, list):
        return "|".join(type_text({**spec, "type": k}, root, depth, budget) for k in kind)
    if kind == "array" or "items" in spec:
        items = spec.get("items")
        inner = type_text(items, root, depth + 1, budget) if items is not None else "any"
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if kind == "object" or "properties" in spec:
        return _object_text(spec, root, depth, budget)
    if isinstance(kind, str):
        fmt = spec.get("format")
        kind = _cut(kind, VALUE_CHARS)
        return f"{kind}<{_cut(fmt, VALUE_CHARS)}>" if isinstance(fmt, str) else kind
    return "any"


def _object_text(spec: Mapping[str, Any], root: Mapping[str, Any], depth: int, budget: _Budget) -> str:
    properties = spec.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        values = spec.get("additionalProperties")
        if isinstance(values, Mapping) and values:
            return f"{{[key]: {type_text(values, root, depth + 1, budget)}}}"
        return "object"
    if depth >= MAX_DEPTH:
        return "{…}"
    required = set(spec.get("required") or [])
    fields = []
    for name, field in properties.items():
        field = _resolve(field, root)
        shown = _cut(name, NAME_CHARS)
        text = f"{shown}{'' if name in required else '?'}: {type_text(field, root, depth + 1, budget)}"
        described = _short(field.get("description") if isinstance(field, Mapping) else None, _NESTED_DESCRIPTION_CHARS)
        fields.append(f"{text} ({described})" if described else text)
    return "{" + ", ".join(fields) + "}"


def _resolve(spec: Any, root: Mapping[str, Any]) -> Any:
    """A local `$ref` ("#/$defs/Name" or "#/definitions/Name") replaced by what it points at."""
    seen = 0
    while isinstance(spec, Mapping) and isinstance(spec.get("$ref"), str) and seen < 5:
        target: Any = root
        for part in spec["$ref"].removeprefix("#/").split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            return {k: v for k, v in spec.items() if k != "$ref"}
        spec = {**target, **{k: v for k, v in spec.items() if k != "$ref"}}
        seen += 1
    return spec


def _default(spec: Any) -> str:
    if not isinstance(spec, Mapping) or "default" not in spec or spec["default"] is None:
        return ""
    text = _json(spec["default"])
    return f" = {text}" if len(text) <= 40 else ""


def _short(text: Any, limit: int) -> str:
    if not isinstance(text, str):
        return ""
    folded = " ".join(text.split())
    # The first sentence says what the value is; the rest is usually examples and caveats.
    end = folded.find(". ")
    if 0 < end < limit:
        folded = folded[:end]
    folded = folded.rstrip(".")
    return folded if len(folded) <= limit else folded[: limit - 1].rstrip() + "…"


def _value(value: Any) -> str:
    """A `const` or an enum value as JSON, cut at `VALUE_CHARS` (a long string before it is written)."""
    if isinstance(value, str) and len(value) > VALUE_CHARS:
        value = value[:VALUE_CHARS]
    return _cut(_json(value), VALUE_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
