"""A tool result as text: what is sized, what a spill file holds, what a preview shows.

Plain code. A result's *data* is its structured content, else the JSON its only text block holds,
else that text, else its content list in wire form. Object and array data is written as indented
JSON (so line-based reads work) or, with `toon`, as TOON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types

# What a tool call answers: its result, or (to a 2026-07-28 client) the server's questions first.
ToolAnswer = types.CallToolResult | types.InputRequiredResult

PREVIEW_CHARS = 400

_MISSING: Any = object()


def estimate_tokens(size_in_bytes: int) -> int:
    """About 4 bytes per token for JSON-heavy text: rough, but cheap and never zero for content."""
    return (size_in_bytes + 3) // 4


@dataclass(frozen=True)
class SpilledFile:
    path: Path
    byte_size: int
    line_count: int

    @property
    def estimated_tokens(self) -> int:
        return estimate_tokens(self.byte_size)


@dataclass(frozen=True)
class RenderedResult:
    """One tool result, serialized."""

    text: str  # what a spill file holds
    suffix: str  # .json, .toon or .txt
    data: Any  # the parsed object/array when there is one, else _MISSING
    toon: bool  # whether `text` is TOON (then it also replaces the content when inline)
    inline: list[types.ContentBlock]  # the content to answer with when the result stays inline

    @property
    def inline_size(self) -> int:
        """Bytes the inline answer puts in context: what thresholds compare against."""
        return content_size(self.inline)

    def top_level_keys(self) -> str | None:
        if isinstance(self.data, dict):
            keys = list(self.data)
            shown = ", ".join(str(key) for key in keys[:20])
            return f"[{shown}{', ...' if len(keys) > 20 else ''}]"
        if isinstance(self.data, list):
            return f"(an array of {len(self.data)} items)"
        return None

    def preview(self) -> str:
        """The head of the data, compact (JSON without indentation) so the preview says the most."""
        head = self.text if self.data is _MISSING or self.toon else _compact(self.data)
        return head if len(head) <= PREVIEW_CHARS else head[:PREVIEW_CHARS] + "..."


def render_result(result: types.CallToolResult, *, toon: bool = False) -> RenderedResult:
    data = _data_of(result)
    content = list(result.content)
    if isinstance(data, str):
        return RenderedResult(data, ".txt", _MISSING, False, content or [_text(data)])
    if toon and isinstance(data, dict | list):
        from toon_format import encode

        text = encode(data)
        return RenderedResult(text, ".toon", data, True, [_text(text)])
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return RenderedResult(text, ".json", data, False, content or [_text(_compact(data))])


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _data_of(result: types.CallToolResult) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if len(blocks) == 1 and isinstance(blocks[0], types.TextContent):
        text = blocks[0].text
        if text.lstrip().startswith(("{", "[")):
            try:
                return json.loads(text)
            except ValueError:
                pass
        return text
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def content_size(content: list[types.ContentBlock] | list[dict[str, Any]]) -> int:
    """Bytes of content as it enters context: text as is, other blocks as compact JSON (blocks as models,
    or in wire form)."""
    size = 0
    for block in content:
        if isinstance(block, dict):
            text = block.get("text") if block.get("type") == "text" else None
            size += len((text if isinstance(text, str) else _compact(block)).encode("utf-8"))
        elif isinstance(block, types.TextContent):
            size += len(block.text.encode("utf-8"))
        else:
            size += len(_compact(block.model_dump(mode="json", by_alias=True, exclude_none=True)).encode("utf-8"))
    return size


def spill_notice(spilled: SpilledFile, rendered: RenderedResult, *, threshold: int | None, ttl: float) -> str:
    """The short text that stands in for a spilled result: where it is, how big, what it starts with."""
    why = f"auto-spilled (exceeded {threshold} bytes)" if threshold is not None else "written"
    lines = [
        f"Result {why} to file: {spilled.path} (deleted at shutdown or after {ttl:g}s).",
        f"Size: {spilled.byte_size} bytes, {spilled.line_count} lines (~{spilled.estimated_tokens} tokens).",
    ]
    keys = rendered.top_level_keys()
    if keys:
        lines.append(f"Top-level keys: {keys}")
    lines.append(f"Preview: {rendered.preview()}")
    return "\n".join(lines)


@dataclass(frozen=True)
class SpillPolicy:
    """When a tool result goes to a file instead of into the client's context, and how it is announced."""

    threshold: int = 0  # inline bytes above which a result spills; 0: never by size
    to_file: bool = False  # spill a successful result whatever its size (dispatch's `resultToFile`)
    toon: bool = False  # write object/array data as TOON (when there is a threshold: `renders_toon`)
    ttl: float = 0.0  # seconds the file is kept (said in the notice)
    hint: str | None = None  # a line added to the notice: how to read the file

    @property
    def active(self) -> bool:
        return self.threshold > 0 or self.to_file

    @property
    def renders_toon(self) -> bool:
        """TOON only with a size threshold, as Mini-A's `mcpproxytoon` (it sizes and previews the TOON text)."""
        return self.toon and self.threshold > 0


@dataclass(frozen=True)
class Spilled:
    """A result that went to a file: the notice the client gets, and the file."""

    result: types.CallToolResult
    file: SpilledFile
    auto: bool  # by size (True) or because the caller asked for a file


def spill_if_due(
    result: types.CallToolResult, policy: SpillPolicy, write: Callable[[str, str], SpilledFile]
) -> Spilled | None:
    """The notice standing in for `result` when `policy` says it goes to a file (written with `write`), else None.

    Errors spill only by size: an error asked to go to a file stays inline, where the client sees it.
    The notice keeps `is_error`; `_meta` has the file's facts (`resultFile`, `byteSize`, ...) for programs.
    """
    to_file = policy.to_file and not result.is_error
    if not (to_file or policy.threshold > 0):
        return None
    rendered = render_result(result, toon=policy.renders_toon)
    auto = not to_file and rendered.inline_size > policy.threshold
    if not (to_file or auto):
        return None
    spilled = write(rendered.text, rendered.suffix)
    notice = spill_notice(spilled, rendered, threshold=policy.threshold if auto else None, ttl=policy.ttl)
    if policy.hint:
        notice = f"{notice}\n{policy.hint}"
    answer = types.CallToolResult(
        content=[types.TextContent(type="text", text=notice)],
        is_error=result.is_error,
        _meta=spill_facts(spilled, auto=auto),
    )
    return Spilled(answer, spilled, auto)


def spill_facts(spilled: SpilledFile, *, auto: bool) -> dict[str, Any]:
    return {
        "resultFile": str(spilled.path),
        "autoSpilled": auto,
        "byteSize": spilled.byte_size,
        "lineCount": spilled.line_count,
        "estimatedTokens": spilled.estimated_tokens,
    }


def tool_error(message: str) -> types.CallToolResult:
    """A tool result the client shows as an error, carrying our message and nothing else."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def scrubbed(result: types.CallToolResult, scrub: Callable[[str], str]) -> types.CallToolResult:
    """An error result with `scrub` applied to its text (a server's secrets can appear in what it says)."""
    content = [
        block.model_copy(update={"text": scrub(block.text)}) if isinstance(block, types.TextContent) else block
        for block in result.content
    ]
    return result.model_copy(update={"content": content})


def with_exposed_uris(
    blocks: list[types.ContentBlock], exposed: Callable[[str], str]
) -> list[types.ContentBlock] | None:
    """`blocks` with the URIs of resource links and embedded resources in the exposed form (so the client
    can read them back through the gateway), or None when none needed it."""
    changed: list[types.ContentBlock] | None = None
    for index, block in enumerate(blocks):
        if isinstance(block, types.ResourceLink):
            replaced: types.ContentBlock = block.model_copy(update={"uri": exposed(str(block.uri))})
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource.model_copy(update={"uri": exposed(str(block.resource.uri))})
            replaced = block.model_copy(update={"resource": resource})
        else:
            continue
        if changed is None:
            changed = list(blocks)
        changed[index] = replaced
    return changed


def drop_server_stamp(result: Any) -> Any:
    """Remove from `result` the identity a 2026-07-28 server stamps on it (`_meta` serverInfo): through
    the gateway, the server a client talks to is the gateway, which stamps its own. In place, and
    returned: it is called on a result just made from the server's answer, which nothing else holds
    (a copy would be work for nothing)."""
    meta = getattr(result, "meta", None)
    if meta and types.SERVER_INFO_META_KEY in meta:
        result.meta = meta_without_server_stamp(meta)
    return result


def meta_without_server_stamp(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """A result's `_meta` less the server's `serverInfo` stamp; None when nothing else is left."""
    rest = {key: value for key, value in meta.items() if key != types.SERVER_INFO_META_KEY}
    return rest or None
