"""`manifold config check` and `manifold import`: config files, the gateway's and the clients'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mcp_manifold._cli.common import ConfigOption, app, config_app, config_path, err, load, out
from mcp_manifold._config import check_config, load_config
from mcp_manifold._config.commands import command_warning
from mcp_manifold._config.warnings import config_warnings
from mcp_manifold._errors import ConfigError, ManifoldError
from mcp_manifold._front.identity import exposure_problem


@config_app.command("check")
def config_check(
    config: Annotated[Path | None, typer.Argument(help="The config file to check (or --config).")] = None,
    config_option: ConfigOption = None,
) -> None:
    """Report every problem in a config file at once, naming file, server and field; warn about commands
    that are not installed."""
    path = config_path(config_option, [str(config)] if config is not None else [])
    assert path is not None  # required: config_path stops when there is none
    problems = check_config(path)
    for problem in problems:
        err.print(str(problem), markup=False, highlight=False)
    if problems:
        raise typer.Exit(1)
    config = load_config(path)
    if config.settings.http and (refused := exposure_problem(config)):
        # What `serve` would refuse at start (with `http: true` in the file; a --http flag is not seen here).
        err.print(f"{path}: {refused}", markup=False, highlight=False)
        raise typer.Exit(1)
    for server in config.servers.values():
        if warning := command_warning(server):
            err.print(f"warning: {path}: server {server.name!r}: {warning}; it would fail to start", markup=False)
    for warning in config_warnings(config):
        err.print(f"warning: {path}: {warning}", markup=False, highlight=False)
    out.print(f"[green]{path}: OK[/green]")


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


@app.command("install")
def install(
    client: Annotated[str, typer.Argument(help="claude-desktop, cursor or claude-code.")],
    config: Annotated[Path | None, typer.Argument(help="The gateway's config file (or --config).")] = None,
    config_option: ConfigOption = None,
    name: Annotated[str, typer.Option(help="The entry's name in the client's file.")] = "manifold",
    client_file: Annotated[
        Path | None, typer.Option("--client-file", help="The client's config file (default: its usual place).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the client's file as it would be; change nothing.")
    ] = False,
    force: Annotated[bool, typer.Option(help="Replace an entry of that name that is not mcp-manifold.")] = False,
) -> None:
    """Add the gateway to Claude Desktop's, Cursor's or Claude Code's config (the old file is backed up)."""
    from mcp_manifold._config.installers import apply_install, plan_install, unchanged

    if client not in ("claude-desktop", "cursor", "claude-code"):
        raise typer.BadParameter("client must be claude-desktop, cursor or claude-code")
    path = config_path(config_option, [str(config)] if config is not None else [])
    assert path is not None
    cfg = load(path)  # a config with problems is refused here, not when the client starts the gateway
    try:
        plan = plan_install(client, path, cfg.servers, name=name, client_file=client_file, force=force)  # type: ignore[arg-type]
        if unchanged(plan):
            err.print(f"{plan.path} already has this {name!r} entry; nothing changed", markup=False)
        elif dry_run:
            err.print(f"would write {plan.path} (--dry-run: nothing changed):", markup=False)
            print(plan.text(), end="")
        else:
            backup = apply_install(plan)
            kept = f"; the old one is {backup}" if backup else ""
            verb = "replaced" if plan.replaced else "added"
            err.print(f"{verb} {name!r} in {plan.path}{kept}. Restart {client} to use it.", markup=False)
    except ConfigError as exc:
        for problem in exc.problems:
            err.print(str(problem), markup=False)
        raise typer.Exit(2) from None
    for note in plan.notes:
        err.print(f"note: {note}", markup=False)
