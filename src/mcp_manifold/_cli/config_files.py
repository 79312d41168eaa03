"""`manifold config check` and `manifold import`: config files, the gateway's and the clients'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mcp_manifold._cli.common import app, config_app, err, out
from mcp_manifold._config import check_config
from mcp_manifold._errors import ConfigError, ManifoldError


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
