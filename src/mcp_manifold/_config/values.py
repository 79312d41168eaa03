"""Raw config values into typed ones, and the checks servers and settings share.

A value may come from JSON/YAML, where `true` and `8080` are already typed, or as text from a
`MANIFOLD_*` variable, a command-line flag or a `${VAR}`, so every coercion also takes the text
spellings ("yes", "8080", "a,b"). Coercions and converters raise `Invalid`; checks return the
problem or None. Every message is worded to follow the field's name ("must be a whole number,
not 'x'").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from mcp_manifold._config.problems import Invalid, kind
from mcp_manifold._config.redaction import HIDDEN, redact_url

T = TypeVar("T")

# Names as clients and LLM APIs accept them; an explicit prefix is used verbatim, so it must be one.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


# --- coercions ---------------------------------------------------------------------------------


def as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):  # from the environment, a CLI flag or a ${VAR}
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise Invalid(f"must be true or false (or 1/0, yes/no, on/off), not {value!r}")
    raise Invalid(f"must be true or false, not {kind(value)}")


def as_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    shown = repr(value) if isinstance(value, str | float) else kind(value)
    raise Invalid(f"must be a whole number, not {shown}")


def as_float(value: Any) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None:
        shown = repr(value) if isinstance(value, str) else kind(value)
        raise Invalid(f"must be a number, not {shown}")
    if not math.isfinite(number):
        raise Invalid(f"must be a finite number, not {value!r}")
    return number


def as_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise Invalid(f"must be a string, not {kind(value)}")


def as_str_list(value: Any) -> list[str]:
    if isinstance(value, str):  # comma-separated, as environment variables and flags give lists
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return list(value)
    raise Invalid(f"must be a list of strings, not {kind(value)}")


def as_text(value: Any) -> str:
    """A scalar that ends up as text (an argument, an env value): YAML may give `8080` unquoted."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    hint = " (quote it in YAML)" if isinstance(value, bool) else ""
    raise Invalid(f"must be a string, not {kind(value)}{hint}")


def nul_problem(value: str | None) -> str | None:
    """A NUL character, which no command line, environment or path can hold: the process would not start
    (and a command run in the background would fail where nobody sees it)."""
    return "must not contain a NUL character (\\u0000)" if value and "\x00" in value else None


def for_a_process(value: Any) -> str:
    """A scalar handed to a process (an argument, an env value): text without a NUL character."""
    text = as_text(value)
    if problem := nul_problem(text):
        raise Invalid(problem)
    return text


def expand_user(path: str, env: Mapping[str, str]) -> str:
    """`~` and `~/...` become the home directory; HOME comes from `env` so tests stay hermetic."""
    if path != "~" and not path.startswith(("~/", "~\\")):
        return path
    home = env.get("HOME") or env.get("USERPROFILE") or str(Path.home())
    return home + path[1:]


# --- checks: the problem with a converted value, or None ---------------------------------------


def positive(value: float) -> str | None:
    return None if value > 0 else f"must be greater than 0, not {value:g}"


def long_secrets(values: list[str]) -> str | None:
    """Every secret is at least 32 characters (a sealing key; shown by position, never by value)."""
    short = [str(position) for position, value in enumerate(values, 1) if len(value) < 32]
    return f"needs secrets of 32 characters or more; too short: number {', '.join(short)}" if short else None


def non_negative(value: float) -> str | None:
    return None if value >= 0 else f"must be 0 or more, not {value:g}"


def not_blank(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def tool_name_problem(value: str) -> str | None:
    return None if _TOOL_NAME.match(value) else f"must be 1-64 letters, digits, '_' or '-', not {value!r}"


# The tools the other surfaces always show (their `reserved_tool_names`; tests/test_proxy.py keeps the two
# in step). The proxy's tool may not take one: calls of it would reach whichever surface comes first.
OTHER_SURFACES_TOOLS = {
    "proxy-dispatch": "dispatch",
    "retrieve_tools": "retrieve",
    "call_tool": "retrieve",
    "instances_list": "hub",
    "instances_connect": "hub",
    "instances_disconnect": "hub",
    "instances_call": "hub",
    "search_tools": "code",
    "execute_code": "code",
}


def proxy_tool_name_problem(value: str) -> str | None:
    if value in OTHER_SURFACES_TOOLS:
        return f"{value!r} is the {OTHER_SURFACES_TOOLS[value]} surface's tool: choose another name"
    return tool_name_problem(value)


def prefix_problem(value: str) -> str | None:
    """A server's `prefix`: a valid name part, or empty (its tools and URIs keep their own names)."""
    return None if value == "" else tool_name_problem(value)


def http_url_problem(url: str) -> str | None:
    problem = http_url_unusable(url)
    return None if problem is None else f"{problem}, not {quoted_url(url)}"


def quoted_url(url: str) -> str:
    """`url` as a problem quotes it, with its password (or bare user) and secret-named query values hidden:
    a problem reaches the log, the dashboard and `manifold config check`, and a mistyped scheme is no reason
    to show the password beside it."""
    try:
        return repr(redact_url(url))
    except ValueError:  # no URL Python can split: what looks like its userinfo hidden all the same
        return repr(re.sub(r"(?<=//)[^/?#]*@", f"{HIDDEN}@", url))


def http_url_unusable(url: str) -> str | None:
    """Why `url` is no http(s) URL with a host that every later use can parse, or None. The reason quotes
    no part of it (a URL may carry a token)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is no number from 0 to 65535, as every later use would
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", ...
        return f"must be an http:// or https:// URL with a host, which Python cannot parse ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host"
    return None


def checked(convert: Callable[[Any], T], check: Callable[[T], str | None]) -> Callable[[Any], T]:
    """A converter that also runs `check` on the converted value; its problem raises `Invalid`."""

    def run(value: Any) -> T:
        converted = convert(value)
        problem = check(converted)
        if problem:
            raise Invalid(problem)
        return converted

    return run
