"""What one backend listed: its tools, resources, resource templates and prompts, as the wire types.

One type for every place that holds a backend's lists: the catalog (configured servers), the listing
cache on disk, and the hub (instances found at run time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import mcp_types as types


@dataclass(frozen=True)
class Listing:
    """A backend's lists, in the order it gave them."""

    tools: list[types.Tool] = field(default_factory=list)
    resources: list[types.Resource] = field(default_factory=list)
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    # The extensions (SEP-2133) the server declared, kept with its lists so that a warm start knows them.
    extensions: dict[str, Any] | None = None

    def tool(self, name: str) -> types.Tool | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def prompt(self, name: str) -> types.Prompt | None:
        return next((prompt for prompt in self.prompts if prompt.name == name), None)

    def owns_uri(self, uri: str) -> bool:
        """Whether `uri` is one of the resources, or matches one of the templates."""
        return any(resource.uri == uri for resource in self.resources) or any(
            template_pattern(template.uri_template).fullmatch(uri) for template in self.templates
        )


@lru_cache(maxsize=1024)
def template_pattern(template: str) -> re.Pattern[str]:
    """A URI template (RFC 6570, the simple forms) as a pattern that matches its URIs."""
    pattern = ""
    for literal, expression in re.findall(r"([^{]*)(\{[^}]*\})?", template):
        pattern += re.escape(literal)
        if expression:
            # `{+var}` and `{#var}` may span slashes; `{var}` stays within one segment.
            pattern += ".*" if expression[1:2] in ("+", "#") else "[^/]*"
    return re.compile(pattern)
