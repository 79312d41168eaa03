"""What a surface is, and the small host interface it reaches the gateway through.

A surface maps client requests onto the catalog, search and the call path. It never sees the
gateway itself, nor the SDK: it gets a `Host` (what it may ask of the gateway) and, per request, a
`Request` of a `Caller` (core/clients.py). It reads the catalog and searches only through
`host.view(request)`: that caller's view, which leaves out what its profile does not allow and
every quarantined tool, so no surface can show or rank what the caller may not use. Anything with
I/O (calling a backend, touching a file, starting a process) is the host's to do. Every hook a
surface may implement is declared here with an empty default, so each surface implements only what
it shows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types

from mcp_manifold._core.clients import Caller, ListKind, Request
from mcp_manifold._core.router import Target

if TYPE_CHECKING:
    from mcp_manifold._config import ServerConfig, Settings
    from mcp_manifold._core.catalog_view import CatalogView
    from mcp_manifold._core.listing import Listing
    from mcp_manifold._core.programs import ProgramReport
    from mcp_manifold._core.reading import ReadAnswer
    from mcp_manifold._core.results import ToolAnswer
    from mcp_manifold._core.router import ToolCall
    from mcp_manifold._core.status import BackendStatus

# An SDK server middleware, `(ctx, call_next) -> result` (mcp.server.context.ServerMiddleware).
WireMiddleware = Callable[[Any, Any], Awaitable[Any]]


class ResultFiles(Protocol):
    """The gateway's result files (spilled results), for surfaces that hand them to clients."""

    def resolve(self, raw: Any, field: str) -> Path:
        """A path a client sent back, checked to be a result file it may read (else a clear error)."""
        ...

    async def read_arguments(self, path: Path) -> dict[str, Any]:
        """A result file's content as a call's arguments (an object)."""
        ...

    async def stat(self, path: Path) -> dict[str, int | str]:
        """A result file's size, lines and estimated tokens."""
        ...

    async def read(self, path: Path, op: str, **options: Any) -> ReadAnswer:
        """Read part of a result file: op `head`, `tail`, `slice`, `grep` or `read` (options by op)."""
        ...


# --- instances found at run time (the hub), as the gateway's registry offers them -----------------


class InstanceView(Protocol):
    """One instance, as the surface reads it."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def listing(self) -> Listing | None:
        """What the instance lists, under the names its clients see."""
        ...

    def label(self) -> str: ...

    def original_tool(self, exposed: str) -> str:
        """The instance's own name of the tool its clients know as `exposed`."""
        ...

    def original_prompt(self, exposed: str) -> str:
        """The instance's own name of the prompt its clients know as `exposed`."""
        ...


class Instances(Protocol):
    """The gateway's instance registry (runtime/instances.py); `start`/`run` follow the hub surface's lifecycle."""

    instances: dict[str, Any]  # id -> InstanceView
    gone: dict[str, str]  # id of a dropped instance -> why
    skipped: set[str]  # ids registered but left out: the hub keeps `hub_max_instances` at most

    def start(self, listener: Any) -> None: ...

    async def run(self) -> None: ...

    async def scan(self) -> None: ...

    def get(self, instance_id: str) -> Any: ...

    def reserve(self, names: list[str]) -> None: ...

    def unusable(self, instance: Any) -> str | None: ...

    async def connect(self, instance: Any) -> None: ...

    async def relist(self, instance: Any) -> Listing: ...

    def after_call(self, instance: Any) -> None: ...

    def row(self, instance: Any) -> dict[str, Any]: ...


class StateFile(Protocol):
    """A small JSON document a surface keeps between runs (in the data dir)."""

    def load(self) -> Any:
        """The saved document, or None when there is none (or it cannot be read)."""
        ...

    def save(self, data: Any) -> None:
        """Save the document whole; a failure is logged, never raised (state is a convenience)."""
        ...


class Calls(Protocol):
    """The one call path (runtime/call_path.py): how a surface reaches a backend's tools, resources and prompts."""

    async def call_tool(self, request: Request, call: ToolCall) -> ToolAnswer: ...

    async def read_resource(self, request: Request, target: Target) -> types.ReadResourceResult: ...

    async def get_prompt(
        self, request: Request, target: Target, args: dict[str, str] | None
    ) -> types.GetPromptResult: ...

    async def run_program(
        self, request: Request, target: Target, run: Callable[[], Awaitable[ProgramReport]]
    ) -> ProgramReport:
        """Run a code-mode program under one record and span; its calls still go through `call_tool`."""
        ...

    def give_up(self, asked: types.InputRequiredResult) -> None:
        """Stop the server's call behind an `input_required` answer that will never be retried."""
        ...

    async def action(self, request: Request, target: Target, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work`, which the gateway does itself for the caller (a list, a search, a result file read),
        through the policy like a call: rate-limited, counted in flight, audited (kind "action")."""
        ...


class Host(Protocol):
    """What a surface may ask of the gateway."""

    @property
    def settings(self) -> Settings: ...

    @property
    def servers(self) -> Mapping[str, ServerConfig]:
        """The configured servers by name, enabled or not."""
        ...

    def view(self, request: Request) -> CatalogView:
        """The merged, namespaced lists of the configured servers (what the client's own sessions listed,
        where it has any), and search over their tools, as this request's caller may see them: only what
        its profile allows, nothing quarantined. Read it; the gateway keeps the catalog."""
        ...

    def holds_profile(self, caller: Caller) -> bool:
        """Whether the caller's principal still holds the profile its request was made with (a reload may
        have given it another): for work that goes on making calls after its request was admitted."""
        ...

    def may_see_server(self, caller: Caller, server: str) -> bool:
        """Whether the caller's profile lets it see `server` (or hub instance) now, for what is sent to it unasked:
        a reload may have taken the server away from a client still connected to it."""
        ...

    # --- the catalog ---
    async def ensure_catalog(self, request: Request | None = None) -> None:
        """List every configured server not listed yet (starting lazy ones), and the client's own sessions."""
        ...

    async def refresh(self, servers: list[str]) -> None:
        """(Re)list these servers now."""
        ...

    def backend_status(self, server: str) -> BackendStatus:
        """A configured server's state, breaker and last error."""
        ...

    @property
    def calls(self) -> Calls:
        """The one call path into backends."""
        ...

    # --- clients ---
    async def notify_list_changed(self, kinds: set[ListKind], caller: Caller | None = None) -> None:
        """Tell one client (or all) that lists changed."""
        ...

    async def notify_listeners(
        self, kinds: set[ListKind], items: Mapping[ListKind, frozenset[tuple[str, str]]] | None = None
    ) -> None:
        """Tell 2026-07-28 clients' listen streams that lists of `kinds` may have changed (the lists of an
        address of its own, such as a hub instance's), without telling every session. `items`: (server, exposed
        name) of what changed, per kind; a stream hears of a kind only if its caller may see one of them."""
        ...

    # --- files and processes ---
    @property
    def result_files(self) -> ResultFiles: ...

    def state_file(self, name: str) -> StateFile:
        """The JSON document `name` in the data dir."""
        ...

    def start_command(self, command: str, *, timeout: float) -> None:
        """Start an operator's command from the config through the shell, in the background, killed after
        `timeout`; returns at once. Failures and timeouts are logged, never raised."""
        ...

    def worker_processes(self, module: str, most: int) -> Any:
        """Worker processes running `python -m module` (`runtime/worker_processes.py`), at most `most` kept idle;
        the surface closes them when it stops."""
        ...

    # --- instances found at run time (the hub) ---
    @property
    def instances(self) -> Instances: ...


class Surface:
    """Base class: a surface that shows nothing. Subclasses override what they expose."""

    name = "surface"
    # Whether lists need the whole catalog first (a surface that shows only its own tools does not).
    needs_catalog = True

    def __init__(self, host: Host) -> None:
        self.host = host

    # --- lifecycle ---
    async def start(self) -> None:
        """Called once when the gateway starts (after backends are attached)."""

    async def run(self) -> None:
        """Background work for as long as the gateway runs (the hub's discovery); returns at once by default."""

    def reserved_tool_names(self) -> list[str]:
        """The tool names this surface always shows; backend tools never take them."""
        return []

    def wire_middleware(self) -> WireMiddleware | None:
        """A middleware for the MCP server's wire (the proxy restores annotation keys the SDK drops)."""
        return None

    def live_rows(self) -> list[dict[str, Any]]:
        """Rows for `manifold servers` of a running gateway (the hub's instances)."""
        return []

    async def work(self, request: Request, tool: str, action: str, run: Callable[[], Awaitable[Any]]) -> Any:
        """Run `run`, the surface's own `action` of its tool `tool` that costs the gateway work (a list, a
        search, a result file read, starting an instance), through the call path's policy: the caller's
        rate and calls-in-flight limits apply, and the audit records it like a call."""
        return await self.host.calls.action(request, Target("", action, tool, self.name), run)

    def unknown_tool_hint(self, request: Request, name: str) -> str | None:
        """When no surface has the tool `name`: this surface's advice to the client, if it has any."""
        return None

    async def prepare_lists(self, request: Request) -> None:
        """Before `request`'s lists are made or searched: fetch what they show (the hub lists the instance
        an address names). Never raises: a list shows what there is."""

    # --- tools ---
    def list_tools(self, request: Request) -> list[types.Tool]:
        return []

    def owns_tool(self, request: Request, name: str) -> bool:
        return False

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        raise NotImplementedError

    # --- resources ---
    def list_resources(self, request: Request) -> list[types.Resource]:
        return []

    def list_resource_templates(self, request: Request) -> list[types.ResourceTemplate]:
        return []

    def owns_resource(self, request: Request, uri: str) -> bool:
        return False

    async def read_resource(self, request: Request, uri: str) -> types.ReadResourceResult:
        raise NotImplementedError

    # --- prompts ---
    def list_prompts(self, request: Request) -> list[types.Prompt]:
        return []

    def owns_prompt(self, request: Request, name: str) -> bool:
        return False

    async def get_prompt(self, request: Request, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        raise NotImplementedError

    # --- completions ---
    def completion_target(
        self, request: Request, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> Target | None:
        """Where completions for a prompt's or a resource template's arguments come from, if this surface
        shows it (the target's `name` is the prompt's name or the template as its server knows them)."""
        return None
