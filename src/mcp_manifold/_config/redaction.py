"""What in a server's config is secret, and how it is hidden wherever the config is shown.

The one redaction point: everything shown about a server (listings of every surface, the hub's
endpoints, status and `manifold servers`, the dashboard, logs, the audit file) goes through
`ServerConfig.redacted()`, `.endpoint()` (the config) or `.scrub()` (free text: error messages and
stderr lines, which may echo a secret), and those follow the rules here, so what one hides the
others hide too.

Two rules. A value the config took from the environment (`${VAR}`) is shown as `${VAR}`, in the
config and in free text alike. Besides, env and header values, URL credentials and secret-named
query parameters or command-line options may hold tokens written in the file: those are `***`.
Values shorter than 4 characters are left alone in text: too likely to be an ordinary word.

A secret with characters a URL cannot carry as they are (`p@ss/w rd`) is also found in text
percent-encoded, however it was encoded (each character as itself or as `%XX`, either case; a space also as
`+`): an HTTP library's error quotes the URL it sent, which holds the value encoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import pydantic_core

from mcp_manifold._config.variables import ENV_VAR_NAME


class Redactable(Protocol):
    """What redaction reads of a server's config (`model.ServerConfig`), named here so that the model
    can delegate to this module without the two importing each other."""

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def args(self) -> Sequence[str]: ...

    @property
    def url(self) -> str | None: ...

    @property
    def expanded(self) -> Mapping[str, str]: ...

    def identity(self) -> dict[str, Any]: ...


HIDDEN = "***"
# Query parameters, header-like flags and CLI options whose value is probably a credential.
_SECRET_NAME = re.compile(r"token|key|secret|passw|auth|credential|signature", re.IGNORECASE)
_URL_IN_ARG = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_MIN_SECRET = 4  # shorter values are too likely to be ordinary words inside an error message
# `${NAME}`: what a value from the environment is shown as, and is not hidden again.
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# What may stand beside references in a shown env or header value: an auth scheme (`Bearer ${TOKEN}`).
_SCHEME = re.compile(r"(?:[A-Za-z][A-Za-z0-9-]* )?\Z")

Secret = str | re.Pattern[str]  # a secret as written, or a pattern that finds its percent-encoded forms


def reference(name: str) -> str:
    return "${" + name + "}"


def _is_reference(text: str) -> bool:
    return _REFERENCE.fullmatch(text) is not None


def unexpand(config: Redactable, text: str) -> str:
    """`text` with each value `config` took from the environment (4 characters or more) shown as `${VAR}`."""
    return show_references(text, config.expanded)


def show_references(text: str, expanded: Mapping[str, str]) -> str:
    """`text` with each of the `expanded` values (4 characters or more) shown as `${NAME}`, written as they
    are or percent-encoded."""
    return apply(with_encoded(_reference_pairs(expanded)), text)


def _reference_pairs(expanded: Mapping[str, str]) -> list[tuple[str, str]]:
    pairs = ((value, reference(name)) for name, value in expanded.items() if len(value) >= _MIN_SECRET)
    # Longest first, so a value inside a longer one does not leave the rest showing.
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def with_encoded(pairs: Sequence[tuple[str, str]]) -> list[tuple[Secret, str]]:
    """`pairs`, then the other ways an error message may spell each secret (escaped as Python writes a
    string or bytes, without the whitespace around it), then for each secret that a URL would carry
    percent-encoded, a pattern of its encoded forms (after all the plain ones: a plain secret is replaced
    first, wherever it is)."""
    spelled = [(other, shown) for secret, shown in pairs for other in _other_spellings(secret)]
    encoded = [(_encoded_forms(secret), shown) for secret, shown in pairs if quote(secret, safe="") != secret]
    return [*pairs, *spelled, *encoded]


def _other_spellings(secret: str) -> list[str]:
    # A token read from a file often ends in a newline, which the HTTP library refuses, quoting the value
    # as `b'...\\n'`: the secret as given is not in that message, but these are.
    forms = {secret.strip(), repr(secret)[1:-1], repr(secret.encode(errors="backslashreplace"))[2:-1]}
    return sorted((form for form in forms - {secret} if len(form) >= _MIN_SECRET), key=len, reverse=True)


def _encoded_forms(secret: str) -> re.Pattern[str]:
    """What finds `secret` percent-encoded in any way: each character as itself or as its UTF-8 `%XX`
    bytes (hex digits in either case), a space also as `+`."""
    parts = []
    for char in secret:
        choices = [
            re.escape(char),
            "".join(f"%{_hex_digit(byte >> 4)}{_hex_digit(byte & 15)}" for byte in char.encode()),
        ]
        if char == " ":
            choices.append(r"\+")
        parts.append(f"(?:{'|'.join(choices)})")
    return re.compile("".join(parts))


def _hex_digit(value: int) -> str:
    digit = f"{value:X}"
    return f"[{digit}{digit.lower()}]" if digit.isalpha() else digit


def redacted(config: Redactable) -> dict[str, Any]:
    """`config.identity()` with values from the environment shown as `${VAR}`, and the other env and
    header values, URL credentials and secret-looking query parameters and command-line options `***`."""
    shown = config.identity()
    shown["command"] = unexpand(config, config.command) if config.command else config.command
    shown["cwd"] = unexpand(config, config.cwd) if config.cwd else config.cwd
    shown["env"] = {name: _shown_value(config, value) for name, value in config.env.items()}
    shown["headers"] = {name: _shown_value(config, value) for name, value in config.headers.items()}
    shown["args"] = redact_args([unexpand(config, arg) for arg in config.args])
    shown["url"] = _redact_url_if_secret(unexpand(config, config.url)) if config.url else config.url
    return shown


def endpoint(config: Redactable) -> str:
    """The url, or the command line, as listings show it: redacted."""
    shown = redacted(config)
    return shown["url"] or " ".join([shown["command"] or "", *shown["args"]]).strip()


def _shown_value(config: Redactable, value: str) -> str:
    """An env or header value: shown when it is made of `${VAR}`s (and perhaps an auth scheme), else ***."""
    shown = unexpand(config, value)
    if _REFERENCE.search(shown) and _SCHEME.match(_REFERENCE.sub("", shown)):
        return shown
    return HIDDEN


def scrub(config: Redactable, text: str) -> str:
    """`text` with its URL shown redacted, values from the environment as `${VAR}` and the other
    secret values of `config` as ***."""
    return apply(replacements(config), text)


def replacements(config: Redactable) -> list[tuple[Secret, str]]:
    """What `scrub` replaces, in order: (secret text or the pattern of its encoded forms, what is shown
    instead). For filters that scrub the same text of many servers (the log), which compute these once
    per config."""
    pairs: list[tuple[Secret, str]] = [(config.url, redacted(config)["url"])] if config.url else []
    secrets = _reference_pairs(config.expanded) + [(secret, HIDDEN) for secret in secret_values(config)]
    return pairs + with_encoded(secrets)


def apply(pairs: Sequence[tuple[Secret, str]], text: str) -> str:
    for secret, shown in pairs:
        if isinstance(secret, str):
            if secret in text:
                text = text.replace(secret, shown)
        elif "%" in text or "+" in text:  # an encoded form has one of them, or it is the plain one, gone already
            text = secret.sub(lambda _found, shown=shown: shown, text)
    return text


def redact_url(url: str) -> str:
    """Hide the userinfo password (or a bare user, often a token) and secret-named query values;
    a `${VAR}` stays as it is."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, password = userinfo.partition(":")
        if has_password:
            netloc = f"{user}:{password if _is_reference(password) else HIDDEN}@{host}"
        elif not _is_reference(user):
            netloc = f"{HIDDEN}@{host}"
    query = "&".join(_redact_query_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _redact_query_pair(pair: str) -> str:
    name, has_value, value = pair.partition("=")
    if has_value and _SECRET_NAME.search(unquote(name)) and not _is_reference(unquote(value)):
        return f"{name}={HIDDEN}"
    return pair


def redact_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """Hide the values of secret-looking options: `--api-key=X` and `--api-key X` both lose X (a
    `${VAR}` stays as it is)."""
    shown: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            shown.append(arg if _is_reference(arg) else HIDDEN)
            hide_next = False
            continue
        hide_next = False
        name, has_value, value = arg.partition("=")
        if _is_reference(value):
            shown.append(arg)
        elif arg.startswith("-") and _SECRET_NAME.search(name):
            shown.append(f"{name}={HIDDEN}" if has_value else arg)
            hide_next = not has_value
        elif "://" in arg:
            # A URL argument (a database DSN such as postgresql://user:pw@host/db) can carry a secret.
            shown.append(_URL_IN_ARG.sub(lambda found: _redact_url_if_secret(found.group()), arg))
        elif has_value and ENV_VAR_NAME.match(name) and _SECRET_NAME.search(name):
            shown.append(f"{name}={HIDDEN}")  # `API_KEY=value`, as given to `env` or `docker run -e`
        else:
            shown.append(arg)
    return shown


def _redact_url_if_secret(url: str) -> str:
    # Only a URL with something to hide is rebuilt: urlunsplit may respell an ordinary one.
    return redact_url(url) if _url_secrets(url) else url


def secret_values(config: Redactable) -> list[str]:
    """Values that must never be shown: env and header values (and the token of `Bearer <token>`),
    and whatever `redacted()` hides in the arguments and the URL."""
    values: set[str] = set(config.env.values())
    for value in config.headers.values():
        values.add(value)
        values.add(value.rpartition(" ")[2])
    for original, shown in zip(config.args, redact_args(config.args), strict=True):
        if original == shown:
            continue
        if shown == HIDDEN or shown.endswith(f"={HIDDEN}"):
            values.add(original.partition("=")[2] or original)  # a value hidden whole
        for url in _URL_IN_ARG.findall(original):
            values.update(_url_secrets(url))  # and the parts a URL argument hides
    if config.url:
        values.update(_url_secrets(config.url))
    auth = getattr(config, "auth", None)
    if auth is not None and auth.client_secret:
        values.add(auth.client_secret)
    # Longest first, so a token inside a longer secret does not leave the rest showing.
    return sorted((value for value in values if len(value) >= _MIN_SECRET), key=len, reverse=True)


def _url_secrets(url: str) -> set[str]:
    """The parts of `url` that `redact_url` hides: the userinfo secret and secret-named query values."""
    original, shown = urlsplit(url), urlsplit(redact_url(url))
    secrets = set()
    if original.netloc != shown.netloc:
        userinfo = original.netloc.rpartition("@")[0]
        user, _, password = userinfo.partition(":")
        secrets.add(unquote(password or user))
        secrets.add(password or user)
    for pair, hidden in zip(original.query.split("&"), shown.query.split("&"), strict=False):
        if pair != hidden:
            value = pair.partition("=")[2]
            secrets.update({value, unquote(value)})
    return secrets


def scrub_data(data: Any, scrub: Callable[[str], str]) -> Any:
    """A log message's `data` (any JSON value) with `scrub` applied to every string in it, keys too."""
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, dict):
        return {scrub(str(key)): scrub_data(value, scrub) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [scrub_data(item, scrub) for item in data]
    return data


def scrub_log_data(pairs: Sequence[tuple[Secret, str]], data: Any) -> Any:
    """`scrub_data` with `pairs` (`replacements`, worked out once for the server), walking `data` only when
    a secret may be in it. The walk is Python on the event loop, a string at a time (a log message of
    100,000 short strings held the loop a third of a second); the look for each secret in the data's JSON
    text is C. Escaping a string for JSON escapes each character on its own, so a secret inside a string
    is in the text as its own JSON escape. The patterns of encoded forms are matched against strings as
    they are, so with one of those the data is walked unless the text has no `%` or `+` (what `apply`
    first looks for too)."""
    if not pairs:
        return data
    try:
        text = pydantic_core.to_json(data).decode()
    except (ValueError, RecursionError):
        return scrub_data(data, lambda value: apply(pairs, value))
    for secret, _shown in pairs:
        if isinstance(secret, str):
            if pydantic_core.to_json(secret).decode()[1:-1] in text:
                break
        elif "%" in text or "+" in text:
            break
    else:
        return data
    return scrub_data(data, lambda value: apply(pairs, value))
