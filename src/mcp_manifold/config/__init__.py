"""The gateway's configuration: which servers sit behind it and how the gateway itself behaves.

A config file is the `mcpServers` map Claude Desktop and Cursor use, as JSON or YAML, plus an
optional `manifold` section with the gateway's settings. Every problem found in a file, the
environment or the command line is collected and reported together in one `ConfigError`, so a
user can fix everything in one pass.

Settings resolve in this order: command-line flag > `MANIFOLD_<NAME>` environment variable >
file > default. String values in the file may use `${VAR}` and `${VAR:-default}`.
"""

from __future__ import annotations

import hashlib
import json
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, NamedTuple, Union, get_args, get_origin, get_type_hints

from mcp_manifold._errors import ConfigError, ConfigProblem
from mcp_manifold.config import redaction
from mcp_manifold.config.files import CONFIG_SUFFIXES, read_config_data, read_file
from mcp_manifold.config.problems import Invalid, Problems, kind, unknown
from mcp_manifold.config.redaction import redact_args, redact_url
from mcp_manifold.config.values import (
    as_bool,
    as_float,
    as_int,
    as_str,
    as_str_list,
    as_text,
    checked,
    expand_user,
    http_url_problem,
    non_negative,
    not_blank,
    positive,
    tool_name_problem,
)
from mcp_manifold.config.variables import escape_vars, expand_fields, expand_vars
from mcp_manifold.model_folders import BUNDLED, model_folder_problem
from mcp_manifold.naming import sanitize_prefix

Transport = Literal["stdio", "http", "sse"]

ENV_PREFIX = "MANIFOLD_"
ENVIRONMENT = "environment"  # the `file` of problems found in MANIFOLD_* variables
COMMAND_LINE = "command line"  # the `file` of problems found in CLI overrides
SURFACE_NAMES = ("direct", "proxy", "dispatch", "retrieve", "hub")
SEPARATORS = ("_", "-", "__", "--", "_-", "-_")

# Every key a server entry may have; `type` is the Claude Code / VS Code spelling of `transport`.
SERVER_FIELDS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "transport",
    "type",
    "enabled",
    "prefix",
    "tools",
    "lazy",
    "timeout",
    "max_concurrency",
    "cache_ttl",
)
TOP_LEVEL_KEYS = ("mcpServers", "manifold")


# --- servers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolFilter:
    """Which of a server's tools are exposed, by fnmatch globs on the server's own tool names."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))

    def allows(self, tool_name: str) -> bool:
        """True if the name matches an include glob (or there are none) and no exclude glob."""
        if self.include and not any(fnmatchcase(tool_name, glob) for glob in self.include):
            return False
        return not any(fnmatchcase(tool_name, glob) for glob in self.exclude)


@dataclass(frozen=True)
class ServerConfig:
    """One downstream MCP server as configured."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    enabled: bool = True
    prefix: str | None = None
    tools: ToolFilter = ToolFilter()
    lazy: bool | None = None
    timeout: float | None = None
    max_concurrency: int | None = None
    cache_ttl: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))

    @property
    def exposed_prefix(self) -> str:
        """The prefix of this server's tool names: `prefix` if set, else the server key."""
        return self.prefix if self.prefix is not None else self.name

    def identity(self) -> dict[str, Any]:
        """What defines the connection; two configs with equal identities reach the same server."""
        return {
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "cwd": self.cwd,
            "url": self.url,
            "headers": dict(self.headers),
        }

    def fingerprint(self) -> str:
        """A short stable hash of `identity()`, to tell whether a server must be restarted."""
        text = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def scrub(self, text: str) -> str:
        """`text` (an error message, a stderr line) with this server's secret values replaced by ***."""
        return redaction.scrub(self, text)

    def redacted(self) -> dict[str, Any]:
        """`identity()` safe to show or log: env and header values, URL credentials and secret-looking
        query parameters and command-line options are replaced by `***`."""
        return redaction.redacted(self)


def _normalise_transport(value: Any) -> Transport:
    """Map the spellings clients use (streamable-http, streamableHttp, ...) onto the three transports."""
    word = as_str(value).strip().lower().replace("-", "").replace("_", "")
    known: dict[str, Transport] = {"stdio": "stdio", "http": "http", "streamablehttp": "http", "sse": "sse"}
    if word not in known:
        raise Invalid(f"unknown transport {value!r}: expected stdio, http, streamable-http or sse")
    return known[word]


class _ServerReader:
    """Checks one server entry field by field, reporting every problem under the server's name."""

    def __init__(self, name: str, values: dict[str, Any], broken: set[str], problems: Problems) -> None:
        self.name = name
        self.values = values
        self.broken = broken  # fields whose ${VAR}s failed: present, but already reported
        self.problems = problems

    def report(self, field_name: str, message: str) -> None:
        self.problems.add(self.name, field_name, message)

    def get(self, key: str, convert: Callable[[Any], Any], default: Any = None) -> Any:
        if key not in self.values:
            return default
        try:
            return convert(self.values[key])
        except Invalid as exc:
            self.report(exc.path or key, str(exc))
            return default

    def present(self, key: str) -> bool:
        return key in self.values or key in self.broken

    def transport(self) -> Transport | None:
        declared = [(key, self.get(key, _normalise_transport)) for key in ("transport", "type")]
        named = {value for _, value in declared if value is not None}
        if len(named) > 1:
            self.report("type", "'transport' and 'type' disagree; give only one of them")
        has_command, has_url = self.present("command"), self.present("url")
        if has_command and has_url:
            self.report("url", "has both 'command' and 'url': a server is a local command or a remote url")
            return None
        if not has_command and not has_url:
            self.report("command", "needs 'command' (a local stdio server) or 'url' (a remote server)")
            return None
        wanted = next(iter(named)) if len(named) == 1 else None
        if wanted == "stdio" and not has_command:
            self.report("transport", "transport 'stdio' needs a 'command', not a 'url'")
        if wanted in ("http", "sse") and not has_url:
            self.report("transport", f"transport {wanted!r} needs a 'url', not a 'command'")
        if has_command:
            return "stdio"
        return "sse" if wanted == "sse" else "http"


# Converters of server fields that are a shared coercion plus a shared check.
_non_empty = checked(as_str, not_blank)
_http_url = checked(lambda value: as_str(value).strip(), http_url_problem)
_prefix = checked(as_str, tool_name_problem)


def _text_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise Invalid(f"must be a list of strings, not {kind(value)}")
    items = []
    for index, item in enumerate(value):
        try:
            items.append(as_text(item))
        except Invalid as exc:
            raise Invalid(str(exc), f"{key}[{index}]") from None
    return tuple(items)


def _text_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping of names to strings, not {kind(value)}")
    result = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise Invalid(f"names must be non-empty strings, not {name!r}")
        try:
            result[name] = as_text(item)
        except Invalid as exc:
            raise Invalid(str(exc), f"{key}.{name}") from None
    return result


def _tool_filter(value: Any) -> ToolFilter:
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping with 'include' and/or 'exclude' lists, not {kind(value)}")
    for key in value:
        if key not in ("include", "exclude"):
            raise Invalid(f"unknown key {key!r}: expected 'include' and/or 'exclude'", f"tools.{key}")
    globs = {}
    for key in ("include", "exclude"):
        raw = value.get(key) or []
        raw = [raw] if isinstance(raw, str) else raw  # a single glob is a list of one
        if not isinstance(raw, list) or not all(isinstance(glob, str) for glob in raw):
            raise Invalid(f"must be a list of glob strings, not {kind(raw)}", f"tools.{key}")
        globs[key] = tuple(raw)
    return ToolFilter(**globs)


def _parse_server(name: str, entry: Any, env: Mapping[str, str], problems: Problems) -> ServerConfig | None:
    """Check one `mcpServers` entry; None when it has any problem (all of them reported)."""
    if not isinstance(entry, Mapping):
        problems.add(name, None, f"must be a mapping of fields, not {kind(entry)}")
        return None
    before = len(problems.items)
    values, broken = expand_fields(entry, env, problems, name)
    for key in values:
        if key not in SERVER_FIELDS:
            problems.add(name, str(key), unknown("field", str(key), SERVER_FIELDS))
    read = _ServerReader(name, values, broken, problems)
    transport = read.transport()
    config = {
        "command": read.get("command", _non_empty),
        "args": read.get("args", lambda value: _text_list(value, "args"), ()),
        "env": read.get("env", lambda value: _text_map(value, "env"), {}),
        "cwd": read.get("cwd", lambda value: expand_user(_non_empty(value), env)),
        "url": read.get("url", _http_url),
        "headers": read.get("headers", lambda value: _text_map(value, "headers"), {}),
        "enabled": read.get("enabled", as_bool, True),
        "prefix": read.get("prefix", _prefix),
        "tools": read.get("tools", _tool_filter, ToolFilter()),
        "lazy": read.get("lazy", as_bool),
        "timeout": read.get("timeout", checked(as_float, positive)),
        "max_concurrency": read.get("max_concurrency", checked(as_int, positive)),
        "cache_ttl": read.get("cache_ttl", checked(as_float, non_negative)),
    }
    if transport is None or len(problems.items) > before:
        return None
    return ServerConfig(name=name, transport=transport, **config)


def _parse_servers(raw: Any, env: Mapping[str, str], problems: Problems) -> dict[str, ServerConfig]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(None, "mcpServers", f"must be a mapping of server names to servers, not {kind(raw)}")
        return {}
    servers = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not name.strip():
            problems.add(None, "mcpServers", f"server names must be non-empty strings, not {name!r}")
            continue
        server = _parse_server(name, entry, env, problems)
        if server is not None:
            servers[name] = server
    _check_prefixes(servers, problems)
    return servers


def _check_prefixes(servers: Mapping[str, ServerConfig], problems: Problems) -> None:
    """Two enabled servers may not share a prefix: their resource URIs could not be told apart, and a
    tool name both have would be listed once. Prefixes compare as exposed (`a.b` and `a_b` are equal)."""
    owners: dict[str, ServerConfig] = {}
    for server in servers.values():
        if not server.enabled:
            continue
        exposed = sanitize_prefix(server.exposed_prefix)
        first = owners.setdefault(exposed, server)
        if first is server:
            continue
        source = f"prefix {exposed!r}" if server.prefix is not None else f"its name gives the prefix {exposed!r}, which"
        problems.add(
            server.name,
            "prefix",
            f"{source} is already used by server {first.name!r}; give one of them a different 'prefix'",
        )


# --- settings ----------------------------------------------------------------------------------


def _port_problem(value: int) -> str | None:
    return None if 0 <= value <= 65535 else f"must be a port number from 0 to 65535, not {value}"


def _search_models_problem(entries: list[str]) -> str | None:
    # Checked here rather than when the first search loads a model, which may be long after start.
    for entry in entries:
        if problem := model_folder_problem(entry):
            return problem
    return None


def _setting(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    check: Callable[[Any], str | None] | None = None,
    path: bool = False,
) -> Any:
    """A Settings field; its metadata drives checks, the CLI flags and the docs."""
    metadata = {"help": help, "choices": choices, "check": check, "path": path}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    if callable(default):
        return field(default_factory=default, metadata=metadata)
    return field(default=default, metadata=metadata)


def default_data_dir(env: Mapping[str, str] | None = None) -> str:
    """`$XDG_DATA_HOME/mcp-manifold`, else `~/.local/share/mcp-manifold`."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or expand_user("~/.local/share", env)
    return str(Path(base) / "mcp-manifold")


@dataclass
class Settings:
    """The gateway's own settings (the `manifold` section)."""

    expose: list[str] = _setting(  # noqa: RUF009 - _setting returns a dataclasses.field with a factory
        ["direct"],
        "Surfaces offered to clients, in order: direct, proxy, dispatch, retrieve, hub.",
        choices=SURFACE_NAMES,
    )
    separator: str = _setting(
        "_", "Joins a server's prefix and a tool name (git + _ + status = git_status).", choices=SEPARATORS
    )
    lazy: bool = _setting(True, "Start or connect a server only when it is first needed.")
    init_timeout: float = _setting(
        30.0, "Seconds a server gets to start and finish the MCP initialize handshake.", check=positive
    )
    call_timeout: float = _setting(
        120.0, "Seconds a tool call may take unless the server sets its own timeout.", check=positive
    )
    stderr_lines: int = _setting(
        200, "Lines of each stdio server's stderr kept for error messages.", check=non_negative
    )
    data_dir: str = _setting(
        default_data_dir, "Where the gateway keeps its state (indexes, spilled results).", check=not_blank, path=True
    )
    log_level: str = _setting(
        "warning",
        "Log level: debug, info, warning, error or critical.",
        choices=("debug", "info", "warning", "error", "critical"),
    )
    host: str = _setting("127.0.0.1", "Address the HTTP endpoint listens on.", check=not_blank)
    port: int = _setting(8765, "Port the HTTP endpoint listens on (0 picks a free one).", check=_port_problem)
    http: bool = _setting(False, "Serve streamable HTTP on host:port instead of stdio.")
    proxy_tool_name: str = _setting("proxy", "Name of the proxy surface's tool.", check=tool_name_problem)
    spill_threshold: int = _setting(
        0, "Tool results larger than this many bytes go to a file instead; 0 turns this off.", check=non_negative
    )
    spill_dir: str | None = _setting(None, "Where spilled results are written (default: under data_dir).", path=True)
    spill_ttl: float = _setting(3600.0, "Seconds a spilled result is kept.", check=positive)
    toon: bool = _setting(False, "Render JSON tool results as TOON, a compact notation that saves tokens.")
    search_embedder: str = _setting(
        "bm25", "How tool search ranks tools: bm25, hybrid or openai.", choices=("bm25", "hybrid", "openai")
    )
    search_models: list[str] = _setting(  # noqa: RUF009 - a dataclasses.field with a factory
        [],
        "Models for search_embedder hybrid: minilm (the bundled one) or sentence-transformers model folders;"
        " with two or more their cosines are averaged.",
        check=_search_models_problem,
        path=True,
    )
    search_top_k: int = _setting(5, "How many tools a search returns.", check=positive)
    tools_limit: int = _setting(15, "Most tools listed at once by dynamic routing.", check=positive)
    routing: str = _setting(
        "call_tool",
        "How found tools are called: call_tool (through a gateway tool) or dynamic (added to the tool list).",
        choices=("call_tool", "dynamic"),
    )
    list_changed_exec: str | None = _setting(None, "Command run when the tool list changes.")
    list_changed_exec_timeout: float = _setting(5.0, "Seconds list_changed_exec may run.", check=positive)
    discovery_dir: str | None = _setting(
        None,
        "Where running MCP servers register for the hub (default: $XDG_RUNTIME_DIR/manifold/instances).",
        path=True,
    )
    ping_interval: float = _setting(
        10.0, "Seconds between health pings to servers; 0 turns pings off.", check=non_negative
    )
    ping_timeout: float = _setting(5.0, "Seconds a ping may take before the server counts as down.", check=positive)
    session_idle_timeout: float = _setting(
        1800.0, "Seconds an idle HTTP client session is kept; 0 keeps it forever.", check=non_negative
    )
    shutdown_timeout: float = _setting(
        10.0,
        "Seconds HTTP requests in flight get to finish when the gateway stops; open streams are then cut.",
        check=positive,
    )
    breaker_threshold: int = _setting(3, "Failures in a row after which a server is paused.", check=positive)
    breaker_cooldown: float = _setting(
        10.0, "Seconds a paused server waits before it is tried again.", check=non_negative
    )
    spill_allowed_dirs: list[str] = _setting(  # noqa: RUF009 - a dataclasses.field with a factory
        [],
        "Directories besides the spill directory whose files argumentsFile and resultFile may name.",
        path=True,
    )
    openai_base_url: str | None = _setting(
        None, "Base URL of an OpenAI-compatible embeddings API (default: OpenAI's).", check=http_url_problem
    )
    openai_model: str = _setting(
        "text-embedding-3-small", "Embedding model for search_embedder openai.", check=not_blank
    )


class SettingField(NamedTuple):
    """One setting as the CLI and docs see it."""

    name: str
    type: Any  # bool, int, float, str, str | None or list[str]
    default: Any
    help: str


def settings_fields() -> list[SettingField]:
    """Every setting with its type, default and help, in declaration order."""
    hints = get_type_hints(Settings)
    defaults = Settings()
    return [
        SettingField(f.name, hints[f.name], getattr(defaults, f.name), f.metadata["help"]) for f in fields(Settings)
    ]


def env_var(setting: str) -> str:
    """The environment variable that sets `setting`: MANIFOLD_CALL_TIMEOUT for call_timeout."""
    return ENV_PREFIX + setting.upper()


def _converter(annotation: Any) -> Callable[[Any], Any]:
    """The coercion for a Settings field type; `X | None` coerces like X (None never reaches it)."""
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    if get_origin(annotation) is list:
        return as_str_list
    return {bool: as_bool, int: as_int, float: as_float, str: as_str}[annotation]


_SETTING_FIELDS = {f.name: f for f in fields(Settings)}
_SETTING_TYPES = get_type_hints(Settings)


def _convert_setting(name: str, value: Any, env: Mapping[str, str], base: Path | None = None) -> Any:
    """Coerce, normalise and check one setting value; raises `Invalid`.

    `base` is the folder of the config file the value comes from: relative paths written there mean
    that folder (a desktop client starts the gateway from any directory), not the working directory.
    """
    meta = _SETTING_FIELDS[name].metadata
    value = _converter(_SETTING_TYPES[name])(value)
    choices: tuple[str, ...] = meta["choices"]
    if choices and isinstance(value, list):
        value = list(dict.fromkeys(item.strip().lower() for item in value))  # drop repeats, keep order
        bad = [item for item in value if item not in choices]
        if bad or not value:
            shown = ", ".join(map(repr, bad)) if bad else "an empty list"
            raise Invalid(f"got {shown}; pick one or more of {', '.join(choices)}")
    elif choices:
        value = value.strip().lower()
        if value not in choices:
            raise Invalid(f"must be one of {', '.join(repr(c) for c in choices)}, not {value!r}")
    if meta["path"]:  # before the check, which may look at the path

        def place(item: str) -> str:
            item = expand_user(item, env)
            if (
                base is None
                or not item
                or Path(item).is_absolute()
                or (name == "search_models" and item.strip().lower() == BUNDLED)
            ):
                return item
            return str(base / item)

        value = [place(item) for item in value] if isinstance(value, list) else place(value)
    if meta["check"]:
        problem = meta["check"](value)
        if problem:
            raise Invalid(problem)
    return value


def _settings_layer(
    raw: Mapping[str, Any],
    problems: Problems,
    label: Callable[[str], str],
    env: Mapping[str, str],
    base: Path | None = None,
) -> dict[str, Any]:
    """Check one source of settings; `label` turns a setting name into the problem's field."""
    values = {}
    for name, value in raw.items():
        if name not in _SETTING_FIELDS:
            problems.add(None, label(str(name)), unknown("setting", str(name), _SETTING_FIELDS))
            continue
        try:
            values[name] = _convert_setting(name, value, env, base)
        except Invalid as exc:
            problems.add(None, label(name), str(exc))
    return values


def _file_settings(raw: Any, env: Mapping[str, str], problems: Problems, base: Path | None) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(None, "manifold", f"must be a mapping of settings, not {kind(raw)}")
        return {}
    expanded, _ = expand_fields(raw, env, problems)
    return _settings_layer(expanded, problems, lambda name: name, env, base)


def _env_settings(env: Mapping[str, str], problems: list[ConfigProblem]) -> dict[str, Any]:
    # An empty variable counts as unset, as `MANIFOLD_PORT=` in a compose file usually means.
    raw = {name: env[env_var(name)] for name in _SETTING_FIELDS if env.get(env_var(name), "").strip()}
    return _settings_layer(raw, Problems(ENVIRONMENT, problems), env_var, env)


def _override_settings(
    overrides: Mapping[str, Any] | None, env: Mapping[str, str], problems: list[ConfigProblem]
) -> dict[str, Any]:
    raw = {name: value for name, value in (overrides or {}).items() if value is not None}
    return _settings_layer(raw, Problems(COMMAND_LINE, problems), lambda name: name, env)


# --- the whole config --------------------------------------------------------------------------


@dataclass
class Config:
    """A checked configuration: the servers in file order (disabled ones included) and the settings."""

    servers: dict[str, ServerConfig]
    settings: Settings
    path: Path | None = None

    @property
    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: server for name, server in self.servers.items() if server.enabled}


def _build(
    data: Any,
    source: str,
    env: Mapping[str, str] | None,
    overrides: Mapping[str, Any] | None,
    base: Path | None = None,
) -> tuple[Config, list[ConfigProblem]]:
    """Check everything and build what can be built; the config is only valid when there are no problems."""
    env = os.environ if env is None else env
    problems: list[ConfigProblem] = []
    in_file = Problems(source, problems)
    if data is None:  # an empty YAML file
        data = {}
    if not isinstance(data, Mapping):
        in_file.add(None, None, f"the top level must be a mapping with 'mcpServers', not {kind(data)}")
        data = {}
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            in_file.add(None, str(key), unknown("top-level key", str(key), TOP_LEVEL_KEYS))
    servers = _parse_servers(data.get("mcpServers"), env, in_file)
    layers = [
        (in_file, "search_models", _file_settings(data.get("manifold"), env, in_file, base)),
        (Problems(ENVIRONMENT, problems), env_var("search_models"), _env_settings(env, problems)),
        (Problems(COMMAND_LINE, problems), "search_models", _override_settings(overrides, env, problems)),
    ]
    values = {"data_dir": default_data_dir(env)}
    for _, _, layer in layers:
        values.update(layer)
    settings = Settings(**values)
    if settings.search_models and settings.search_embedder != "hybrid":
        # Reported where search_models was set last, the value that wins.
        where, label, _ = next(layer for layer in reversed(layers) if "search_models" in layer[2])
        embedder = settings.search_embedder
        where.add(None, label, f"is only used with search_embedder 'hybrid', but search_embedder is {embedder!r}")
    return Config(servers=servers, settings=settings), problems


def parse_config_data(
    data: Mapping[str, Any],
    *,
    source: str,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Like `load_config` for already-parsed data; `source` names it in problems."""
    config, problems = _build(data, source, env, overrides)
    if problems:
        raise ConfigError(problems)
    return config


def _load(
    path: str | Path | None, env: Mapping[str, str] | None, overrides: Mapping[str, Any] | None
) -> tuple[Config, list[ConfigProblem]]:
    if path is None:
        return _build({}, "<no config file>", env, overrides)
    path = Path(path)
    data, file_problems = read_file(path)
    # Keep going after a broken file so environment and flag problems are reported in the same pass.
    config, problems = _build(data, str(path), env, overrides, base=path.expanduser().absolute().parent)
    config.path = path
    return config, file_problems + problems


def load_config(
    path: str | Path | None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Load, expand and check a config file; `ConfigError` lists every problem.

    `path` None gives no servers and settings from `env` (default `os.environ`) and `overrides`
    (CLI flags by setting name; None values are ignored).
    """
    config, problems = _load(path, env, overrides)
    if problems:
        raise ConfigError(problems)
    return config


def check_config(path: str | Path | None, *, env: Mapping[str, str] | None = None) -> list[ConfigProblem]:
    """Every problem `load_config` would raise, as a list; empty when the config is fine."""
    return _load(path, env, None)[1]


__all__ = [
    "CONFIG_SUFFIXES",
    "SERVER_FIELDS",
    "SURFACE_NAMES",
    "Config",
    "ServerConfig",
    "SettingField",
    "Settings",
    "ToolFilter",
    "Transport",
    "check_config",
    "default_data_dir",
    "env_var",
    "escape_vars",
    "expand_vars",
    "load_config",
    "parse_config_data",
    "read_config_data",
    "redact_args",
    "redact_url",
    "settings_fields",
]
