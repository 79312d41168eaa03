"""One JavaScript program in QuickJS: no ambient I/O, limits on time, memory and output, tools as promises.

A program runs in a fresh QuickJS runtime of its own (a memory limit each) on one worker thread for its
whole life: QuickJS must never see a second thread. The engine has no `require`, `process`, `fetch`,
module loader, timers or files; the only ways out are two host functions, captured in a closure by the
prelude and deleted from the global object before the program's first line runs:

- `call(name, argsJson)` records a pending tool call and returns its id; the tool's function returns a
  promise kept in the prelude's table;
- `print(text)` appends to the output, which is capped.

The loop (`Sandbox.run`) alternates: run JavaScript until no job is left, hand every pending call to
`perform` (which the caller makes on the event loop, the calls of one round concurrently), settle the
promises with the answers, and again, until the program's own promise settles. Every slice of JavaScript
runs under QuickJS's time limit set to what is left of the program's budget; QuickJS counts it as the
process's CPU time (`clock()`), so other work in the gateway makes it end sooner, never later, while a
machine short of CPU makes it last longer in wall time. The rounds of tool calls are bounded by the caller.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_manifold._errors import InvalidRequest

logger = logging.getLogger(__name__)


class EngineMissing(InvalidRequest):
    """The QuickJS engine is not installed (it comes with the `code` extra)."""


def load_engine() -> Any:
    """The `quickjs` module, or a clear error saying how to install it."""
    try:
        import quickjs
    except ImportError as exc:
        raise EngineMissing(
            "the code surface needs the QuickJS engine, which is not installed: "
            "pip install 'mcp-manifold[code]' (or: pip install quickjs)"
        ) from exc
    return quickjs


@dataclass(frozen=True)
class Limits:
    seconds: float = 30.0  # the program's budget: its JavaScript's CPU time, and the wall time of its calls
    memory_bytes: int = 128 * 1024 * 1024
    output_chars: int = 20_000  # of console output kept; the rest is counted and noted
    max_calls: int = 1000  # tool calls per program
    value_bytes: int = 8_000_000  # a tool's value as JSON, handed into the program
    stack_bytes: int = 512 * 1024  # QuickJS's own stack check: deep recursion is a RangeError, not a crash


@dataclass(frozen=True)
class PendingCall:
    id: int
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Settled:
    """A call's answer for the program: its value as JSON text, or the message of the Error it throws."""

    id: int
    ok: bool
    text: str


@dataclass
class Outcome:
    ok: bool
    value: str | None = None  # the program's return value as JSON text (None: it returned nothing)
    error: str | None = None
    output: str = ""
    output_dropped: int = 0  # characters printed past the cap
    calls: int = 0
    kind: str = "ok"  # ok, error, timeout, memory


class ProgramStopped(Exception):
    """Stopped from outside (the client went away, the wall time ran out)."""


# Everything the host and the program share lives in this closure: the queue of calls, the table of
# waiting promises, the output. The program reaches only `tools` and `console`, both frozen; the host
# reaches the rest through the function the prelude returns (QuickJS's Python binding cannot call into
# Python under a time limit, so nothing calls out: the host drains the queue between slices).
_PRELUDE = r"""
(() => {
  delete globalThis.__date_clock;  // an engine benchmark helper, not for programs
  const limits = LIMITS;
  const queue = [];
  const pending = new Map();
  let outcome = null;
  let calls = 0;
  let output = "";
  let dropped = 0;
  const describe = (error) => {
    if (error instanceof Error) {
      return `${error.name}: ${error.message}`;
    }
    try { return `uncaught ${JSON.stringify(error)}`; } catch (e) { return `uncaught ${String(error)}`; }
  };
  const show = (value) => {
    if (typeof value === "string") return value;
    if (value instanceof Error) return `${value.name}: ${value.message}`;
    if (value === undefined || typeof value === "function" || typeof value === "symbol") return String(value);
    try { const text = JSON.stringify(value); return text === undefined ? String(value) : text; }
    catch (e) { return String(value); }
  };
  const log = (...values) => {
    const line = values.map(show).join(" ") + "\n";
    const room = limits.output - output.length;
    if (room >= line.length) { output += line; return; }
    if (room > 0) output += line.slice(0, room);
    dropped += line.length - Math.max(room, 0);
  };
  const tools = Object.create(null);
  for (const name of limits.names) {
    const tool = function (args) {
      if (args === undefined) args = {};
      if (typeof args !== "object" || args === null || Array.isArray(args)) {
        return Promise.reject(new TypeError(`tools.${name} takes one object of arguments`));
      }
      let text;
      try { text = JSON.stringify(args); }
      catch (e) { return Promise.reject(new TypeError(`tools.${name}: arguments are not JSON: ${e.message}`)); }
      if (calls >= limits.calls) {
        return Promise.reject(new Error(`the program made more than ${limits.calls} tool calls (code_max_calls)`));
      }
      calls += 1;
      const id = calls;
      queue.push({ id, name, arguments: text });
      return new Promise((resolve, reject) => { pending.set(id, { resolve, reject }); });
    };
    Object.defineProperty(tools, name, { value: Object.freeze(tool), enumerable: true });
  }
  Object.freeze(tools);
  const console = Object.freeze({ log, info: log, warn: log, error: log, debug: log });
  for (const [key, value] of [["tools", tools], ["console", console]]) {
    Object.defineProperty(globalThis, key, { value, writable: false, configurable: false, enumerable: false });
  }
  const watch = (promise) => {
    promise.then(
      (value) => {
        let text;
        try { text = value === undefined ? null : JSON.stringify(value); }
        catch (e) { text = JSON.stringify(String(value)); }
        outcome = { ok: true, value: text === undefined ? null : text };
      },
      (error) => { outcome = { ok: false, error: describe(error) }; },
    );
  };
  Object.defineProperty(globalThis, "__manifold_watch", { value: watch, configurable: true });
  return (op, id, ok, text) => {
    if (op === "drain") return JSON.stringify(queue.splice(0, queue.length));
    if (op === "state") return JSON.stringify({ outcome, output, dropped, calls });
    const waiting = pending.get(id);
    pending.delete(id);
    if (waiting !== undefined) {
      if (ok) waiting.resolve(JSON.parse(text));
      else waiting.reject(new Error(text));
    }
    return null;
  };
})()
"""

# The program is the body of an async function (top-level await; `return` gives its value), started by
# an arrow that took the watcher off the global object first.
_WRAPPER = (
    "((watch) => { delete globalThis.__manifold_watch; return watch((async () => {\n%s\n})()); })"
    "(globalThis.__manifold_watch)"
)


class Sandbox:
    """Runs one program; `run` blocks its thread until the program is done, so call it off the event loop."""

    def __init__(self, tool_names: list[str], limits: Limits) -> None:
        self.tool_names = tool_names
        self.limits = limits
        self._engine = load_engine()
        self._state: dict[str, Any] = {}
        self.stopped = False  # set from another thread: checked between slices

    def run(self, code: str, perform: Callable[[list[PendingCall], float], list[Settled]]) -> Outcome:
        """Run `code`; `perform(calls, seconds_left)` makes a round of tool calls and returns their answers."""
        engine = self._engine
        deadline = time.monotonic() + self.limits.seconds
        context = engine.Context()
        context.set_memory_limit(self.limits.memory_bytes)
        context.set_max_stack_size(self.limits.stack_bytes)

        def slice_(action: Callable[[], Any]) -> Any:
            left = deadline - time.monotonic()
            if left <= 0 or self.stopped:
                raise ProgramStopped
            context.set_time_limit(max(left, 0.001))
            return action()

        limits = {"names": self.tool_names, "output": self.limits.output_chars, "calls": self.limits.max_calls}
        host: Any = None
        try:
            host = slice_(lambda: context.eval(_PRELUDE.replace("LIMITS", json.dumps(limits))))
            slice_(lambda: context.eval(_WRAPPER % code))
            while True:
                while slice_(context.execute_pending_job):
                    pass
                self._state = json.loads(slice_(lambda: host("state", 0, False, "")))
                outcome = self._state["outcome"]
                if outcome is not None:
                    return self._finish(outcome["ok"], outcome.get("value"), outcome.get("error"))
                batch = [
                    PendingCall(item["id"], item["name"], json.loads(item["arguments"]))
                    for item in json.loads(slice_(lambda: host("drain", 0, False, "")))
                ]
                if not batch:
                    return self._finish(False, None, "the program awaits a promise that nothing will settle")
                answers = perform(batch, deadline - time.monotonic())
                for answer in answers:
                    slice_(lambda answer=answer: host("settle", answer.id, answer.ok, answer.text))
        except ProgramStopped:
            self._read_state(host, context)
            return self._finish(False, None, self._timeout(), "timeout")
        except (engine.JSException, engine.StackOverflow) as exc:
            self._read_state(host, context)
            return self._engine_error(str(exc))
        except Exception:  # the gateway's side failed (it is stopping, say): the runtime is freed on this thread
            logger.exception("code mode: a program could not be run to its end")
            return self._finish(False, None, "the gateway could not run the program to its end")

    def _read_state(self, host: Any, context: Any) -> None:
        """What the program printed before the engine stopped it (best effort: it may be out of memory)."""
        if host is None:
            return
        try:
            context.set_time_limit(1.0)
            context.set_memory_limit(self.limits.memory_bytes + 8 * 1024 * 1024)  # room to read the output
            self._state = json.loads(host("state", 0, False, ""))
        except Exception:
            pass

    def _timeout(self) -> str:
        return f"the program ran out of time ({self.limits.seconds:g} s)"

    def _engine_error(self, message: str) -> Outcome:
        lines = message.strip().splitlines() or ["the engine stopped the program"]
        line = re.search(r"<input>:(\d+)", message)
        # The program starts on the wrapper's second line.
        where = f" (line {int(line.group(1)) - 1})" if line and int(line.group(1)) > 1 else ""
        return self._finish(False, None, lines[0] + where)

    def _finish(self, ok: bool, value: str | None, error: str | None, kind: str | None = None) -> Outcome:
        if error is not None and "InternalError: out of memory" in error:
            error, kind = f"the program ran out of memory ({self.limits.memory_bytes // (1024 * 1024)} MB)", "memory"
        elif error is not None and "InternalError: interrupted" in error:
            error, kind = self._timeout(), "timeout"
        state = self._state
        return Outcome(
            ok=ok,
            value=value,
            error=error,
            output=state.get("output", ""),
            output_dropped=state.get("dropped", 0),
            calls=state.get("calls", 0),
            kind=kind or ("ok" if ok else "error"),
        )
