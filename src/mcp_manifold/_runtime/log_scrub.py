"""The gateway's log, scrubbed of its servers' secrets whatever a log line quotes.

Most lines that name a server's state already carry scrubbed text (`Backend.last_error`, stderr);
this filter is the net under them: an exception from a transport that quotes a URL with its
password, a traceback, a third-party message. Every record that reaches the `mcp_manifold` log's
handlers passes through the same rules as every other view of a server (`redaction`), for every
server the gateway knows, configured or added at run time (hub instances).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import suppress

from mcp_manifold._config import ServerConfig
from mcp_manifold._config.redaction import Secret, apply, replacements

LOGGER = "mcp_manifold"


class SecretFilter(logging.Filter):
    """Rewrites each record's message (and traceback) with the servers' secrets hidden."""

    def __init__(self, configs: Callable[[], Iterable[ServerConfig]]) -> None:
        super().__init__()
        self._configs = configs
        self._known: list[ServerConfig] = []  # held, so that an id is never reused by another config
        self._pairs: list[tuple[Secret, str]] = []

    def filter(self, record: logging.LogRecord) -> bool:
        # A record whose arguments do not format is left as it is: the handler reports it as usual.
        with suppress(Exception):
            self._scrub(record)
        return True

    def _scrub(self, record: logging.LogRecord) -> None:
        pairs = self._current_pairs()
        if not pairs:
            return
        message = record.getMessage()
        scrubbed = apply(pairs, message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = apply(pairs, record.exc_text)

    def _current_pairs(self) -> list[tuple[Secret, str]]:
        # Computed again only when the set of configs changes (a reload, a hub instance added).
        configs = list(self._configs())
        if len(configs) != len(self._known) or any(a is not b for a, b in zip(configs, self._known, strict=True)):
            self._pairs = [pair for config in configs for pair in replacements(config)]
            self._known = configs
        return self._pairs


def install(configs: Callable[[], Iterable[ServerConfig]]) -> Callable[[], None]:
    """Scrub every record the gateway's log handlers write (the root's too, and the last-resort handler
    that prints third-party libraries' warnings when the root has none); returns the function that
    takes the filter off again."""
    secret_filter = SecretFilter(configs)
    handlers = [*logging.getLogger(LOGGER).handlers, *logging.getLogger().handlers]
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        handler.addFilter(secret_filter)

    def remove() -> None:
        for handler in handlers:
            handler.removeFilter(secret_filter)

    return remove
