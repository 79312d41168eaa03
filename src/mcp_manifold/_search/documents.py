"""What the index stores about a tool, and what a search returns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_manifold._search.terms import split_identifier

# How deep `schema_details` reads nested objects and arrays, and how many values of an enum it keeps:
# enough for an object's fields and an array of objects, short enough that a 500-value enum (country
# codes) does not drown a tool's own words.
SCHEMA_DEPTH = 3
ENUM_VALUES = 20


@dataclass(frozen=True)
class ToolDocument:
    """One tool as the gateway exposes it."""

    key: str  # the exposed, unique tool name, e.g. "github_create_issue"
    server: str  # the server's key in the gateway config
    name: str  # the tool's name on its own server
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)

    def parameters(self) -> Iterator[tuple[str, str]]:
        """(name, description) of each top-level parameter in the input schema."""
        properties = self.input_schema.get("properties")
        if not isinstance(properties, Mapping):
            return
        for pname, spec in properties.items():
            described = spec.get("description") if isinstance(spec, Mapping) else None
            yield str(pname), described if isinstance(described, str) else ""

    def name_words(self) -> str:
        """The server and tool name as plain words: "github create issue"."""
        return " ".join(split_identifier(f"{self.server} {self.name}"))

    def parameters_text(self) -> str:
        """Each parameter's name split into words, followed by its description."""
        return "\n".join(f"{' '.join(split_identifier(p))}: {d}".rstrip(": ") for p, d in self.parameters())

    def schema_details(self) -> str:
        """What the input schema says beyond its top-level parameters: the allowed values of every enum
        ("plus comfort black") and the names and descriptions of nested fields (an object's properties,
        an array's items), up to `SCHEMA_DEPTH` levels down."""
        lines: list[str] = []
        _schema_details(self.input_schema, 0, lines)
        return "\n".join(lines)

    def text(self) -> str:
        """Everything a search can match: name words, description, parameters and schema details."""
        parts = (self.name_words(), self.description.strip(), self.parameters_text(), self.schema_details())
        return "\n".join(p for p in parts if p)

    def content_hash(self) -> str:
        """sha256 of the canonical JSON of every field: equal hashes mean an embedding can be reused."""
        canonical = json.dumps(
            self._fields(),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            default=str,  # a schema with an odd value must still hash, deterministically
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def to_json(self) -> str:
        """The document as JSON, for the store."""
        return json.dumps(self._fields(), ensure_ascii=False, default=str)

    def _fields(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "server": self.server,
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    @classmethod
    def from_json(cls, raw: str) -> ToolDocument:
        data = json.loads(raw)
        return cls(
            key=data["key"],
            server=data["server"],
            name=data["name"],
            description=data.get("description") or "",
            input_schema=data.get("input_schema") or {},
        )


def _schema_details(spec: object, depth: int, out: list[str]) -> None:
    if not isinstance(spec, Mapping) or depth > SCHEMA_DEPTH:
        return
    values = spec.get("enum")
    if isinstance(values, list) and values:
        out.append(" ".join(str(v) for v in values[:ENUM_VALUES]))
    properties = spec.get("properties")
    if isinstance(properties, Mapping):
        for pname, child in properties.items():
            if depth > 0:  # top-level parameters are `parameters_text` already
                described = child.get("description") if isinstance(child, Mapping) else None
                words = " ".join(split_identifier(str(pname)))
                out.append(f"{words}: {described}" if isinstance(described, str) and described else words)
            _schema_details(child, depth + 1, out)
    items = spec.get("items")
    if isinstance(items, Mapping):
        described = items.get("description")
        if depth > 0 and isinstance(described, str) and described:
            out.append(described)
        _schema_details(items, depth + 1, out)


@dataclass(frozen=True)
class SearchHit:
    """One result: the exposed tool name and its score (higher is better; only comparable within one search)."""

    key: str
    score: float
