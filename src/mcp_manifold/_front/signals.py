"""Stop signals: SIGTERM / SIGHUP end serving the way EOF or Ctrl-C do, by returning.

A client quitting, `kill` and systemd all send one of them; returning (rather than dying) lets the
gateway stop its servers and remove its files on the way out.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import anyio

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopper:
    """Turns SIGTERM / SIGHUP into an orderly stop: by default `stop_everything` (a cancel of the
    caller's scope); while a front serves, whatever that front installs in `stop` instead."""

    def __init__(self, stop_everything: Callable[[], None]) -> None:
        self.stop = stop_everything
        self._default = stop_everything

    def restore(self) -> None:
        """Back to stopping everything (a front that installed its own stop has finished)."""
        self.stop = self._default

    async def watch(self, *extra: signal.Signals) -> None:
        with anyio.open_signal_receiver(*_STOP_SIGNALS, *extra) as signals:
            async for _ in signals:
                self.stop()
