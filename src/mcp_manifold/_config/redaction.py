"""What in a server's config is secret, and how it is hidden wherever the config is shown.

Env and header values, URL credentials and secret-named query parameters or command-line options
may hold tokens. `ServerConfig.redacted()` (what status and logs show) and `ServerConfig.scrub()`
(error messages and stderr lines, which may echo a secret) both follow the rules here, so what the
one hides the other hides too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

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

    def identity(self) -> dict[str, Any]: ...


HIDDEN = "***"
# Query parameters, header-like flags and CLI options whose value is probably a credential.
_SECRET_NAME = re.compile(r"token|key|secret|passw|auth|credential|signature", re.IGNORECASE)
_URL_IN_ARG = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_MIN_SECRET = 4  # shorter values are too likely to be ordinary words inside an error message


def redacted(config: Redactable) -> dict[str, Any]:
    """`config.identity()` with env and header values, URL credentials and secret-looking query
    parameters and command-line options replaced by `***`."""
    shown = config.identity()
    shown["env"] = dict.fromkeys(config.env, HIDDEN)
    shown["headers"] = dict.fromkeys(config.headers, HIDDEN)
    shown["args"] = redact_args(config.args)
    shown["url"] = redact_url(config.url) if config.url else config.url
    return shown


def scrub(config: Redactable, text: str) -> str:
    """`text` with the secret values of `config` replaced by ***, and its URL by the redacted one."""
    for secret in secret_values(config):
        text = text.replace(secret, HIDDEN)
    if config.url:
        text = text.replace(config.url, redact_url(config.url))
    return text


def redact_url(url: str) -> str:
    """Hide the userinfo password (or a bare user, often a token) and secret-named query values."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{HIDDEN}@{host}" if has_password else f"{HIDDEN}@{host}"
    query = "&".join(_redact_query_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _redact_query_pair(pair: str) -> str:
    name, has_value, _ = pair.partition("=")
    if has_value and _SECRET_NAME.search(unquote(name)):
        return f"{name}={HIDDEN}"
    return pair


def redact_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """Hide the values of secret-looking options: `--api-key=X` and `--api-key X` both lose X."""
    shown: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            shown.append(HIDDEN)
            hide_next = False
            continue
        hide_next = False
        name, has_value, _ = arg.partition("=")
        if arg.startswith("-") and _SECRET_NAME.search(name):
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
