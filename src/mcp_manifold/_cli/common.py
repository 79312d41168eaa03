"""What every `manifold` command shares: the Typer apps, the consoles, the config option, loading a config."""

from __future__ import annotations

import logging
import os
import re
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from typer.core import TyperGroup

from mcp_manifold._cli.shown import printable
from mcp_manifold._config import CONFIG_SUFFIXES, Config, load_config, settings_fields
from mcp_manifold._errors import ConfigError
from mcp_manifold._runtime.lineage import check_not_nested

app = typer.Typer(
    name="manifold",
    help="One MCP endpoint in front of any number of MCP servers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # --install-completion / --show-completion: shell completion
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(asked: bool) -> None:
    if asked:
        from mcp_manifold._version import __version__

        print(f"mcp-manifold {__version__}")
        raise typer.Exit()


@app.callback()
def _top(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", is_eager=True, callback=_print_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """One MCP endpoint in front of any number of MCP servers."""


config_app = typer.Typer(help="Work with config files.", no_args_is_help=True)
app.add_typer(config_app, name="config")


class ConfigArgumentGroup(TyperGroup):
    """A command group that takes its config file as its argument too (`manifold pins team.yaml`), as every
    other command does; a group reads its first argument as a subcommand, so that said "No such command"."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: typer's click Context
        return super().parse_args(ctx, _config_as_option(args, set(self.commands)))


def _config_as_option(args: list[str], commands: set[str]) -> list[str]:
    """`args` with a first argument that is a config file (not a subcommand) given as `--config FILE`."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("--config", "-c"):
            index += 2
        elif arg.startswith("-"):
            index += 1
        else:
            if arg not in commands and Path(arg).suffix.lower() in CONFIG_SUFFIXES:
                return [*args[:index], "--config", arg, *args[index + 1 :]]
            break
    return args


pins_app = typer.Typer(
    help="Pinned tool definitions: list them (no subcommand), see what changed, approve or reject a change.",
    invoke_without_command=True,
    cls=ConfigArgumentGroup,
)
app.add_typer(pins_app, name="pins")
auth_app = typer.Typer(help="Credentials for a shared gateway.", no_args_is_help=True)
app.add_typer(auth_app, name="auth")

out = Console()
# Soft wrap: a problem or error stays on one line however narrow the terminal (or a pipe's 80 columns).
err = Console(stderr=True, soft_wrap=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config file (JSON or YAML, Claude Desktop's mcpServers format); also the command's argument. "
        "Default: $MANIFOLD_CONFIG, else ~/.config/mcp-manifold/mcp.json.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
WITH_CONFIG = "[OPTIONS] [CONFIG]"  # the usage line of a command that also takes its config as an argument


def setting_overrides(extra: list[str]) -> dict[str, Any]:
    """Parse `--some-setting VALUE` / `--flag` / `--no-flag` for every gateway setting."""
    overrides, positional = parse_extra(extra)
    if positional:
        raise typer.BadParameter(f"unexpected argument {positional[0]!r}")
    return overrides


def parse_extra(extra: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The settings given as flags, and the arguments that are no flag's value (the config file)."""
    fields = {name: (kind, default) for name, kind, default, _help in settings_fields()}
    overrides: dict[str, Any] = {}
    positional: list[str] = []
    args = list(extra)
    while args:
        arg = args.pop(0)
        if not arg.startswith("--"):
            positional.append(arg)
            continue
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
    return overrides, positional


def default_config_path() -> Path:
    """Where a config is looked for when none is given: $MANIFOLD_CONFIG, else the README's place."""
    if given := os.environ.get("MANIFOLD_CONFIG"):
        return Path(given).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "mcp-manifold" / "mcp.json"


_ADDRESS = re.compile(r"(?:(?:[\w.-]+|\[[0-9a-fA-F:]+\])?:)?\d{1,5}")  # 8080, :8080, 127.0.0.1:8080, [::1]:8080


def config_path(option: Path | None, positional: list[str], *, required: bool = True) -> Path | None:
    """The config file a command was given, as `--config FILE` or as its argument; else the default one.

    Without either and without a file at the default place, a command that needs servers stops with an
    error naming where it looked (never a silent gateway of nothing); the others go on without one."""
    for text in positional:
        if _ADDRESS.fullmatch(text) and not Path(text).exists():
            # `serve --http 127.0.0.1:8080`: the flag takes no value, so the address came here.
            host, _, port = text.rpartition(":")
            where = f"--host {host.strip('[]')} --port {port}" if host else f"--port {port}"
            raise typer.BadParameter(f"{text!r} is an address, not a config file: serve HTTP there with --http {where}")
    if len(positional) > 1:
        raise typer.BadParameter(f"one config file at most, got {', '.join(map(repr, positional))}")
    given = Path(positional[0]) if positional else None
    if option is not None and given is not None and option != given:
        raise typer.BadParameter(f"two config files given: --config {option} and {given}; give one")
    chosen = option or given
    if chosen is not None:
        return chosen
    default = default_config_path()
    if default.is_file():
        return default
    if not required:
        return None
    where = "$MANIFOLD_CONFIG" if os.environ.get("MANIFOLD_CONFIG") else "the default place"
    err.print(
        f"error: no config file: none given, and {default} ({where}) does not exist.\n"
        f"Give one with --config FILE (or as the command's argument), or create {default}, "
        f"e.g. with `manifold import claude-desktop --output {default}`.",
        markup=False,
        highlight=False,
    )
    raise typer.Exit(2)


def load_for(ctx: typer.Context, option: Path | None, *, required: bool = True) -> Config:
    """The config of a command that takes settings as flags and its config file as an argument too."""
    overrides, positional = parse_extra(ctx.args)
    return load(config_path(option, positional, required=required), overrides)


def load_with_argument(ctx: typer.Context, option: Path | None, argument: str) -> tuple[Config, str]:
    """`load_for` for a command with an argument of its own (`call NAME`, `search QUERY`), and that argument.
    The usage line reads `[CONFIG] NAME`, so a config file given first is taken as one: before, the file was
    read as the name and the name as the file (`'multiply two numbers': unsupported file type ''`)."""
    overrides, positional = parse_extra(ctx.args)
    if option is None and len(positional) == 1 and _is_config_file(argument) and not _is_config_file(positional[0]):
        argument, positional = positional[0], [argument]
    return load(config_path(option, positional), overrides), argument


def config_among(names: list[str], option: Path | None) -> tuple[list[str], Path | None]:
    """`names` of a command that takes several (`pins approve A B`), and its config: a config file given last
    (`pins approve A team.yaml`, as other commands take it) is the config, not a name. Before, it was read
    as a name, and the default config's pins were searched for it."""
    if option is None and len(names) > 1 and _is_config_file(names[-1]):
        return names[:-1], Path(names[-1])
    return names, option


def _is_config_file(text: str) -> bool:
    return Path(text).suffix.lower() in CONFIG_SUFFIXES and Path(text).is_file()


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


class LogFormatter(logging.Formatter):
    """One log record, one line, with every control character written out (`\\x1b`, `\\n`); a traceback
    below it keeps its line breaks. A record quotes what servers and callers wrote (a server's name and
    version, its errors, a URI): raw, a line break forged a log line of any level and an escape sequence acted
    on the terminal the operator reads the log in (the window's title, the screen cleared)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        # The message's line holds no line break now: what follows the first one is the traceback or stack.
        line, newline, rest = super().format(record).partition("\n")
        return line + newline + printable(rest, lines=True)


def configure_logging(level: str) -> None:
    """The gateway's own log records go to stderr (never stdout: it may carry MCP) at `log_level`; the
    libraries' warnings (the SDK's client quotes what a server sent: an SSE event's name, a content type) go
    there through the same formatter, where Python's fallback wrote them raw."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter("mcp-manifold %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("mcp_manifold")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    root = logging.getLogger()
    if not root.handlers:  # an embedding program's own logging is left as it is
        others = logging.StreamHandler(sys.stderr)
        others.setFormatter(LogFormatter("%(levelname)s %(name)s: %(message)s"))
        others.setLevel(logging.WARNING)  # what the fallback showed, and no more
        root.addHandler(others)


def settings_help() -> str:
    lines = ["Every gateway setting is also a flag (flag > MANIFOLD_<SETTING> env > file > default):"]
    for name, _kind, default, help_text in settings_fields():
        lines.append(f"--{name.replace('_', '-')} (default {default!r}): {help_text}")
    return "\n\n".join(lines)


async def with_gateway(cfg: Config, work: Any) -> Any:
    """Run `work` with a gateway of `cfg`; on a terminal, a spinner says which servers it is waiting for."""
    from mcp_manifold._runtime.gateway import Gateway

    with ExitStack() as logins:
        if any(server.auth is not None for server in cfg.servers.values()):
            from mcp_manifold._runtime.remote_auth import logins_in_browser

            # A person runs this command: a server that needs an OAuth login starts it in the browser.
            logins.enter_context(logins_in_browser())
        return await _with_gateway(Gateway(cfg), work)


async def _with_gateway(gateway_of: Any, work: Any) -> Any:
    async with gateway_of as gateway:
        if not err.is_terminal:  # piped or captured: progress would only be noise
            return await work(gateway)
        with err.status(_waiting_for(gateway)) as status:
            async with anyio.create_task_group() as watch:

                async def update() -> None:
                    while True:
                        await anyio.sleep(0.2)
                        status.update(_waiting_for(gateway))

                watch.start_soon(update)
                try:
                    return await work(gateway)
                finally:
                    watch.cancel_scope.cancel()


def _waiting_for(gateway: Any) -> str:
    starting = [backend.name for backend in gateway.pool if backend.state == "starting"]
    ready = sum(backend.state == "ready" for backend in gateway.pool)
    if not starting:
        return f"{ready} server(s) ready"
    return f"starting {', '.join(starting)} ({ready} ready)"


ProbeOption = Annotated[
    bool, typer.Option("--probe", help="Start the servers here even when a gateway is running with this config.")
]
