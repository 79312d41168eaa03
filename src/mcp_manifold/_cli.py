"""The `manifold` command line: serve, servers, tools, call, search, config check, import, pins, audit, auth."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import signal
import sys
import time
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from mcp_manifold._config import Config, check_config, load_config, settings_fields
from mcp_manifold._errors import ConfigError, ManifoldError
from mcp_manifold._runtime.lineage import check_not_nested

app = typer.Typer(
    name="manifold",
    help="One MCP endpoint in front of any number of MCP servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Work with config files.", no_args_is_help=True)
app.add_typer(config_app, name="config")
pins_app = typer.Typer(
    help="Pinned tool definitions: list them (no subcommand), see what changed, approve or reject a change.",
    invoke_without_command=True,
)
app.add_typer(pins_app, name="pins")
auth_app = typer.Typer(help="Credentials for a shared gateway.", no_args_is_help=True)
app.add_typer(auth_app, name="auth")

out = Console()
# Soft wrap: a problem or error stays on one line however narrow the terminal (or a pipe's 80 columns).
err = Console(stderr=True, soft_wrap=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Config file (JSON or YAML, Claude Desktop's mcpServers format)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}


def _setting_overrides(extra: list[str]) -> dict[str, Any]:
    """Parse `--some-setting VALUE` / `--flag` / `--no-flag` for every gateway setting."""
    fields = {name: (kind, default) for name, kind, default, _help in settings_fields()}
    overrides: dict[str, Any] = {}
    args = list(extra)
    while args:
        arg = args.pop(0)
        if not arg.startswith("--"):
            raise typer.BadParameter(f"unexpected argument {arg!r}")
        key, _, value = arg[2:].partition("=")
        name = key.replace("-", "_")
        negated = name.startswith("no_") and name[3:] in fields
        if negated:
            name = name[3:]
        if name not in fields:
            raise typer.BadParameter(f"unknown option --{key}; run with --help to see the settings")
        if fields[name][0] is bool and not value:
            overrides[name] = not negated
            continue
        if not value:
            if not args:
                raise typer.BadParameter(f"--{key} needs a value")
            value = args.pop(0)
        overrides[name] = value
    return overrides


def _load(config_path: Path | None, overrides: dict[str, Any] | None = None) -> Config:
    try:
        cfg = load_config(config_path, overrides=overrides or {})
        check_not_nested(cfg.path)
    except ConfigError as exc:
        err.print("[red]config has problems:[/red]")
        for problem in exc.problems:
            err.print(f"  {problem}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    _configure_logging(cfg.settings.log_level)
    return cfg


def _configure_logging(level: str) -> None:
    """The gateway's own log records go to stderr (never stdout: it may carry MCP) at `log_level`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mcp-manifold %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("mcp_manifold")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def _settings_help() -> str:
    lines = ["Every gateway setting is also a flag (flag > MANIFOLD_<SETTING> env > file > default):"]
    for name, _kind, default, help_text in settings_fields():
        lines.append(f"--{name.replace('_', '-')} (default {default!r}): {help_text}")
    return "\n\n".join(lines)


@app.command(context_settings=_EXTRA, epilog=_settings_help())
def serve(
    ctx: typer.Context,
    config: ConfigOption = None,
    http: Annotated[bool | None, typer.Option("--http/--stdio", help="Serve streamable HTTP at /mcp.")] = None,
    host: Annotated[str | None, typer.Option(help="HTTP host.")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port.")] = None,
    expose: Annotated[str | None, typer.Option(help="Surfaces, comma-separated: direct,proxy,...")] = None,
) -> None:
    """Run the gateway over stdio (default) or streamable HTTP."""
    overrides = _setting_overrides(ctx.args)
    for key, value in (("http", http), ("host", host), ("port", port), ("expose", expose)):
        if value is not None:
            overrides[key] = value
    cfg = _load(config, overrides)
    if cfg.settings.http:
        from mcp_manifold._front.identity import check_exposure

        check_exposure(cfg)  # before any server starts: an open gateway on a network interface is refused
    from mcp_manifold._front.signals import Stopper
    from mcp_manifold._front.stdio import serve_stdio
    from mcp_manifold._runtime.gateway import Gateway

    async def serve(gateway: Gateway, stopper: Stopper) -> None:
        if cfg.settings.http:
            # Imported here: the HTTP front brings uvicorn, starlette and the JOSE library, which a stdio
            # gateway (a desktop client's child, started often) never needs.
            from mcp_manifold._front.http import serve_http

            err.print(
                f"mcp-manifold: serving {len(cfg.enabled_servers)} server(s) at "
                f"http://{cfg.settings.host}:{cfg.settings.port}/mcp (expose: {','.join(cfg.settings.expose)})"
            )
            await serve_http(gateway, cfg.settings.host, cfg.settings.port, stopper)
        else:
            await serve_stdio(gateway, stopper)

    async def main() -> None:
        # SIGTERM (a client quitting, `kill`, systemd) ends serving like EOF or Ctrl-C does, at any
        # moment from start-up on, so the gateway still stops its servers and removes its files.
        async with anyio.create_task_group() as task_group:
            stopper = Stopper(task_group.cancel_scope.cancel)
            task_group.start_soon(stopper.watch, *([signal.SIGINT] if cfg.settings.http else []))
            async with Gateway(cfg, serving=True, single_client=not cfg.settings.http) as gateway:
                if cfg.settings.http and gateway.reloader is not None:
                    # A daemon's SIGHUP: read the config again (over stdio a hang-up still stops it).
                    stopper.on_hangup = partial(gateway.reloader.request, "signal")
                await serve(gateway, stopper)
            task_group.cancel_scope.cancel()

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main)


async def _with_gateway(cfg: Config, work: Any) -> Any:
    from mcp_manifold._runtime.gateway import Gateway

    async with Gateway(cfg) as gateway:
        return await work(gateway)


ProbeOption = Annotated[
    bool, typer.Option("--probe", help="Start the servers here even when a gateway is running with this config.")
]


@app.command(context_settings=_EXTRA)
def servers(
    ctx: typer.Context, config: ConfigOption = None, as_json: JsonOption = False, probe: ProbeOption = False
) -> None:
    """Each server's state, tools, breaker, last error and stderr.

    Live from the running gateway(s) of this config (same data_dir) when there are any, with health
    and hub instances; otherwise (or with --probe) by starting every server here.
    """
    cfg = _load(config, _setting_overrides(ctx.args))
    from mcp_manifold._runtime.live_status import live_dir, read_live

    live = [] if probe else read_live(live_dir(cfg.settings.data_dir))
    if live:
        _print_live(live, as_json)
        return

    async def work(gateway: Any) -> list[Any]:
        await gateway.refresh([b.name for b in gateway.pool if b.state != "disabled"])
        from mcp_manifold._runtime.instances import instance_statuses

        # Instances registered in the discovery dir are extra rows when the hub is exposed (issue 6).
        return [backend.status() for backend in gateway.pool] + await instance_statuses(gateway.settings, gateway.pool)

    statuses = anyio.run(_with_gateway, cfg, work)
    if as_json:
        out.print_json(json.dumps([status.__dict__ for status in statuses]))
        return
    out.print(_servers_table("servers", [status.__dict__ for status in statuses]))


def _print_live(snapshots: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps({"gateways": snapshots}))
        return
    for snapshot in snapshots:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.get("started_at", 0)))
        title = f"gateway pid {snapshot['pid']}, serving since {since} (expose: {','.join(snapshot['expose'])})"
        out.print(_servers_table(title, snapshot["servers"], health=True))
        clients = snapshot.get("clients")
        if clients:
            out.print(_clients_line(clients))
        if snapshot.get("instances"):
            table = Table(title="hub instances")
            for column in ("id", "name", "state", "sessions", "tools", "endpoint", "last error"):
                table.add_column(column)
            for row in snapshot["instances"]:
                table.add_row(
                    *(str(row.get(key, "")) for key in ("id", "name", "state", "sessions", "tools", "endpoint")),
                    str(row.get("last_error") or ""),
                )
            out.print(table)


def _clients_line(clients: dict[str, Any]) -> str:
    """The gateway's clients by protocol era: sessions now, and 2026-07-28 requests (which have none)."""
    line = f"clients: {clients.get('sessions', 0)} in a session (2025-11-25 and before)"
    count, last = clients.get("stateless_requests", 0), clients.get("last_stateless_request")
    line += f"; {count} request(s) of 2026-07-28 clients"
    if count and last:
        line += f", the latest {max(0.0, time.time() - last):.0f}s ago"
    return line


def _servers_table(title: str, rows: list[dict[str, Any]], *, health: bool = False) -> Table:
    table = Table(title=title)
    columns = ["name", "transport", "state", *(["health"] if health else []), "breaker", "tools", "server", "protocol"]
    for column in [*columns, "last error / stderr"]:
        table.add_column(column)
    for row in rows:
        detail = row.get("last_error") or ""
        if row.get("stderr_tail"):
            detail += ("\n" if detail else "") + "\n".join(row["stderr_tail"][-3:])
        state = row["state"]
        color = {"ready": "green", "failed": "red", "disabled": "dim"}.get(state, "yellow")
        cells = [row["name"], row["transport"], f"[{color}]{state}[/{color}]"]
        if health:
            cells.append(row.get("health") or "")
        cells += [
            _breaker_cell(row),
            str(row["tools"]),
            row.get("server_info") or "",
            row.get("protocol") or "",
            detail,
        ]
        table.add_row(*cells)
    return table


def _breaker_cell(row: dict[str, Any]) -> str:
    """`closed`, `half-open`, or `open (4.2s)` with the time left before the trial call."""
    if row.get("breaker") == "open" and row.get("breaker_retry_in") is not None:
        return f"[red]open ({row['breaker_retry_in']:.1f}s)[/red]"
    return "[yellow]half-open[/yellow]" if row.get("breaker") == "half-open" else str(row.get("breaker", ""))


@app.command(context_settings=_EXTRA)
def tools(ctx: typer.Context, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List every tool as exposed (namespaced), with its server."""
    cfg = _load(config, _setting_overrides(ctx.args))

    async def work(gateway: Any) -> list[Any]:
        from mcp_manifold._core.clients import Caller, Request

        await gateway.ensure_catalog()
        # What a client of the `profile` setting sees (`--profile NAME`): everything without one.
        return gateway.view(Request(Caller("cli"))).tool_entries()

    entries = anyio.run(_with_gateway, cfg, work)
    if as_json:
        rows = [
            {"name": e.name, "server": e.server, "original": e.original.name, "description": e.exposed.description}
            for e in entries
        ]
        out.print_json(json.dumps(rows))
        return
    table = Table(title=f"{len(entries)} tools")
    for column in ("name", "server", "description"):
        table.add_column(column)
    for entry in entries:
        table.add_row(entry.name, entry.server, (entry.exposed.description or "").split("\n")[0][:100])
    out.print(table)


@app.command(context_settings=_EXTRA)
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
    cfg = _load(config, _setting_overrides(ctx.args))

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

    result = anyio.run(_with_gateway, cfg, work)
    if as_json:
        out.print_json(result.model_dump_json(by_alias=True, exclude_none=True))
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


@app.command(context_settings=_EXTRA)
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
    cfg = _load(config, _setting_overrides(ctx.args))

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

    matches, status, how, missing, unavailable = anyio.run(_with_gateway, cfg, work)
    ranking = how.ranking if how is not None and how.in_index else ("bm25" if status.embedder == "bm25" else "hybrid")
    why_not_hybrid = None
    if cfg.settings.search_embedder != "bm25" and ranking == "bm25":
        why_not_hybrid = unavailable or status.last_error or "the embedder could not be loaded"
    if why_not_hybrid:
        err.print(f"ranked by BM25 alone, not {cfg.settings.search_embedder}: {why_not_hybrid}")
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
        out.print_json(json.dumps(answer))
        return
    answered = f"hybrid, {status.embedder}" if ranking == "hybrid" else "bm25"
    table = Table(title=f"{query!r}: {len(matches)} of {status.tools} tools (ranked by {answered})")
    for column in ("score", "name", "server", "description"):
        table.add_column(column)
    for match in matches:
        description = (match.entry.exposed.description or "").split("\n")[0][:90]
        table.add_row(f"{match.score:.2f}", match.entry.name, match.entry.server, description)
    out.print(table)
    if explain and how is not None:
        for line in [*render(how), *(f"  {note}" for note in missing)]:
            out.print(line, markup=False, highlight=False)


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


@app.command(context_settings=_EXTRA)
def register(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", "-n", help="A name for the server, shown by instances_list.")],
    url: Annotated[str | None, typer.Option(help="The running server's streamable HTTP URL.")] = None,
    command: Annotated[str | None, typer.Option(help="Or a command line a hub runs over stdio.")] = None,
    directory: Annotated[Path | None, typer.Option(help="The project directory it serves (default: here).")] = None,
    pid: Annotated[int | None, typer.Option(help="The server's pid; the record goes stale when it exits.")] = None,
    instance_id: Annotated[str | None, typer.Option("--id", help="The instance id (default: NAME-<random>).")] = None,
    config: ConfigOption = None,
) -> None:
    """Announce a running MCP server to hubs until interrupted (writes it into discovery_dir)."""
    from mcp_manifold._runtime.discovery import RecordError, discovery_dir
    from mcp_manifold._runtime.registration import build_record, default_pid, register_until_stopped

    cfg = _load(config, _setting_overrides(ctx.args))
    folder = discovery_dir(cfg.settings.discovery_dir)
    try:
        record = build_record(
            name,
            url=url,
            command=command,
            directory=str((directory or Path.cwd()).resolve()),
            pid=pid if pid is not None else default_pid(),
            instance_id=instance_id,
            interval=cfg.settings.ping_interval or 10.0,
        )
    except RecordError as exc:
        raise typer.BadParameter(str(exc).removeprefix("register: ")) from None

    def announce(path: Path) -> None:
        err.print(f"registered {record.id} ({record.endpoint()}) in {path}; Ctrl-C removes it", markup=False)

    try:
        anyio.run(register_until_stopped, folder, record, announce)
    except OSError as exc:
        err.print(f"error: cannot write to the discovery directory {folder}: {exc}", markup=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass


@config_app.command("check")
def config_check(config: Annotated[Path, typer.Argument(help="The config file to check.")]) -> None:
    """Report every problem in a config file at once, naming file, server and field."""
    problems = check_config(config)
    if not problems:
        out.print(f"[green]{config}: OK[/green]")
        return
    for problem in problems:
        err.print(str(problem), markup=False, highlight=False)
    raise typer.Exit(1)


@app.command("import")
def import_config(
    client: Annotated[str, typer.Argument(help="claude-desktop, cursor or claude-code.")],
    path: Annotated[Path | None, typer.Argument(help="The client's config file (default: its usual place).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite --output if it exists.")] = False,
) -> None:
    """Write a manifold config from Claude Desktop's, Cursor's or Claude Code's MCP settings."""
    from mcp_manifold._config.importers import import_client_config, write_config

    if client not in ("claude-desktop", "cursor", "claude-code"):
        raise typer.BadParameter("client must be claude-desktop, cursor or claude-code")
    try:
        result = import_client_config(client, path)  # type: ignore[arg-type]
        for warning in result.warnings:
            err.print(f"warning: {warning}", markup=False)
        if output is None:
            print(json.dumps(result.config, indent=2))
        else:
            write_config(result.config, output, force=force)
            err.print(f"wrote {output} ({len(result.config.get('mcpServers', {}))} servers from {result.source})")
    except ConfigError as exc:
        for problem in exc.problems:
            err.print(str(problem), markup=False)
        raise typer.Exit(2) from None
    except ManifoldError as exc:
        err.print(str(exc), markup=False)
        raise typer.Exit(2) from None


# --- pins ----------------------------------------------------------------------------------------


def _pin_store(config: Path | None) -> Any:
    from mcp_manifold._runtime.pin_store import PinStore

    cfg = _load(config)
    mode = cfg.settings.pinning
    if mode == "off":
        err.print("note: pinning is off in this config; showing the pins recorded before", markup=False)
    return cfg, PinStore(cfg.settings.data_dir, "warn" if mode == "off" else mode)  # type: ignore[arg-type]


def _find_pin(cfg: Config, store: Any, name: str) -> Any:
    """A pin by `server/tool`, by the tool's exposed name (`git_status`), or by its own name if one server has it."""
    pins = store.pins()
    server, slash, tool = name.partition("/")
    if slash:
        found = [pin for pin in pins if (pin.server, pin.tool) == (server, tool)]
    else:
        separator = cfg.settings.separator
        prefixes = {n: c.exposed_prefix for n, c in cfg.servers.items()}
        found = [p for p in pins if f"{prefixes.get(p.server, p.server)}{separator}{p.tool}" == name]
        found = found or [pin for pin in pins if pin.tool == name]
    if len(found) == 1:
        return found[0]
    if found:
        options = ", ".join(f"{pin.server}/{pin.tool}" for pin in found)
        raise ManifoldError(f"{name!r} is pinned on several servers: {options}; name it as SERVER/TOOL")
    from mcp_manifold._core.suggestions import did_you_mean

    raise ManifoldError(
        f"no pinned tool {name!r}{did_you_mean(name, [f'{p.server}/{p.tool}' for p in pins])} (see `manifold pins`)"
    )


@pins_app.callback()
def pins(
    ctx: typer.Context,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    changed: Annotated[bool, typer.Option("--changed", help="Only tools that are not approved as served.")] = False,
) -> None:
    """Every pinned tool and its state: pinned, changed, new or rejected (quarantined under pinning: enforce)."""
    if ctx.invoked_subcommand is not None:
        return
    cfg, store = _pin_store(config)
    rows = [pin for pin in store.pins() if not changed or pin.state != "pinned"]
    quarantined = cfg.settings.pinning == "enforce"
    if as_json:
        out.print_json(
            json.dumps(
                [
                    {
                        "server": pin.server,
                        "tool": pin.tool,
                        "state": pin.state,
                        "quarantined": quarantined and pin.state != "pinned",
                        "changed_at": pin.changed_at,
                    }
                    for pin in rows
                ]
            )
        )
        return
    table = Table(title=f"{len(rows)} pinned tools (pinning: {cfg.settings.pinning})")
    for column in ("server", "tool", "state", "since"):
        table.add_column(column)
    for pin in rows:
        state = (
            pin.state if pin.state == "pinned" else f"[red]{pin.state}{' (quarantined)' if quarantined else ''}[/red]"
        )
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(pin.changed_at)) if pin.changed_at else ""
        table.add_row(pin.server, pin.tool, state, since)
    out.print(table)


@pins_app.command("diff")
def pins_diff(
    name: Annotated[str, typer.Argument(help="SERVER/TOOL, or the tool's exposed name.")], config: ConfigOption = None
) -> None:
    """What changed in a tool since it was approved: description and schemas as a diff."""
    from mcp_manifold._core.pins import describe_change

    cfg, store = _pin_store(config)
    print(describe_change(_find_pin(cfg, store, name)))


@pins_app.command("approve")
def pins_approve(
    names: Annotated[list[str], typer.Argument(help="SERVER/TOOL or exposed names.")], config: ConfigOption = None
) -> None:
    """Approve the definition a tool is served with now; a running gateway lifts its quarantine within a second."""
    _decide(names, config, "approve")


@pins_app.command("reject")
def pins_reject(
    names: Annotated[list[str], typer.Argument(help="SERVER/TOOL or exposed names.")], config: ConfigOption = None
) -> None:
    """Refuse the definition a tool is served with now: quarantined until the server serves the approved one."""
    _decide(names, config, "reject")


def _decide(names: list[str], config: Path | None, decision: str) -> None:
    cfg, store = _pin_store(config)
    try:
        for name in names:
            pin = _find_pin(cfg, store, name)
            if pin.candidate is None:
                out.print(f"{pin.server}/{pin.tool}: nothing to {decision} (it is served as approved)")
                continue
            after = getattr(store, decision)(pin.server, pin.tool)
            out.print(f"{after.server}/{after.tool}: {after.state}")
    finally:
        store.close()


# --- audit ----------------------------------------------------------------------------------------


@app.command()
def audit(
    config: ConfigOption = None,
    lines: Annotated[int, typer.Option("--lines", "-n", help="Show the last N matching lines.")] = 20,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines as they come.")] = False,
    principal: Annotated[str | None, typer.Option(help="Only this principal.")] = None,
    profile: Annotated[str | None, typer.Option(help="Only this profile.")] = None,
    outcome: Annotated[
        str | None, typer.Option(help="Only this outcome: ok, error, cached, denied, quarantined, rate_limited.")
    ] = None,
    server: Annotated[str | None, typer.Option(help="Only this server.")] = None,
    name: Annotated[str | None, typer.Option(help="Only this exposed name (a trailing * matches a prefix).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON lines as written.")] = False,
) -> None:
    """Tail and filter the audit log: one line per call, read and prompt (who, what, outcome, sizes)."""
    from collections import deque

    from mcp_manifold._runtime.audit import audit_dir, matches, read_entries

    cfg = _load(config)
    directory = audit_dir(cfg.settings.data_dir)
    filters = {"principal": principal, "profile": profile, "outcome": outcome, "server": server, "name": name}
    shown = 0

    def show(line: dict[str, Any]) -> None:
        if as_json:
            print(json.dumps(line, ensure_ascii=False, separators=(",", ":")), flush=True)
            return
        who = line.get("principal") or "-"
        if line.get("profile"):
            who += f" ({line['profile']})"
        where = f"{line.get('server') or '?'}/{line.get('original') or '?'}"
        text = (
            f"{line.get('time')} {who} {line.get('outcome')} {line.get('surface') or '-'} {line.get('name')} "
            f"[{where}] {line.get('duration_ms')} ms"
        )
        if line.get("error"):
            text += f": {line['error']}"
        out.print(text, markup=False, highlight=False, soft_wrap=True)

    for line in deque((e for e in read_entries(directory) if matches(e, filters)), maxlen=max(0, lines)):
        show(line)
        shown += 1
    if not follow:
        if not shown and not as_json:
            err.print(f"no matching audit lines in {directory}", markup=False)
        return
    _follow(directory, filters, show)


def _follow(directory: Path, filters: dict[str, str | None], show: Any) -> None:
    """Print lines appended from now on (through rotations) until Ctrl-C."""
    from mcp_manifold._runtime.audit import FILE_NAME, matches

    path = directory / FILE_NAME
    position = path.stat().st_size if path.exists() else 0
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            size = path.stat().st_size if path.exists() else 0
            if size < position:  # rotated: start the new file from its beginning
                position = 0
            if size > position:
                with path.open(encoding="utf-8") as file:
                    file.seek(position)
                    chunk = file.read()
                    complete = chunk[: chunk.rfind("\n") + 1]
                    position += len(complete.encode("utf-8"))
                for raw in complete.splitlines():
                    try:
                        entry = json.loads(raw)
                    except ValueError:
                        continue
                    if matches(entry, filters):
                        show(entry)
            time.sleep(0.5)


# --- auth -----------------------------------------------------------------------------------------


@auth_app.command("new-key")
def auth_new_key(principal: Annotated[str, typer.Argument(help="Who the key is for (its principal).")]) -> None:
    """Make a random API key: give the key to its holder, put the SHA-256 in the config's auth.api_keys."""
    import secrets

    from mcp_manifold._config.security import hash_key

    key = f"mfk_{secrets.token_urlsafe(32)}"
    err.print("Give this key to its holder (it is not shown again):", markup=False)
    print(key)
    err.print("Add this to the config (only the hash is stored):", markup=False)
    err.print(json.dumps({"auth": {"api_keys": {principal: {"sha256": hash_key(key)}}}}, indent=2), markup=False)


def main() -> None:
    try:
        app()
    except ManifoldError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(1)
    except BaseExceptionGroup as group:
        # Task groups wrap what the gateway raised; our own errors still deserve a plain message.
        ours, rest = group.split(ManifoldError)
        if ours is None or rest is not None:
            raise
        for exc in _leaves(ours):
            err.print(f"error: {exc}", markup=False)
        sys.exit(1)


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


if __name__ == "__main__":
    main()
