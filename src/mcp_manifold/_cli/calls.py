"""`manifold call` and `manifold search`: one tool through the gateway, and the tool index."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import anyio
import typer
from rich.table import Table

from mcp_manifold._cli.common import (
    EXTRA,
    WITH_CONFIG,
    ConfigOption,
    JsonOption,
    app,
    err,
    load_with_argument,
    out,
    with_gateway,
)
from mcp_manifold._cli.shown import json_text, plain, printable
from mcp_manifold._errors import ManifoldError


@app.command(context_settings=EXTRA, options_metavar=WITH_CONFIG)
def call(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Exposed tool name, e.g. git_status.")],
    args: Annotated[str, typer.Option("--args", "-a", help="Arguments as a JSON object.")] = "{}",
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Call one tool through the gateway and print its result."""
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"--args is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise typer.BadParameter("--args must be a JSON object, e.g. '{\"a\": 1}'")
    cfg, name = load_with_argument(ctx, config, name)

    async def work(gateway: Any) -> Any:
        from mcp_manifold._core.clients import Caller, Request
        from mcp_manifold._core.results import tool_error

        # Start only the servers whose prefix the name carries (a name clash can only involve those,
        # so they name their tools as the whole catalog would); all of them only if that finds nothing.
        owners = [
            backend.name for backend in gateway.pool if _may_own(backend.config, name, gateway.settings.separator)
        ]
        if owners:
            await gateway.refresh(owners)
        # The same way in as a client's tools/call: the surfaces, then the one call path.
        try:
            return await gateway.call_tool_by_name(Request(Caller("cli")), name, arguments)
        except ManifoldError as exc:
            return tool_error(str(exc))

    result = anyio.run(with_gateway, cfg, work)
    if as_json:
        print(json_text(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
    else:
        for item in result.content:
            if item.type == "text":
                print(item.text)
            else:
                print(item.model_dump_json(by_alias=True, exclude_none=True))
    if result.is_error:
        raise typer.Exit(1)


def _may_own(server: Any, name: str, separator: str) -> bool:
    """Whether `server` can expose a tool called `name` (its prefix starts it, or it has none)."""
    from mcp_manifold._core.naming import sanitize_prefix

    if not server.enabled:
        return False
    prefix = server.exposed_prefix
    return not prefix or name.startswith(sanitize_prefix(prefix) + separator)


@app.command(context_settings=EXTRA, options_metavar=WITH_CONFIG)
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What you want to do, in plain words.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=100, help="How many matches.")] = 5,
    explain: Annotated[
        str | None, typer.Option("--explain", metavar="NAME", help="Show where this tool ranks and why.")
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search every server's tools with the gateway's index (and show the index status).

    The title says which ranking answered: hybrid (BM25 + the local model) or bm25, and why not
    hybrid when it was configured. --explain NAME shows that tool's score and place after every
    ranking step, or why it is not in the index at all (a disabled server, a tools filter, a server
    that did not start).
    """
    cfg, query = load_with_argument(ctx, config, query)

    async def work(gateway: Any) -> tuple[list[Any], Any, Any, list[str], str | None]:
        from rich.progress import Progress

        await gateway.ensure_catalog()
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("indexing tools", total=None)

            def report(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            gateway.search_index.index.update(
                (tool_document(e) for e in gateway.catalog.tool_entries()), progress=report
            )
        matches = gateway.search_index.search(query, limit=limit)
        target = explain or (matches[0].entry.name if matches else None)
        how = gateway.search_index.index.explain(query, target, limit=limit) if target else None
        missing = _why_not_indexed(gateway, explain) if how is not None and explain and not how.in_index else []
        return matches, gateway.search_index.index.status(), how, missing, gateway.search_index.embedder_unavailable

    from mcp_manifold._runtime.search_index import tool_document
    from mcp_manifold._search.explain import render

    matches, status, how, missing, unavailable = anyio.run(with_gateway, cfg, work)
    ranking = how.ranking if how is not None and how.in_index else ("bm25" if status.embedder == "bm25" else "hybrid")
    why_not_hybrid = None
    if cfg.settings.search_embedder != "bm25" and ranking == "bm25":
        why_not_hybrid = unavailable or status.last_error or "the embedder could not be loaded"
    if why_not_hybrid:
        err.print(
            f"ranked by BM25 alone, not {cfg.settings.search_embedder}: {printable(why_not_hybrid)}",
            markup=False,
            highlight=False,
        )
    if as_json:
        rows = [
            {
                "name": m.entry.name,
                "server": m.entry.server,
                "score": round(m.score, 4),
                "description": m.entry.exposed.description,
            }
            for m in matches
        ]
        answer: dict[str, Any] = {
            "matches": rows,
            "ranking": ranking,
            "index": {
                "tools": status.tools,
                "embedder": status.embedder,
                "last_update": str(status.last_update),
                "stale": status.stale,
                "last_error": status.last_error,
            },
        }
        if explain and how is not None:
            answer["explain"] = {**dataclasses.asdict(how), "shown": how.shown, "notes": [*how.notes, *missing]}
        print(json_text(answer))
        return
    answered = f"hybrid, {status.embedder}" if ranking == "hybrid" else "bm25"
    table = Table(title=f"{query!r}: {len(matches)} of {status.tools} tools (ranked by {answered})")
    for column in ("score", "name", "server", "description"):
        table.add_column(column)
    for match in matches:
        description = (match.entry.exposed.description or "").split("\n")[0][:90]
        table.add_row(f"{match.score:.2f}", match.entry.name, match.entry.server, plain(description))
    out.print(table)
    if explain and how is not None:
        for line in [*render(how), *(f"  {note}" for note in missing)]:
            out.print(printable(line), markup=False, highlight=False)


def _why_not_indexed(gateway: Any, name: str) -> list[str]:
    """Why no tool called `name` is in the catalog: the servers that could expose it, and what hid it there."""
    from mcp_manifold._core.naming import sanitize_prefix

    separator = gateway.settings.separator
    reasons = []
    for server in gateway.config.servers.values():
        prefix = sanitize_prefix(server.exposed_prefix) + separator if server.exposed_prefix else ""
        if prefix and not name.startswith(prefix):
            continue
        original = name[len(prefix) :]
        if not server.enabled:
            reasons.append(f"server {server.name!r} is disabled in the config")
        elif not server.tools.allows(original):
            reasons.append(f"server {server.name!r} has a tools filter that leaves out {original!r}")
        else:
            backend = gateway.backends.get(server.name)
            if backend is not None and backend.last_error:
                reasons.append(f"server {server.name!r} is not running: {backend.last_error}")
    if not reasons:
        close = [m.entry.name for m in gateway.search_index.search(name.replace("_", " "), limit=3)]
        reasons.append("no server exposes a tool by that name" + (f"; closest: {', '.join(close)}" if close else ""))
    return reasons
