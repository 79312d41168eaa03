"""The `hub` surface (seed 003, Brummer's hub): pick one running MCP server per client session.

Instances are the configured servers plus the servers found at run time in the discovery
directory (the gateway's instance registry, runtime/instances.py; `manifold register` writes those
records). A client calls `instances_list`, then `instances_connect(instance_id)`: from then on that
session's tools, resources and prompts include the instance's (a `list_changed` notification says
so) and its calls go there, with progress, logs and cancellation passed through.
`instances_disconnect` takes them away again. The binding lives in the client's state and is
released when the client goes away (hang-up or `session_idle_timeout`), so two HTTP clients never see
each other's instance.

A 2026-07-28 client has no session to bind: `instances_connect` tells it so and shows the instance's
tools, which it calls with `instances_call(instance_id, tool, arguments)`; or it uses the instance's
own endpoint, `/mcp/instances/<instance_id>`, whose lists are that instance's (lists may vary by
address, never by what a client did before). Session-era clients can use both too.

Each instance has one gateway-side connection, shared by the sessions bound to it and watched by the
gateway's health monitor: a dead instance gives its sessions a clear error and a log message, and
they pick up where they were when it comes back.
"""

from __future__ import annotations

import json
import logging
import weakref
from dataclasses import replace
from typing import Any

import mcp_types as types

from mcp_manifold._core.apps import for_app_only
from mcp_manifold._core.arguments import object_argument
from mcp_manifold._core.catalog import Kind
from mcp_manifold._core.catalog_view import CatalogView
from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.results import ToolAnswer
from mcp_manifold._core.router import Target, ToolCall
from mcp_manifold._core.suggestions import did_you_mean, quoted
from mcp_manifold._errors import BackendUnavailable, InvalidRequest, ManifoldError, NotFound
from mcp_manifold._surfaces.base import Host, Instances, InstanceView, Surface

logger = logging.getLogger(__name__)

LIST = "instances_list"
CONNECT = "instances_connect"
DISCONNECT = "instances_disconnect"
CALL = "instances_call"
HUB_TOOL_NAMES = (LIST, CONNECT, DISCONNECT, CALL)
_BOUND = "hub.instance"  # client state: the id of the instance this client is connected to
_RELEASE = "hub.release_registered"
_ALL_KINDS: set[Kind] = {"tools", "resources", "prompts"}
_HOW_TO = f"Call {LIST} to see the running instances, then {CONNECT} with an instance_id to use its tools."
_NAMED_AT_MOST = 20  # an instance's tools named in an error about one it lacks


def hub_tools() -> list[types.Tool]:
    no_arguments = {"type": "object", "properties": {}}
    return [
        types.Tool(
            name=LIST,
            description="List the MCP server instances this hub can connect you to: configured servers and "
            "servers found running, with their state (discovered, connecting, active, retrying, dead).",
            input_schema=no_arguments,
        ),
        types.Tool(
            name=CONNECT,
            description="Connect this session to one instance: its tools, resources and prompts are added to "
            "yours until you disconnect or connect to another.",
            input_schema={
                "type": "object",
                "properties": {"instance_id": {"type": "string", "description": f"An id from {LIST}."}},
                "required": ["instance_id"],
            },
        ),
        types.Tool(
            name=DISCONNECT,
            description="Disconnect this session from its instance; its tools leave your list.",
            input_schema=no_arguments,
        ),
        types.Tool(
            name=CALL,
            description=f"Call one tool of an instance without connecting to it ({CONNECT} shows its tools).",
            input_schema={
                "type": "object",
                "properties": {
                    "instance_id": {"type": "string", "description": f"An id from {LIST}."},
                    "tool": {"type": "string", "description": "The instance's tool."},
                    "arguments": {"type": "object", "default": {}, "description": "The tool's arguments."},
                },
                "required": ["instance_id", "tool"],
            },
        ),
    ]


class HubSurface(Surface):
    name = "hub"
    needs_catalog = False  # its lists come from the connected instance, not the catalog

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self._sessions: dict[str, weakref.WeakSet[Caller]] = {}  # instance id -> bound clients
        self._tools = hub_tools()

    @property
    def registry(self) -> Instances:
        """The gateway's instance registry (made when first asked for, once the gateway is whole)."""
        return self.host.instances

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.registry.reserve(list(HUB_TOOL_NAMES))
        self.registry.start(self)

    async def run(self) -> None:
        await self.registry.run()

    def reserved_tool_names(self) -> list[str]:
        return list(HUB_TOOL_NAMES)

    def live_rows(self) -> list[dict[str, Any]]:
        """Every known instance as `instances_list` shows it, for `manifold servers` (live_status)."""
        return [self._describe(instance, None) for instance in self.registry.instances.values()]

    # --- what the client sees ----------------------------------------------------------------

    async def prepare_lists(self, request: Request) -> None:
        # An instance's own address lists that instance whether or not anyone connected to it before.
        pinned = request.endpoint.get("instance_id")
        if pinned is None or not self.host.view(request).may_use_server(pinned):
            return  # one the caller's profile may not use is unknown to it: nothing is started for it
        instance = self.registry.get(pinned)
        if instance is None:
            await self.registry.scan()  # registered a moment ago
            instance = self.registry.get(pinned)
        if instance is None:
            return
        try:
            await self._in_catalog(instance.id, self.host.view(request))
            if instance.listing is not None or self.registry.unusable(instance):
                return
            await self._ensure_connected(instance)
            await self.registry.relist(instance)
        except ManifoldError as exc:  # the lists show the hub's tools; a call says why the instance cannot
            logger.info("instance %s not listed for its address: %s", pinned, exc)

    def list_tools(self, request: Request) -> list[types.Tool]:
        listing = self._bound_listing(request)
        return [*self._tools, *(_for_model(listing).tools if listing else ())]

    def owns_tool(self, request: Request, name: str) -> bool:
        if name in HUB_TOOL_NAMES:
            return True
        listing = self._bound_listing(request)
        return listing is not None and listing.tool(name) is not None

    def unknown_tool_hint(self, request: Request, name: str) -> str | None:
        # A name nobody knows: answer it with how to connect rather than a bare "unknown tool".
        bound = _bound(request)
        if bound is None and request.caller.era == "stateless":
            return self._stateless_hint(request, name)
        if bound is None:
            return f"this session is not connected to an instance. {_HOW_TO}"
        instance = self._instance(request, bound)
        if instance is None:
            return self._gone_message(request, bound)
        listing = self._visible(request, instance)
        tools = (
            _some_tools([tool.name for tool in _for_model(listing).tools], "tools/list")
            if listing
            else "its tools: unknown"
        )
        return f"{instance.label()} has no such tool ({tools}). {CONNECT} switches to another instance."

    def _stateless_hint(self, request: Request, name: str) -> str:
        """A 2026-07-28 client has no session to connect: `instances_connect` only showed it the tools. Name
        the instance that has `name` and the two ways it can call it, never `instances_connect` again."""
        owners = [
            instance.id
            for instance in self.registry.instances.values()
            if self._instance(request, instance.id) is not None
            and (listing := self._visible(request, instance)) is not None
            and _for_model(listing).tool(name) is not None
        ]
        if owners:
            address = f", or by its name at the address /mcp/instances/{owners[0]}" if self._addresses else ""
            return (
                f"it is a tool of instance {owners[0]!r}: call it with {CALL} "
                f'{{"instance_id": "{owners[0]}", "tool": "{name}", "arguments": {{...}}}}{address} '
                "(a client speaking MCP 2026-07-28 has no session to connect)"
            )
        address = " or at the address /mcp/instances/<instance_id>" if self._addresses else ""
        return (
            f"a client speaking MCP 2026-07-28 has no session to connect: call {LIST}, then {CONNECT} to see an "
            f"instance's tools, and call them with {CALL}{address}"
        )

    @property
    def _addresses(self) -> bool:
        """Whether instances have addresses of their own (/mcp/instances/<id>): only a gateway serving HTTP has.
        Over stdio a 2026-07-28 client was pointed at an address it has no way to reach."""
        return self.host.settings.http

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        # Listing scans for instances, connecting starts a session: the gateway's own work, as actions.
        if name == LIST:
            return await self.work(request, LIST, "list", lambda: self._list_instances(request))
        if name == CONNECT:
            return await self.work(request, CONNECT, "connect", lambda: self._connect(request, arguments))
        if name == DISCONNECT:
            return await self._disconnect(request)
        if name == CALL:
            return await self._call_on(request, arguments)
        instance = await self._usable(request)
        target = Target(instance.id, instance.original_tool(name), name, self.name)
        result = await self.host.calls.call_tool(request, ToolCall(target, arguments))
        self.registry.after_call(instance)
        return result

    def list_resources(self, request: Request) -> list[types.Resource]:
        listing = self._bound_listing(request)
        return list(listing.resources) if listing else []

    def list_resource_templates(self, request: Request) -> list[types.ResourceTemplate]:
        listing = self._bound_listing(request)
        return list(listing.templates) if listing else []

    def owns_resource(self, request: Request, uri: str) -> bool:
        listing = self._bound_listing(request)
        return listing is not None and listing.owns_uri(uri)

    async def read_resource(self, request: Request, uri: str) -> types.ReadResourceResult:
        instance = await self._usable(request)
        # One it lists is taken as listed, however spelled (`file:///docs/`): a profile judges its spelling else.
        listed = instance.listing is not None and any(resource.uri == uri for resource in instance.listing.resources)
        return await self.host.calls.read_resource(request, Target(instance.id, uri, uri, self.name, listed))

    def list_prompts(self, request: Request) -> list[types.Prompt]:
        listing = self._bound_listing(request)
        return list(listing.prompts) if listing else []

    def owns_prompt(self, request: Request, name: str) -> bool:
        listing = self._bound_listing(request)
        return listing is not None and listing.prompt(name) is not None

    async def get_prompt(self, request: Request, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        instance = await self._usable(request)
        target = Target(instance.id, instance.original_prompt(name), name, self.name)
        return await self.host.calls.get_prompt(request, target, arguments)

    def completion_target(
        self, request: Request, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> Target | None:
        instance = self._bound_instance(request)
        listing = self._visible(request, instance) if instance is not None else None
        if instance is None or listing is None:
            return None
        if isinstance(ref, types.PromptReference):
            if not listing.prompt(ref.name):
                return None
            # The server is asked under its own name (`scripts/explain`), not the one shown (`scripts_explain`).
            return Target(instance.id, instance.original_prompt(ref.name), ref.name, self.name)
        templates = {template.uri_template for template in listing.templates}
        return Target(instance.id, ref.uri, ref.uri, self.name) if ref.uri in templates else None

    # --- the hub's tools -----------------------------------------------------------------------

    async def _list_instances(self, request: Request) -> types.CallToolResult:
        await self.registry.scan()
        bound = _bound(request)
        view = self.host.view(request)
        rows = [
            self._describe(instance, bound, request.caller)
            for instance in self.registry.instances.values()
            if view.may_use_server(instance.id)
        ]
        if bound is not None and self._instance(request, bound) is None:
            gone = self._gone_reason(request, bound)
            rows.append({"id": bound, "state": "gone", "connected": True, "last_error": gone})
        # A bare array, as Brummer's `instances/list` (scripts read `.[0].id`); `connected` marks this session's.
        text = json.dumps(rows, indent=1)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    def _describe(self, instance: InstanceView, bound: str | None, viewer: Caller | None = None) -> dict[str, Any]:
        """An instance's row; `sessions` counts the `viewer`'s principal's sessions only (on a shared gateway,
        how much others use an instance is theirs), every session for the gateway's own status (None)."""
        row = self.registry.row(instance)
        described = {key: row[key] for key in ("id", "name", "kind", "endpoint", "state")}
        described["connected"] = instance.id == bound
        sessions = self._sessions.get(instance.id, ())
        if viewer is not None:
            sessions = [caller for caller in sessions if caller.principal == viewer.principal]
        described["sessions"] = len(sessions)
        described.update({key: value for key, value in row.items() if key not in described})
        return described

    async def _connect(self, request: Request, arguments: dict[str, Any]) -> types.CallToolResult:
        instance_id = arguments.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id.strip():
            raise InvalidRequest(f"{CONNECT} needs 'instance_id': a string id from {LIST}")
        pinned = request.endpoint.get("instance_id")
        if pinned is not None:
            raise InvalidRequest(
                f"this address serves instance {quoted(pinned)} only; connect through the hub's own address"
            )
        instance = await self._known(instance_id.strip(), self.host.view(request))
        await self._ensure_connected(instance)
        view = self.host.view(request)  # with the catalog `_known` may have listed
        listing = view.listing(
            instance.id, await self.registry.relist(instance), instance.original_tool, instance.original_prompt
        )
        listing = _for_model(listing)  # told to the model: never a tool for its app only
        summary = (
            f"{len(listing.tools)} tool(s) ({', '.join(tool.name for tool in listing.tools) or 'none'}), "
            f"{len(listing.resources) + len(listing.templates)} resource(s), {len(listing.prompts)} prompt(s)"
        )
        if request.caller.era == "stateless":
            # No session to bind: the tools, and how to reach them, are the answer.
            address = f", or use the address /mcp/instances/{instance.id}, whose lists are this instance's"
            text = (
                f"{instance.label()} has {summary}. This client speaks MCP 2026-07-28, which keeps no session, so "
                f"connecting cannot add them to your list: call them with {CALL}(instance_id={instance.id!r}, tool, "
                f"arguments){address if self._addresses else ''}.\n" + _tools_with_schemas(listing)
            )
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        if request.caller.state.get(_BOUND) != instance.id:  # connecting again changes no list
            self._bind(request.caller, instance.id)
            await self.host.notify_list_changed(_ALL_KINDS, request.caller)
        text = f"Connected to {instance.label()}: {summary}. They are in your lists now; {DISCONNECT} removes them."
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def _known(self, instance_id: str, view: CatalogView) -> Any:
        """The instance by its id, among those the caller's profile may use (the others are unknown to it)."""
        await self.registry.scan()
        visible = view.may_use_server(instance_id)
        instance = self.registry.get(instance_id) if visible else None
        if instance is None and visible and instance_id in self.registry.skipped:
            limit = self.host.settings.hub_max_instances
            raise InvalidRequest(
                f"instance {instance_id!r} is registered, but the hub already keeps its limit of {limit} "
                f"discovered instances (hub_max_instances); it is not connected to. {LIST} shows those it keeps."
            )
        if instance is None:
            known = ", ".join(sorted(i for i in self.registry.instances if view.may_use_server(i))) or "none"
            raise NotFound(f"unknown instance {quoted(instance_id)}; known instances: {known}. {LIST} shows them all.")
        await self._in_catalog(instance.id, view)
        return instance

    async def _in_catalog(self, instance_id: str, view: CatalogView) -> None:
        """A configured server's items are judged by the names the catalog gives them too (a profile denying
        `kitchen_crash` denies the hub's `crash`): have the catalog list it before the hub shows or calls them, and
        refuse them while it cannot. Before, a server the catalog failed to list but the hub then reached was judged
        by the hub's names alone: `instances_call(kitchen, fail)` ran the tool `!kitchen_fail` denies."""
        if instance_id not in self.host.servers or instance_id in view.catalog.servers:
            return
        await self.host.refresh([instance_id])
        if self._unjudged(instance_id, view):
            raise BackendUnavailable(
                instance_id,
                f"it could not be listed, and its items are judged by the names its listing gives them: nothing "
                f"of it is shown or called until it is. {LIST} shows its state.",
            )

    def _unjudged(self, instance_id: str, view: CatalogView) -> bool:
        """Whether a profile would judge a configured server's items without the catalog's names for them."""
        return view.profile is not None and instance_id in self.host.servers and instance_id not in view.catalog.servers

    async def _disconnect(self, request: Request) -> types.CallToolResult:
        pinned = request.endpoint.get("instance_id")
        bound = request.caller.state.get(_BOUND)
        if pinned is not None:
            text = f"This address serves instance {quoted(pinned)} only; use the hub's own address to leave it."
        elif bound is None:
            text = "This session is not connected to an instance."
        else:
            self._unbind(request.caller)
            await self.host.notify_list_changed(_ALL_KINDS, request.caller)
            text = f"Disconnected from instance {bound!r}; its tools are no longer in your list."
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def _call_on(self, request: Request, arguments: dict[str, Any]) -> ToolAnswer:
        instance_id, tool = arguments.get("instance_id"), arguments.get("tool")
        if not isinstance(instance_id, str) or not instance_id.strip():
            raise InvalidRequest(f"{CALL} needs 'instance_id': a string id from {LIST}")
        if not isinstance(tool, str) or not tool:
            raise InvalidRequest(f"{CALL} needs 'tool': one of the instance's tools ({CONNECT} shows them)")
        args = object_argument(arguments.get("arguments") or {}, "arguments")
        instance = await self._ready(await self._known(instance_id.strip(), self.host.view(request)))
        view = self.host.view(request)  # with the catalog `_known` may have listed
        listing = view.listing(
            instance.id,
            instance.listing or await self.registry.relist(instance),
            instance.original_tool,
            instance.original_prompt,
        )
        listing = _for_model(listing)  # the model's call: never a tool for its app only (its app uses tools/call)
        if listing.tool(tool) is None:
            names = [t.name for t in listing.tools]
            raise NotFound(
                f"{instance.label()} has no tool {quoted(tool)}{did_you_mean(tool, names)} "
                f"({_some_tools(names, CONNECT)})"
            )
        target = Target(instance.id, instance.original_tool(tool), tool, self.name)
        result = await self.host.calls.call_tool(request, ToolCall(target, args))
        self.registry.after_call(instance)
        return result

    # --- sessions ----------------------------------------------------------------------------

    def _bound_instance(self, request: Request) -> InstanceView | None:
        """The instance the client is connected to, if its profile may use it."""
        return self._instance(request, _bound(request) or "")

    def _bound_listing(self, request: Request) -> Listing | None:
        """What the client may see of the instance it is connected to (its profile, the pins)."""
        instance = self._bound_instance(request)
        return self._visible(request, instance) if instance is not None else None

    def _gone_reason(self, request: Request, instance_id: str) -> str | None:
        """Why the instance went away, told only to a caller whose profile may use it."""
        return self.registry.gone.get(instance_id) if self.host.view(request).may_use_server(instance_id) else None

    def _instance(self, request: Request, instance_id: str) -> InstanceView | None:
        """The instance, if the caller's profile may use it: one it may not is unknown to it, as a gone one is
        (an address such as /mcp/instances/<id> can name any)."""
        if not self.host.view(request).may_use_server(instance_id):
            return None
        return self.registry.get(instance_id)

    def _visible(self, request: Request, instance: InstanceView) -> Listing | None:
        view = self.host.view(request)
        if instance.listing is None or self._unjudged(instance.id, view):
            return None
        return view.listing(instance.id, instance.listing, instance.original_tool, instance.original_prompt)

    def _bind(self, caller: Caller, instance_id: str) -> None:
        self._unbind(caller)
        caller.state[_BOUND] = instance_id
        self._sessions.setdefault(instance_id, weakref.WeakSet()).add(caller)
        if not caller.state.get(_RELEASE):
            caller.on_close(lambda: self._unbind(caller))  # the client went away
            caller.state[_RELEASE] = True

    def _unbind(self, caller: Caller) -> None:
        bound = caller.state.pop(_BOUND, None)
        if bound is not None and bound in self._sessions:
            self._sessions[bound].discard(caller)
            if not self._sessions[bound]:
                del self._sessions[bound]

    async def _usable(self, request: Request) -> Any:
        """The client's instance, ready for a request, or a ManifoldError saying why not."""
        bound = _bound(request)
        if bound is None:
            raise NotFound(f"this session is not connected to an instance. {_HOW_TO}")
        instance = self._instance(request, bound)
        if instance is None:
            raise BackendUnavailable(bound, self._gone_message(request, bound))
        await self._in_catalog(instance.id, self.host.view(request))  # a lookup, once the catalog has listed it
        return await self._ready(instance)

    async def _ready(self, instance: Any) -> Any:
        """`instance`, connected, or a ManifoldError saying why it cannot take a request now."""
        problem = self.registry.unusable(instance)
        if problem is not None:
            raise BackendUnavailable(
                instance.id,
                f"{problem}. Calls work again once it answers; {LIST} shows its state, "
                f"{CONNECT} switches to another instance.",
            )
        await self._ensure_connected(instance)
        return instance

    async def _ensure_connected(self, instance: InstanceView) -> None:
        try:
            await self.registry.connect(instance)
        except BackendUnavailable as exc:
            message = str(exc).removeprefix(f"server {instance.id!r}: ")
            if message.endswith(": timed out"):
                raise
            raise BackendUnavailable(instance.id, f"{message}. {LIST} shows every instance.") from None

    def _gone_message(self, request: Request, instance_id: str) -> str:
        reason = self._gone_reason(request, instance_id) or "it is no longer registered"
        return f"instance {quoted(instance_id)} is gone ({reason}). {_HOW_TO}"

    async def _notify_sessions(
        self, instance_id: str, level: types.LoggingLevel, message: Any, logger_name: str = "manifold.hub"
    ) -> None:
        """Tell the clients bound to an instance what happened to it (a log message, best effort)."""
        for caller in self._told(instance_id):
            await caller.log(level, message, logger_name)

    def _told(self, instance_id: str) -> list[Caller]:
        """The clients bound to an instance that may still see it: a reload that narrowed a client's profile
        leaves it bound (its lists hide the instance), and it must not hear of the instance either."""
        bound = self._sessions.get(instance_id, ())
        return [caller for caller in bound if self.host.may_see_server(caller, instance_id)]

    # --- what the registry tells (InstanceListener) ---------------------------------------------

    def in_use(self, instance_id: str) -> bool:
        return bool(self._sessions.get(instance_id))

    async def instance_gone(self, instance_id: str, label: str, reason: str, listing: Listing | None) -> None:
        await self._notify_sessions(instance_id, "warning", f"{label} went away: {reason}")
        await self._lists_changed(instance_id, listing, None)

    async def instance_dead(self, instance_id: str, label: str, reason: str) -> None:
        message = f"{label} is dead: {reason}. The hub keeps trying to reconnect."
        await self._notify_sessions(instance_id, "error", message)

    async def instance_back(self, instance_id: str, label: str) -> None:
        await self._notify_sessions(instance_id, "notice", f"{label} is back")

    async def listing_changed(self, instance_id: str, before: Listing | None) -> None:
        instance = self.registry.get(instance_id)
        await self._lists_changed(instance_id, before, instance.listing if instance is not None else None)

    async def _lists_changed(self, instance_id: str, before: Listing | None, after: Listing | None) -> None:
        # The sessions connected to it, and the listen streams (of /mcp/instances/<instance_id>, say) whose
        # caller may see something that changed: before, every stream heard of every instance's change, a
        # caller whose profile hides the instance too (it exists, and changed).
        for caller in self._told(instance_id):
            kinds = self._seen_changes(caller, instance_id, before, after)
            if kinds:
                await self.host.notify_list_changed(kinds, caller)
        if instance_id in self.host.servers:
            # A configured server: the catalog announced the change to every stream, judged by the names its
            # profiles judge (`kitchen_secret`); told again under the hub's (`secret`), a stream whose profile
            # hides the tool by the catalog's name heard of it.
            return
        await self.host.notify_listeners(_ALL_KINDS, changed_items(instance_id, before, after))

    def _seen_changes(
        self, caller: Caller, instance_id: str, before: Listing | None, after: Listing | None
    ) -> set[Kind]:
        """The kinds of list in which `caller`, bound to the instance, sees something change: its lists show the
        instance as its profile and the pins let it. Before, every change was announced to every bound session,
        one of an item its profile hides (`!send`) too: the item exists, and changed."""
        view = self.host.view(Request(caller))
        instance = self.registry.get(instance_id)
        original_tool = instance.original_tool if instance is not None else str
        original_prompt = instance.original_prompt if instance is not None else str

        def seen(listing: Listing | None) -> Listing | None:
            if listing is None:
                return None
            return _for_model(view.listing(instance_id, listing, original_tool, original_prompt))

        changed = changed_items(instance_id, seen(before), seen(after))
        return {kind for kind, items in changed.items() if items}

    async def instance_log(self, instance_id: str, level: types.LoggingLevel, data: Any, logger_name: str) -> None:
        await self._notify_sessions(instance_id, level, data, logger_name)


def _bound(request: Request) -> str | None:
    """The instance a request is for: the one its address names, else the one its session connected to."""
    return request.endpoint.get("instance_id") or request.caller.state.get(_BOUND)


def _some_tools(names: list[str], shown_by: str) -> str:
    """An instance's tools for an error about a name it lacks: all of them when few, else how many and where they
    are shown. Before, every name: an instance of 2,000 tools made each mistyped call's error 22 KB."""
    if len(names) <= _NAMED_AT_MOST:
        return f"its tools: {', '.join(names) or 'none'}"
    first = ", ".join(names[:_NAMED_AT_MOST])
    return f"its tools: {first} and {len(names) - _NAMED_AT_MOST} more; {shown_by} shows them all"


def _for_model(listing: Listing) -> Listing:
    """`listing` without the tools for their app only (MCP Apps `visibility: ["app"]`), as the direct surface lists:
    never listed, named or called through the hub's own tools, which are the model's. Its app still calls them with
    `tools/call` on the connected session (`owns_tool` takes the whole listing). Before, `instances_connect` showed
    them to the model with their schemas and `instances_call` called them."""
    tools = [tool for tool in listing.tools if not for_app_only(tool.meta)]
    return listing if len(tools) == len(listing.tools) else replace(listing, tools=tools)


def _tools_with_schemas(listing: Listing) -> str:
    """One line per tool: name, what it does, and its input schema (all a model needs to call it)."""
    lines = []
    for tool in listing.tools:
        description = " ".join((tool.description or "").split())[:160]
        schema = json.dumps(tool.input_schema, separators=(",", ":"))
        lines.append(f"- {tool.name}: {description}\n  input: {schema}")
    return "\n".join(lines) or "(no tools)"


def changed_items(
    instance_id: str, before: Listing | None, after: Listing | None
) -> dict[Kind, frozenset[tuple[str, str]]]:
    """Per kind, (instance id, name as the hub shows it) of each item added, removed or changed between two
    listings (a template's name: its URI template), as `Catalog.last_change` says it of configured servers."""

    def items(listing: Listing | None) -> dict[Kind, dict[str, Any]]:
        if listing is None:
            return {kind: {} for kind in _ALL_KINDS}
        return {
            "tools": {tool.name: tool for tool in listing.tools},
            "prompts": {prompt.name: prompt for prompt in listing.prompts},
            "resources": {
                **{str(resource.uri): resource for resource in listing.resources},
                **{template.uri_template: template for template in listing.templates},
            },
        }

    old, new = items(before), items(after)
    return {
        kind: frozenset(
            (instance_id, name)
            for name in old[kind].keys() | new[kind].keys()
            if old[kind].get(name) != new[kind].get(name)
        )
        for kind in _ALL_KINDS
    }
