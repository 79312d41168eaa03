"""One long-lived client session per downstream server: start, watch, restart, stop.

A `Backend` owns its connection in a task of the pool's task group (structured concurrency: the
pool's exit cancels and reaps every one). Starting is lazy by default and happens at most once at
a time; a failed start is remembered and retried with exponential backoff on the next need. A
connection that dies (process exit, closed stream) marks the backend `failed` with the reason and
the next request starts it again. Stdio servers run in their own process group (the SDK's
`stdio_client` does that); when a connection ends, whatever is left of that group is killed too, so
grandchildren die with the server even when the server itself exits politely or is killed.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, suppress
from functools import partial
from typing import Any, Protocol

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_manifold._config import ServerConfig, Settings, redact_url
from mcp_manifold._config.commands import command_warning
from mcp_manifold._config.redaction import Secret, apply, replacements, scrub_log_data
from mcp_manifold._config.switches import speed_up_on
from mcp_manifold._core.breaker import CircuitBreaker
from mcp_manifold._core.clients import ASKS, NO_ASKS, Ask, Caller, Waiting
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.status import BackendStatus, State
from mcp_manifold._core.suggestions import shortened
from mcp_manifold._errors import (
    BackendClosed,
    BackendError,
    BackendRequestError,
    BackendStartError,
    BackendTimeout,
    BackendUnavailable,
)
from mcp_manifold._runtime.answer_size import answer_bound
from mcp_manifold._runtime.backend_errors import (
    HandshakeRefused,
    cut_context_loop,
    describe,
    first_leaf,
    translate_backend_errors,
)
from mcp_manifold._runtime.cancellation import stray_cancellation
from mcp_manifold._runtime.get_pacing import GetPacing
from mcp_manifold._runtime.http_leg import HttpLeg
from mcp_manifold._runtime.http_refusal import (
    FirstAnswerPage,
    StartRefusals,
    cannot_connect,
    oauth_remedy,
    refusal,
)
from mcp_manifold._runtime.learned import learned_facts
from mcp_manifold._runtime.listing_fetch import list_everything
from mcp_manifold._runtime.not_mcp import GRACE, NotMcpWatch
from mcp_manifold._runtime.outbound import EncodableWrites
from mcp_manifold._runtime.processes import exit_of, open_stdio, telling_line, terminate_group
from mcp_manifold._runtime.stdio_leg import StdioLeg
from mcp_manifold._sdk import (
    accept_liberally,
    create_http_client,
    negotiate,
    no_deprecation_warnings,
    notification_deliverer,
    request_answerer,
    sse_http_clients,
    stamp_requesting_client,
    tls_context,
)
from mcp_manifold._version import __version__

logger = logging.getLogger(__name__)

_BACKOFF_START = 1.0
_BACKOFF_MAX = 30.0
_CLIENT_INFO = types.Implementation(name="mcp-manifold", version=__version__)
# Characters of one stderr line kept (its start and length past that): the tail is in every view of the
# server (the dashboard's overview each second, the live status file every 2 s, errors quoting a line), and
# a server that logs big payloads kept 200 lines of 64 KB, 12 MB in each.
_STDERR_LINE = 2000
# Characters of a server's name and version shown (dispatch's list, the dashboard, `manifold servers`, the
# log): a server named itself in 5 MB, and every caller's dispatch list failed (past its client's 1 MB event).
_SERVER_INFO = 200


class BackendHooks(Protocol):
    """What a backend needs from the gateway: somewhere to send what the server initiates."""

    async def on_server_notification(self, backend: Backend, notification: types.ServerNotification) -> None: ...

    async def on_server_log(self, backend: Backend, params: types.LoggingMessageNotificationParams) -> None: ...

    async def on_server_request(self, backend: Backend, method: str, params: Any) -> Any: ...


class Backend:
    """A downstream MCP server and the one session the gateway keeps with it."""

    def __init__(
        self,
        config: ServerConfig,
        settings: Settings,
        hooks: BackendHooks,
        child_env: Mapping[str, str] | None = None,
        client: Callable[[], Caller | None] = lambda: None,
        shared_extensions: Callable[[], dict[str, Any] | None] = lambda: None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.hooks = hooks
        # The one client this session serves (a stdio gateway's, or a per-client session's owner), read
        # at each start; None when it serves several, or none is known yet. What the server is told it
        # may ask, and (under `protocol: auto`) how a stdio server is opened, follow from it.
        self.client = client
        # With no one client: the extensions every client of the gateway declares (a shared session-era
        # session tells its server only those; see common_extensions).
        self.shared_extensions = shared_extensions
        self.declared: frozenset[Ask] = NO_ASKS
        self.declared_extensions: dict[str, Any] | None = None  # the client extensions the session declared
        # The extensions the server declared (SEP-2133), kept from its latest start (the gateway's own
        # capabilities offer the union of them).
        self.extensions: dict[str, Any] | None = None
        # The one client this session serves (a per-client session), who answers what the server asks
        # outside any call; None for a shared session.
        self.owner: weakref.ref[Caller] | None = None
        self.last_used = time.monotonic()
        self.child_env = dict(child_env or {})  # added under a stdio server's own `env` (see lineage)
        self.name = config.name
        self.state: State = "stopped" if config.enabled else "disabled"
        self.last_error: str | None = None
        self.restarts = 0
        self.pid: int | None = None
        self._process: Any | None = None  # a stdio server's, while it runs: its exit status names a failed start
        self.tool_count = 0
        self.stderr: deque[str] = deque(maxlen=max(1, settings.stderr_lines))
        self.initialize_result: types.InitializeResult | None = None
        self.protocol_version: str | None = None  # negotiated; 2026-07-28 for a modern server
        self.server_info: types.Implementation | None = None
        self._listened: tuple[str, ...] = ()  # the resource URIs the open listen stream asked for
        self._subscribed: Callable[[], set[str]] = set  # the URIs clients are subscribed to now (listen_to)
        self._resubscribe = anyio.Event()
        self._session: ClientSession | None = None
        # A plain call's way around the SDK's request machinery (see http_leg and stdio_leg).
        self._leg: HttpLeg | StdioLeg | None = None
        self._raw_calls_before = 0  # calls the legs of earlier sessions took
        self._start_lock = anyio.Lock()
        self._stop: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._next_retry = 0.0
        self._failures = 0
        self._task_group: anyio.abc.TaskGroup | None = None
        limit = config.max_concurrency
        self._limiter = anyio.CapacityLimiter(limit) if limit else None
        self._callers: list[Any] = []  # front sessions with a request in flight here, newest last
        self._asking: dict[Any, list[anyio.CancelScope]] = {}  # their questions waiting for an answer (`asking`)
        self._running = 0  # requests on the session now, counted or not among `_callers` (a ping, a listing)
        # Learned: under `protocol: auto` the server took 2026-07-28 but asks its client mid-call, which
        # only a session carries; it is reconnected with the handshake (see `asks_mid_call`).
        # Both learned facts are kept in the data dir (`learned`): a restart does not fail the same way again.
        self._learned = learned_facts(settings.data_dir)
        self._needs_session = self._learned.knows(config, "needs_session")
        # Learned: the handshake asked for first failed (a 2026-07-28-only server), so discovery comes first.
        self._discover_first = self._learned.knows(config, "discover_first")
        self._not_mcp: NotMcpWatch | None = None  # while starting: what the server wrote that is not MCP
        self._refusals: StartRefusals | None = None  # while starting: the HTTP answers that refused a request
        self._oauth: Any = None  # this connection's OAuth provider (remote_auth), for `needs_login` in its status
        self._sse_page: FirstAnswerPage | None = None  # an SSE server's: whether its stream was a web page
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_cooldown)
        self._filled_fields: set[str] = set()  # fields this server leaves out of its answers (logged once)
        self._secrets_of: tuple[ServerConfig, list[tuple[Secret, str]]] | None = None  # see `_secrets`

    # --- lifecycle -------------------------------------------------------------------------

    def attach(self, task_group: anyio.abc.TaskGroup) -> None:
        self._task_group = task_group

    @property
    def lazy(self) -> bool:
        return self.settings.lazy if self.config.lazy is None else self.config.lazy

    @property
    def call_timeout(self) -> float:
        return self.config.timeout or self.settings.call_timeout

    async def session(self) -> ClientSession:
        """The live session, starting (or restarting) the server if needed."""
        if self._session is not None and self.state == "ready":
            return self._session
        if self.state == "disabled":
            raise BackendUnavailable(self.name, "disabled in the config (enabled: false)")
        async with self._start_lock:
            if self._session is not None and self.state == "ready":
                return self._session
            wait = self._next_retry - time.monotonic()
            if self.state == "failed" and wait > 0:
                raise BackendUnavailable(
                    self.name, f"not running ({self.last_error}); next start attempt in {wait:.1f}s"
                )
            try:
                await self._start()
            except HandshakeRefused as refused:
                self._discover_first = True
                self._learned.learn(self.config, "discover_first")
                logger.info("server %r: %s; starting it again with discovery", self.name, refused.detail)
                await self._start()
            assert self._session is not None
            return self._session

    async def _start(self) -> None:
        if self._task_group is None:
            raise RuntimeError("backend used outside its pool")
        if self.state == "failed":
            self.restarts += 1
        self.state = "starting"
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        try:
            await self._task_group.start(self._run)
        except HandshakeRefused:
            self.state = "stopped"  # not a failure: the server is reached another way (see `session`)
            raise
        except BackendError as exc:
            self._record_failure(str(exc))
            raise
        except Exception as exc:  # anything the transport raised while spawning or connecting
            leaf = first_leaf(exc)
            ours = self._login_needed(exc) or leaf
            if isinstance(ours, HandshakeRefused):
                self.state = "stopped"
                raise ours from None
            if isinstance(ours, BackendError):  # already says what happened, stderr included
                self._record_failure(str(ours))
                raise ours from None
            if isinstance(leaf, httpx2.HTTPStatusError):  # the SSE client's: its text ends in a link to MDN
                oauth = self.config.auth
                remedy = oauth_remedy(self.name, oauth.grant) if oauth is not None else None
                reason = refusal(leaf.response, sse=self.config.transport == "sse", oauth_remedy=remedy)
            elif self._sse_page is not None and self._sse_page.said:
                reason = self._sse_page.said
            else:
                # "FileNotFoundError: [Errno 2] No such file or directory: 'npx-typo'" says less than this does.
                missing = command_warning(self.config) if isinstance(leaf, OSError) else None
                reason = missing or describe(exc)
                if self.config.url:  # "ConnectError: All connection attempts failed" names no address
                    reason = cannot_connect(leaf, self.config.url) or f"{reason} (at {redact_url(self.config.url)})"
            self._record_failure(reason)
            raise BackendStartError(self.name, self._with_stderr(f"failed to start: {reason}")) from exc
        self._failures = 0
        self.state = "ready"
        self.last_error = None
        pid = f", pid {self.pid}" if self.pid is not None and self.config.transport == "stdio" else ""
        logger.info("server %r ready (%s%s)", self.name, self._named_itself() or "?", pid)

    def _record_failure(self, reason: str) -> None:
        self.state = "failed"
        self.last_error = self.config.scrub(reason)
        self._session = None
        delay = min(_BACKOFF_MAX, _BACKOFF_START * 2**self._failures)
        self._failures += 1
        self._next_retry = time.monotonic() + delay

    def _init_timed_out(self) -> str:
        """Why initialization did not finish in time: a person's OAuth login not completed, or a slow start."""
        waited = f"did not finish initialization within {self.settings.init_timeout:g}s"
        if self.config.auth is not None:
            from mcp_manifold._runtime.remote_auth import login_page_waiting

            if login_page_waiting(self.name):
                return (
                    f"{waited}: its OAuth login in the browser was not completed by then; log in first with "
                    f"`manifold auth login {self.name}` (it waits five minutes), then run this again"
                )
        # The setting named: a server that loads a model or fetches a package may need longer.
        return f"{waited} (init_timeout: raise it for a server that is slow to start)"

    def _with_stderr(self, message: str) -> str:
        line = telling_line(self.stderr)
        if line is not None:
            message = f"{message}; stderr: {line!r}"
        return self.config.scrub(message)

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Own the connection: connect, initialize, report ready, then wait for stop or death."""
        assert self._stop is not None and self._stopped is not None
        stop, stopped = self._stop, self._stopped
        started = False
        try:
            async with AsyncExitStack() as stack:
                # Entered first so it closes last: the stderr watcher outlives the transport it watches.
                watchers = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(watchers.cancel_scope.cancel)
                read, write = await self._open_transport(stack, watchers)
                write = EncodableWrites(write, self.name)  # a message no wire carries never ends the connection
                declared = self.declare()
                declared_extensions = self.declare_extensions()
                # The SDK declares a capability for each callback it is given: give only the declared ones.
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        sampling_callback=self._on_sampling if "sampling" in declared else None,
                        elicitation_callback=self._on_elicitation if "elicitation" in declared else None,
                        list_roots_callback=self._on_list_roots if "roots" in declared else None,
                        logging_callback=self._on_log,
                        message_handler=self._on_message,
                        client_info=_CLIENT_INFO,
                        extensions=declared_extensions,
                    )
                )
                accept_liberally(session, self._filled_in)
                protocol = self.opening_protocol()
                watch = self._not_mcp = NotMcpWatch()
                try:
                    with anyio.fail_after(self.settings.init_timeout), anyio.CancelScope() as given_up:
                        watchers.start_soon(watch.cancel_after, min(GRACE, self.settings.init_timeout), given_up)
                        try:
                            await negotiate(session, "legacy" if protocol == "handshake-first" else protocol)
                        except Exception as exc:
                            if protocol != "handshake-first" or (self._needs_session and not isinstance(exc, MCPError)):
                                raise  # (a server learned to ask, that did not answer at all, is not learned 2026-only)
                            # Refused (-32022 from a 2026-only server, or another error, or it hung up): a
                            # stdio connection keeps the era it was opened in, so a new one discovers.
                            raise HandshakeRefused(self.name, f"the handshake failed: {describe(exc)}") from exc
                        self.initialize_result = session.initialize_result
                except TimeoutError:
                    raise BackendStartError(self.name, self._with_stderr(self._init_timed_out())) from None
                except HandshakeRefused:
                    raise
                except Exception as exc:
                    said = f"initialization failed: {describe(exc)}"
                    leaf = first_leaf(exc)
                    hung_up = isinstance(leaf, MCPError) and leaf.code == types.CONNECTION_CLOSED
                    # "Connection closed" is the SDK's word for a stdio server that exited: say so, with its code.
                    if hung_up and (exited := await exit_of(self._process)) is not None:
                        said = f"initialization failed: {exited} before it answered"
                    if self._refusals is not None and self._refusals.said:
                        said = f"{said} ({self._refusals.said})"
                    raise BackendStartError(self.name, self._with_stderr(said)) from exc
                if given_up.cancelled_caught:
                    terminate_group(self.pid)  # it is not waiting for anything the spec's polite stop would give
                    said = f"it wrote {watch.line!r} where MCP was expected"
                    raise BackendStartError(self.name, self._with_stderr(f"is not speaking MCP: {said}"))
                if self._refusals is not None:
                    self._refusals.detach()
                    self._refusals = None
                self._session = session
                deliver, answer = notification_deliverer(session), request_answerer(session)
                if isinstance(self._leg, HttpLeg):
                    if deliver is not None and answer is not None:
                        self._leg.opened(deliver, answer)
                    else:
                        self._drop_leg()  # it could not pass on what the server sends in an answer's stream
                self.declared = declared
                self.declared_extensions = declared_extensions
                capabilities = session.server_capabilities
                self.extensions = dict(capabilities.extensions) if capabilities and capabilities.extensions else None
                self.protocol_version = session.protocol_version
                self.server_info = session.server_info
                if self.modern:
                    stamp_requesting_client(session)  # each request tells the truth about its own client
                    # At 2026-07-28 a server tells of changes only on a subscriptions/listen stream.
                    watchers.start_soon(self._listen, session)
                task_status.started()
                started = True
                await stop.wait()
        except BaseException as exc:
            cut_context_loop(exc)
            # Decided by this run's own facts, never by `self.state`: a restart may already be under
            # way, and an old run that re-raised its transport error would take the whole pool down.
            # A cancellation nothing asked for (from outside anyio) is this connection's end, not one to pass
            # on: raised into the pool's task group, it would cancel every server's connection and the gateway.
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class()) and not stray_cancellation(exc)
            current = self._stopped is stopped
            if started and current and not stop.is_set() and not cancelled and self.state == "ready":
                self._record_failure(f"connection ended: {describe(exc)}")
            if not started or cancelled:
                raise
        finally:
            if self._stopped is stopped:
                self._session = None
                self._drop_leg()
            stopped.set()

    async def _open_transport(self, stack: AsyncExitStack, watchers: anyio.abc.TaskGroup) -> tuple[Any, Any]:
        self._drop_leg()  # an earlier run's, if it has not finished stopping yet: its count is kept
        config = self.config
        if config.transport == "stdio":
            assert config.command is not None
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env={**self.child_env, **config.env} or None,
                cwd=config.cwd,
            )
            leg = StdioLeg(self.name) if self._leg_allowed("MANIFOLD_STDIO_LEG") else None
            (read, write), process = await open_stdio(
                params,
                stack,
                watchers,
                on_stderr_line=self._on_stderr_line,
                on_exit=partial(self._process_gone, self._stop),  # this run's process, not a later one
                read_stdout=leg.reading_stdout if leg is not None else None,
                server=self.name,
                max_line=self.settings.max_answer_bytes,
                stderr_kept=self.stderr.maxlen or 1,
            )
            self.pid = process.pid if process is not None else None
            self._process = process
            if process is not None and leg is not None:
                leg.attach(process.stdin)
                self._leg = leg
                read = leg.reading(read)
            return read, write
        assert config.url is not None
        self._process = None
        headers = dict(config.headers)
        auth = None
        self._oauth = None
        connect = None  # how the client connects: OAuth servers' clients check the address connected to
        if config.auth is not None:  # OAuth: never waits for a person (see remote_auth)
            from mcp_manifold._runtime import remote_auth  # the SDK's OAuth machinery, only for servers that use it

            where = remote_auth.token_storage(config, self.settings.data_dir, self.settings.state_url)
            storage = await stack.enter_async_context(where)  # kept open as long as the connection
            await remote_auth.check_login(config, storage)
            auth = await remote_auth.oauth_provider(config, storage)
            self._oauth = auth
            connect = auth.guard.network_backend()
        tls = tls_context()
        limit = self.settings.max_answer_bytes
        if config.transport == "sse":  # its POSTs' answers are read whole, whatever their type
            self._sse_page = FirstAnswerPage()
            hooks = [answer_bound(limit, self.name, streams_on_post=False), self._sse_page]
            clients = sse_http_clients(tls, connect, response_hooks=hooks)
            opened = sse_client(config.url, headers=headers or None, auth=auth, httpx_client_factory=clients)
            return await stack.enter_async_context(opened)
        hooks = [answer_bound(limit, self.name)]
        pacing = [GetPacing(self.name)]  # the session's GETs, whichever of its clients sends them
        http_client = create_http_client(
            headers, auth, tls=tls, network_backend=connect, response_hooks=hooks, request_hooks=pacing
        )
        http_client = await stack.enter_async_context(http_client)
        remedy = oauth_remedy(config.name, config.auth.grant) if config.auth is not None else None
        self._refusals = StartRefusals(http_client, remedy)
        # OAuth servers keep the SDK's path: its provider's refresh and login rounds stay in one place.
        if auth is None and self._leg_allowed("MANIFOLD_HTTP_LEG"):

            async def open_client() -> Any:  # closed with the session, as its own client is
                if http_client.is_closed:  # the session has ended: a client opened now would never close
                    raise RuntimeError("the session's HTTP client is closed")
                jar = http_client.cookies.jar
                opened = create_http_client(headers, cookies=jar, tls=tls, response_hooks=hooks, request_hooks=pacing)
                return await stack.enter_async_context(opened)

            self._leg = HttpLeg(http_client, config.url, self.name, config.scrub, open_client)
        return await stack.enter_async_context(streamable_http_client(config.url, http_client=http_client))

    def _login_needed(self, exc: BaseException) -> BackendError | None:
        """The "needs an OAuth login" failure somewhere in what the transport raised, for a server with OAuth."""
        if self.config.auth is None:
            return None
        from mcp_manifold._runtime.remote_auth import login_needed_in

        return login_needed_in(exc)

    def _filled_in(self, method: str, fields: tuple[str, ...]) -> None:
        new = set(fields) - self._filled_fields
        if new:
            self._filled_fields |= new
            logger.info(
                "server %r answers %s without %s; read as the 2026-07-28 schema means their absence",
                self.name,
                method,
                ", ".join(sorted(new)),
            )

    def _on_stderr_line(self, line: str) -> None:
        # Scrubbed as it arrives: a server may echo its own token, which must never be shown.
        # `config.scrub`, its secrets worked out once; cut after the scrub: no half secret.
        self.stderr.append(shortened(apply(self._secrets(), line), _STDERR_LINE))

    def _process_gone(self, stop: anyio.Event | None, reason: str) -> None:
        """The process of the run `stop` ends has exited. Only that run dies of it: the exit of one stopped
        earlier (its group is still being stopped) would otherwise stop the session started after it."""
        if stop is self._stop and self.state == "ready" and stop is not None and not stop.is_set():
            self._mark_dead(reason)

    def _mark_dead(self, reason: str) -> None:
        self._record_failure(self._with_stderr(reason))
        logger.warning("server %r stopped: %s; it restarts on next need", self.name, self.last_error)
        self._next_retry = time.monotonic()  # a crash restarts on next need; backoff is for failed starts
        if self._stop is not None:
            self._stop.set()

    @property
    def modern(self) -> bool:
        """Whether the running session speaks MCP 2026-07-28 (no handshake, no server-initiated requests)."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def needs_session(self) -> bool:
        """Whether the gateway learned that this server asks mid-call and so is reached in a session."""
        return self._needs_session

    def learn_needs_session(self) -> None:
        """What another replica learned (`asks_mid_call`): reach this server in a session from now on."""
        self._needs_session = True

    def asks_mid_call(self, method: str) -> str:
        """The running server tried to send `method` to its client during a request, and could not: at
        2026-07-28 there is no channel for it (the session-era idiom, common in servers that also answer
        2026-07-28), and a session-era session carries only what it told the server its client can answer.
        Under `protocol: auto`, where a session would tell the server its client can answer, learn it: the
        next request reconnects with the handshake, and the gateway relays the question. Returns what to
        tell the client (after the server's name)."""
        if self.modern:
            what = f"it asked its client ({method}) in the middle of a request, which MCP 2026-07-28 cannot carry"
            if self.config.protocol != "auto":
                return f"{what}; give it `protocol: auto` or `legacy` in the config so that it can ask in a session"
        else:
            what = f"it asked its client ({method}) in the middle of a request, which its session cannot carry"
        if ASKS.get(method) not in self.declare():
            # A session shared by several clients promises nothing (see `declare`).
            if self.owner is not None:  # this client's own session
                return f"{what}, and this client did not declare that it can answer it ({ASKS.get(method)})"
            if self.config.session_scope == "client":
                # Only a client the gateway can tell apart gets a session of its own.
                return (
                    f"{what}, and the session it shares between clients cannot either: a 2026-07-28 client gets "
                    "a session of its own (`session_scope: client`) once it authenticates to the gateway"
                )
            return (
                f"{what}, and its shared session cannot either: a client that can answer it gets a session of its "
                "own once the gateway can tell it apart (a session-era client; a 2026-07-28 client once it "
                "authenticates to the gateway)"
            )
        self.learn_it_asks(method)
        return f"{what}; mcp-manifold now reaches it in a session, where it can ask: call again"

    def learn_it_asks(self, method: str) -> None:
        """Learn, once and for good (`needs_session`, kept in the data dir), that the server asks its client
        mid-call: it is reached with the handshake from now on, and a client that can answer what a shared
        session never told it reaches it through a session of its own (call_path)."""
        if not self._needs_session:
            self._needs_session = True
            self._learned.learn(self.config, "needs_session")
            logger.warning(
                "server %r asks its client mid-call (%s): reaching it in a session where it can ask "
                "(`protocol: legacy` for it starts it that way)",
                self.name,
                method,
            )

    async def renew_if_session_needed(self) -> None:
        """Reconnect with the handshake if `asks_mid_call` learned the server needs a session. Call it with
        the request that wants it counted (`serving`): it renews only while that is the only one in flight, and
        no request (a ping, a listing) runs on the session."""
        # Only between requests: the connection is shared, and another client's request may be running on it.
        if self.state != "ready" or len(self._callers) > 1 or self._running:
            return
        if self._needs_session and self.modern and not self._takes_no_handshake():
            logger.info("server %r: reconnecting with the handshake", self.name)
            await self.stop()
        elif self.owner is None and not self.modern and self.client() is None and self.changed_extensions():
            # The clients sharing this session-era session now have other extensions in common (one came
            # or went): its handshake told the server otherwise, and only a new handshake can change that.
            logger.info("server %r: reconnecting to declare the extensions its clients now share", self.name)
            await self.stop()

    async def ping(self) -> None:
        """Check the server answers: `ping`, or `server/discover` at 2026-07-28 (which has no ping)."""

        async def probe(session: ClientSession) -> Any:
            if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return await session.send_discover(session.protocol_version)
            return await session.send_ping()

        await self.request("ping", probe)

    # --- subscriptions/listen (2026-07-28 servers) -------------------------------------------------

    def listen_to(self, subscribed: Callable[[], set[str]]) -> None:
        """Clients' subscriptions to this server's resources changed (a modern server: its listen stream asks
        for them). `subscribed` gives them; it is asked when the stream is next opened, once for a burst of
        changes (a stream of 256 resources, subscribed one by one, scanned every subscribed URI each time)."""
        self._subscribed = subscribed
        self._resubscribe.set()

    async def _listen(self, session: ClientSession) -> None:
        """Keep a subscriptions/listen stream open; its events reach `_on_message` like notifications."""
        from mcp.client.subscriptions import listen

        self._listened = tuple(sorted(self._subscribed()))  # a new session: what clients hold now
        while True:
            changed = False
            try:
                async with (
                    listen(
                        session,
                        tools_list_changed=True,
                        prompts_list_changed=True,
                        resources_list_changed=True,
                        resource_subscriptions=self._listened,
                    ) as events,
                    anyio.create_task_group() as reader,
                ):
                    reader.start_soon(_drain, events, reader.cancel_scope)
                    await self._subscriptions_change()
                    changed = True
                    reader.cancel_scope.cancel()
                if not changed:
                    await anyio.sleep(1.0)  # the server ended the stream: listen again, but not in a tight loop
            except Exception as exc:  # the server does not serve listen, or the stream was lost
                logger.debug("server %r: subscriptions/listen ended: %s", self.name, describe(exc))
                await self._subscriptions_change()  # no stream until the subscriptions change again

    async def _subscriptions_change(self) -> None:
        """Wait until the resources clients are subscribed to differ from those the stream names."""
        while True:
            await self._resubscribe.wait()
            self._resubscribe = anyio.Event()
            listened = tuple(sorted(self._subscribed()))
            if listened != self._listened:
                self._listened = listened
                return

    async def roots_changed(self) -> None:
        """Tell the server its client's roots changed (if it was told the client has roots)."""
        if self.state == "ready" and "roots" in self.declared and self._session is not None:
            with no_deprecation_warnings(), suppress(Exception):
                await self._session.send_roots_list_changed()

    def declare(self) -> frozenset[Ask]:
        """What the server is told its client can be asked for: only what the one client this session
        serves can answer; nothing for a session shared by several (a later one may declare less)."""
        client = self.client()
        return client.asks if client is not None else NO_ASKS

    def declare_extensions(self) -> dict[str, Any] | None:
        """The client extensions the session declares: those of the one client it serves; for a session
        shared by several, those every one of them declares (`shared_extensions`). (At 2026-07-28 each
        request declares its own client's.)"""
        client = self.client()
        extensions = client.extensions if client is not None else self.shared_extensions()
        return dict(extensions) if extensions else None

    def changed_extensions(self) -> bool:
        """Whether this shared session declared other extensions than its clients now have in common."""
        return self.declared_extensions != (self.shared_extensions() or None)

    def _takes_no_handshake(self) -> bool:
        """Whether this server refused the handshake (learned by this backend or another of the same server,
        such as a client's own session)."""
        if not self._discover_first and self._learned.knows(self.config, "discover_first"):
            self._discover_first = True
        return self._discover_first

    def opening_protocol(self) -> str:
        """How the next session opens: `legacy`, `modern`, `auto` (discovery first, then the handshake),
        or `handshake-first` (then discovery, in a new connection).

        Under `protocol: auto` a stdio server whose session serves one session-era client (a stdio
        gateway's, or a per-client session) is asked for the handshake first: the gateway then speaks to
        it as its client would have, the server's questions travel in that session as it wrote them, and
        in SDK 2.3 a session-era request costs a stdio server a quarter of a millisecond less CPU than
        a 2026-07-28 one. A server that does not take the handshake (2026-07-28 only) is started again
        with discovery, once. Every other session discovers first, as the spec says: over HTTP, and for a
        2026-07-28 client or several clients, whom per-request capabilities serve better.
        """
        if self._needs_session and not self._takes_no_handshake():
            # Refused (a 2026-07-28-only server whose words only sounded like a question it could not
            # ask), the handshake is learned to be of no use and discovery serves it as before.
            return "handshake-first"
        protocol = self.config.protocol
        if (
            protocol == "auto"
            and self.config.transport == "stdio"
            and not self._discover_first
            and (client := self.client()) is not None
            and client.era == "session"
        ):
            return "handshake-first"
        return protocol

    async def renew_if_declared_differs(self) -> None:
        """Stop a running session that declared other capabilities, or was opened in another era, than it
        would now; the next need starts it again telling the server the truth (the one client of a stdio
        gateway became known)."""
        if self.state != "ready":
            return
        reopen = self.modern and self.opening_protocol() == "handshake-first"
        if self.declared != self.declare() or self.declared_extensions != self.declare_extensions() or reopen:
            logger.info("server %r: restarting to speak to it as its client does", self.name)
            await self.stop()

    async def stop(self) -> None:
        """Close the session and stop the server (with its process group)."""
        if self._stop is None or self._stopped is None:
            return
        self._stopped_on_purpose()
        self._stop.set()
        with anyio.move_on_after(10):
            await self._stopped.wait()

    def _stopped_on_purpose(self) -> None:
        if self.state != "disabled":
            self.state = "stopped"

    def reconfigure(self, config: ServerConfig) -> None:
        """Take a changed entry that reaches the same server (`identity()` unchanged): prefix, tool filter,
        timeout, concurrency limit, caching, laziness. The session and its process are kept."""
        assert config.identity() == self.config.identity() and config.enabled == self.config.enabled
        self.config = config
        limit = config.max_concurrency
        if limit and self._limiter is not None:
            self._limiter.total_tokens = limit
        else:  # calls holding the old limiter release it as they finish
            self._limiter = anyio.CapacityLimiter(limit) if limit else None

    async def drain(self, grace: float) -> None:
        """Wait (at most `grace` seconds) for the calls in flight here to finish, then stop."""
        with anyio.move_on_after(grace):
            while self._callers:
                await anyio.sleep(0.05)
        await self.stop()

    # --- requests --------------------------------------------------------------------------

    def serving(self, request: Any) -> Waiting:
        """`with backend.serving(request):` marks a client request as waiting on this backend, so what
        the server initiates meanwhile (a log, a request for input) can reach that client."""
        return Waiting(self._callers, request, self._asking)

    def asking(self, request: Any, scope: anyio.CancelScope) -> Callable[[], None]:
        """Note a question the server put to the client of `request` (a call in flight here), answered within
        `scope`: cancelled if it still waits when the call ends. Returns what forgets it once answered."""
        scopes = self._asking.setdefault(request, [])
        scopes.append(scope)

        def forget() -> None:
            with suppress(ValueError):
                scopes.remove(scope)
            if not scopes and self._asking.get(request) is scopes:
                del self._asking[request]

        return forget

    @property
    def current_caller(self) -> Any | None:
        return self._callers[-1] if self._callers else None

    @property
    def callers(self) -> tuple[Any, ...]:
        """Every front request waiting on this backend, oldest first."""
        return tuple(self._callers)

    async def request(
        self, action: str, call: Callable[[ClientSession], Awaitable[Any]], who: str | None = None
    ) -> Any:
        """Run one request on the session with the backend's error translation, limits and breaker; `who` is
        the principal the request is for (None: none, or the gateway's own), whom the breaker may pause alone."""
        self.last_used = time.monotonic()
        if self.state == "disabled":
            await self.session()  # raises the clear "disabled" error; not a failure of the server
        admission = self.breaker.admit(who)
        if not admission.allowed:
            if admission.paused:
                raise BackendUnavailable(self.name, self._paused_message(admission.retry_in))
            raise BackendUnavailable(self.name, self._breaker_message(admission.retry_in))
        if admission.trial and self.state == "failed":
            # The breaker's trial is the retry: it must reach the server, not fail on the restart backoff.
            self._next_retry = 0.0
        await self.renew_if_session_needed()
        self._running += 1
        try:
            result = await self._request(action, call)
        except (BackendStartError, BackendUnavailable, BackendTimeout, BackendClosed) as exc:
            # The server could not be reached or did not answer: that counts toward opening the breaker.
            reason = str(exc).removeprefix(f"server {self.name!r}: ")
            paused_before = who is not None and who in self.breaker.paused()
            self.breaker.failure(reason, who)
            if who is not None and not paused_before and who in self.breaker.paused():
                logger.warning(
                    "server %r: the calls of %r failed %d times in a row (last: %s); that principal's calls to it "
                    "fail fast for %gs, the others' go on",
                    self.name,
                    who,
                    self.breaker.threshold,
                    reason,
                    self.breaker.cooldown,
                )
            raise
        except BackendRequestError:
            self.breaker.success(who)  # it answered, with an MCP error: the server itself is alive
            raise
        except BaseException:
            if admission.trial or admission.own_trial:
                self.breaker.abandon(who)  # cancelled mid-trial: the next call gets to be the trial
            raise
        finally:
            self._running -= 1
        self.breaker.success(who)
        return result

    def _paused_message(self, retry_in: float) -> str:
        wait = f"for another {retry_in:.1f}s" if retry_in > 0 else "until your call in progress ends"
        return (
            f"your calls to it failed {self.breaker.threshold} times in a row, so yours fail fast {wait} (other "
            "callers' calls go on); then one call of yours is let through"
        )

    def _breaker_message(self, retry_in: float) -> str:
        breaker = self.breaker
        wait = f"for another {retry_in:.1f}s" if retry_in > 0 else "until the trial call in progress ends"
        return (
            f"circuit breaker open after {breaker.failures} consecutive failure(s), so calls fail fast {wait}; "
            f"then one trial call is let through (last failure: {breaker.last_failure})"
        )

    async def _request(self, action: str, call: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        session = await self.session()
        timeout = self.call_timeout
        try:
            with translate_backend_errors(self.name, lambda: f"{action} (timeout {timeout:g}s)", self.config.scrub):
                # `anyio.fail_after`, less its two generators: a cancel scope with the deadline. Only the
                # deadline cancels it, so leaving it without an answer is the timeout.
                with anyio.CancelScope(deadline=anyio.current_time() + timeout):
                    if self._limiter is None:
                        return await call(session)
                    async with self._limiter:
                        return await call(session)
                raise TimeoutError
        except BackendClosed as exc:
            # A session replaced meanwhile (stopped on purpose to renew it, say) must not take its successor down.
            if self._session is session:
                self._mark_dead(str(exc))
            raise BackendClosed(
                self.name, self._with_stderr(f"{action} failed: the server closed the connection")
            ) from exc

    def _leg_allowed(self, switch: str) -> bool:
        """A raw leg is used unless its switch is off, or tracing wants the SDK client's span per request."""
        return speed_up_on(switch) and not self.settings.tracing

    def _drop_leg(self) -> None:
        leg, self._leg = self._leg, None
        if leg is not None:
            self._raw_calls_before += leg.posts
            if isinstance(leg, StdioLeg):
                leg.close()

    @property
    def raw_leg_calls(self) -> int:
        """`tools/call` requests a raw leg took since the gateway started (the rest took the SDK's path): written
        on a stdio server's stdin, or answered by an HTTP server's POST (not handed back to the SDK's path)."""
        return self._raw_calls_before + (self._leg.posts if self._leg is not None else 0)

    @property
    def raw_leg_clients(self) -> int | None:
        """The HTTP clients the raw leg of this HTTP server's session has sent on (None: no such leg)."""
        return self._leg.clients if isinstance(self._leg, HttpLeg) else None

    def raw_leg(self, session: ClientSession) -> HttpLeg | StdioLeg | None:
        """The raw leg for a plain call on `session` (still the live one). A stdio server's requests
        mid-call reach the session on its pipe either way; an HTTP server's would come in the POST's
        answer stream, so the HTTP leg only serves sessions that could not be asked anything mid-call:
        2026-07-28 ones, and ones that declared nothing the server may ask."""
        leg = self._leg
        if leg is None or session is not self._session:
            return None
        if isinstance(leg, HttpLeg) and not (self.modern or not self.declared):
            return None
        return leg

    async def list_all(self) -> Listing:
        """Everything the server offers, following pagination, skipping what it does not support."""
        listing = await list_everything(self)
        self.tool_count = len(listing.tools)
        return listing

    def offers_completions(self) -> bool:
        """Whether the running server declared the completions capability."""
        capabilities = self._session.server_capabilities if self._session is not None else None
        return capabilities is not None and capabilities.completions is not None

    def _named_itself(self) -> str | None:
        """The server's name and version as it gave them (`serverInfo`), cut to `_SERVER_INFO` characters."""
        info = self.server_info
        return shortened(f"{info.name} {info.version}".strip(), _SERVER_INFO) if info else None

    @property
    def needs_login(self) -> bool:
        """Running, yet each call refused until `manifold auth login NAME` (its OAuth tokens stopped working)."""
        return self._session is not None and self._oauth is not None and self._oauth.needs_login

    def status(self) -> BackendStatus:
        retry = self._next_retry - time.monotonic() if self.state == "failed" else None
        return BackendStatus(
            name=self.name,
            transport=self.config.transport,
            state=self.state,
            last_error=self.last_error,
            restarts=self.restarts,
            pid=self.pid,
            tools=self.tool_count,
            stderr_tail=list(self.stderr),
            server_info=self._named_itself(),
            retry_in=max(0.0, retry) if retry is not None else None,
            breaker=self.breaker.state,
            breaker_retry_in=self.breaker.retry_in(),
            protocol=self.protocol_version if self._session is not None else None,
            needs_login=self.needs_login,
        )

    # --- what the server initiates ------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            if self.state == "starting" and self._not_mcp is not None:
                self._not_mcp.saw(message)  # a start that reads nothing but this fails fast, quoting it
            return  # transport noise; a dead connection shows up on the next request
        with suppress(Exception):
            await self.hooks.on_server_notification(self, message)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        with suppress(Exception):
            # A server may log its own token: scrubbed here, before any client or the gateway's log sees it.
            params = params.model_copy(update={"data": scrub_log_data(self._secrets(), params.data)})
            await self.hooks.on_server_log(self, params)

    def _secrets(self) -> list[tuple[Secret, str]]:
        """What scrubbing this server's log messages replaces (`replacements`), worked out once per config."""
        if self._secrets_of is None or self._secrets_of[0] is not self.config:
            self._secrets_of = (self.config, replacements(self.config))
        return self._secrets_of[1]

    async def _on_sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        return await self._forward_request("sampling/createMessage", params)

    async def _on_elicitation(self, context: ClientRequestContext, params: Any) -> Any:
        return await self._forward_request("elicitation/create", params)

    async def _on_list_roots(self, context: ClientRequestContext) -> Any:
        return await self._forward_request("roots/list", None)

    async def _forward_request(self, method: str, params: Any) -> Any:
        try:
            return await self.hooks.on_server_request(self, method, params)
        except Exception as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"mcp-manifold could not forward {method}: {exc}")


async def _drain(events: Any, done: anyio.CancelScope) -> None:
    async for _ in events:  # each event also reaches the session's message handler
        pass
    done.cancel()
