"""What every `manifold` command shares: the Typer apps, the consoles, the config option, loading a config."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from mcp_manifold._config import Config, load_config, settings_fields
from mcp_manifold._errors import ConfigError
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
EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}


def setting_overrides(extra: list[str]) -> dict[str, Any]:
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


def load(config_path: Path | None, overrides: dict[str, Any] | None = None) -> Config:
    try:
        cfg = load_config(config_path, overrides=overrides or {})
        check_not_nested(cfg.path)
    except ConfigError as exc:
        err.print("[red]config has problems:[/red]")
        for problem in exc.problems:
            err.print(f"  {problem}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    configure_logging(cfg.settings.log_level)
    return cfg


def configure_logging(level: str) -> None:
    """The gateway's own log records go to stderr (never stdout: it may carry MCP) at `log_level`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mcp-manifold %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("mcp_manifold")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def settings_help() -> str:
    lines = ["Every gateway setting is also a flag (flag > MANIFOLD_<SETTING> env > file > default):"]
    for name, _kind, default, help_text in settings_fields():
        lines.append(f"--{name.replace('_', '-')} (default {default!r}): {help_text}")
    return "\n\n".join(lines)


async def with_gateway(cfg: Config, work: Any) -> Any:
    from mcp_manifold._runtime.gateway import Gateway

    async with Gateway(cfg) as gateway:
        return await work(gateway)


ProbeOption = Annotated[
    bool, typer.Option("--probe", help="Start the servers here even when a gateway is running with this config.")
]
