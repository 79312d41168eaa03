"""Programs run in engine processes of their own, which the gateway kills when a program is past its deadline.

QuickJS looks at its time limit between bytecode steps only, and some of its C code runs long without one: a
BigInt of a million bits is turned into a string in seconds, and a built-in that does so for each element
(`Array(4).fill(1n << 999000n).map(String)`) chained them: 21.6 s on a 1 s limit, and no bound with more
elements. A thread cannot be stopped, so such a program held a core and its slot for as long as it liked.
Each program now runs in a worker process the host keeps (`engine_worker.py`); the engine still stops a
program itself at its deadline, and a process still running as long again later (`GRACE` at least) is
killed. Idle processes wait for the next program, so a program starts in a pipe's round trip, not a Python
start.

The process runs the caller's code: what it sends is JSON (`engine_wire.py`), bounded in size, and checked
again here (the calls' names, ids and count) as from any other untrusted side; the tool calls themselves are
made by the gateway, through the caller's view, as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any, Protocol

from mcp_manifold._surfaces.code.engine_wire import WireBroken, read_message, write_message
from mcp_manifold._surfaces.code.sandbox import (
    Limits,
    Outcome,
    PendingCall,
    ProgramStopped,
    Settled,
    forged_call,
    most_containers,
)

logger = logging.getLogger(__name__)

MODULE = "mcp_manifold._surfaces.code.engine_worker"  # what the host's worker processes run (`engine_worker.py`)
# The engine counts a program's time as its process's CPU time, which on a machine short of CPU is slower than
# the wall's: the kill waits as long again (a second at least), so the engine's own stop, which keeps what the
# program printed, comes first wherever it can.
GRACE = 1.0
_OUTCOME_TYPES = {"ok": bool, "value": (str, type(None)), "error": (str, type(None)), "output": str}
_OUTCOME_TYPES |= {"output_dropped": int, "calls": int, "kind": str}
_KINDS = frozenset({"ok", "error", "timeout", "memory"})


class EngineProcesses(Protocol):
    """The host's worker processes running `MODULE` (`runtime/worker_processes.py`)."""

    def take(self) -> Any: ...

    def give_back(self, process: Any) -> None: ...

    def discard(self, process: Any) -> None: ...


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
        # And its objects and arrays, before it is parsed: 60 MB of `{}` from an engine took the gateway to 1.6 GB.
        self._most_containers = most_containers(limits)

    def run(self, code: str, perform: Callable[[list[PendingCall], float], list[Settled]]) -> Outcome:
        """Run `code`; `perform(calls, seconds_left)` makes a round of tool calls and returns their answers."""
        process = self.processes.take()
        assert process.stdin is not None and process.stdout is not None
        ends = time.monotonic() + self.limits.seconds  # where the engine stops the program itself
        killed_at = ends + max(GRACE, self.limits.seconds)  # where a process still running is killed
        try:
            write_message(process.stdin, {"names": self.tool_names, "limits": asdict(self.limits), "code": code})
            while True:
                message = read_message(
                    process.stdout.fileno(), killed_at, self._most_bytes, lambda: self.stopped, self._most_containers
                )
                if message is None:  # past its deadline in code that does not look at it, or its request is gone
                    self.processes.discard(process)
                    return self._killed()
                if "done" in message:
                    outcome = self._outcome(message["done"])
                    self.processes.give_back(process)
                    return outcome
                batch = self._batch(message.get("round"))
                try:
                    answers = perform(batch, ends - time.monotonic())
                except ProgramStopped:
                    write_message(process.stdin, {"stop": True})
                    continue
                write_message(process.stdin, {"answers": [asdict(answer) for answer in answers]})
        except (WireBroken, OSError, ValueError, TypeError) as exc:
            # What the process sent is not what the worker writes: its program reached past the engine.
            logger.warning("code mode: a program's engine process was stopped: %s", exc)
            self.processes.discard(process)
            return Outcome(False, error="the program's engine stopped answering as it should", calls=len(self._seen))
        except BaseException:
            self.processes.discard(process)
            raise

    def _batch(self, items: Any) -> list[PendingCall]:
        if type(items) is not list:
            raise WireBroken("a round that is not a list")
        batch = []
        for item in items:
            if forged_call(item, self._seen, self._names, dict):
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
            error=f"the program ran out of time ({self.limits.seconds:g} s) and was stopped, what it printed lost: it "
            "was still running as long again later (in the engine's own code, which does not look at the time "
            "limit, or on a machine short of CPU)",
            calls=len(self._seen),
            kind="timeout",
        )
