"""`${VAR}` references in config strings: expansion from the environment, and escaping.

A config file keeps tokens out of itself by naming environment variables (`"Bearer ${TOKEN}"`).
Unlike the shell, an unset variable without a default does not become an empty string: it is a
problem, reported with the place of the reference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcp_manifold._config.problems import Invalid, Problems

# The name of an environment variable, as `${NAME}` and `NAME=value` give it.
ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# `$$`, or `${...}` (group 3 is missing when the brace is never closed).
_REFERENCE = re.compile(r"\$(?:(\$)|\{([^}]*)(\})?)")


def expand_vars(text: str, env: Mapping[str, str], used: dict[str, str] | None = None) -> str:
    """Expand `${VAR}` and `${VAR:-default}` from `env`; `$$` is a literal `$`, a lone `$` stays as is.

    `${VAR:-default}` uses the default when VAR is unset or empty (as in the shell); the default is
    taken literally. Raises `ValueError` naming the variable when VAR is unset and has no default.
    Each value taken from `env` is noted in `used` by name, so that redaction can show it as `${VAR}`.
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return "$"
        if match.group(3) is None:
            raise Invalid(f"unterminated reference {match.group(0)!r}: missing '}}'")
        return _resolve_reference(match.group(2), env, used)

    return _REFERENCE.sub(replace, text)


def referenced_values(value: Any, env: Mapping[str, str], found: dict[str, str] | None = None) -> dict[str, str]:
    """The environment values the `${VAR}`s anywhere inside `value` name (keys excluded), by name:
    what a problem message quoting an expanded value must show as `${VAR}` instead."""
    found = {} if found is None else found
    if isinstance(value, str):
        for match in _REFERENCE.finditer(value):
            name = (match.group(2) or "").partition(":-")[0]
            if env.get(name):
                found[name] = env[name]
    elif isinstance(value, Mapping):
        for item in value.values():
            referenced_values(item, env, found)
    elif isinstance(value, list):
        for item in value:
            referenced_values(item, env, found)
    return found


def escape_vars(text: str) -> str:
    """The inverse of `expand_vars` for literal text: every `$` becomes `$$`."""
    return text.replace("$", "$$")


def _resolve_reference(body: str, env: Mapping[str, str], used: dict[str, str] | None) -> str:
    name, has_default, default = body.partition(":-")
    if not ENV_VAR_NAME.match(name):
        raise Invalid(f"malformed reference '${{{body}}}': expected ${{NAME}} or ${{NAME:-default}}")
    value = env.get(name)
    if has_default and not value:
        return default  # written in the file: shown as it is written
    if value is None:
        raise Invalid(f"environment variable {name!r} is not set (write ${{{name}:-default}} to give a default)")
    if used is not None:
        used[name] = value
    return value


def _expand_tree(value: Any, env: Mapping[str, str], path: str, used: dict[str, str] | None) -> Any:
    """Expand every string inside `value` (keys excluded); errors carry the nested path."""
    if isinstance(value, str):
        try:
            return expand_vars(value, env, used)
        except Invalid as exc:
            raise Invalid(str(exc), path) from None
    if isinstance(value, Mapping):
        return {key: _expand_tree(item, env, f"{path}.{key}", used) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand_tree(item, env, f"{path}[{index}]", used) for index, item in enumerate(value)]
    return value


def expand_fields(
    raw: Mapping[Any, Any],
    env: Mapping[str, str],
    problems: Problems,
    server: str | None = None,
    used: dict[str, str] | None = None,
) -> tuple[dict[Any, Any], set[Any]]:
    """Expand ${VAR}s field by field (of a server entry, or of the settings when `server` is None).

    A field that fails is reported once and left out of the values; its key is returned in the
    second result, so that checks which need the field know it was there. The values taken from
    the environment are noted in `used` (see `expand_vars`).
    """
    values: dict[Any, Any] = {}
    broken: set[Any] = set()
    for key, value in raw.items():
        if value is None:  # null means "not set", as if the key were absent
            continue
        try:
            values[key] = _expand_tree(value, env, str(key), used)
        except Invalid as exc:
            problems.add(server, exc.path or str(key), str(exc))
            broken.add(key)
    return values, broken
