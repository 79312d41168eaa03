"""The gateway's configuration: which servers sit behind it and how the gateway itself behaves.

A config file is the `mcpServers` map Claude Desktop and Cursor use, as JSON or YAML, plus an
optional `manifold` section with the gateway's settings. Every problem found in a file, the
environment or the command line is collected and reported together in one `ConfigError`, so a
user can fix everything in one pass.

Settings resolve in this order: command-line flag > `MANIFOLD_<NAME>` environment variable >
file > default. String values in the file may use `${VAR}` and `${VAR:-default}`.

The names below (`__all__`) are the package's interface; each module holds one concern:

- `loading`: `load_config`, `check_config` and `parse_config_data`, the whole config assembled
- `commands`: whether a stdio server's command can be found (a warning of `config check`; not exported)
- `changes`: what a reload of a running gateway changes (`diff_configs`)
- `files`: JSON/YAML read with duplicate keys found, the only file I/O
- `servers`: the `mcpServers` entries read and checked, and the prefix check across them
- `settings`: `Settings`, its fields and environment names, and the layering of its sources
- `model`: the checked data the gateway reads (`Config`, `ServerConfig`, `ToolFilter`)
- `variables`: `${VAR}` expansion and escaping
- `values`: coercion of raw values, and the checks servers and settings share
- `redaction`: what in a server's config is secret, and how it is hidden
- `problems`: how problems are worded and collected
"""

from mcp_manifold._config.files import CONFIG_SUFFIXES, read_config_data
from mcp_manifold._config.loading import check_config, load_config, parse_config_data
from mcp_manifold._config.model import Config, ServerConfig, ToolFilter, Transport
from mcp_manifold._config.redaction import redact_args, redact_url
from mcp_manifold._config.servers import SERVER_FIELDS
from mcp_manifold._config.settings import (
    LIVE_SETTINGS,
    MAX_SEARCH_LIMIT,
    SURFACE_NAMES,
    SettingField,
    Settings,
    default_data_dir,
    env_var,
    settings_fields,
)
from mcp_manifold._config.variables import escape_vars, expand_vars

__all__ = [
    "CONFIG_SUFFIXES",
    "LIVE_SETTINGS",
    "MAX_SEARCH_LIMIT",
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
