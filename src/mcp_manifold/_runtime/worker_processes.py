"""Worker processes of one Python module that a surface hands work to (code mode's engines), idle ones kept.

A surface asks the host for them (surfaces start no processes themselves) and owns the lifecycle: `warm`
ahead of the first job, `close` with the gateway. A worker is given enough of the gateway's environment to
start Python, none of the servers' secrets; it shares the gateway's standard error and process group, so it
is stopped with the gateway, and it ends by itself when the gateway's end of its pipe closes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

_ENVIRONMENT = ("PATH", "PYTHONPATH", "SYSTEMROOT", "LANG", "LC_ALL")


class WorkerProcesses:
    """Processes running `python -m module`, talking on their standard input and output; at most `most` idle."""

    def __init__(self, module: str, most: int) -> None:
        self.command = [sys.executable, "-m", module]
        self.most = most
        self._idle: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()  # taken and given back from worker threads
        self._closed = False

    def take(self) -> subprocess.Popen[bytes]:
        """An idle worker, or a new one (a third of a second to start)."""
        with self._lock:
            while self._idle:
                process = self._idle.pop()
                if process.poll() is None:
                    return process
        return self._start()

    def give_back(self, process: subprocess.Popen[bytes]) -> None:
        """A worker whose job ended well waits for the next one (past `most`, or after `close`, it is stopped)."""
        with self._lock:
            if not self._closed and len(self._idle) < self.most and process.poll() is None:
                self._idle.append(process)
                return
        self.discard(process)

    @staticmethod
    def discard(process: subprocess.Popen[bytes]) -> None:
        """Kill a worker (its job ran too long, or it answered what it should not) and release its pipes."""
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()

    def warm(self) -> None:
        """Start one worker ahead of the first job."""
        self.give_back(self._start())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for process in idle:
            self.discard(process)

    def _start(self) -> subprocess.Popen[bytes]:
        environment = {name: os.environ[name] for name in _ENVIRONMENT if name in os.environ}
        return subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)
