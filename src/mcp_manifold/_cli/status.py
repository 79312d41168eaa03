"""`manifold servers` and `manifold tools`: what the gateway's servers are doing and what they offer."""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import typer
from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from mcp_manifold._cli.common import (
    EXTRA,
    WITH_CONFIG,
    ConfigOption,
    JsonOption,
    ProbeOption,
    app,
    err,
    load_for,
    out,
    with_gateway,
)
from mcp_manifold._cli.shown import json_text, plain, printable


@app.command(context_settings=EXTRA, options_metavar=WITH_CONFIG)
def servers(
    ctx: typer.Context, config: ConfigOption = None, as_json: JsonOption = False, probe: ProbeOption = False
) -> None:
    """Each server's state, tools, breaker, last error and stderr.

    Live from the running gateway(s) of this config (same data_dir) when there are any, with health
    and hub instances, and with state_url set every replica's row (id, address, last seen, servers);
    otherwise (or with --probe) by starting every server here.
    """
    cfg = load_for(ctx, config)
    from mcp_manifold._runtime.live_status import live_dir, read_live

    # Only gateways serving this very config: another config may share the data dir (the default one).
    this = str(cfg.path.resolve()) if cfg.path is not None else None
    live = [] if probe else [s for s in read_live(live_dir(cfg.settings.data_dir)) if s.get("config") == this]
    replicas = [] if probe or not cfg.settings.state_url else _replica_rows(cfg.settings.state_url)
    if live or replicas:
        _print_live(live, as_json, replicas if cfg.settings.state_url else None)
        states = [row for snapshot in live for row in snapshot["servers"]]
        states += [
            {"name": name, "state": state, "last_error": f"failed on replica {row.get('id')}"}
            for row in replicas
            for name, state in (row.get("servers") or {}).items()
        ]
        _exit_if_failed(cfg, states)
        return

    async def work(gateway: Any) -> list[Any]:
        await gateway.refresh([b.name for b in gateway.pool if b.state != "disabled"])
        from mcp_manifold._runtime.instances import instance_statuses

        # Instances registered in the discovery dir are extra rows when the hub is exposed (issue 6).
        return [backend.status() for backend in gateway.pool] + await instance_statuses(gateway.settings, gateway.pool)

    rows = [status.__dict__ for status in anyio.run(with_gateway, cfg, work)]
    if as_json:
        print(json_text(rows))
    else:
        out.print(_servers_table(f"servers of {cfg.path}" if cfg.path else "servers", rows))
    _exit_if_failed(cfg, rows)


def _exit_if_failed(cfg: Any, rows: list[dict[str, Any]]) -> None:
    """Exit 1 when a server the config enables failed (scripts and health checks see it), naming them."""
    failed = {row["name"]: row for row in rows if row["name"] in cfg.servers and row["state"] == "failed"}
    if failed:
        err.print(f"{len(failed)} enabled server(s) failed: {', '.join(sorted(failed))}", markup=False, highlight=False)
        for name in sorted(failed):  # each reason whole on one line, however narrow the table's column
            trouble = printable(_trouble(failed[name]).replace("\n", "; "))
            err.print(f"  {name}: {trouble}", markup=False, highlight=False)
        raise typer.Exit(1)


def _replica_rows(state_url: str) -> list[dict[str, Any]]:
    """Every live replica's row from the shared state (`state_url` set)."""
    from mcp_manifold._runtime.shared_state.status import replica_rows

    return anyio.run(replica_rows, state_url)


def _print_live(snapshots: list[dict[str, Any]], as_json: bool, replicas: list[dict[str, Any]] | None) -> None:
    """This machine's gateways of the config, and with `state_url` set every replica's row (`replicas`)."""
    if as_json:
        shown: dict[str, Any] = {"gateways": snapshots}
        if replicas is not None:
            shown["replicas"] = replicas
        print(json_text(shown))
        return
    if replicas:
        out.print(_replicas_table(replicas))
    for snapshot in snapshots:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.get("started_at", 0)))
        title = (
            f"gateway pid {snapshot['pid']} of {snapshot.get('config')}, serving since {since} "
            f"(expose: {','.join(snapshot['expose'])})"
        )
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
                    *(plain(row.get(key, "")) for key in ("id", "name", "state", "sessions", "tools", "endpoint")),
                    plain(row.get("last_error") or "", lines=True),
                )
            out.print(table)


def _replicas_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(rows)} replica(s) in the shared state")
    table.add_column("replica", no_wrap=True)
    table.add_column("address", no_wrap=True)  # whole, however narrow the terminal: the rest wraps
    for column in ("last seen", "servers ok", "servers failed", "sessions / 2026 requests"):
        table.add_column(column)
    for row in rows:
        states = row.get("servers") or {}
        failed = sorted(name for name, state in states.items() if state == "failed")
        clients = row.get("clients") or {}
        table.add_row(
            plain(row.get("id")),
            plain(row.get("url") or ""),
            f"{row.get('age', 0):.0f}s ago",  # by the store's clock: this machine's may differ
            str(sum(state == "ready" for state in states.values())),
            plain(", ".join(failed), style="red") if failed else "0",
            f"{clients.get('sessions', 0)} / {clients.get('stateless_requests', 0)}",
        )
    return table


def _clients_line(clients: dict[str, Any]) -> str:
    """The gateway's clients by protocol era: sessions now, and 2026-07-28 requests (which have none)."""
    line = f"clients: {clients.get('sessions', 0)} in a session (2025-11-25 and before)"
    count, last = clients.get("stateless_requests", 0), clients.get("last_stateless_request")
    line += f"; {count} request(s) of 2026-07-28 clients"
    if count and last:
        line += f", the latest {max(0.0, time.time() - last):.0f}s ago"
    return line


def _servers_table(title: str, rows: list[dict[str, Any]], *, health: bool = False) -> RenderableType:
    """The table, then each server's last error and stderr on lines of their own below it: in a column
    they were a few characters wide at 80 columns."""
    # Fits 80 columns (a pipe's width): no vertical rules, names whole, each server's name and version
    # under its name, and its last error below the table; the narrow columns wrap instead of the names.
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, collapse_padding=True)
    table.add_column("name", no_wrap=True, min_width=max((len(row["name"]) for row in rows), default=4))
    for column in ("transport", "state", *(["health"] if health else [])):
        table.add_column(column, min_width=len(column))
    table.add_column("breaker", overflow="fold")
    table.add_column("tools", min_width=len("tools"))
    table.add_column("protocol", overflow="fold")
    for row in rows:
        state = "needs login" if row.get("needs_login") else row["state"]  # "ready", yet each call refused
        color = {"ready": "green", "failed": "red", "disabled": "dim", "needs login": "red"}.get(state, "yellow")
        name = plain(row["name"])
        if row.get("server_info"):  # as the server named itself
            name.append(f"\n  {printable(row['server_info'])}", style="dim")
        cells: list[RenderableType] = [name, plain(row["transport"]), plain(state, style=color)]
        if health:
            cells.append(plain(row.get("health") or ""))
        cells += [_breaker_cell(row), str(row["tools"]), plain(row.get("protocol") or "")]
        table.add_row(*cells)
    troubles = [(row["name"], _trouble(row)) for row in rows]
    details: list[RenderableType] = [
        Padding(Text.assemble((f"{printable(name)}: ", "bold"), plain(trouble, lines=True)), (0, 0, 0, 2))
        for name, trouble in troubles
        if trouble
    ]
    if not details:
        return table
    return Group(table, Text("last error / stderr:"), *details)


_MARKS = re.compile(r"\s*[~^]+\s*")


def _trouble(row: dict[str, Any]) -> str:
    """The last error and the stderr lines it does not quote; nothing for a server that runs (its start-up
    banner on stderr is not a problem)."""
    error = (row.get("last_error") or "").removeprefix(f"server {row['name']!r}: ")
    if row.get("needs_login"):  # its last error and stderr are from before: not why its calls fail now
        from mcp_manifold._runtime.remote_auth import login_words  # the SDK's OAuth: only when it is needed

        return login_words(printable(row["name"]))
    if row["state"] in ("ready", "disabled") and not error:
        return ""
    # The last three the error does not quote. Python's `~~~^^^` marks point into the line above them:
    # alone they would only take the place of the lines that say where a traceback came from.
    lines = [line for line in row.get("stderr_tail") or [] if line.strip() and line not in error]
    lines = [line for line in lines if not _MARKS.fullmatch(line)][-3:]
    return "\n".join([error, *lines] if error else lines)


def _breaker_cell(row: dict[str, Any]) -> str:
    """`closed`, `half-open`, or `open (4.2s)` with the time left before the trial call."""
    if row.get("breaker") == "open" and row.get("breaker_retry_in") is not None:
        return f"[red]open ({row['breaker_retry_in']:.1f}s)[/red]"
    return "[yellow]half-open[/yellow]" if row.get("breaker") == "half-open" else str(row.get("breaker", ""))


@app.command(context_settings=EXTRA, options_metavar=WITH_CONFIG)
def tools(ctx: typer.Context, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List every tool as exposed (namespaced), with its server; exit 1 if an enabled server failed (its
    tools are missing from the list)."""
    cfg = load_for(ctx, config)

    async def work(gateway: Any) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
        from mcp_manifold._core.clients import Caller, Request

        await gateway.ensure_catalog()
        # What a client of the `profile` setting sees (`--profile NAME`): everything without one.
        entries = gateway.view(Request(Caller("cli"))).tool_entries()
        return entries, [b.status().__dict__ for b in gateway.pool], [e.name for e in gateway.catalog.tool_entries()]

    entries, states, every_name = anyio.run(with_gateway, cfg, work)
    _warn_of_unmatched_tools(cfg, every_name)
    if as_json:
        rows = [
            {"name": e.name, "server": e.server, "original": e.original.name, "description": e.exposed.description}
            for e in entries
        ]
        print(json_text(rows))
    else:
        _print_tools(entries)
    # The tools of the servers that started are listed; a failed one makes the list incomplete.
    _exit_if_failed(cfg, states)


def _warn_of_unmatched_tools(cfg: Any, every_name: list[str]) -> None:
    """Each `tools` entry of the profile listed (`--profile`) that matches no tool the servers list: it
    hides nothing and allows nothing, so a typo there left the tool out without a word."""
    from mcp_manifold._core.profiles import unmatched_tool_globs
    from mcp_manifold._core.suggestions import did_you_mean

    profile = cfg.profiles.get(cfg.settings.profile) if cfg.settings.profile else None
    for entry in unmatched_tool_globs(profile, every_name) if profile is not None else []:
        hint = did_you_mean(entry.removeprefix("!"), every_name)
        line = f"warning: profile {profile.name!r}, field 'tools': {entry!r} matches no tool any server lists{hint}"
        err.print(line, markup=False, highlight=False)


def _print_tools(entries: list[Any]) -> None:
    table = Table(title=f"{len(entries)} tools")
    table.add_column("name", no_wrap=True, min_width=max((len(entry.name) for entry in entries), default=4))
    table.add_column("server", no_wrap=True, min_width=max((len(entry.server) for entry in entries), default=6))
    table.add_column("description")
    for entry in entries:
        table.add_row(entry.name, entry.server, plain((entry.exposed.description or "").split("\n")[0][:100]))
    out.print(table)
