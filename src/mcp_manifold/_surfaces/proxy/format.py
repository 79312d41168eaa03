"""The proxy tool's format: parameter validation, list selection, result building and decoding.

Pure functions over SDK models and plain dicts, shared by the gateway's proxy surface
(`surfaces/proxy.py`), the library helper (`proxy_server.py`) and `ProxyClient`. The format is
the MCP Proxy Extension draft (Magg's `proxy` tool), so a client written against Magg works unchanged.

Annotations on the wire: the spec puts `proxyAction`, `proxyType`, ... inside each content item's
`annotations`, but the SDK's outbound sieve re-validates every `tools/call` result against the
protocol schema (whose `Annotations` ignores unknown keys) and would drop them. So results are built
with those keys parked in the item's `_meta` under `WIRE_KEY` (which the sieve keeps), and
`lift_wire_extras` - run by a server middleware on the already-sieved dict - moves them to where
the spec wants them: `annotations`, and `contentType` on an objectified resource.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

import mcp_types as types
from pydantic import ConfigDict

from mcp_manifold._core.arguments import given, integer_field, json_type_name, object_argument, string_field
from mcp_manifold._core.suggestions import LONGEST_URI, did_you_mean, quoted
from mcp_manifold._errors import InvalidRequest, NotFound

Action = Literal["list", "info", "call"]
Kind = Literal["tool", "resource", "prompt"]
Item: TypeAlias = types.Tool | types.Resource | types.ResourceTemplate | types.Prompt

ACTIONS: tuple[Action, ...] = ("list", "info", "call")
BATCH = "batch"
KINDS: tuple[Kind, ...] = ("tool", "resource", "prompt")
PARAMETERS = ("action", "type", "path", "args", "limit", "offset", "filter_server", "filter", "operations")
LIST_ONLY = ("limit", "offset", "filter_server", "filter")
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_BATCH = 100
# A list's tags are each matched against every item, on the event loop: 100,000 tags (2.7 MB) over 1,000
# tools held the gateway, every client's requests, for 135 s. A filter names a few tags, each a few words.
MAX_TAGS = 32
MAX_TAG_CHARS = 200
JSON_MIME = "application/json"
# `pythonType` of list results; info results name the item's own class. A resource list holds both
# kinds, and Magg's client decodes it only under the exact name its server emits: Python's `str()` of
# the union `mcp.types.Resource | mcp.types.ResourceTemplate` (a union has no `__name__`). So that
# string, not the spec's `Resource|ResourceTemplate` (docs/proxy.md, "Type identifiers").
MAGG_RESOURCE_LIST_TYPE = "mcp.types.Resource | mcp.types.ResourceTemplate"
PYTHON_TYPES: dict[Kind, str] = {"tool": "Tool", "resource": MAGG_RESOURCE_LIST_TYPE, "prompt": "Prompt"}
# The class names a `pythonType` may join with `|` for each kind, in any spelling a server uses:
# simple (`Resource`), qualified (`mcp.types.Resource`), spaced or not around `|`.
_TYPE_NAMES: dict[Kind, frozenset[str]] = {
    "tool": frozenset({"Tool"}),
    "resource": frozenset({"Resource", "ResourceTemplate"}),
    "prompt": frozenset({"Prompt"}),
}
WIRE_KEY = "io.github.mcp-manifold/proxy-wire"
# In a failed read's or prompt's `_meta`: the MCP error code the server answered with. The spec's
# answer has no place for it, and a transparent client needs it to raise what a direct one would.
ERROR_CODE_KEY = "io.github.mcp-manifold/error-code"
ANNOTATION_KEYS = frozenset(
    {"proxyAction", "proxyType", "proxyPath", "pythonType", "many", "totalCount", "offset", "limit", "batchIndex"}
)
_COMPACT = (",", ":")
_MISSING: Any = object()


# --- requests -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProxyOperation:
    """One validated list, info or call operation."""

    action: Action
    type: Kind
    path: str | None = None
    args: dict[str, Any] | None = None
    limit: int = DEFAULT_LIMIT
    offset: int = 0
    filter_server: str | None = None
    prefix: str | None = None
    tags: tuple[str, ...] = ()

    def to_arguments(self) -> dict[str, Any]:
        """The proxy tool arguments for this operation, leaving out what is at its default."""
        arguments: dict[str, Any] = {"action": self.action, "type": self.type}
        if self.path is not None:
            arguments["path"] = self.path
        if self.args is not None:
            arguments["args"] = self.args
        if self.action == "list":
            if self.limit != DEFAULT_LIMIT:
                arguments["limit"] = self.limit
            if self.offset:
                arguments["offset"] = self.offset
            if self.filter_server is not None:
                arguments["filter_server"] = self.filter_server
            if self.prefix is not None or self.tags:
                arguments["filter"] = {
                    key: value for key, value in (("prefix", self.prefix), ("tags", list(self.tags))) if value
                }
        return arguments


@dataclass(frozen=True)
class InvalidOperation:
    """A batch operation that failed validation; reported inline, the others still run."""

    message: str
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchRequest:
    """The `batch` extension: operations run independently, results come back in order."""

    operations: list[ProxyOperation | InvalidOperation]


def parse_request(arguments: Mapping[str, Any]) -> ProxyOperation | BatchRequest:
    """Validate proxy tool arguments; every rule broken raises `InvalidRequest` with a clear message."""
    if not isinstance(arguments, Mapping):
        raise InvalidRequest("the proxy tool's arguments must be an object")
    _check_known(arguments)
    action = _action(arguments)
    if action == BATCH:
        return _parse_batch(arguments)
    return _parse_operation(arguments, cast(Action, action))


def _check_known(arguments: Mapping[str, Any]) -> None:
    unknown = [key for key in arguments if key not in PARAMETERS]
    if unknown:
        raise InvalidRequest(f"unknown parameter {quoted(unknown[0])}; the proxy tool takes: {', '.join(PARAMETERS)}")


def _action(arguments: Mapping[str, Any]) -> str:
    choices = f"{', '.join(ACTIONS)} (or {BATCH})"
    if not given(arguments, "action"):
        raise InvalidRequest(f"missing required parameter 'action': one of {choices}")
    action = arguments["action"]
    if action not in (*ACTIONS, BATCH):
        shown = quoted(action) if isinstance(action, str) else json_type_name(action)
        raise InvalidRequest(f"unknown action {shown}: expected one of {choices}")
    return cast(str, action)


def _parse_operation(arguments: Mapping[str, Any], action: Action) -> ProxyOperation:
    if given(arguments, "operations"):
        raise InvalidRequest(f"'operations' is only allowed for action '{BATCH}', not '{action}'")
    kind = _kind(arguments)
    path = _path(arguments, action, kind)
    args = _args(arguments, action)
    for key in LIST_ONLY:
        if action != "list" and given(arguments, key):
            raise InvalidRequest(f"'{key}' is only allowed for action 'list', not '{action}'")
    if action != "list":
        return ProxyOperation(action, kind, path, args)
    prefix, tags = _filter(arguments.get("filter"))
    return ProxyOperation(
        action,
        kind,
        limit=integer_field(arguments, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
        offset=integer_field(arguments, "offset", 0, 0, None),
        filter_server=string_field(arguments, "filter_server"),
        prefix=prefix,
        tags=tags,
    )


def _kind(arguments: Mapping[str, Any]) -> Kind:
    choices = ", ".join(KINDS)
    if not given(arguments, "type"):
        raise InvalidRequest(f"missing required parameter 'type': one of {choices}")
    kind = arguments["type"]
    if kind not in KINDS:
        raise InvalidRequest(f"unknown type {kind!r}: expected one of {choices}")
    return cast(Kind, kind)


def _path(arguments: Mapping[str, Any], action: Action, kind: Kind) -> str | None:
    has_path = given(arguments, "path")
    if action == "list":
        if has_path:
            raise InvalidRequest(f"'path' must not be given for action 'list' (it lists every {kind})")
        return None
    what = "URI" if kind == "resource" else "name"
    if not has_path:
        raise InvalidRequest(f"'path' is required for action '{action}': the {what} of the {kind}")
    path = arguments["path"]
    if not isinstance(path, str):
        raise InvalidRequest(f"'path' must be a string (the {what} of the {kind}), got {json_type_name(path)}")
    if not path:
        raise InvalidRequest(f"'path' must not be empty: give the {what} of the {kind}")
    return path


def _args(arguments: Mapping[str, Any], action: Action) -> dict[str, Any] | None:
    if not given(arguments, "args"):
        return None
    if action != "call":
        raise InvalidRequest(f"'args' must not be given for action '{action}'; it is only allowed for action 'call'")
    return object_argument(arguments["args"], "args")


def _filter(raw: Any) -> tuple[str | None, tuple[str, ...]]:
    if raw is None:
        return None, ()
    if not isinstance(raw, Mapping):
        raise InvalidRequest(f"'filter' must be an object with 'prefix' and/or 'tags', got {json_type_name(raw)}")
    unknown = [key for key in raw if key not in ("prefix", "tags")]
    if unknown:
        raise InvalidRequest(f"unknown filter key {unknown[0]!r}: 'filter' takes 'prefix' and 'tags'")
    prefix = string_field(raw, "prefix")
    tags = raw.get("tags")
    if tags is None:
        return prefix, ()
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag.strip() for tag in tags):
        raise InvalidRequest("'filter.tags' must be a list of non-empty strings")
    if len(tags) > MAX_TAGS:
        raise InvalidRequest(f"'filter.tags' takes at most {MAX_TAGS} tags, got {len(tags)}")
    longest = max(len(tag) for tag in tags)
    if longest > MAX_TAG_CHARS:
        raise InvalidRequest(f"'filter.tags': a tag has at most {MAX_TAG_CHARS} characters, got one of {longest}")
    return prefix, tuple(tags)


def _parse_batch(arguments: Mapping[str, Any]) -> BatchRequest:
    extra = [key for key in arguments if key not in ("action", "operations") and arguments[key] is not None]
    if extra:
        raise InvalidRequest(f"action '{BATCH}' takes only 'operations'; {extra[0]!r} belongs inside each operation")
    operations = arguments.get("operations")
    if not isinstance(operations, list) or not operations:
        raise InvalidRequest(f"action '{BATCH}' needs 'operations': a non-empty array of proxy operations")
    if len(operations) > MAX_BATCH:
        raise InvalidRequest(f"a batch takes at most {MAX_BATCH} operations, got {len(operations)}")
    return BatchRequest([_parse_batch_item(index, raw) for index, raw in enumerate(operations)])


def _parse_batch_item(index: int, raw: Any) -> ProxyOperation | InvalidOperation:
    if not isinstance(raw, Mapping):
        return InvalidOperation(f"operation {index} must be an object, got {json_type_name(raw)}")
    try:
        _check_known(raw)
        action = _action(raw)
        if action == BATCH:
            raise InvalidRequest("batch operations cannot be nested")
        return _parse_operation(raw, cast(Action, action))
    except InvalidRequest as exc:
        return InvalidOperation(str(exc), raw)


def prompt_arguments(args: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Prompt arguments are strings in MCP; other JSON values are sent JSON-encoded (`3` -> "3")."""
    if args is None:
        return None
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in args.items()}


# --- list selection -----------------------------------------------------------------------------


def item_key(item: Item) -> str:
    """The exposed name or URI an item is addressed by (what `path` and the prefix filters match)."""
    if isinstance(item, types.ResourceTemplate):
        return item.uri_template
    if isinstance(item, types.Resource):
        return item.uri
    return item.name


def select(items: Sequence[Item], op: ProxyOperation) -> tuple[list[Item], int]:
    """Filter (prefix, tags) then paginate; returns the page and the filtered total."""
    prefixes = [prefix for prefix in (op.filter_server, op.prefix) if prefix]
    chosen = [
        item
        for item in items
        if all(item_key(item).startswith(prefix) for prefix in prefixes) and (not op.tags or has_tag(item, op.tags))
    ]
    return chosen[op.offset : op.offset + op.limit], len(chosen)


_WORD = re.compile(r"[a-z0-9]+")


def has_tag(item: Item, tags: Iterable[str]) -> bool:
    """Whether any tag matches: a `_meta` tag, or all of the tag's words among the item's words.

    The item's words are those of its name (split at `_`, `-`, `.` and the like), title and
    description, lower-cased; `_meta` tags are `_meta.tags` and FastMCP's `_meta._fastmcp.tags`.
    """
    text = " ".join(filter(None, (item.name, item.title, item.description))).lower()
    declared = {tag.lower() for tag in meta_tags(item)}
    for tag in tags:
        wanted = tag.lower().strip()
        if wanted in declared:
            return True
        tag_words = _WORD.findall(wanted)
        # Each word searched for whole in C: splitting every item's text into a set of words, 5,000 tools of
        # 2 KB descriptions took 1.56 s a list, holding other sessions' calls up to 2 s (found by a review).
        if tag_words and all(_whole_word(word).search(text) for word in tag_words):
            return True
    return False


@functools.lru_cache(maxsize=256)
def _whole_word(word: str) -> re.Pattern[str]:
    """`word` where it is a whole word of `_WORD`'s: no letter or digit either side."""
    return re.compile(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])")


def meta_tags(item: Item) -> list[str]:
    meta = item.meta or {}
    found: list[str] = []
    for source in (meta.get("tags"), (meta.get("_fastmcp") or {}).get("tags")):
        if isinstance(source, list):
            found.extend(tag for tag in source if isinstance(tag, str))
    return found


def find_item(items: Sequence[Item], kind: Kind, path: str) -> Item:
    """The item whose exposed name (resource: URI or URI template) is `path`."""
    for item in items:
        if item_key(item) == path:
            return item
    shown = quoted(path, LONGEST_URI) if kind == "resource" else quoted(path)
    raise NotFound(f"unknown {kind} {shown}{did_you_mean(path, (item_key(item) for item in items))}")


# --- building results ---------------------------------------------------------------------------


def dump(model: types.MCPModel) -> dict[str, Any]:
    """An SDK model as it goes on the wire: by alias, JSON types, no nulls."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def to_json(data: Any) -> str:
    return json.dumps(data, separators=_COMPACT, ensure_ascii=False)


def carry(item: types.ContentBlock, annotations: Mapping[str, Any], content_type: Any = _MISSING) -> Any:
    """Park the spec's annotation keys (and `contentType`) in `_meta` until `lift_wire_extras` runs."""
    carried: dict[str, Any] = {"annotations": dict(annotations)}
    if content_type is not _MISSING:
        carried["contentType"] = content_type
    meta = dict(item.meta or {})
    meta[WIRE_KEY] = carried
    return item.model_copy(update={"meta": meta})


def carried(item: types.ContentBlock) -> dict[str, Any]:
    """The spec annotations parked on a built item (empty when there are none)."""
    return dict(((item.meta or {}).get(WIRE_KEY) or {}).get("annotations") or {})


def call_annotations(op: ProxyOperation) -> dict[str, Any]:
    return {"proxyType": op.type, "proxyAction": op.action, "proxyPath": op.path}


def query_result(op: ProxyOperation, data: Item | Sequence[Item], *, total: int | None = None) -> types.CallToolResult:
    """A list or info answer: one embedded JSON resource with the spec's annotations (3.1)."""
    annotations: dict[str, Any] = {"proxyAction": op.action, "proxyType": op.type}
    if op.action == "list":
        items = cast(Sequence[Item], data)
        uri = f"proxy:list/{op.type}"
        text = to_json([dump(item) for item in items])
        annotations |= {"pythonType": PYTHON_TYPES[op.type], "many": True}
        total = total if total is not None else len(items)
        annotations |= {"totalCount": total, "offset": op.offset, "limit": op.limit}
    else:
        item = cast(Item, data)
        uri = f"proxy:info/{op.type}/{op.path}"
        text = to_json(dump(item))
        annotations |= {"proxyPath": op.path, "pythonType": type(item).__name__, "many": False}
    return json_answer(uri, text, annotations)


def json_answer(uri: str, text: str, annotations: Mapping[str, Any]) -> types.CallToolResult:
    """A tool result of one annotated, embedded JSON resource."""
    resource = types.TextResourceContents(uri=uri, mime_type=JSON_MIME, text=text)
    return types.CallToolResult(
        content=[carry(types.EmbeddedResource(type="resource", resource=resource), annotations)]
    )


def tool_call_result(op: ProxyOperation, result: types.CallToolResult) -> types.CallToolResult:
    """A proxied tool's own result, each content item annotated (3.2.1); isError, structuredContent kept."""
    annotations = call_annotations(op)
    return result.model_copy(update={"content": [carry(item, annotations) for item in result.content]})


def resource_call_result(op: ProxyOperation, result: types.ReadResourceResult) -> types.CallToolResult:
    """Each read content as an EmbeddedResource (3.2.2); JSON text is objectified (4.2)."""
    annotations = call_annotations(op)
    content = []
    for contents in result.contents:
        objectified = objectify(contents)
        if objectified is None:
            content.append(carry(types.EmbeddedResource(type="resource", resource=contents), annotations))
        else:
            resource = contents.model_copy(update={"text": objectified, "mime_type": JSON_MIME})
            embedded = types.EmbeddedResource(type="resource", resource=resource)
            content.append(carry(embedded, annotations, content_type=contents.mime_type))
    return types.CallToolResult(content=content)


def objectify(contents: types.TextResourceContents | types.BlobResourceContents) -> str | None:
    """Compact JSON for text that parses as a JSON object or array; None for anything else.

    Scalars ("42", "true", "\"hi\"") are left alone: they are plain text far more often than data.
    """
    if not isinstance(contents, types.TextResourceContents):
        return None
    text = contents.text.strip()
    if not text or text[0] not in "[{":
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return to_json(data)


def prompt_call_result(op: ProxyOperation, result: types.GetPromptResult) -> types.CallToolResult:
    """The prompt result as one embedded JSON resource (3.2.3)."""
    annotations = call_annotations(op) | {"pythonType": "GetPromptResult"}
    # resultType is protocol plumbing, not prompt data.
    text = to_json(result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"result_type"}))
    return json_answer(f"proxy:call/prompt/{op.path}", text, annotations)


def error_result(
    message: str, op: ProxyOperation | Mapping[str, Any] | None = None, *, code: int | None = None
) -> types.CallToolResult:
    """A failed operation (in a batch, or a failed read or prompt): its message, annotated with what is known.

    `code` is the MCP error code a server answered with, if one did; it travels in `_meta`.
    """
    if isinstance(op, ProxyOperation):
        annotations = {"proxyType": op.type, "proxyAction": op.action} | ({"proxyPath": op.path} if op.path else {})
    else:
        raw = op or {}
        names = {"type": "proxyType", "action": "proxyAction", "path": "proxyPath"}
        annotations = {names[key]: raw[key] for key in names if isinstance(raw.get(key), str)}
    item = carry(types.TextContent(type="text", text=message), annotations)
    meta = {ERROR_CODE_KEY: code} if code else None
    return types.CallToolResult(content=[item], is_error=True, _meta=meta)


def batch_result(results: Sequence[types.CallToolResult]) -> types.CallToolResult:
    """All operations' items in order, each annotated with its `batchIndex`; a summary in structuredContent."""
    content: list[Any] = []
    summary: list[dict[str, Any]] = []
    for index, result in enumerate(results):
        for item in result.content:
            carried_item = carried(item)
            content_type = ((item.meta or {}).get(WIRE_KEY) or {}).get("contentType", _MISSING)
            content.append(carry(item, carried_item | {"batchIndex": index}, content_type))
        entry: dict[str, Any] = {"index": index, "isError": result.is_error, "items": len(result.content)}
        if result.structured_content is not None:
            entry["structuredContent"] = result.structured_content
        if result.is_error:
            entry["error"] = "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))
        summary.append(entry)
    return types.CallToolResult(content=content, structured_content={"results": summary})


def lift_wire_extras(result: dict[str, Any]) -> dict[str, Any]:
    """Move parked annotation keys and `contentType` into place in a dumped tools/call result (in place)."""
    for item in result.get("content") or ():
        if isinstance(item, dict):
            _lift(item)
    return result


def _lift(item: dict[str, Any]) -> None:
    meta = item.get("_meta")
    if not isinstance(meta, dict) or WIRE_KEY not in meta:
        return
    rest = {key: value for key, value in meta.items() if key != WIRE_KEY}
    extras = meta[WIRE_KEY] or {}
    if rest:
        item["_meta"] = rest
    else:
        del item["_meta"]
    if extras.get("annotations"):
        item["annotations"] = {**(item.get("annotations") or {}), **extras["annotations"]}
    if "contentType" in extras and isinstance(item.get("resource"), dict):
        item["resource"] = {**item["resource"], "contentType": extras["contentType"]}


def wire_dump(result: types.CallToolResult) -> dict[str, Any]:
    """The wire form of a built result, extras lifted (for tests and middleware-less callers)."""
    return lift_wire_extras(dump(result))


# --- decoding (client side) ---------------------------------------------------------------------


class ProxyAnnotations(types.Annotations):
    """Annotations that keep the proxy keys (the SDK's own `Annotations` drops unknown keys)."""

    model_config = ConfigDict(extra="allow")

    proxy_action: str | None = None
    proxy_type: str | None = None
    proxy_path: str | None = None
    python_type: str | None = None
    many: bool | None = None
    total_count: int | None = None
    offset: int | None = None
    limit: int | None = None
    batch_index: int | None = None

    def standard(self) -> types.Annotations | None:
        """Only the protocol's own annotation fields, or None when there are none."""
        fields = {"audience": self.audience, "priority": self.priority, "last_modified": self.last_modified}
        kept = {key: value for key, value in fields.items() if value is not None}
        return types.Annotations(**kept) if kept else None


class ProxyTextResourceContents(types.TextResourceContents):
    """Text contents that keep `contentType`, the original MIME type of an objectified resource."""

    content_type: str | None = None


def parse_tool_result(raw: Mapping[str, Any]) -> types.CallToolResult:
    """A raw tools/call result as SDK types, keeping the proxy annotations and `contentType`."""
    result = types.CallToolResult.model_validate(raw, by_name=False)
    content: list[Any] = []
    for item, raw_item in zip(result.content, raw.get("content") or (), strict=True):
        update: dict[str, Any] = {}
        raw_annotations = raw_item.get("annotations")
        if isinstance(raw_annotations, dict) and ANNOTATION_KEYS & raw_annotations.keys():
            update["annotations"] = ProxyAnnotations.model_validate(raw_annotations)
        raw_resource = raw_item.get("resource")
        if isinstance(raw_resource, dict) and "contentType" in raw_resource and "text" in raw_resource:
            update["resource"] = ProxyTextResourceContents.model_validate(raw_resource)
        content.append(item.model_copy(update=update) if update else item)
    return result.model_copy(update={"content": content})


def proxy_annotations(item: Any) -> ProxyAnnotations | None:
    annotations = getattr(item, "annotations", None)
    return annotations if isinstance(annotations, ProxyAnnotations) else None


def proxy_error(result: types.CallToolResult) -> str | None:
    """The message of an error the proxy itself raised (bad parameters, unknown name), else None.

    The proxy annotates every item it relays, so an error result with no annotated item came from
    the proxy tool, not from the capability behind it.
    """
    if not result.is_error or not result.content or any(proxy_annotations(item) for item in result.content):
        return None
    return "\n".join(item.text for item in result.content if isinstance(item, types.TextContent)) or "proxy error"


def query_payload(result: types.CallToolResult) -> tuple[Any, ProxyAnnotations | None]:
    """The decoded JSON of a list/info/prompt answer and its annotations."""
    for item in result.content:
        if isinstance(item, types.EmbeddedResource) and isinstance(item.resource, types.TextResourceContents):
            return json.loads(item.resource.text), proxy_annotations(item)
    raise ValueError("the proxy answer holds no embedded JSON resource")


def check_python_type(kind: Kind, python_type: str | None) -> None:
    """Refuse a list or info answer whose `pythonType` names another kind's class (None: not given, fine).

    Any spelling of the right classes is accepted: `Resource|ResourceTemplate`, `Resource | ResourceTemplate`,
    `mcp.types.Resource | mcp.types.ResourceTemplate`, or one of them alone.
    """
    if python_type is None:
        return
    names = {part.strip().removeprefix("mcp.types.") for part in python_type.split("|")}
    if not names <= _TYPE_NAMES[kind]:
        expected = " | ".join(sorted(_TYPE_NAMES[kind]))
        raise ValueError(f"the proxy answered a {kind} query with pythonType {python_type!r}; expected {expected}")


def decode_items(kind: Kind, data: Any) -> list[Item]:
    """List (or info) JSON as SDK models; resources and templates are told apart by `uriTemplate`."""
    rows = data if isinstance(data, list) else [data]
    if kind == "tool":
        return [types.Tool.model_validate(row, by_name=False) for row in rows]
    if kind == "prompt":
        return [types.Prompt.model_validate(row, by_name=False) for row in rows]
    return [
        types.ResourceTemplate.model_validate(row, by_name=False)
        if "uriTemplate" in row
        else types.Resource.model_validate(row, by_name=False)
        for row in rows
    ]


def plain_item(item: Any) -> Any:
    """A relayed content item as the capability produced it: proxy annotations removed."""
    annotations = proxy_annotations(item)
    if annotations is None:
        return item
    return item.model_copy(update={"annotations": annotations.standard()})


def tool_result_from_proxy(result: types.CallToolResult) -> types.CallToolResult:
    """A proxied tool call's result as the direct call returns it."""
    return result.model_copy(update={"content": [plain_item(item) for item in result.content]})


def read_result_from_proxy(result: types.CallToolResult) -> types.ReadResourceResult:
    """A proxied resource read as `resources/read` returns it; objectified text gets its MIME type back."""
    contents: list[types.TextResourceContents | types.BlobResourceContents] = []
    for item in result.content:
        if not isinstance(item, types.EmbeddedResource):
            continue
        resource = item.resource
        if isinstance(resource, ProxyTextResourceContents):
            fields = resource.model_dump(exclude={"content_type"})
            fields["mime_type"] = resource.content_type
            resource = types.TextResourceContents.model_validate(fields)
        contents.append(resource)
    # The response envelope's `_meta` (e.g. the 2026-07-28 serverInfo stamp) is the read's own.
    return types.ReadResourceResult(contents=contents, _meta=result.meta)


def prompt_result_from_proxy(result: types.CallToolResult) -> types.GetPromptResult:
    data, _ = query_payload(result)
    prompt = types.GetPromptResult.model_validate(data, by_name=False)
    return prompt if prompt.meta is not None else prompt.model_copy(update={"meta": result.meta})


def find_proxy_tool(tools: Iterable[types.Tool], name: str = "proxy") -> types.Tool | None:
    """Discovery (spec 6.1): the tool called `name`, if the server has one."""
    return next((tool for tool in tools if tool.name == name), None)
