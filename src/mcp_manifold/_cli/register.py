"""`manifold register`: announce a running MCP server to hubs."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import anyio
import typer

from mcp_manifold._cli.common import EXTRA, ConfigOption, app, err, load_for
from mcp_manifold._config import settings_fields


def _register_settings() -> str:
    """The two settings `register` reads, as `manifold serve --help` words them (they are flags here too)."""
    helps = {name: (default, text) for name, _kind, default, text in settings_fields()}
    lines = [
        f"--{name.replace('_', '-')} (default {helps[name][0]!r}): {helps[name][1]}{also}"
        for name, also in (
            ("discovery_dir", ""),
            (
                "ping_interval",
                " Here: how often the record is renewed (0: every 10 s); a record not renewed goes stale.",
            ),
        )
    ]
    return "\n\n".join([*lines, "Every other gateway setting is a flag too (see `manifold serve --help`)."])


@app.command(context_settings=EXTRA, epilog=_register_settings())
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
    """Announce a running MCP server to hubs until interrupted (writes it into discovery_dir; with state_url
    set, into the replicas' shared registry instead)."""
    from mcp_manifold._runtime.discovery import RecordError, discovery_dir
    from mcp_manifold._runtime.registration import build_record, default_pid, register_until_stopped

    cfg = load_for(ctx, config, required=False)
    if cfg.path is not None and "hub" not in cfg.settings.expose:
        # Registered all the same (another gateway may read the same place), but the newcomer's one does not.
        err.print(
            f"warning: {cfg.path} does not expose the hub (expose: {', '.join(cfg.settings.expose)}), so a gateway "
            "serving it lists no registered instance: add 'hub' to expose",
            markup=False,
            highlight=False,
        )
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

    if cfg.settings.state_url:  # the replicas' shared registry: every replica's hub lists it
        from mcp_manifold._runtime.registration import register_shared_until_stopped
        from mcp_manifold._runtime.shared_state.instances import COMMAND_NOT_SHARED

        if record.command is not None:
            raise typer.BadParameter(COMMAND_NOT_SHARED)

        def shared() -> None:
            err.print(
                f"registered {record.id} ({record.endpoint()}) in the shared state; Ctrl-C removes it", markup=False
            )

        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(register_shared_until_stopped, cfg.settings.state_url, record, shared)
        return

    def announce(path: Path) -> None:
        err.print(f"registered {record.id} ({record.endpoint()}) in {path}; Ctrl-C removes it", markup=False)

    try:
        anyio.run(register_until_stopped, folder, record, announce)
    except OSError as exc:
        err.print(f"error: cannot write to the discovery directory {folder}: {exc}", markup=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
