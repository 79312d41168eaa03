"""A tool as a TypeScript-style declaration a model can call from a program without its JSON schemas.

    // Multiply two numbers.
    function numbers_multiply(args: {a: number, b: number}): Promise<{result: number}>;

The argument and value types come from the input and output schemas through `compact_schema.type_text`
(`?` marks an optional field); a tool without an output schema gives `Promise<any>`.
"""

from __future__ import annotations

import re

import mcp_types as types

from mcp_manifold._search.compact_schema import type_text

_DESCRIPTION_CHARS = 160
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def one_line(text: str | None) -> str:
    folded = " ".join((text or "").split())
    return folded if len(folded) <= _DESCRIPTION_CHARS else folded[: _DESCRIPTION_CHARS - 1] + "…"


def declaration(tool: types.Tool) -> str:
    """The tool's comment line and declaration; a name that is no identifier is called as tools["a-b"](…)."""
    schema = tool.input_schema or {}
    arguments = type_text(schema, schema) if schema.get("properties") else "{}"
    optional = "" if schema.get("required") else "?"
    output = tool.output_schema
    value = type_text(output, output) if output else "any"
    name = tool.name if _IDENTIFIER.match(tool.name) else f'["{tool.name}"]'
    described = one_line(tool.description)
    comment = f"// {described}\n" if described else ""
    return f"{comment}function {name}(args{optional}: {arguments}): Promise<{value}>;"
