"""One JavaScript program in QuickJS: no ambient I/O, limits on time, memory and output, tools as promises.

A program runs in a fresh QuickJS runtime of its own (a memory limit each) on one worker thread for its
whole life: QuickJS must never see a second thread. The engine has no `require`, `process`, `fetch`,
module loader, timers or files; the only ways out are two host functions, captured in a closure by the
prelude and deleted from the global object before the program's first line runs:

- `call(name, argsJson)` records a pending tool call and returns its id; the tool's function returns a
  promise kept in the prelude's table;
- `print(text)` appends to the output, which is capped.

The program can replace any built-in the prelude uses (`Array.prototype.push`, `JSON.stringify`,
`Promise.prototype.then`), and so reach the prelude's queue and state. So the host trusts nothing it reads
back: it counts and caps the calls itself, checks every call and the state for their types, and cuts the
output, the value and the error to the output limit. A program that tampers with the channel can only
spoil its own answer. (Keeping the prelude's own copies of those built-ins as well cost about 50 µs a
program, a sixth of its start, for nothing the host's checks do not already give.)

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

from mcp_manifold._code_engine import load_engine

logger = logging.getLogger(__name__)


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
    raw: bool = False  # `text` is the tool's own text: the program takes it parsed when it is JSON, else as it is


@dataclass
class Outcome:
    ok: bool
    value: str | None = (
        None  # the program's return value as JSON text, cut to the output limit (None: it returned nothing)
    )
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
  GUARDS
  const AsyncFunction = (async () => {}).constructor;
  const queue = [];
  const pending = new Map();
  let outcome = null;
  let calls = 0;
  let output = "";
  let dropped = 0;
  const text = (value) => {  // never throws: a value whose conversion throws is named as such
    try { return String(value); } catch (e) { return "(a value that cannot be shown)"; }
  };
  const describe = (error) => {
    try {
      if (error instanceof Error) return `${text(error.name)}: ${text(error.message)}`;
      const shown = JSON.stringify(error);
      return `uncaught ${shown === undefined ? text(error) : shown}`;
    } catch (e) { return `uncaught ${text(error)}`; }
  };
  const show = (value) => {
    if (typeof value === "string") return value;
    try {
      if (value instanceof Error) return `${text(value.name)}: ${text(value.message)}`;
      if (value === undefined || typeof value === "function" || typeof value === "symbol") return text(value);
      const shown = JSON.stringify(value);
      return shown === undefined ? text(value) : shown;
    } catch (e) { return text(value); }
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
      let encoded;
      try { encoded = JSON.stringify(args); }
      catch (e) {
        return Promise.reject(new TypeError(`tools.${name}: arguments are not JSON: ${text(e && e.message)}`));
      }
      if (calls >= limits.calls) {
        return Promise.reject(new Error(`the program made more than ${limits.calls} tool calls (code_max_calls)`));
      }
      calls += 1;
      const id = calls;
      queue.push({ id, name, arguments: encoded });
      return new Promise((resolve, reject) => { pending.set(id, { resolve, reject }); });
    };
    Object.defineProperty(tools, name, { value: Object.freeze(tool), enumerable: true });
  }
  Object.freeze(tools);
  const console = Object.freeze({ log, info: log, warn: log, error: log, debug: log });
  for (const [key, value] of [["tools", tools], ["console", console]]) {
    Object.defineProperty(globalThis, key, { value, writable: false, configurable: false, enumerable: false });
  }
  // The value and the error are cut here to what the answer shows, with their whole length: the host
  // read them whole (a 30 MB value), parsing and scanning them while holding the GIL, so every other
  // client's calls waited up to half a second at each such program's end.
  const settled = (value) => {
    let shown;
    try { shown = value === undefined ? null : JSON.stringify(value); }
    catch (e) { shown = JSON.stringify(text(value)); }
    if (typeof shown !== "string") { outcome = { ok: true, value: null, chars: 0 }; return; }
    outcome = { ok: true, value: shown.slice(0, limits.output), chars: shown.length };
  };
  const failed = (error) => {
    const said = describe(error);
    outcome = { ok: false, error: said.slice(0, limits.error), chars: said.length };
  };
  const fromText = (answer) => {  // a tool's text: parsed when it is JSON (here, under the program's limits)
    try { return JSON.parse(answer); } catch (e) {
      if (e instanceof SyntaxError || e instanceof RangeError) return answer;  // no JSON, or nested too deep
      throw e;  // out of memory (null: QuickJS had no room for an error)
    }
  };
  return (op, id, ok, answer) => {
    if (op === "start") {  // the program, compiled as an async function's body, in the global scope
      AsyncFunction(answer)().then(settled, failed);
      return null;
    }
    if (op === "drain") return JSON.stringify(queue.splice(0, queue.length));
    if (op === "state") {  // no prototype: a toJSON the program puts on Object.prototype is not called
      const state = Object.create(null);
      state.outcome = outcome; state.output = output; state.dropped = dropped;
      return JSON.stringify(state);
    }
    const waiting = pending.get(id);
    pending.delete(id);
    if (waiting !== undefined) {
      if (!ok) waiting.reject(new Error(answer));
      else if (op === "text") waiting.resolve(fromText(answer));
      else waiting.resolve(JSON.parse(answer));
    }
    return null;
  };
})()
"""

# Built-ins that go through a length in C without looking at QuickJS's time limit: on an object of length
# 2**53 - 1 (or an array of 2**32 - 1 holes) `join`, `sort`, `reverse`, `slice`, `concat`, `flat`... ran for
# ever, holding the program's thread and its slot past code_timeout; four such one-line programs took every
# slot for good. Each is guarded before the program runs: a length past `limits.length` is refused, read so that
# the built-in reads the same (a data property, never a getter; proxies are removed, whose traps could show the
# guard one length and the built-in another). `concat` is made an item at a time, each checked just before; `flat`
# and `flatMap` are written in JavaScript, which the time limit stops (an element's getter could change what the
# built-in goes through after any check).
_GUARDS = r"""
  (() => {
    "use strict";  // a guard called on null or undefined says so, as the built-in does
    const { getOwnPropertyDescriptor, getPrototypeOf, defineProperty } = Object;
    const apply = Reflect.apply, isArray = Array.isArray, toObject = Object, spreads = Symbol.isConcatSpreadable;
    const most = limits.length;
    delete globalThis.Proxy;
    const plain = (where, object, key, label) => {  // a data property's value, own or inherited: no getter runs
      for (let holder = object; holder !== null && holder !== undefined; holder = getPrototypeOf(holder)) {
        const own = getOwnPropertyDescriptor(holder, key);
        if (own === undefined) continue;
        if (!("value" in own)) throw new TypeError(`${where}: in a program, ${label} may not be a getter`);
        return own.value;
      }
      return undefined;
    };
    const bounded = (where, object) => {  // the length the built-in will go through, refused past `most`
      const length = isArray(object) ? object.length : plain(where, object, "length", "length");
      if (length !== undefined && typeof length !== "number") {
        throw new TypeError(`${where}: in a program, length must be a number`);
      }
      if (length > most) {
        throw new RangeError(`${where}: a length of ${length} is more than a program may go through at once `
          + `(${most}): the engine could not stop it at the time limit`);
      }
      return length > 0 ? length - length % 1 : 0;
    };
    const method = (owner, name, value) => {
      defineProperty(owner, name, { value, writable: true, enumerable: false, configurable: true });
    };
    const guarded = ["join", "toLocaleString", "reverse", "sort", "copyWithin", "slice", "splice", "shift", "unshift"];
    for (const name of guarded) {
      const native = Array.prototype[name], where = `Array.prototype.${name}`;
      const checked = { [name](...args) { bounded(where, this); return apply(native, this, args); } }[name];
      method(Array.prototype, name, checked);
    }
    const concat = Array.prototype.concat;
    const spreadable = (item) => {
      if (item === null || (typeof item !== "object" && typeof item !== "function")) return false;
      const said = plain("Array.prototype.concat", item, spreads, "Symbol.isConcatSpreadable");
      return said === undefined ? isArray(item) : !!said;
    };
    method(Array.prototype, "concat", { concat(...items) {
      const where = "Array.prototype.concat";
      let total = spreadable(this) ? bounded(where, this) : 1;
      let joined = apply(concat, this, []);
      for (let i = 0; i < items.length; i++) {
        total += spreadable(items[i]) ? bounded(where, items[i]) : 1;
        if (total > most) bounded(where, { length: total });
        joined = apply(concat, joined, [items[i]]);
      }
      return joined;
    } }.concat);
    const toLength = (value) => { const n = +value; return n > 0 ? (n > 2 ** 53 - 1 ? 2 ** 53 - 1 : n - n % 1) : 0; };
    const append = (out, value) => {
      defineProperty(out, out.length, { value, writable: true, enumerable: true, configurable: true });
    };
    const flatInto = (out, source, depth) => {
      const length = toLength(source.length);
      for (let k = 0; k < length; k++) {
        if (!(k in source)) continue;
        const element = source[k];
        if (depth >= 1 && isArray(element)) flatInto(out, element, depth - 1);
        else append(out, element);
      }
    };
    const objectOf = (where, value) => {
      if (value === null || value === undefined) throw new TypeError(`${where} called on null or undefined`);
      return toObject(value);
    };
    method(Array.prototype, "flat", { flat(depth) {
      const out = [], levels = depth === undefined ? 1 : +depth;
      flatInto(out, objectOf("Array.prototype.flat", this), levels === levels ? levels : 0);
      return out;
    } }.flat);
    method(Array.prototype, "flatMap", { flatMap(callback, thisArg) {
      const source = objectOf("Array.prototype.flatMap", this), length = toLength(source.length), out = [];
      if (typeof callback !== "function") throw new TypeError("Array.prototype.flatMap: its callback is no function");
      for (let k = 0; k < length; k++) {
        if (!(k in source)) continue;
        const mapped = apply(callback, thisArg, [source[k], k, source]);
        if (isArray(mapped)) flatInto(out, mapped, 0);
        else append(out, mapped);
      }
      return out;
    } }.flatMap);
    const helpers = typeof Iterator === "function" ? Iterator.prototype : undefined;
    if (helpers !== undefined && typeof helpers.drop === "function") {
      const drop = helpers.drop;
      method(helpers, "drop", { drop(limit) {
        const count = +limit;  // skipped in C at the first next(), as many as asked
        if (count > most) bounded("Iterator.prototype.drop", { length: count });
        return apply(drop, this, [count]);
      } }.drop);
    }
  })();
"""
_LENGTH_BOUND = 1 << 25  # a length the guarded built-ins go through: about a fifth of a second of C at most

# The function body a program is compiled as starts on this line of what the engine reports (its
# header takes two: `(async function anonymous(` and `) {`).
_FIRST_LINE = 3
_SURROGATE = re.compile("[\\ud800-\\udfff]")  # a lone half of a pair, which no answer can carry
# What an object or array of a call's arguments costs the gateway once parsed (a `{}` is a dict of 64 bytes
# and more, and the call path copies it to send it): 8 MB of `{}` in two calls took it from 100 to 860 MB.
_CONTAINER_BYTES = 200
_ERROR_ROOM = 1_000  # an error is cut at the output limit, but never shorter than this (the gateway's own words)


def most_containers(limits: Limits) -> int:
    """The most `{` and `[` a message of a program's engine holds (in strings too: counted in C, a bound): a
    round's arguments (`_calls_of`'s room), each call's own object, or an outcome's value, error and output, each
    cut. Parsed, each costs the gateway up to `_CONTAINER_BYTES`; an engine that escaped its sandbox may send more."""
    cap = limits.output_chars
    return limits.memory_bytes // 2 // _CONTAINER_BYTES + limits.max_calls + 2 * cap + max(cap, _ERROR_ROOM) + 64


_NOT_READ = "the program interfered with the sandbox's own functions, so its answer could not be read"


class Sandbox:
    """Runs one program; `run` blocks its thread until the program is done, so call it off the event loop."""

    def __init__(self, tool_names: list[str], limits: Limits) -> None:
        self.tool_names = tool_names
        self.limits = limits
        self._engine = load_engine()
        self._names = frozenset(tool_names)
        self._seen: set[int] = set()  # the ids of the calls handed out: each once, at most max_calls of them
        self._made = 0  # the calls made (the audit's count): not those refused before (too many, too large)
        self._state: dict[str, Any] = {}
        # The state while the program runs: its output (each character at most six as JSON) and two numbers;
        # at its end, its value or error too, which the prelude cuts to what the answer shows.
        self._running_state_chars = 6 * limits.output_chars + 100
        self._final_state_chars = 6 * (limits.output_chars + max(limits.output_chars, _ERROR_ROOM)) + 200
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

        limits = {
            "names": self.tool_names,
            "output": self.limits.output_chars,
            "error": max(self.limits.output_chars, _ERROR_ROOM),
            "calls": self.limits.max_calls,
            "length": _LENGTH_BOUND,
        }
        host: Any = None
        try:
            prelude = _PRELUDE.replace("GUARDS", _GUARDS).replace("LIMITS", json.dumps(limits))
            host = slice_(lambda: context.eval(prelude))
            slice_(lambda: host("start", 0, False, code))
            while True:
                while slice_(context.execute_pending_job):
                    pass
                text = slice_(lambda: host("state", 0, False, ""))
                self._state = _read(text, self._final_state_chars)
                outcome = self._state["outcome"]
                if outcome is not None:
                    return self._finish(
                        outcome["ok"], outcome.get("value"), outcome.get("error"), chars=outcome["chars"]
                    )
                if len(text) > self._running_state_chars:
                    # Larger than the prelude writes while the program runs: a program that inflated it
                    # had the host parse it after every round, holding the GIL, so other callers waited.
                    raise _Tampered
                batch, refused = self._calls_of(slice_(lambda: host("drain", 0, False, "")))
                if not batch and not refused:
                    return self._finish(False, None, "the program awaits a promise that nothing will settle")
                self._made += len(batch)
                answers = [*refused, *(perform(batch, deadline - time.monotonic()) if batch else [])]
                for answer in answers:
                    slice_(
                        lambda answer=answer: host(
                            "text" if answer.raw else "settle", answer.id, answer.ok, answer.text
                        )
                    )
        except ProgramStopped:
            self._read_state(host, context)
            return self._finish(False, None, self._timeout(), "timeout")
        except (engine.JSException, engine.StackOverflow) as exc:
            self._read_state(host, context)
            return self._engine_error(str(exc))
        except _Tampered:
            return self._finish(False, None, _NOT_READ)
        except Exception:  # the gateway's side failed (it is stopping, say): the runtime is freed on this thread
            logger.exception("code mode: a program could not be run to its end")
            return self._finish(False, None, "the gateway could not run the program to its end")

    def _calls_of(self, drained: Any) -> tuple[list[PendingCall], list[Settled]]:
        """The calls a round drained, checked here (the program may have forged the queue), counted against
        `max_calls` here too; and the answers for those refused on the way (their promises throw)."""
        try:
            items = json.loads(drained)
        except (TypeError, ValueError, RecursionError):
            raise _Tampered from None
        if type(items) is not list:
            raise _Tampered
        batch: list[PendingCall] = []
        refused: list[Settled] = []
        # The arguments of a round are held parsed until it ends, outside the program's heap: their objects and
        # arrays may cost half its memory, as its values may (counted in C, brackets in strings too: a bound).
        room = self.limits.memory_bytes // 2 // _CONTAINER_BYTES
        for item in items:
            if forged_call(item, self._seen, self._names, str):
                raise _Tampered
            call_id, name = item["id"], item["name"]
            self._seen.add(call_id)
            if len(self._seen) > self.limits.max_calls:
                limit = self.limits.max_calls
                refused.append(
                    Settled(call_id, False, f"the program made more than {limit} tool calls (code_max_calls)")
                )
                continue
            size = len(item["arguments"].encode())
            if size > self.limits.value_bytes:  # the other way too: a client's request is held to a few MB
                limit = self.limits.value_bytes
                refused.append(
                    Settled(
                        call_id,
                        False,
                        f"tools.{name}: its arguments are {size} bytes as JSON, more than a program may send in a "
                        f"call ({limit}, code_value_bytes)",
                    )
                )
                continue
            containers = item["arguments"].count("{") + item["arguments"].count("[")
            if containers > room:
                megabytes = self.limits.memory_bytes // (1024 * 1024)
                refused.append(
                    Settled(
                        call_id,
                        False,
                        f"tools.{name}: the arguments of the calls awaited together hold more objects and arrays "
                        f"than the gateway takes from a program at once (about {containers} in this call's, "
                        f"{self.limits.memory_bytes // 2 // _CONTAINER_BYTES} at most together for {megabytes} MB, "
                        "code_memory_mb): send fewer, or await fewer calls at a time",
                    )
                )
                continue
            room -= containers
            try:
                arguments = json.loads(item["arguments"])
            except RecursionError:
                refused.append(Settled(call_id, False, f"tools.{name}: its arguments are nested too deeply"))
                continue
            except ValueError:
                raise _Tampered from None
            if type(arguments) is not dict:
                raise _Tampered
            batch.append(PendingCall(call_id, name, arguments))
        return batch, refused

    def _read_state(self, host: Any, context: Any) -> None:
        """What the program printed before the engine stopped it (best effort: it may be out of memory)."""
        if host is None:
            return
        try:
            context.set_time_limit(1.0)
            context.set_memory_limit(self.limits.memory_bytes + 8 * 1024 * 1024)  # room to read the output
            self._state = _read(host("state", 0, False, ""), self._final_state_chars)
        except Exception:
            pass

    def _timeout(self) -> str:
        return f"the program ran out of time ({self.limits.seconds:g} s)"

    def _engine_error(self, message: str) -> Outcome:
        # Only its start is read: a replaced built-in can throw a value as long as the program's memory from
        # inside the host's own call, and splitting and searching all of it held the GIL (0.13 s for 30 MB).
        text = message.lstrip()
        head = text[: max(self.limits.output_chars, _ERROR_ROOM) + 2_000]  # the engine's stack lines follow
        lines = head.rstrip().splitlines() or ["the engine stopped the program"]
        end = text.find("\n")
        chars = end if end >= 0 else len(text.rstrip())  # its first line's whole length, for the cut's note
        if lines[0] == "null":  # what QuickJS throws when it has no room left to make the error itself
            lines, chars = ["InternalError: out of memory"], 0
        line = re.search(r"<input>:(\d+)", head)
        number = int(line.group(1)) - _FIRST_LINE + 1 if line else 0
        where = f" (line {number})" if number >= 1 else ""
        return self._finish(False, None, lines[0] + where, chars=chars)

    def _finish(
        self, ok: bool, value: str | None, error: str | None, kind: str | None = None, chars: int | None = None
    ) -> Outcome:
        """The outcome as the answer shows it; `chars`: the whole length of a value or error the prelude cut."""
        if error is not None and "InternalError: out of memory" in error:
            error, kind = f"the program ran out of memory ({self.limits.memory_bytes // (1024 * 1024)} MB)", "memory"
        elif error is not None and "InternalError: interrupted" in error:
            error, kind = self._timeout(), "timeout"
        state = self._state
        cap = self.limits.output_chars
        output, dropped = state.get("output", ""), state.get("dropped", 0)
        if len(output) > cap:  # the program's own cap is its to spoil: this one holds
            output, dropped = output[:cap], dropped + len(output) - cap
        if value is not None:
            value = _cut(value, cap, chars)
        if error is not None:  # a thrown value can be as long as the program likes
            error = _cut(error, max(cap, _ERROR_ROOM), chars)
        return Outcome(
            ok=ok,
            value=_whole(value),
            error=_whole(error),
            output=_whole(output) or "",
            output_dropped=dropped,
            calls=self._made,
            kind=kind or ("ok" if ok else "error"),
        )


def forged_call(item: Any, seen: set[int], names: frozenset[str], arguments: type) -> bool:
    """Whether `item` is no call the prelude (or the engine's worker, `arguments` parsed) writes: not an object,
    an id handed out before or not a number, a name not among the program's tools, arguments of another type."""
    return (
        type(item) is not dict
        or type(item.get("id")) is not int
        or item["id"] in seen
        or item.get("name") not in names
        or type(item.get("arguments")) is not arguments
    )


class _Tampered(Exception):
    """What the program's side of the channel said is not what the prelude writes."""


def _read(text: Any, most: int) -> dict[str, Any]:
    """The program's state as the prelude writes it, checked: anything else is a program that tampered.
    Longer than `most` characters it is not even parsed (the prelude writes no more)."""
    if type(text) is str and len(text) > most:
        raise _Tampered
    try:
        state = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise _Tampered from None
    if type(state) is not dict or type(state.get("output")) is not str:
        raise _Tampered
    dropped, outcome = state.get("dropped"), state.get("outcome")
    if type(dropped) is not int or dropped < 0:
        raise _Tampered
    if outcome is not None:
        if type(outcome) is not dict or type(outcome.get("ok")) is not bool:
            raise _Tampered
        if outcome["ok"] and type(outcome.get("value")) not in (str, type(None)):
            raise _Tampered
        if not outcome["ok"] and type(outcome.get("error")) is not str:
            raise _Tampered
        shown = outcome.get("value") if outcome["ok"] else outcome["error"]
        if type(outcome.get("chars")) is not int or outcome["chars"] < len(shown or ""):
            raise _Tampered
    return state


def _cut(text: str, room: int, chars: int | None = None) -> str:
    """`text` to `room` characters, saying how many more there were (`chars`: its whole length, when the
    prelude cut it already)."""
    whole = max(len(text), chars or 0)
    if whole <= room:
        return text
    return f"{text[:room]}… [cut: {whole - room} more characters]"


def _whole(text: str | None) -> str | None:
    """`text` with each lone half of a surrogate pair as U+FFFD: JavaScript strings may hold one, no answer can."""
    return _SURROGATE.sub("\ufffd", text) if text else text
