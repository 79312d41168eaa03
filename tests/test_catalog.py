"""The catalog without processes: merging, filtering, routing and change events."""

from __future__ import annotations

import mcp_types as types
import pytest

from mcp_manifold import NotFound
from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.listing import Listing


def tool(name: str, description: str = "") -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


def listing(prefix: str, *names: str, tool_filter: object = None, **lists: object) -> dict[str, object]:
    """`Catalog.set_backend`'s keyword arguments for a backend with these tools (and other lists)."""
    extra = {"tool_filter": tool_filter} if tool_filter is not None else {}
    return {"listing": Listing(tools=[tool(n) for n in names], **lists), "prefix": prefix, **extra}  # type: ignore[arg-type]


def test_merges_and_routes_tools() -> None:
    catalog = Catalog()
    catalog.set_backend("git", **listing("git", "status", "log"))
    catalog.set_backend("fs", **listing("fs", "read"))
    assert [t.name for t in catalog.tools()] == ["fs_read", "git_log", "git_status"]
    route = catalog.route_tool("git_status")
    assert (route.server, route.original) == ("git", "status")


def test_unknown_tool_names_what_was_asked() -> None:
    catalog = Catalog()
    catalog.set_backend("git", **listing("git", "status"))
    with pytest.raises(NotFound, match=r"'statu'.*git_status"):
        catalog.route_tool("statu")


def test_tool_filter_applies() -> None:
    catalog = Catalog()
    catalog.set_backend("git", **listing("git", "status", "push", tool_filter=lambda name: name != "push"))
    assert [t.name for t in catalog.tools()] == ["git_status"]


def test_change_events_name_the_kinds_that_changed() -> None:
    catalog = Catalog()
    seen: list[set[str]] = []
    catalog.subscribe(lambda kinds: seen.append(set(kinds)))
    catalog.set_backend("git", **listing("git", "status"))
    catalog.set_backend("git", **listing("git", "status"))  # same content: no event
    catalog.set_backend("git", **listing("git", "status", prompts=[types.Prompt(name="p")]))
    catalog.remove_backend("git")
    assert seen == [{"tools"}, {"prompts"}, {"tools", "prompts"}]


def test_resources_and_templates_are_namespaced_and_routed() -> None:
    catalog = Catalog()
    catalog.set_backend(
        "kitchen",
        **listing(
            "kitchen",
            resources=[types.Resource(name="text", uri="kitchen://text")],
            templates=[types.ResourceTemplate(name="greet", uri_template="kitchen://greeting/{name}")],
        ),
    )
    assert [r.uri for r in catalog.resources()] == ["kitchen+kitchen://text"]
    assert [t.uri_template for t in catalog.templates()] == ["kitchen+kitchen://greeting/{name}"]
    route = catalog.route_resource("kitchen+kitchen://greeting/bob")
    assert (route.server, route.original) == ("kitchen", "kitchen://greeting/bob")
    with pytest.raises(NotFound):
        catalog.route_resource("nobody+x://y")


def test_prompts_are_namespaced() -> None:
    catalog = Catalog()
    catalog.set_backend("a", **listing("a", prompts=[types.Prompt(name="greet")]))
    assert [p.name for p in catalog.prompts()] == ["a_greet"]
    assert catalog.route_prompt("a_greet").original == "greet"


def test_reserved_names_are_never_given_to_backend_tools() -> None:
    catalog = Catalog(reserved_names=["proxy"])
    catalog.set_backend("x", **listing("", "proxy"))
    assert catalog.tools()[0].name != "proxy"
