"""Stop signals: SIGTERM / SIGHUP end serving the way EOF or Ctrl-C do, by returning.

A client quitting, `kill` and systemd all send one of them; returning (rather than dying) lets the
gateway stop its servers and remove its files on the way out.

SIGHUP means two things. Over stdio the gateway is a child of its client or of a terminal, where a
hang-up means the other side is gone: it stops. A shared HTTP gateway is a daemon, where SIGHUP
conventionally means "read your config again": once the gateway runs, the HTTP front sets
`on_hangup` to a config reload (before that, a hang-up still stops it).
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import anyio

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopper:
    """Turns SIGTERM / SIGHUP into an orderly stop: by default `stop_everything` (a cancel of the
    caller's scope); while a front serves, whatever that front installs in `stop` instead. SIGHUP
    runs `on_hangup` instead when one is set (the HTTP front's reload)."""

    def __init__(self, stop_everything: Callable[[], None]) -> None:
        self.stop = stop_everything
        self.on_hangup: Callable[[], None] | None = None
        self._default = stop_everything

    def restore(self) -> None:
        """Back to stopping everything (a front that installed its own stop has finished)."""
        self.stop = self._default
        self.on_hangup = None

    async def watch(self, *extra: signal.Signals) -> None:
        with anyio.open_signal_receiver(*_STOP_SIGNALS, *extra) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP and self.on_hangup is not None:
                    self.on_hangup()
                else:
                    self.stop()
