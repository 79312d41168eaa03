"""What the index stores about a tool, and what a search returns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_manifold._search.terms import split_identifier


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

    def text(self) -> str:
        """Everything a search can match: name words, description and parameters."""
        parts = (self.name_words(), self.description.strip(), self.parameters_text())
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


@dataclass(frozen=True)
class SearchHit:
    """One result: the exposed tool name and its score (higher is better; only comparable within one search)."""

    key: str
    score: float
