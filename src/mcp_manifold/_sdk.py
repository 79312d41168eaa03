"""Every place the gateway reaches past the MCP SDK's public API, in one module.

Each touch says what it needs, why there is no public way, and the SDK version it was written against
(`mcp` 2.3.0; pyproject pins `mcp==2.3.*`). An SDK upgrade is checked here and nowhere else: where a
private name has moved, the function degrades as its docstring says instead of failing at import.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from types import SimpleNamespace
from typing import Any

import anyio.abc
import mcp.client.stdio as _sdk_stdio
from mcp_types import methods
from mcp_types.version import LATEST_HANDSHAKE_VERSION

SDK_VERSION_WRITTEN_AGAINST = "2.3.0"

# --- the connection behind a server request context ------------------------------------------------


def connection_of(ctx: Any) -> Any:
    """The per-client `mcp.server.connection.Connection` behind a request context.

    mcp 2.3.0: the runner builds a `ServerSession` per request and keeps the connection in its private
    `_connection`; `ServerRequestContext` has no public handle on it (the SDK's `Context` has one but
    the lowlevel runner does not build it yet). The gateway needs it to know the client across
    requests (per-client state, notifications, session end).
    """
    return ctx.session._connection


# --- the stdio transport's child process ------------------------------------------------------------

# Spawns made while this holds a list (one backend's start, in its own task) are appended to it.
_spawned: ContextVar[list[Any] | None] = ContextVar("manifold_spawned", default=None)
# While set, what the SDK's reader reads of a spawned process's stdout goes through this first.
_stdout_reader: ContextVar[Callable[[Any], Any] | None] = ContextVar("manifold_stdout_reader", default=None)


def _hook_stdio_spawn() -> None:
    """mcp 2.3.0: `stdio_client` creates its process with the private `_create_platform_compatible_process`
    and keeps it to itself; the gateway needs it for the pid, the exit status and the process group,
    and the raw stdio leg (`_runtime/stdio_leg.py`) wants to read its own answers off stdout before the
    SDK's reader parses them. If the function is gone, nothing is hooked: the gateway then works without
    pid or group sweep, and the leg's answers go through the SDK's reader.
    """
    original = getattr(_sdk_stdio, "_create_platform_compatible_process", None)
    if original is None or getattr(original, "manifold_hook", False):
        return

    async def spawn(*args: Any, **kwargs: Any) -> Any:
        process = await original(*args, **kwargs)
        wrap_stdout = _stdout_reader.get()
        if wrap_stdout is not None and process.stdout is not None:
            process = _StdoutReadThrough(process, wrap_stdout(process.stdout))
        sink = _spawned.get()
        if sink is not None:
            sink.append(process)
        return process

    spawn.manifold_hook = True  # type: ignore[attr-defined]
    _sdk_stdio._create_platform_compatible_process = spawn  # type: ignore[attr-defined]


class _StdoutReadThrough(anyio.abc.Process):
    """`process` with its stdout read through `stdout`. An anyio `Process` itself, as the SDK asserts; what
    else the SDK reaches for by name (`_process`, to close the subprocess transport) is the real one's."""

    def __init__(self, process: anyio.abc.Process, stdout: anyio.abc.ByteReceiveStream) -> None:
        self._inner = process
        self._stdout = stdout

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def wait(self) -> int:
        return await self._inner.wait()

    def terminate(self) -> None:
        self._inner.terminate()

    def kill(self) -> None:
        self._inner.kill()

    def send_signal(self, signal: Any) -> None:
        self._inner.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._inner.pid

    @property
    def returncode(self) -> int | None:
        return self._inner.returncode

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._inner.stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        return self._inner.stderr

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":  # not set yet (a copy being made): no endless lookup
            raise AttributeError(name)
        return getattr(self._inner, name)


_hook_stdio_spawn()


@contextmanager
def capture_spawned(into: list[Any], read_stdout: Callable[[Any], Any] | None = None) -> Iterator[None]:
    """Collect in `into` the processes `stdio_client` starts in this task while the block runs; with
    `read_stdout`, the SDK reads each one's stdout through `read_stdout(stdout)` (a byte stream)."""
    token = _spawned.set(into)
    reader_token = _stdout_reader.set(read_stdout)
    try:
        yield
    finally:
        _stdout_reader.reset(reader_token)
        _spawned.reset(token)


# --- connecting to a server of either protocol era -------------------------------------------------


async def negotiate(session: Any, protocol: str) -> None:
    """Open `session` in the era `protocol` asks for: `legacy` (the initialize handshake), `modern`
    (2026-07-28: `server/discover`, no handshake), or `auto` (discover, falling back to the handshake).

    mcp 2.3.0: `auto` is the policy of the SDK's own `Client(mode="auto")`, `mcp.client._probe.negotiate_auto`
    (private: it handles the -32022 re-probe and servers that answer discover with no modern version);
    `ClientSession` alone offers only `discover()` and `initialize()`. Without it, `auto` is discover,
    then the handshake on any error.
    """
    if protocol == "legacy":
        await session.initialize()
        return
    if protocol == "modern":
        await session.discover()
        return
    try:
        from mcp.client._probe import negotiate_auto
    except ImportError:  # pragma: no cover - another SDK layout
        from mcp.shared.exceptions import MCPError

        try:
            await session.discover()
        except MCPError:
            await session.initialize()
        return
    await negotiate_auto(session)


async def call_tool_wire(
    session: Any,
    name: str,
    arguments: dict[str, Any] | None,
    meta: Mapping[str, Any] | None,
    post: Callable[[str, Any, Mapping[str, str]], Awaitable[dict[str, Any] | None]] | None = None,
) -> Any:
    """`tools/call` on `session`, answered with the result as the server sent it (a mapping), checked
    against the session's protocol version by the SDK's own validator, without building its models.

    mcp 2.3.0: `ClientSession.call_tool` builds a request model, dumps it, stamps it (`_stamp`: the
    2026-07-28 `_meta` envelope, or the version header), sends it with its dispatcher's
    `send_raw_request`, then validates the raw result, builds the result model and checks it against
    the tool's output schema. There is no public way to send a stamped request and keep the raw
    result; this does those steps but the models. A tool with an output schema, or one the session has
    not listed (`_tool_output_schemas`, filled by `list_tools`), goes through `call_tool` for the schema
    check and comes back as the model, as it does without the private names (another layout).

    `post` (a backend's raw leg, `_runtime/http_leg.py` or `stdio_leg.py`) sends the stamped request instead
    of the dispatcher; when it answers None the server did not take it, and the dispatcher sends it.
    """
    stamp = getattr(session, "_stamp", None)
    dispatcher = getattr(session, "_dispatcher", None)
    schemas = getattr(session, "_tool_output_schemas", None)
    if stamp is None or dispatcher is None or schemas is None or schemas.get(name, True) is not None:
        return await session.call_tool(name, arguments, meta=meta, allow_input_required=True)
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta:
        params["_meta"] = dict(meta)
    data = {"method": "tools/call", "params": params}
    opts: dict[str, Any] = {}
    stamp(data, opts)
    raw = await post("tools/call", data["params"], opts.get("headers") or {}) if post is not None else None
    if raw is None:
        raw = await dispatcher.send_raw_request("tools/call", data["params"], opts)
    elif (fill := getattr(session, "_manifold_fill", None)) is not None:
        raw = fill("tools/call", raw)  # as `accept_liberally` reads the dispatcher's answers
    _result_validator("tools/call", session.protocol_version or LATEST_HANDSHAKE_VERSION)(raw)
    return raw


@cache
def _result_validator(method: str, version: str) -> Callable[[Any], object]:
    """What checks a server's `method` result at `version` as the SDK's client checks it.

    mcp 2.3.0: `methods.validate_server_result` validates and then dumps the result again, to throw the
    dump away; validating alone raises the same errors at about half the cost (its cached adapter). In
    another layout, the public function."""
    adapter_of = getattr(methods, "_adapter", None)
    surface = getattr(methods, "SERVER_RESULTS", None)
    if adapter_of is None or surface is None or (method, version) not in surface:  # pragma: no cover
        return lambda raw: methods.validate_server_result(method, version, raw)
    validate = adapter_of(surface[(method, version)]).validate_python
    return lambda raw: validate(raw, by_name=False)


def notification_deliverer(session: Any) -> Callable[[str, Mapping[str, Any] | None], Awaitable[None]] | None:
    """What hands a server notification read outside the session's transport to the session, which then
    treats it as one it read itself (validated, the logging callback, the message handler).

    mcp 2.3.0: `ClientSession._on_notify(dctx, method, params)` is the dispatcher's private entry for
    them; it does not read `dctx`. None in another layout (the raw leg then drops notifications).
    """
    on_notify = getattr(session, "_on_notify", None)
    if on_notify is None:  # pragma: no cover - another SDK layout
        return None

    async def deliver(method: str, params: Mapping[str, Any] | None) -> None:
        await on_notify(None, method, params)

    return deliver


def request_answerer(session: Any) -> Callable[[Any, str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]] | None:
    """What answers a server's request read outside the session's transport as the session answers it (its
    callbacks, or the SDK's refusal when it has none): the result, or the `MCPError` to send back.

    mcp 2.3.0: `ClientSession._on_request(dctx, method, params)` is the dispatcher's private entry for
    them; of `dctx` it reads only `request_id`. None in another layout (the raw leg then refuses them).
    """
    on_request = getattr(session, "_on_request", None)
    if on_request is None:  # pragma: no cover - another SDK layout
        return None

    async def answer(request_id: Any, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return await on_request(SimpleNamespace(request_id=request_id), method, params)

    return answer


def accept_liberally(session: Any, on_filled: Callable[[str, tuple[str, ...]], None]) -> None:
    """Make `session` read a 2026-07-28 server's answers with the meaning-fixed fields it left out filled
    in (see `_core/interop.py`), before the SDK validates them; `on_filled(method, fields)` hears of each.

    mcp 2.3.0: every request of a `ClientSession` (discovery included) goes through its private
    `_dispatcher.send_raw_request`, whose raw answer the session then validates against the negotiated
    version; nothing public sits between the two. Wrapped here, on this one session's dispatcher. Without
    it (another layout) such answers fail the SDK's validation as before. A session that settles on a
    session-era version (negotiated once, for the session's life) is unwrapped at its next request, so
    its calls pay nothing for this.
    """
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from mcp_manifold._core.interop import completed_result

    dispatcher = getattr(session, "_dispatcher", None)
    inner = getattr(dispatcher, "send_raw_request", None)
    if inner is None:  # pragma: no cover - another SDK layout
        return
    own = vars(dispatcher).get("send_raw_request")  # a wrapper set before this one, kept when unwrapping

    def fill(method: str, raw: Any) -> Any:
        version = getattr(session, "_negotiated_version", None)
        if isinstance(raw, dict) and (method == "server/discover" or version in MODERN_PROTOCOL_VERSIONS):
            raw, filled = completed_result(method, raw)
            if filled:
                on_filled(method, filled)
        return raw

    async def send_raw_request(method: str, params: Any, opts: Any = None, **kwargs: Any) -> Any:
        version = getattr(session, "_negotiated_version", None)
        if version is not None and version not in MODERN_PROTOCOL_VERSIONS and method != "server/discover":
            if vars(dispatcher).get("send_raw_request") is send_raw_request:  # nobody wrapped it after us
                if own is None:
                    del dispatcher.send_raw_request  # the class's method again
                else:
                    dispatcher.send_raw_request = own
            return await inner(method, params, opts, **kwargs)
        return fill(method, await inner(method, params, opts, **kwargs))

    dispatcher.send_raw_request = send_raw_request
    session._manifold_fill = fill  # for answers read outside the dispatcher (the raw HTTP leg)


# What the client a 2026-07-28 request is made for can be asked (its `sampling`, `elicitation`, `roots`
# capabilities), set around one request by the call path; None outside any client's request.
requesting_client: ContextVar[Mapping[str, Any] | None] = ContextVar("manifold_requesting_client", default=None)


def stamp_requesting_client(session: Any) -> None:
    """Make a 2026-07-28 session tell the server, per request, what the client it serves can be asked.

    At 2026-07-28 each request carries the client's capabilities, and a server asks only what they
    allow (with input_required, which the gateway relays to that client in its own era), and shapes its
    answers by the client's extensions (SEP-2133). One connection serves many clients, so the truth differs
    per request: the value in `requesting_client` replaces `sampling`, `elicitation`, `roots` and
    `extensions` in what the session would declare.

    mcp 2.3.0: `ClientSession.adopt` builds a private `_stamp(data, opts)` that writes the capabilities
    of the session's callbacks into every request's `_meta` after the caller's own `_meta` is merged
    (so `meta=` cannot override them), and there is no per-request hook. Wrapped here; without it (a
    future layout) requests declare what the session does, which is never more than the truth.
    """
    from mcp_types import CLIENT_CAPABILITIES_META_KEY

    from mcp_manifold._core.clients import CLIENT_FACTS

    inner = getattr(session, "_stamp", None)
    if inner is None:  # pragma: no cover - another SDK layout
        return

    def stamp(data: dict[str, Any], opts: Any) -> None:
        inner(data, opts)
        client = requesting_client.get()
        meta = data.get("params", {}).get("_meta")
        if client is None or not isinstance(meta, dict) or CLIENT_CAPABILITIES_META_KEY not in meta:
            return
        declared = {key: value for key, value in meta[CLIENT_CAPABILITIES_META_KEY].items() if key not in CLIENT_FACTS}
        meta[CLIENT_CAPABILITIES_META_KEY] = {**declared, **client}

    session._stamp = stamp


_NO_BACK_CHANNEL = re.compile(r"Cannot send '([\w/]+)': this transport context has no back-channel")
# What a server's SDK says when its client was never declared able to answer (TypeScript SDK 1.x: its
# `Server` checks the client's capabilities before it sends), and what the gateway's own session answers
# a question it never declared it could take (this SDK's default callbacks), which a server quotes back.
_NOT_DECLARED = re.compile(
    r"Client does not support (?P<ts>sampling|elicitation|listing roots|(?:URL|url|form) elicitation)"
    r"|\b(?P<ours>Sampling|Elicitation|List roots) not supported\b"
)
_ASKED_FOR = {
    "sampling": "sampling/createMessage",
    "elicitation": "elicitation/create",
    "listing roots": "roots/list",
    "list roots": "roots/list",
}


def asked_without_back_channel(text: str, *, opening: bool = False) -> str | None:
    """The method a server tried to send its client mid-call and could not, if `text` (a tool's result
    text, or an error's message) is what the server made of that failure; None for anything else.

    Three sentences say it, each from an SDK (the server's wording around them is its own):
    - mcp 2.3.0 raises `NoBackChannelError` in a handler that asks the session-era way (`ctx.elicit`,
      `create_message`, `list_roots`) on a 2026-07-28 request ("Cannot send 'elicitation/create': this
      transport context has no back-channel"), and its MCPServer reports it as the tool's error text;
    - the TypeScript SDK 1.x (1.32.2) refuses to ask a client that did not declare the capability
      ("Client does not support sampling (required for sampling/createMessage)", "Client does not
      support form elicitation."), which its servers report as text, as an error or not;
    - a server that asks anyway gets this SDK's default answer from the gateway's session that did not
      declare it ("Sampling not supported", "Elicitation not supported", "List roots not supported":
      mcp 2.3.0's `_default_*_callback`), and quotes it.
    Only the caller knows whether the session could have carried the question (see call_path).
    `opening`: only when `text` opens with the sentence (a server's refusal, not a text that quotes one).
    """
    find = _NO_BACK_CHANNEL.match if opening else _NO_BACK_CHANNEL.search
    found = find(text)
    if found:
        return found.group(1)
    found = _NOT_DECLARED.match(text) if opening else _NOT_DECLARED.search(text)
    if found is None:
        return None
    said = (found.group("ts") or found.group("ours")).lower()
    return _ASKED_FOR.get(said, "elicitation/create")  # URL or form elicitation


_OUTPUT_SCHEMA_SAID = re.compile(
    r"(?P<unfit>Invalid structured content returned by tool )"
    r"|(?P<missing>Tool .* has an output schema but did not return structured content)"
    r"|(?P<unresolved>Invalid schema for tool )",
    re.DOTALL,
)


def output_schema_refusal(exc: BaseException) -> str | None:
    """What the SDK's client says when a tool's result does not fit the tool's output schema, in words
    that name where but never quote the server's data; None for any other error.

    mcp 2.3.0: `ClientSession.call_tool` checks a result's structured content against the output schema
    the tool listed and raises a plain `RuntimeError` (the jsonschema error as its cause, which quotes the
    offending value) when it is missing or does not fit, or when the schema cannot be resolved.
    """
    said = _OUTPUT_SCHEMA_SAID.match(str(exc)) if isinstance(exc, RuntimeError) else None
    if said is None:
        return None
    if said.lastgroup == "missing":
        return "the tool has an output schema but returned no structured content"
    if said.lastgroup == "unresolved":
        return "the tool's output schema cannot be resolved"
    where, rule = getattr(exc.__cause__, "json_path", None), getattr(exc.__cause__, "validator", None)
    place = f" (at {where}: {rule})" if isinstance(where, str) and isinstance(rule, str) else ""
    return f"the tool's structured content does not fit its output schema{place}"


async def sealed(boundary: Any, method: str, params: Mapping[str, Any], result: Any) -> Any:
    """`result` (an `input_required` answer to `method` with `params`) with its `requestState` sealed the
    way the SDK server's `RequestStateBoundary` seals what a handler returns.

    mcp 2.3.0: the boundary is server middleware, `boundary(ctx, call_next)`. Sealing the first round of a
    request (no `requestState` came in) reads `ctx.method` and `ctx.params` only (the principal binding
    reads the auth context, none over stdio), so a stand-in context with those two serves.
    """

    async def handler_result(_ctx: Any) -> Any:
        return result

    return await boundary(SimpleNamespace(method=method, params=params), handler_result)


# --- deprecations ------------------------------------------------------------------------------------


@contextmanager
def no_deprecation_warnings() -> Iterator[None]:
    """Silence the SDK's `MCPDeprecationWarning` for a session-era call the gateway must still make.

    mcp 2.3.0 warns (a `UserWarning`, printed on stderr) whenever `resources/subscribe`, `logging/setLevel`,
    roots or logging are used, because 2026-07-28 deprecates them; a gateway relaying a session-era
    client's request is doing the right thing, and the warning only alarms whoever reads its stderr.
    """
    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


# --- HTTP clients and in-process streams -------------------------------------------------------------


# Connections to one HTTP server kept open between calls: as many as calls may be in flight to it at once
# (httpx keeps 20 by default, so past 20 concurrent calls every answer closed a connection and the next
# call opened one again).
HTTP_KEEPALIVE = 100


def create_http_client(
    headers: Mapping[str, str] | None,
    auth: Any = None,
    cookies: Any = None,
    tls: Any = None,
    network_backend: Any = None,
    response_hooks: Sequence[Any] = (),
    request_hooks: Sequence[Any] = (),
) -> Any:
    """An httpx client set up as the SDK's own transports set theirs up (timeouts, redirects), one per
    backend session: its pool keeps up to `HTTP_KEEPALIVE` connections alive between calls. `response_hooks`
    see each response before anything reads it (`answer_size.answer_bound`); `request_hooks` each request
    before it is sent (`get_pacing.GetPacing`). `cookies`, a
    `CookieJar`, is shared with the client (another client's jar: what a load balancer set reaches both);
    `tls`, an `ssl.SSLContext` from `tls_context`, is too (each client would otherwise load the CA bundle,
    some 30 ms of the event loop's time). `network_backend`, an httpcore2 network backend, makes its
    direct connections (remote_auth's check of the address connected to); the environment's proxies are
    used as by any other client.

    mcp 2.3.0: `mcp.shared._httpx_utils.create_mcp_http_client` (and its default timeouts) is private;
    the public `streamable_http_client` takes a ready client, and the gateway needs its own for the
    headers and the pool's size, which `create_mcp_http_client` does not take.
    """
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    verify = tls if tls is not None else True
    limits = httpx2.Limits(max_connections=HTTP_KEEPALIVE, max_keepalive_connections=HTTP_KEEPALIVE)
    client = httpx2.AsyncClient(
        headers=dict(headers) if headers else None,
        auth=auth,
        cookies=cookies,
        verify=verify,
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        limits=limits,
        event_hooks={"request": list(request_hooks), "response": list(response_hooks)},
    )
    if network_backend is not None:
        import httpcore2

        # httpx2 2.16: neither the client nor its transport takes a network backend; the pool of its
        # direct connections (private) does. Given a transport of our own, the client would drop the
        # proxies of the environment (HTTPS_PROXY, NO_PROXY), which it mounts beside that pool: a request
        # through a proxy connects to the proxy, which resolves the name, so it is the proxy's to judge.
        pool = client._transport._pool
        assert type(pool) is httpcore2.AsyncConnectionPool, "httpx2's client changed: see create_http_client"
        pool._network_backend = network_backend
    return client


def sse_http_clients(tls: Any = None, network_backend: Any = None, response_hooks: Sequence[Any] = ()) -> Any:
    """`create_http_client` in the shape of the SDK's `sse_client(httpx_client_factory=...)`."""

    def create(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
        client = create_http_client(
            headers, auth, tls=tls, network_backend=network_backend, response_hooks=response_hooks
        )
        if timeout is not None:  # the SDK's SSE timeouts (a long read for the event stream)
            client.timeout = timeout
        return client

    return create


def tls_context() -> Any:
    """The TLS settings an httpx client takes by default (the CA bundle, `SSL_CERT_FILE`/`SSL_CERT_DIR`), built
    once to be shared by several clients (`create_http_client`)."""
    import httpx2

    return httpx2.create_ssl_context()


def create_context_streams(item_type: Any, size: int = 0) -> tuple[Any, Any]:
    """A (send, receive) memory stream pair that carries each message's context, as the SDK's
    server loop expects of its read stream.

    mcp 2.3.0: `mcp.shared._context_streams.create_context_streams` is private; the gateway's own
    stdio front (on the event loop's pipes, see front/stdio.py) must feed the server the same kind of
    stream the SDK's `stdio_server` does.
    """
    from mcp.shared._context_streams import create_context_streams as create

    return create[item_type](size)


# --- the streamable HTTP session manager's sessions -----------------------------------------------------


def open_session_transport(manager: Any, session_id: str, user: Any) -> Any | None:
    """The transport of the open HTTP session `session_id` when `user` (the scope's authenticated user, or
    None) is the credential that opened it, as the session manager itself checks; else None.

    mcp 2.3.0: `StreamableHTTPSessionManager` keeps its sessions and their owners in the private
    `_server_instances` and `_session_owners`, with no public lookup; the HTTP fast lane answers only an
    open session's requests. Where they have moved, None: every request takes the SDK's path.
    """
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context

    transport = getattr(manager, "_server_instances", {}).get(session_id)
    if transport is None or transport.is_terminated:
        return None
    idle = transport.idle_scope
    if idle is not None and idle.cancel_called:
        return None  # expired: the SDK answers it as terminated
    requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    if requestor != getattr(manager, "_session_owners", {}).get(session_id):
        return None
    return transport


def session_is_open(manager: Any, session_id: str) -> bool | None:
    """Whether the session manager still holds the HTTP session `session_id` (None: it cannot be told).

    mcp 2.3.0: only its private `_server_instances` says so (see `open_session_transport`)."""
    sessions = getattr(manager, "_server_instances", None)
    return session_id in sessions if isinstance(sessions, dict) else None


@contextmanager
def session_request_in_flight(transport: Any) -> Iterator[None]:
    """Hold an HTTP session's idle countdown while a request the SDK transport never saw is served.

    mcp 2.3.0: `StreamableHTTPServerTransport.handle_request` does this with its private
    `_requests_in_flight` and `_idle_timeout` around each request it serves itself.
    """
    idle = transport.idle_scope if transport is not None else None
    timeout = getattr(transport, "_idle_timeout", None)
    if idle is None or timeout is None or not hasattr(transport, "_requests_in_flight"):
        yield
        return
    import math

    import anyio

    transport._requests_in_flight += 1
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout


# --- MCPServer's lowlevel server ---------------------------------------------------------------------


def lowlevel_server(server: Any) -> Any:
    """The lowlevel `Server` inside an `MCPServer` (whose handler table `add_proxy_tool` wraps).

    mcp 2.3.0: kept in the private `_lowlevel_server`; `MCPServer` has no public handle on it.
    """
    return server._lowlevel_server
