"""Hypothesis strategies for the gateway's fuzzer (tests/test_fuzz.py): JSON-RPC lines a hostile or
broken client might send, each with the name of the strategy that made it and the method it names.

Values are nasty where it counts: lone surrogates, NUL and control characters, line and paragraph
separators, huge strings and keys, huge and non-finite numbers, deep nesting, wrong types. Lines are
written as a Python client would (`json.dumps`, ASCII escapes), so a surrogate travels as `\\ud800`
and a non-finite number as `NaN` or `Infinity`; raw framing adds what no encoder writes at all.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

# Numbers past Python's 4300-digit limit are fuzzed too, so this process (the test's, never the
# gateway's) writes and shows them.
sys.set_int_max_str_digits(0)

# Names the gateway under fuzz serves (tests/test_fuzz.py: kitchen's harmless tools, numbers, all surfaces).
TOOLS = [
    "kitchen_echo",
    "kitchen_add",
    "kitchen_fail",
    "kitchen_mixed",
    "kitchen_image",
    "kitchen_embedded",
    "numbers_add",
    "numbers_multiply",
    "numbers_sqrt",
    "proxy",
    "proxy-dispatch",
    "retrieve_tools",
    "call_tool",
    "instances_list",
    "instances_connect",
    "instances_call",
    "execute_code",
]
SERVER_TOOLS = ["echo", "add", "fail", "mixed", "sqrt", "multiply"]
URIS = ["kitchen+kitchen://text", "kitchen+kitchen://config", "numbers+numbers://constants", "kitchen://text"]
# Other spellings of those URIs, which a server may read as another (`_core/uri_spelling.py`), malformed ones
# and a prefix with `_`; the HTTP fuzzer's profile refuses them, saying why.
URI_SPELLINGS = [
    "kitchen+kitchen://text/../config",
    "kitchen+KITCHEN://text",
    "kitchen+kitchen://%74ext",
    "kitchen+kitchen://te%78t",
    "kitchen+kitchen://text#top",
    "kitchen+kitchen://text/",
    "kitchen+kitchen://text//",
    "kitchen+kitchen:text",
    "kitchen+file://localhost/etc/passwd",
    "kitchen+file:/etc/passwd",
    "kitchen+http://[::1/",
    "kitchen+https://h:x/",
    "kitchen+https://User@H.:443",
    "ui://kitchen+x/../y",
    "ui://+x",
    "my_kitchen+kitchen://text",
    "+kitchen://text",
    "kitchen+",
]
PROMPTS = ["kitchen_greet", "kitchen_summarize", "numbers_explain"]
# Programs for the code surface: plain ones, ones that call tools (well and badly), and ones that fail.
PROGRAMS = [
    "return 1 + 1",
    "console.log('x'); return [1, {a: null}]",
    "return await tools.kitchen_echo({text: 'code'})",
    "return await tools.numbers_add({a: 1, b: 'two'})",
    "await tools.numbers_nope({})",
    "throw new Error('thrown')",
    "return '\\ud800'",
    "return {x: 1n}",
    "return await Promise.all([tools.kitchen_echo({text: 'a'}), tools.kitchen_echo({})])",
    "syntax error (",
]
TEMPLATE = "kitchen+kitchen://greeting/"
# Every method a client may send (and a few it may not); subscriptions/listen is left out: it is a
# stream that stays open by design, so "answered" does not apply to it.
METHODS = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/list",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
]
# What matters most comes first (hypothesis starts from the first) and more often.
WEIGHTED_METHODS = ["tools/call"] * 8 + ["resources/read", "prompts/get", "completion/complete"] * 2 + METHODS
NAMED_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass(frozen=True)
class Case:
    """One line to send: what made it, the method it names (or `-`), and the line itself."""

    strategy: str
    method: str
    line: bytes
    headers: tuple[tuple[str, str], ...] = ()  # extra or wrong HTTP headers (the HTTP runs)


def rarely(one_in: int) -> st.SearchStrategy[bool]:
    """True once in `one_in` draws (an integer draw would favour its small values)."""
    return weighted((one_in - 1, st.just(False)), (1, st.just(True)))


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of `choices`, each as often as its weight (`st.one_of` would merge repeated strategies)."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


# --- values ---------------------------------------------------------------------------------------

NASTY_PIECES = [
    "\ud800",
    "\udfff",
    "a\udc00b",
    "\ud83d",  # half of an emoji's surrogate pair
    "\x00",
    "nul\x00inside",
    "\x1b[31mred",
    "\u2028\u2029",
    "\ufeff",
    "\uffff",
    "\U0010ffff",
    "%00",
    "../../../etc/passwd",
    "${HOME}",
    "' OR 1=1 --",
    "\r\n",
    '"},"id":1}',
    "{{7*7}}",
]
surrogates = st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3)
controls = st.text(alphabet=st.characters(max_codepoint=0x1F), min_size=1, max_size=5)
nasty_text = weighted(
    (4, st.text(max_size=20)),
    (1, st.text(alphabet=st.characters(codec="utf-8"), max_size=8)),
    (2, st.sampled_from(NASTY_PIECES)),
    (1, st.tuples(st.text(max_size=5), surrogates, st.text(max_size=5)).map("".join)),
    (1, controls),
    (1, st.integers(10_000, 300_000).map(lambda size: "x" * size)),  # huge strings
)
nasty_numbers = st.one_of(
    st.integers(),
    st.integers(-(10**400), 10**400),
    st.sampled_from([10**4400, -(10**4400), 2**63, -(2**63) - 1, 2**64]),  # past Python's own 4300-digit limit
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), nasty_numbers, nasty_text)
huge_key = st.integers(1_000, 200_000).map(lambda size: "k" * size)
keys = st.one_of(nasty_text, huge_key)


def nested(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


deep = st.integers(50, 800).map(nested)  # deeper lines: FRAMING (json.dumps stops near 1000)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=12,
)
values = weighted((4, json_values), (1, deep))
objects = weighted((4, st.dictionaries(keys, values, max_size=5)), (1, st.builds(lambda d: {"deep": d}, deep)))
wrong_types = st.one_of(scalars, st.lists(scalars, max_size=3))


def as_json_string(value: Any) -> str:
    """Arguments as a JSON string, as models often send them; surrogates become `\\ud800` escapes."""
    return json.dumps(value)


arguments = weighted((4, objects), (2, objects.map(as_json_string)), (1, wrong_types))


def name_or(names: list[str]) -> st.SearchStrategy[Any]:
    return weighted((6, st.sampled_from(names)), (1, nasty_text), (1, wrong_types))


# --- params per method ----------------------------------------------------------------------------

surface_arguments = st.one_of(
    st.fixed_dictionaries(
        {
            "action": st.sampled_from(["call", "list", "info", "search"]),
            "type": st.sampled_from(["tool", "resource", "prompt"]),
            "path": weighted((4, name_or(TOOLS + URIS + PROMPTS)), (1, st.sampled_from(URI_SPELLINGS))),
            "args": arguments,
        }
    ),
    st.fixed_dictionaries(
        {
            "action": st.sampled_from(["call", "list", "search", "readresult"]),
            "tool": name_or(SERVER_TOOLS),
            "connection": name_or(["kitchen", "numbers"]),
            "query": nasty_text,
            "arguments": arguments,
        }
    ),
    st.fixed_dictionaries({"name": name_or(TOOLS), "args": arguments}),
    st.fixed_dictionaries({"query": nasty_text, "limit": nasty_numbers}),
    st.fixed_dictionaries(
        {"instance_id": name_or(["kitchen", "numbers"]), "tool": name_or(SERVER_TOOLS), "arguments": arguments}
    ),
    st.fixed_dictionaries({"code": weighted((3, st.sampled_from(PROGRAMS)), (1, nasty_text), (1, wrong_types))}),
    objects,
)
uris = weighted(
    (5, name_or(URIS)), (2, st.sampled_from(URI_SPELLINGS)), (1, nasty_text.map(lambda text: TEMPLATE + text))
)
PARAMS: dict[str, st.SearchStrategy[Any]] = {
    "tools/call": st.fixed_dictionaries({"name": name_or(TOOLS), "arguments": st.one_of(surface_arguments, arguments)}),
    "resources/read": st.fixed_dictionaries({"uri": uris}),
    "resources/subscribe": st.fixed_dictionaries({"uri": uris}),
    "resources/unsubscribe": st.fixed_dictionaries({"uri": uris}),
    "prompts/get": st.fixed_dictionaries({"name": name_or(PROMPTS), "arguments": st.one_of(objects, wrong_types)}),
    "completion/complete": st.fixed_dictionaries(
        {
            "ref": st.one_of(
                st.fixed_dictionaries({"type": st.just("ref/prompt"), "name": name_or(PROMPTS)}),
                st.fixed_dictionaries({"type": st.just("ref/resource"), "uri": name_or([TEMPLATE + "{name}"])}),
                values,
            ),
            "argument": st.one_of(st.fixed_dictionaries({"name": nasty_text, "value": nasty_text}), values),
            "context": st.one_of(st.fixed_dictionaries({"arguments": objects}), values),
        }
    ),
    "logging/setLevel": st.fixed_dictionaries({"level": name_or(["debug", "info", "warning", "emergency"])}),
    "initialize": st.fixed_dictionaries(
        {
            "protocolVersion": name_or(["2025-11-25", "2025-06-18", "2026-07-28"]),
            "capabilities": values,
            "clientInfo": values,
        }
    ),
    "notifications/cancelled": st.fixed_dictionaries({"requestId": values, "reason": nasty_text}),
    "notifications/progress": st.fixed_dictionaries({"progressToken": values, "progress": nasty_numbers}),
    "tools/list": st.fixed_dictionaries({"cursor": nasty_text}),
}


def params_for(method: str) -> st.SearchStrategy[Any]:
    plausible = PARAMS.get(method, st.fixed_dictionaries({}))
    return weighted((7, plausible), (2, objects), (1, wrong_types))


# --- whole messages -------------------------------------------------------------------------------

request_ids = st.one_of(
    st.integers(0, 2**31).map(lambda number: f"fz-{number}"),  # a good id: the answer must carry it
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    nasty_text,
    st.lists(st.integers(), max_size=2),
)


def dump(message: Any) -> bytes:
    """As Python's encoder writes it: `\\ud800` escapes, and NaN/Infinity for the non-finite numbers."""
    return json.dumps(message).encode()


@st.composite
def messages(draw: st.DrawFn, era: str) -> Case:
    """A JSON-RPC request or notification with fuzzed params (and now and then a fuzzed envelope)."""
    known = draw(st.integers(0, 9)) < 9  # nine in ten name a method the gateway knows
    method = draw(st.sampled_from(WEIGHTED_METHODS) if known else nasty_text)
    params = draw(params_for(method) if isinstance(method, str) else objects)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not method.startswith("notifications/") or draw(st.booleans()):
        good = draw(st.integers(0, 4)) < 4  # four in five carry a good id, which the answer must carry back
        message["id"] = draw(st.integers(0, 2**31).map(lambda number: f"fz-{number}") if good else request_ids)
    if era == "modern" and isinstance(params, dict):
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        if draw(rarely(10)):  # now and then a broken envelope
            meta = draw(st.one_of(objects, st.dictionaries(st.sampled_from(list(meta)), values)))
        params = {**params, "_meta": meta}
    if isinstance(params, dict) and draw(rarely(5)):  # what a client adds to `_meta`, in either era
        extras = draw(st.lists(st.sampled_from(sorted(META_EXTRAS)), min_size=1, max_size=2, unique=True))
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        params = {**params, "_meta": {**meta, **{key: draw(META_EXTRAS[key]) for key in extras}}}
    if params is not None or draw(st.booleans()):
        message["params"] = params
    if draw(rarely(20)):
        message["jsonrpc"] = draw(st.one_of(st.just("1.0"), scalars))
    strategy = "message"
    if draw(st.booleans()):  # half of them well-formed JSON, which the SDK reads: deeper into the gateway
        message, strategy = clean(message), "clean"
        params = message.get("params")
    headers = ()
    if era == "modern":
        headers = draw(modern_headers(method if isinstance(method, str) else "-", params))
    label = method if method in METHODS else "unknown method"
    return Case(strategy, label, dump(message), headers)


def clean(value: Any) -> Any:
    """`value` as valid JSON in UTF-8: surrogates replaced, non-finite numbers made 0 (nesting stays)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode()
    if isinstance(value, float):
        return value if value - value == 0.0 else 0.0
    if isinstance(value, list):
        return [clean(item) for item in value]
    if isinstance(value, dict):
        return {clean(key): clean(item) for key, item in value.items()}
    return value


def header_value(text: str) -> str:
    """What an HTTP client can send of `text`: printable ASCII (others become `?`), 200 characters at most."""
    return "".join(char if " " <= char <= "~" else "?" for char in text[:200]).strip() or "-"


def modern_headers(method: str, params: Any) -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    """The 2026-07-28 HTTP headers: mostly right, sometimes missing or wrong."""
    right = [("mcp-method", header_value(method))]
    key = NAMED_PARAM.get(method)
    name = params.get(key) if isinstance(params, dict) and key else None
    if isinstance(name, str):
        right.append(("mcp-name", header_value(name)))
    printable = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
    names = st.sampled_from(["mcp-method", "mcp-name", "mcp-protocol-version"])
    wrong = st.lists(st.tuples(names, printable.map(header_value)), max_size=3)
    return weighted((6, st.just(tuple(right))), (1, st.just(())), (1, wrong.map(tuple)))


FRAMING = [
    b"",
    b"not json",
    b"{",
    b"}",
    b"[]",
    b"[1,2,3]",
    b"null",
    b"42",
    b'"a string"',
    b"\xff\xfe\xfd",
    b"\xed\xa0\x80",  # a surrogate encoded as if it were UTF-8 (invalid UTF-8)
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}}',
    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":"fz-dup","method":"ping","method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":"fz-nan","method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":"fz-inf","method":"ping","params":{"x":-Infinity}}',
    b'{"jsonrpc":"2.0","id":"fz-big","method":"ping","params":{"x":1' + b"0" * 5000 + b"}}",
    b'{"jsonrpc":"2.0","id":"fz-deep","method":"tools/list","params":' + b"[" * 20000 + b"]" * 20000 + b"}",
    b'{"jsonrpc":"2.0","id":"fz-esc","method":"ping","params":{"x":"\\ud800\\udc00\\ud800"}}',
    b'{"jsonrpc":"2.0","id":"fz-bad-escape","method":"ping","params":{"x":"\\x41"}}',
    b'\x00{"jsonrpc":"2.0","id":"fz-nul","method":"ping"}',
    b'{"jsonrpc":"2.0","result":{},"id":"never-asked"}',
    b'{"jsonrpc":"2.0","error":{"code":1,"message":"x"},"id":"never-asked"}',
    b'[{"jsonrpc":"2.0","id":"fz-b1","method":"ping"},{"jsonrpc":"2.0","id":"fz-b2","method":"ping"}]',
]


@st.composite
def framing(draw: st.DrawFn) -> Case:
    """What no encoder writes: broken JSON, bytes that are not UTF-8, duplicate keys, batches, and more."""
    line = draw(
        st.one_of(
            st.sampled_from(FRAMING),
            st.binary(max_size=64).map(lambda raw: raw.replace(b"\n", b" ")),
            st.tuples(st.sampled_from(FRAMING), st.binary(max_size=8)).map(
                lambda pair: (pair[0] + pair[1]).replace(b"\n", b" ")
            ),
        )
    )
    return Case("framing", "-", line)


def cases(era: str) -> st.SearchStrategy[Case]:
    return weighted((5, messages(era)), (1, framing()))


# --- plain calls, for the HTTP lane against the SDK's path (tests/test_fuzz.py, `test_fuzz_lane`) ---------

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# What a client may add to a call's `_meta`, each with values to try: the lane takes some and leaves others.
META_EXTRAS = {
    "progressToken": st.one_of(st.none(), st.integers(), nasty_text, wrong_types),
    "traceparent": st.just("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    "io.modelcontextprotocol/logLevel": name_or(["debug", "info", "warning"]),
    "io.modelcontextprotocol/clientInfo": st.one_of(
        st.fixed_dictionaries({"name": nasty_text, "version": nasty_text}), values
    ),
    "io.modelcontextprotocol/clientCapabilities": st.one_of(
        st.fixed_dictionaries({}, optional={"sampling": values, "elicitation": values, "roots": values}), values
    ),
    "io.modelcontextprotocol/protocolVersion": name_or(["2026-07-28", "2025-11-25", "1900-01-01"]),
}
PLAIN_ARGUMENTS = {  # by fixture server, by tool
    "kitchen.py": {
        "echo": st.fixed_dictionaries({"text": nasty_text}),
        "add": st.fixed_dictionaries({"a": nasty_numbers, "b": nasty_numbers}),
        "fail": st.fixed_dictionaries({}, optional={"message": nasty_text}),
        "mixed": st.just({}),
        "image": st.just({}),
    },
    "numbers.py": {
        "add": st.fixed_dictionaries({"a": nasty_numbers, "b": nasty_numbers}),
        "sqrt": st.fixed_dictionaries({"x": nasty_numbers}),
    },
}
PLAIN_SERVERS = {"kitchen": "kitchen.py", "numbers": "numbers.py"}  # the fuzzed gateways' servers, by name


@st.composite
def plain_calls(draw: st.DrawFn, era: str, servers: dict[str, str] = PLAIN_SERVERS) -> Case:
    """A `tools/call` of a direct tool of `servers` (name: fixture script), mostly as a client sends one,
    now and then with one thing changed: its arguments, an envelope key, something added to `_meta` or the
    params, its id, the wire's framing."""
    server = draw(st.sampled_from(sorted(servers)))
    tools = PLAIN_ARGUMENTS[servers[server]]
    tool = draw(st.sampled_from(sorted(tools)))
    params: dict[str, Any] = {"name": f"{server}_{tool}"}
    params["arguments"] = draw(weighted((6, tools[tool]), (1, objects), (1, wrong_types)))
    meta: dict[str, Any] | None = dict(ENVELOPE) if era == "modern" else None
    if draw(rarely(3)):
        meta = dict(meta or {})
        for key in draw(st.lists(st.sampled_from(sorted(META_EXTRAS)), min_size=1, max_size=2, unique=True)):
            meta[key] = draw(META_EXTRAS[key])
        if era == "modern" and draw(rarely(4)):
            del meta[draw(st.sampled_from(sorted(ENVELOPE)))]
    if meta is not None:
        params["_meta"] = meta
    if draw(rarely(8)):
        params[draw(st.sampled_from(["task", "requestState", "inputResponses", "cursor"]))] = draw(values)
    good = draw(st.integers(0, 4)) < 4
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(st.integers(0, 2**31) if good else request_ids)}
    message.update(method="tools/call", params=params)
    if draw(rarely(20)):
        message["jsonrpc"] = draw(scalars)
    strategy = "plain"
    if draw(st.booleans()):
        message, strategy = clean(message), "plain-clean"
    headers = draw(modern_headers("tools/call", message["params"])) if era == "modern" else ()
    return Case(strategy, "tools/call", dump(message), headers)
