"""The gateway's own settings: what they are, how each is given, and which source wins.

`Settings` declares every setting once, with its default, help and check in the field's metadata;
the checks, the CLI flags and the docs all follow from that declaration. A setting may come from
the config file's `manifold` section, a `MANIFOLD_<NAME>` environment variable or a command-line
flag. Each source is checked on its own, so a problem names the place to fix it, and they layer
flag > environment > file > default.
"""

from __future__ import annotations

import importlib.util
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple, Union, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from mcp_manifold._code_engine import engine_problem
from mcp_manifold._config.problems import Invalid, Problems, unknown
from mcp_manifold._config.values import (
    as_bool,
    as_float,
    as_int,
    as_str,
    as_str_list,
    expand_user,
    http_url_problem,
    long_secrets,
    non_negative,
    not_blank,
    nul_problem,
    positive,
    proxy_tool_name_problem,
    quoted_url,
)
from mcp_manifold._config.variables import expand_fields
from mcp_manifold._model_folders import BUNDLED, model_folder_problem

ENV_PREFIX = "MANIFOLD_"
ENVIRONMENT = "environment"  # the `file` of problems found in MANIFOLD_* variables
COMMAND_LINE = "command line"  # the `file` of problems found in CLI overrides
SURFACE_NAMES = ("direct", "proxy", "dispatch", "retrieve", "hub", "code")
SEPARATORS = ("_", "-", "__", "--", "_-", "-_")


def state_url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is no number from 0 to 65535, as connecting would
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", ...: a problem, not a traceback
        unparsed = f"which Python cannot parse ({exc})"
        return f"must be a redis:// or rediss:// URL with a host, {unparsed}, not {quoted_url(url)}"
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        return f"must be a redis:// or rediss:// URL with a host, not {quoted_url(url)}"
    return None


def _port_problem(value: int) -> str | None:
    return None if 0 <= value <= 65535 else f"must be a port number from 0 to 65535, not {value}"


def _tracing_problem(enabled: bool) -> str | None:
    # Checked here, not at the first call: `manifold config check` and start-up say what to install.
    if enabled and importlib.util.find_spec("opentelemetry.sdk") is None:
        return "needs the OpenTelemetry SDK: pip install 'mcp-manifold[otel]'"
    return None


# The most tools one search returns, on every surface that searches (retrieve_tools, dispatch, the
# dashboard): `search_top_k` is their default, so it may not be more.
MAX_SEARCH_LIMIT = 50


def _search_limit_problem(value: int) -> str | None:
    if 1 <= value <= MAX_SEARCH_LIMIT:
        return None
    return f"must be from 1 to {MAX_SEARCH_LIMIT} (the most tools a search returns), not {value}"


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
    live: bool = False,
) -> Any:
    """A Settings field; its metadata drives checks, the CLI flags and the docs.

    `live`: a config reload may change it while the gateway runs (everything reads it at each use);
    any other setting keeps its start-up value until the gateway restarts.
    """
    metadata = {"help": help, "choices": choices, "check": check, "path": path, "live": live}
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
        "Surfaces offered to clients, in order: direct, proxy, dispatch, retrieve, hub, code.",
        choices=SURFACE_NAMES,
    )
    separator: str = _setting(
        "_", "Joins a server's prefix and a tool name (git + _ + status = git_status).", choices=SEPARATORS
    )
    lazy: bool = _setting(True, "Start or connect a server only when it is first needed.", live=True)
    init_timeout: float = _setting(
        30.0,
        "Seconds a server gets to start and finish the MCP initialize handshake.",
        check=positive,
        live=True,
    )
    call_timeout: float = _setting(
        120.0,
        "Seconds a tool call may take unless the server sets its own timeout.",
        check=positive,
        live=True,
    )
    max_answer_bytes: int = _setting(
        64 << 20,
        "Largest answer a server may send: one JSON answer of an HTTP server (decoded), one line of a stdio"
        " server's stdout. A larger one fails that request (HTTP) or closes the connection (stdio).",
        check=positive,
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
        live=True,
    )
    host: str = _setting("127.0.0.1", "Address the HTTP endpoint listens on.", check=not_blank)
    port: int = _setting(8765, "Port the HTTP endpoint listens on (0 picks a free one).", check=_port_problem)
    http: bool = _setting(False, "Serve streamable HTTP on host:port instead of stdio.")
    proxy_tool_name: str = _setting(
        "proxy", "Name of the proxy surface's tool (not another surface's).", check=proxy_tool_name_problem
    )
    spill_threshold: int = _setting(
        0, "Tool results larger than this many bytes go to a file instead; 0 turns this off.", check=non_negative
    )
    spill_dir: str | None = _setting(None, "Where spilled results are written (default: under data_dir).", path=True)
    spill_ttl: float = _setting(3600.0, "Seconds a spilled result is kept.", check=positive)
    spill_max_bytes: int = _setting(
        1 << 30,
        "Most bytes the spilled results of one gateway may take (each file counts as at least 4 KiB); the oldest "
        "files are removed to make room.",
        check=positive,
    )
    toon: bool = _setting(
        False,
        "Render JSON tool results as TOON, a compact notation that saves tokens (with a spill threshold above 0).",
    )
    dispatch_response: str = _setting(
        "object",
        "What proxy-dispatch's call answers show the model: object (Mini-A's response object: the call's facts"
        " and the tool's content as JSON text) or lean (the tool's content only, the facts in _meta).",
        choices=("object", "lean"),
    )
    search_embedder: str = _setting(
        "hybrid",
        "How tool search ranks tools: hybrid (BM25 + the bundled local model; BM25 alone where it cannot load),"
        " bm25 or openai.",
        choices=("bm25", "hybrid", "openai"),
    )
    search_models: list[str] = _setting(  # noqa: RUF009 - a dataclasses.field with a factory
        [],
        "Models for search_embedder hybrid: minilm (the bundled one) or sentence-transformers model folders;"
        " with two or more their cosines are averaged.",
        check=_search_models_problem,
        path=True,
    )
    search_top_k: int = _setting(5, "How many tools a search returns.", check=_search_limit_problem, live=True)
    tools_limit: int = _setting(15, "Most tools listed at once by dynamic routing.", check=positive, live=True)
    routing: str = _setting(
        "call_tool",
        "How found tools are called: call_tool (through a gateway tool) or dynamic (added to the tool list).",
        choices=("call_tool", "dynamic"),
    )
    list_changed_exec: str | None = _setting(
        None, "Command run when the tool list changes.", check=nul_problem, live=True
    )
    list_changed_exec_timeout: float = _setting(5.0, "Seconds list_changed_exec may run.", check=positive, live=True)
    discovery_dir: str | None = _setting(
        None,
        "Where running MCP servers register for the hub"
        " (default: $XDG_RUNTIME_DIR/manifold/instances, else ~/.local/state/mcp-manifold/instances).",
        path=True,
    )
    hub_max_instances: int = _setting(
        100, "Most discovered instances the hub keeps at once; more registrations are skipped.", check=positive
    )
    code_timeout: float = _setting(
        30.0, "Seconds a code-mode program may run: its JavaScript's CPU time and its tool calls.", check=positive
    )
    code_memory_mb: int = _setting(128, "Megabytes of memory a code-mode program may use.", check=positive)
    code_output_chars: int = _setting(
        20_000, "Characters of a code-mode program's output (and return value) that reach the client.", check=positive
    )
    code_max_calls: int = _setting(1000, "Most tool calls one code-mode program may make.", check=positive)
    code_value_bytes: int = _setting(
        8_000_000,
        "Largest tool result, as JSON, handed into a code-mode program as a value (and largest arguments it may send).",
        check=positive,
    )
    code_max_programs: int = _setting(
        4,
        "Most code-mode programs running at once (each on a thread of its own); more wait, served by principal "
        "in turn.",
        check=positive,
    )
    ping_interval: float = _setting(
        10.0, "Seconds between health pings to servers; 0 turns pings off.", check=non_negative
    )
    ping_timeout: float = _setting(
        5.0, "Seconds a ping may take before the server counts as down.", check=positive, live=True
    )
    session_idle_timeout: float = _setting(
        1800.0, "Seconds an idle HTTP client session is kept; 0 keeps it forever.", check=non_negative
    )
    max_http_sessions: int = _setting(
        1000, "Most HTTP client sessions open at once; past it a new client gets HTTP 503.", check=positive
    )
    request_memory_mb: int = _setting(
        256,
        "Memory the large HTTP requests in flight (bodies of 64 KiB or more) may take together, by estimate;"
        " past it they wait in turn (30 s at most, then HTTP 503).",
        check=positive,
    )
    header_timeout: float = _setting(
        10.0,
        "Seconds an HTTP connection has to send a request's line and headers (from when it opens, or its next "
        "request begins); then it is closed.",
        check=positive,
    )
    body_timeout: float = _setting(
        60.0,
        "Seconds an HTTP connection has to send a request's body, once its headers are in; then it is closed.",
        check=positive,
    )
    principal_max_sessions: int = _setting(
        100,
        "Most HTTP client sessions one authenticated principal may have open at once (its share of "
        "max_http_sessions); past it that principal gets HTTP 429. Also its subscriptions/listen streams, apart.",
        check=positive,
    )
    client_sessions_max: int = _setting(
        16,
        "Most sessions one server with session_scope: client keeps at once (one per client); the least "
        "recently used idle one is closed for a new client.",
        check=positive,
    )
    client_session_idle: float = _setting(
        300.0, "Seconds a client's own session to a server (session_scope: client) is kept unused.", check=positive
    )
    held_call_timeout: float = _setting(
        300.0,
        "Seconds a call of a 2026-07-28 client that a server asked a question in is kept waiting for the "
        "client's answer (its next call); then it is cancelled.",
        check=positive,
    )
    request_state_keys: list[str] = _setting(  # noqa: RUF009 - a dataclasses.field with a factory
        [],
        "Secrets (32+ characters) that seal the state 2026-07-28 clients echo back (the first seals, all open); "
        "gateways behind one address need the same. Default: a key made at start (state does not survive a "
        "restart).",
        check=long_secrets,
    )
    shutdown_timeout: float = _setting(
        10.0,
        "Seconds HTTP requests in flight get to finish when the gateway stops; open streams are then cut.",
        check=positive,
    )
    breaker_threshold: int = _setting(3, "Failures in a row after which a server is paused.", check=positive, live=True)
    breaker_cooldown: float = _setting(
        10.0,
        "Seconds a paused server waits before it is tried again.",
        check=non_negative,
        live=True,
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
    reload: bool = _setting(True, "Watch the config file while serving and apply its edits without a restart.")
    metrics: bool = _setting(True, "Serve Prometheus metrics at /metrics on the HTTP front.")
    dashboard: bool = _setting(True, "Serve the web dashboard at /ui on the HTTP front.")
    tracing: bool = _setting(
        False,
        "Export OpenTelemetry traces of calls (the otel extra; OTLP set by the OTEL_* variables).",
        check=_tracing_problem,
    )
    profile: str | None = _setting(
        None,
        "Profile of clients that do not authenticate (stdio, HTTP on loopback without a /mcp/p/<profile> URL);"
        " none: they see everything.",
    )
    pinning: str = _setting(
        "warn",
        "Tool pinning: off, warn (record each tool's definition and log changes) or enforce (also quarantine a"
        " changed tool until `manifold pins approve`).",
        choices=("off", "warn", "enforce"),
    )
    pin_new_tools: str = _setting(
        "allow",
        "A tool that appears on a server whose tools are already pinned: allow, or quarantine it until approved.",
        choices=("allow", "quarantine"),
    )
    pin_max_tools: int = _setting(
        10_000,
        "The most tools and apps pinned per server; a server past it has its new tools held (pinning: enforce) or"
        " served unpinned (warn), and logged, never the pins of its old tools dropped. See `manifold pins forget`.",
        check=positive,
    )
    audit: bool = _setting(True, "Write one JSON line per call, read and prompt to audit/audit.jsonl in data_dir.")
    audit_max_bytes: int = _setting(
        10_000_000, "Size at which the audit log rotates (audit.jsonl.1, .2, ...).", check=positive
    )
    audit_backups: int = _setting(5, "Rotated audit logs kept (0: the log is never rotated).", check=non_negative)
    rate_limit: float = _setting(
        0.0, "Calls, reads and prompts per second each principal may make; 0 turns this off.", check=non_negative
    )
    rate_burst: int = _setting(20, "Calls a principal may make at once above rate_limit.", check=positive)
    principal_max_calls: int = _setting(
        0, "Calls each principal may have in flight at once; 0 turns this off.", check=non_negative
    )
    insecure_open_to_network: bool = _setting(
        False,
        "Serve HTTP on a non-loopback address without authentication: anyone who can reach the port can call"
        " every tool of every server.",
    )
    state_url: str | None = _setting(
        None,
        "redis:// or rediss:// URL of the state several replicas of this gateway share (limits, pins, held calls,"
        " the hub's registry, spilled results, listen streams); none: one process keeps its own.",
        check=state_url_problem,
    )
    replica_id: str | None = _setting(
        None, "This replica's name in the shared state, the status and the audit log (default: host and pid)."
    )
    replica_url: str | None = _setting(
        None,
        "Where the other replicas reach this one (to hand it a held call's answers); default: http://host:port,"
        " with this machine's name when host is 0.0.0.0.",
        check=http_url_problem,
    )
    audit_path: str | None = _setting(
        None, "Where the audit log goes: a directory (default: audit in data_dir), or - for standard output."
    )


_SETTING_FIELDS = {f.name: f for f in fields(Settings)}
_SETTING_TYPES = get_type_hints(Settings)
LIVE_SETTINGS = frozenset(name for name, f in _SETTING_FIELDS.items() if f.metadata["live"])


class SettingField(NamedTuple):
    """One setting as the CLI and docs see it."""

    name: str
    type: Any  # bool, int, float, str, str | None or list[str]
    default: Any
    help: str


def settings_fields() -> list[SettingField]:
    """Every setting with its type, default and help, in declaration order."""
    defaults = Settings()
    return [
        SettingField(name, _SETTING_TYPES[name], getattr(defaults, name), f.metadata["help"])
        for name, f in _SETTING_FIELDS.items()
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


def _convert_setting(name: str, value: Any, env: Mapping[str, str], base: Path | None = None) -> Any:
    """Coerce, normalise and check one setting value; raises `Invalid`.

    `base` is the folder of the config file the value comes from: relative paths written there mean
    that folder (a desktop client starts the gateway from any directory), not the working directory.
    """
    meta = _SETTING_FIELDS[name].metadata
    value = _converter(_SETTING_TYPES[name])(value)
    choices: tuple[str, ...] = meta["choices"]
    # A refusal quotes the value as given, not lower-cased: a ${VAR}'s value is then recognised and shown
    # as ${VAR} (`show_references`); lower-cased, a secret with a capital letter was printed in full.
    if choices and isinstance(value, list):
        bad = [item for item in dict.fromkeys(value) if item.strip().lower() not in choices]
        value = list(dict.fromkeys(item.strip().lower() for item in value))  # drop repeats, keep order
        if bad or not value:
            shown = ", ".join(map(repr, bad)) if bad else "an empty list"
            raise Invalid(f"got {shown}; pick one or more of {', '.join(choices)}")
    elif choices:
        given, value = value, value.strip().lower()
        if value not in choices:
            raise Invalid(f"must be one of {', '.join(repr(c) for c in choices)}, not {given!r}")
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


# smart-mcp-proxy's environment variables, read as aliases of settings (its users keep their env).
_HF_EMBEDDER = "hf"
_BUNDLED_MODEL_NAMES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")
ENV_ALIASES: dict[str, str] = {
    "MCPPROXY_ROUTING_TYPE": "routing",  # CALL_TOOL or DYNAMIC: our choices, in any case
    "MCPPROXY_EMBEDDER": "search_embedder",  # BM25, HF (a local model: hybrid here) or OPENAI
    "MCPPROXY_HF_MODEL": "search_models",  # read only with MCPPROXY_EMBEDDER=HF, as smart-mcp-proxy does
    "MCPPROXY_TOP_K": "search_top_k",
    "MCPPROXY_LIST_CHANGED_EXEC": "list_changed_exec",
}


def environment_settings(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Settings given by environment variables, and the variable each came from.

    `MANIFOLD_<SETTING>` first; a smart-mcp-proxy alias (`ENV_ALIASES`) fills a setting only when its
    `MANIFOLD_` variable is not set. An empty variable counts as unset, as `MANIFOLD_PORT=` in a
    compose file usually means.
    """
    values = {name: env[env_var(name)] for name in _SETTING_FIELDS if env.get(env_var(name), "").strip()}
    variables = {name: env_var(name) for name in values}
    hf = env.get("MCPPROXY_EMBEDDER", "").strip().lower() == _HF_EMBEDDER
    for variable, name in ENV_ALIASES.items():
        raw = env.get(variable, "").strip()
        if not raw or name in values or (variable == "MCPPROXY_HF_MODEL" and not hf):
            continue
        if variable == "MCPPROXY_EMBEDDER" and raw.lower() == _HF_EMBEDDER:
            raw = "hybrid"  # BM25 plus the local model; smart-mcp-proxy's HF ranks by the model alone
        elif variable == "MCPPROXY_HF_MODEL" and raw.lower() in _BUNDLED_MODEL_NAMES:
            raw = BUNDLED  # its default model is the one the `semantic` extra ships
        values[name] = raw
        variables[name] = variable
    return values, variables


def given_in(
    name: str, overrides: Mapping[str, Any] | None, env: Mapping[str, str], in_file: Problems
) -> tuple[Problems, str]:
    """Where the setting `name` was given last (flag > environment > file), as a problem about it names
    it: the problems of that source and the field's label there (`MANIFOLD_PROFILE` in the environment)."""
    if (overrides or {}).get(name) is not None:
        return Problems(COMMAND_LINE, in_file.items), name
    _values, variables = environment_settings(env)
    if name in variables:
        return Problems(ENVIRONMENT, in_file.items), variables[name]
    return in_file, name


class _Layer(NamedTuple):
    """The checked settings of one source, with where its problems go and how they name a setting."""

    problems: Problems
    label: Callable[[str], str]
    values: dict[str, Any]


def _by_name(name: str) -> str:
    """How the file and the flags name a setting in a problem: by its own name."""
    return name


def _layer(
    raw: Mapping[Any, Any],
    problems: Problems,
    label: Callable[[str], str],
    env: Mapping[str, str],
    base: Path | None = None,
) -> _Layer:
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
    return _Layer(problems, label, values)


def resolve_settings(
    section: Mapping[Any, Any],
    overrides: Mapping[str, Any] | None,
    env: Mapping[str, str],
    in_file: Problems,
    base: Path | None = None,
) -> Settings:
    """The settings from the file's `manifold` section, the environment and the flags (None values
    ignored), layered flag > environment > file > default; each source's problems go under its name."""
    from_file, _ = expand_fields(section, env, in_file)
    from_env, variables = environment_settings(env)
    from_flags = {name: value for name, value in (overrides or {}).items() if value is not None}
    layers = [  # lowest precedence first
        _layer(from_file, in_file, _by_name, env, base),
        _layer(from_env, Problems(ENVIRONMENT, in_file.items), lambda name: variables[name], env),
        _layer(from_flags, Problems(COMMAND_LINE, in_file.items), _by_name, env),
    ]
    values = {"data_dir": default_data_dir(env)}
    for layer in layers:
        values.update(layer.values)
    settings = Settings(**values)
    if settings.search_models and settings.search_embedder != "hybrid":
        # Reported where search_models was set last, the value that wins.
        last = next(layer for layer in reversed(layers) if "search_models" in layer.values)
        embedder = settings.search_embedder
        message = f"is only used with search_embedder 'hybrid', but search_embedder is {embedder!r}"
        last.problems.add(None, last.label("search_models"), message)
    if "code" in settings.expose and (problem := engine_problem()):
        # Asked here as serve asks at start, so that `manifold config check` says it first.
        last = next(layer for layer in reversed(layers) if "expose" in layer.values)
        last.problems.add(None, last.label("expose"), problem)
    return settings
