"""Programs run in engine processes of their own, which the gateway kills when a program is past its deadline.

QuickJS looks at its time limit between bytecode steps only, and some of its C code runs long without one: a
BigInt of a million bits is turned into a string in seconds, and a built-in that does so for each element
(`Array(4).fill(1n << 999000n).map(String)`) chained them: 21.6 s on a 1 s limit, and no bound with more
elements. A thread cannot be stopped, so such a program held a core and its slot for as long as it liked.
Each program now runs in a process (`engine_worker.py`); the engine still stops a program itself at its
deadline, and a process still running `GRACE` seconds later is killed. Idle processes wait for the next
program, so a program starts in the time of a pipe's round trip, not a Python start.

The process runs the caller's code: what it sends is JSON (`engine_wire.py`), bounded in size, and checked
again here (the calls' names, ids and count) as from any other untrusted side; the tool calls themselves are
made by the gateway, through the caller's view, as before.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any

from mcp_manifold._surfaces.code.engine_wire import WireBroken, read_message, write_message
from mcp_manifold._surfaces.code.sandbox import Limits, Outcome, PendingCall, ProgramStopped, Settled

logger = logging.getLogger(__name__)

GRACE = 1.0  # seconds past a program's deadline before its process is killed: the engine's own stop comes first
_COMMAND = [sys.executable, "-m", "mcp_manifold._surfaces.code.engine_worker"]
# What the process is given of the gateway's environment: enough to start Python, none of the servers' secrets.
_ENVIRONMENT = ("PATH", "PYTHONPATH", "SYSTEMROOT", "LANG", "LC_ALL")
_OUTCOME_TYPES = {"ok": bool, "value": (str, type(None)), "error": (str, type(None)), "output": str}
_OUTCOME_TYPES |= {"output_dropped": int, "calls": int, "kind": str}
_KINDS = frozenset({"ok", "error", "timeout", "memory"})


class EngineProcesses:
    """The engine processes of one gateway: at most `most` idle ones wait for the next program."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._idle: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> subprocess.Popen[bytes]:
        with self._lock:
            while self._idle:
                process = self._idle.pop()
                if process.poll() is None:
                    return process
        return _start()

    def give_back(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.most and process.poll() is None:
                self._idle.append(process)
                return
        stop(process)

    def warm(self) -> None:
        """Start one process ahead of the first program (its Python start is a third of a second)."""
        self.give_back(_start())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for process in idle:
            stop(process)


def _start() -> subprocess.Popen[bytes]:
    environment = {name: os.environ[name] for name in _ENVIRONMENT if name in os.environ}
    return subprocess.Popen(_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            stream.close()


class IsolatedSandbox:
    """A program run as `Sandbox.run` runs it, with its engine in one of `processes`."""

    def __init__(self, processes: EngineProcesses, tool_names: list[str], limits: Limits) -> None:
        self.processes = processes
        self.tool_names = tool_names
        self.limits = limits
        self.stopped = False  # set from another thread: the process is killed within a tenth of a second
        self._names = frozenset(tool_names)
        self._seen: set[int] = set()
        # The most a message may take: a round's arguments are strings of the program's heap, six bytes a
        # character at most as ASCII JSON, and its value and output are cut to the output limit.
        self._most_bytes = 6 * limits.memory_bytes + (1 << 20)

    def run(self, code: str, perform: Callable[[list[PendingCall], float], list[Settled]]) -> Outcome:
        """Run `code`; `perform(calls, seconds_left)` makes a round of tool calls and returns their answers."""
        process = self.processes.take()
        assert process.stdin is not None and process.stdout is not None
        deadline = time.monotonic() + self.limits.seconds + GRACE
        try:
            write_message(process.stdin, {"names": self.tool_names, "limits": asdict(self.limits), "code": code})
            while True:
                message = read_message(process.stdout.fileno(), deadline, self._most_bytes, lambda: self.stopped)
                if message is None:  # past its deadline in code that does not look at it, or its request is gone
                    stop(process)
                    return self._killed()
                if "done" in message:
                    outcome = self._outcome(message["done"])
                    self.processes.give_back(process)
                    return outcome
                batch = self._batch(message.get("round"))
                try:
                    answers = perform(batch, deadline - GRACE - time.monotonic())
                except ProgramStopped:
                    write_message(process.stdin, {"stop": True})
                    continue
                write_message(process.stdin, {"answers": [asdict(answer) for answer in answers]})
        except (WireBroken, OSError, ValueError, TypeError) as exc:
            # What the process sent is not what the worker writes: its program reached past the engine.
            logger.warning("code mode: a program's engine process was stopped: %s", exc)
            stop(process)
            return Outcome(False, error="the program's engine stopped answering as it should", calls=len(self._seen))
        except BaseException:
            stop(process)
            raise

    def _batch(self, items: Any) -> list[PendingCall]:
        if type(items) is not list:
            raise WireBroken("a round that is not a list")
        batch = []
        for item in items:
            if (
                type(item) is not dict
                or type(item.get("id")) is not int
                or item["id"] in self._seen
                or item.get("name") not in self._names
                or type(item.get("arguments")) is not dict
            ):
                raise WireBroken("a call that the engine's worker does not write")
            self._seen.add(item["id"])
            batch.append(PendingCall(item["id"], item["name"], item["arguments"]))
        if len(self._seen) > self.limits.max_calls:
            raise WireBroken(f"more than {self.limits.max_calls} calls")
        return batch

    def _outcome(self, done: Any) -> Outcome:
        if type(done) is not dict or {field.name for field in fields(Outcome)} != done.keys():
            raise WireBroken("an outcome that the engine's worker does not write")
        for name, kinds in _OUTCOME_TYPES.items():
            if not isinstance(done[name], kinds):
                raise WireBroken(f"an outcome whose {name} is a {type(done[name]).__name__}")
        if done["kind"] not in _KINDS:
            raise WireBroken(f"an outcome of kind {done['kind']!r}")
        return Outcome(**done)

    def _killed(self) -> Outcome:
        if self.stopped:
            return Outcome(False, error="the program was stopped", calls=len(self._seen), kind="timeout")
        return Outcome(
            False,
            error=f"the program ran out of time ({self.limits.seconds:g} s); it was inside the engine's own code, "
            "which does not look at the time limit, and was stopped there, so what it printed is lost",
            calls=len(self._seen),
            kind="timeout",
        )
