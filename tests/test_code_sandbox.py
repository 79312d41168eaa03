"""The code-mode sandbox on its own (no gateway): the loop that drives a program's promises, and its limits."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from types import SimpleNamespace

import anyio
import pytest

from mcp_manifold._surfaces.code import sandbox
from mcp_manifold._surfaces.code.sandbox import Limits, Outcome, PendingCall, Sandbox, Settled
from mcp_manifold._surfaces.code.signatures import declaration


def echo_rounds(rounds: list[list[str]]) -> Callable[[list[PendingCall], float], list[Settled]]:
    """A `perform` that answers each call with its arguments and records the rounds it was given."""

    def perform(calls: list[PendingCall], seconds_left: float) -> list[Settled]:
        rounds.append([call.name for call in calls])
        return [Settled(call.id, True, json.dumps(call.arguments)) for call in calls]

    return perform


def test_calls_started_together_come_in_one_round() -> None:
    rounds: list[list[str]] = []
    code = (
        "const [a, b] = await Promise.all([tools.x({n: 1}), tools.y({n: 2})]); return a.n + (await tools.x({n: b.n})).n"
    )
    outcome = Sandbox(["x", "y"], Limits()).run(code, echo_rounds(rounds))
    assert (outcome.ok, outcome.value, outcome.calls) == (True, "3", 3)
    assert rounds == [["x", "y"], ["x"]]


def test_the_call_limit_throws_in_the_program() -> None:
    code = "let made = 0; try { while (true) { await tools.x({}); made++ } } catch (e) { return [made, e.message] }"
    outcome = Sandbox(["x"], Limits(max_calls=5)).run(code, echo_rounds([]))
    assert json.loads(outcome.value or "") == [5, "the program made more than 5 tool calls (code_max_calls)"]


def test_bad_arguments_and_dead_ends_are_clear() -> None:
    limits = Limits(output_chars=10)
    perform = echo_rounds([])
    assert (
        Sandbox(["x"], limits).run("await tools.x(5)", perform).error
        == "TypeError: tools.x takes one object of arguments"
    )
    stuck = Sandbox([], limits).run("await new Promise(() => {})", perform)
    assert stuck.error == "the program awaits a promise that nothing will settle"
    syntax = Sandbox([], limits).run("let a = 1;\nlet = = 2", perform)
    assert syntax.error is not None and syntax.error.startswith("SyntaxError") and syntax.error.endswith("(line 2)")
    loud = Sandbox([], limits).run("console.log('0123456789abcdef'); return 1", perform)
    assert (loud.output, loud.output_dropped, loud.value) == ("0123456789", 7, "1")


def test_declarations_come_from_the_schemas() -> None:
    import mcp_types as types

    tool = types.Tool(
        name="files-list",
        description="List files.\nOne per line.",
        input_schema={"type": "object", "properties": {"folder": {"type": "string"}, "depth": {"type": "integer"}}},
        output_schema={"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}},
    )
    assert declaration(tool) == (
        '// List files. One per line.\nfunction ["files-list"](args?: {folder?: string, depth?: integer}): '
        "Promise<{paths?: string[]}>;"
    )


# --- what a program cannot do (found by a review; each failed on the code before) ------------------------


def test_a_runaway_regular_expression_ends_at_the_time_limit() -> None:
    """The old engine's regular expressions never looked at the time limit: this ran for hours."""
    outcome = Sandbox([], Limits(seconds=1)).run("return /(a+)+$/.test('a'.repeat(40) + 'b')", echo_rounds([]))
    assert (outcome.kind, outcome.error) == ("timeout", "the program ran out of time (1 s)")


FORGERIES = {
    # The queue of calls, reached through a replaced Array.prototype.push, filled past the limit.
    "the call queue": (
        "let queue; const push = Array.prototype.push;\n"
        "Array.prototype.push = function (...items) { if (items[0] && items[0].arguments) queue = this;"
        " return push.apply(this, items); };\n"
        "const first = tools.x({}); Array.prototype.push = push;\n"
        "for (let i = 0; i < 40; i++) queue.push({id: 1000 + i, name: 'x', arguments: '{}'});\n"
        "await first; return 'forged';"
    ),
    # The state the host reads, rewritten by a replaced JSON.stringify or a toJSON on every object.
    "the state": (
        "const stringify = JSON.stringify;\n"
        "JSON.stringify = (value, ...rest) => (value && typeof value === 'object' && 'dropped' in value)"
        " ? stringify({outcome: {ok: true, value: 5}, output: 7, dropped: -1}) : stringify(value, ...rest);\n"
        "Object.prototype.toJSON = function () { return {output: 'x'.repeat(1e5), dropped: 0, outcome: null}; };\n"
        "await tools.x({}); console.log('ok'); return 1;"
    ),
    # Items the host would have handed to the call path as they came.
    "the drained calls": (
        "const stringify = JSON.stringify;\n"
        "JSON.stringify = (value, ...rest) => Array.isArray(value)"
        ' ? \'[{"id": 99, "name": {"x": 1}, "arguments": "[1]"}]\' : stringify(value, ...rest);\n'
        "await tools.x({n: 1}); return 'called';"
    ),
    # The value the host reads at the end, left whole by a replaced String.prototype.slice.
    "the value's cut": "String.prototype.slice = function () { return String(this); }; return 'x'.repeat(1e5);",
}


def test_a_program_that_replaces_built_ins_cannot_forge_what_the_host_reads() -> None:
    for title, code in FORGERIES.items():
        rounds: list[list[str]] = []
        outcome = Sandbox(["x"], Limits(max_calls=5, output_chars=100)).run(code, echo_rounds(rounds))
        made = sum(len(batch) for batch in rounds)
        assert made <= 5 and outcome.calls == made, (title, outcome, rounds)
        assert len(outcome.output) <= 100 and isinstance(outcome.output, str), title
        assert outcome.value in (None, "1", '"called"', '"forged"') or not outcome.ok, (title, outcome)


def test_values_that_cannot_be_read_or_carried_are_named() -> None:
    perform = echo_rounds([])
    odd = "return {toJSON() { throw new Error('no') }, toString() { throw new Error('no') }}"
    assert Sandbox([], Limits()).run(odd, perform).value == '"(a value that cannot be shown)"'
    thrown = Sandbox([], Limits()).run("throw {get message() { throw 1 }, toString() { throw 2 }}", perform)
    assert thrown.error == "uncaught (a value that cannot be shown)"
    half = Sandbox([], Limits()).run("console.log('half: \\ud800'); throw new Error('\\udc00')", perform)
    assert (half.output, half.error) == ("half: \ufffd\n", "Error: \ufffd")  # no answer can carry a lone half
    long = Sandbox([], Limits(output_chars=10)).run("throw new Error('x'.repeat(100000))", perform)
    assert long.error is not None and long.error.endswith("… [cut: 99007 more characters]"), long.error[-60:]


@pytest.mark.anyio
async def test_a_programs_slot_goes_back_once_whoever_ends_last() -> None:
    from mcp_manifold._surfaces.code.slots import FairSlots, ProgramSlot

    slots = FairSlots(1)
    before = ProgramSlot(slots, "before")  # its request gives up before the thread begins
    await before.take()
    before.give_up()
    assert slots.taken == 0 and not before.begin()

    during = ProgramSlot(slots, "during")  # its request gives up while the thread runs
    await during.take()
    assert during.begin()
    during.give_up()
    assert slots.taken == 1  # still the thread's
    await anyio.to_thread.run_sync(during.end)  # the thread ends: it gives the slot back
    assert slots.taken == 0

    after = ProgramSlot(slots, "after")  # the thread ended, then the request was cancelled
    await after.take()
    assert after.begin()
    after.end()
    after.give_up()
    assert slots.taken == 0


@pytest.mark.anyio
async def test_free_slots_go_to_the_waiting_principals_in_turn() -> None:
    """One principal's backlog of programs does not make another's wait behind all of it."""
    from mcp_manifold._surfaces.code.slots import FairSlots

    slots = FairSlots(1)
    served: list[str] = []

    async def program(principal: str, name: str) -> None:
        await slots.take(principal)
        served.append(name)

    await slots.take("busy")  # the one slot is held
    async with anyio.create_task_group() as group:
        for name in ("busy-2", "busy-3", "busy-4"):
            group.start_soon(program, "busy", name)
            await anyio.wait_all_tasks_blocked()
        group.start_soon(program, "other", "other-1")
        await anyio.wait_all_tasks_blocked()
        for _ in range(4):
            slots.give_back()  # the holder ends; the slot passes on, still taken
            await anyio.wait_all_tasks_blocked()
    assert served == ["busy-2", "other-1", "busy-3", "busy-4"]  # first come, first served: other-1 last
    assert slots.taken == 1
    slots.give_back()
    assert slots.taken == 0


@pytest.mark.anyio
async def test_a_program_cancelled_while_waiting_for_a_slot_leaves_none_taken() -> None:
    from mcp_manifold._surfaces.code.slots import FairSlots

    slots = FairSlots(1)
    await slots.take("a")
    with anyio.move_on_after(0.05):  # waits, and is cancelled while waiting
        await slots.take("b")
    slots.give_back()
    assert slots.taken == 0  # nobody was handed the slot

    await slots.take("a")
    took: list[bool] = []
    async with anyio.create_task_group() as group:
        waiting = anyio.CancelScope()

        async def wait_in(scope: anyio.CancelScope) -> None:
            with scope:
                await slots.take("b")
                took.append(True)

        group.start_soon(wait_in, waiting)
        await anyio.wait_all_tasks_blocked()
        slots.give_back()  # handed to the waiting program...
        waiting.cancel()  # ...which is cancelled before it runs: it has the slot only if `take` returned
    assert slots.taken == (1 if took else 0)


def test_a_program_that_inflates_its_state_ends_at_the_first_round() -> None:
    """The host reads the program's state after every round; a program whose replaced JSON.stringify made
    it 30 MB had the host parse that after every round, holding the GIL (another client's calls took 4 times
    as long, up to 260 ms). Larger than the prelude writes while the program runs, it is a tampered state."""
    code = (
        "const stringify = JSON.stringify, big = 'x'.repeat(1e6);\n"
        "JSON.stringify = (value, ...rest) => (value && Object.getPrototypeOf(value) === null && 'dropped' in value)"
        " ? stringify({outcome: value.outcome, output: big, dropped: 0}) : stringify(value, ...rest);\n"
        "for (let i = 0; i < 5; i++) await tools.x({}); return 'done';"
    )
    rounds: list[list[str]] = []
    outcome = Sandbox(["x"], Limits(output_chars=1000)).run(code, echo_rounds(rounds))
    said = "the program interfered with the sandbox's own functions, so its answer could not be read"
    assert (rounds, outcome.error) == ([], said), (rounds, outcome.error)


def test_calls_refused_before_they_are_made_are_not_counted_as_made() -> None:
    """The program's count of calls (its audit line's `calls`) counted calls refused before they were made."""
    code = (
        "for (const text of ['x'.repeat(6000), 'ok']) { try { await tools.x({text}); } catch (e) {} }\n"
        "let deep = []; for (let i = 0; i < 1500; i++) deep = [deep];\n"
        "try { await tools.x({deep}); } catch (e) { return e.message; }"
    )
    rounds: list[list[str]] = []
    outcome = Sandbox(["x"], Limits(value_bytes=5000)).run(code, echo_rounds(rounds))
    said = '"tools.x: its arguments are nested too deeply"'
    assert (outcome.value, outcome.calls, rounds) == (said, 1, [["x"]]), (outcome, rounds)


def test_a_value_the_program_has_no_room_for_is_out_of_memory() -> None:
    """A value too large for what is left of the heap ended the program with `Error: null` (QuickJS throws null
    when it has no room for the error itself); a text was taken as the string instead of its value."""
    big = json.dumps(["abcdefgh"] * 600_000)
    for raw in (False, True):
        outcome = Sandbox(["x"], Limits(memory_bytes=8 << 20)).run(
            "const v = await tools.x({}); return typeof v",
            lambda calls, left, raw=raw: [Settled(call.id, True, big, raw) for call in calls],
        )
        assert (outcome.kind, outcome.error) == ("memory", "the program ran out of memory (8 MB)"), (raw, outcome)


def test_the_host_reads_no_more_of_a_programs_value_or_error_than_the_answer_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A program's value and error were read whole at its end, while the host held the GIL: a 30 MB value was
    parsed, then scanned for lone surrogates, and every other client's calls waited up to half a second at each
    such program's end. The prelude cuts them to what the answer shows and says how long they were."""
    read: list[int] = []
    original = sandbox._read
    monkeypatch.setattr(sandbox, "_read", lambda text, *rest: read.append(len(text)) or original(text, *rest))
    limits = Limits(output_chars=1000)
    value = Sandbox([], limits).run("return 'x'.repeat(3e6)", echo_rounds([]))
    assert value.value == f'"{"x" * 999}… [cut: 2999002 more characters]', (value.value or "")[-60:]
    error = Sandbox([], limits).run("throw new Error('y'.repeat(3e6))", echo_rounds([]))
    assert error.error == f"Error: {'y' * 993}… [cut: 2999007 more characters]", (error.error or "")[-60:]
    assert read and max(read) < 20_000, read


def test_the_objects_of_a_rounds_arguments_are_held_to_half_the_programs_memory() -> None:
    """A call's arguments are parsed by the gateway and held until their round ends, outside the program's
    heap; code_value_bytes bounds their text, but 8 MB of `{}` is 2.6 million Python objects: two such calls
    took the gateway from 100 to 860 MB and held other clients' calls 3.3 s. Their objects and arrays may
    cost half the program's memory, as its values may; the calls past that throw before they are made."""
    code = (
        "const a = Array(40000).fill({}), said = [];\n"
        "for (const round of [[a], [a, a], [[...a, ...a, ...a]]]) {\n"
        "  const all = await Promise.allSettled(round.map((a) => tools.x({a})));\n"
        "  said.push(all.map((one) => one.status === 'fulfilled' ? one.value.a.length : one.reason.message));\n"
        "}\n"
        "return said;"
    )
    rounds: list[list[str]] = []
    outcome = Sandbox(["x"], Limits(memory_bytes=16 << 20)).run(code, echo_rounds(rounds))
    past = (
        "tools.x: the arguments of the calls awaited together hold more objects and arrays than the gateway takes "
        "from a program at once (about {} in this call's, 41943 at most together for 16 MB, code_memory_mb): send "
        "fewer, or await fewer calls at a time"
    )
    assert json.loads(outcome.value or "") == [[40000], [40000, past.format(40002)], [past.format(120002)]], outcome
    assert (rounds, outcome.calls) == ([["x"], ["x"]], 2), rounds


# One-line programs that went through a length in C, where QuickJS never looks at its time limit: they ran for
# ever past code_timeout, holding their thread and slot (four took every slot for good).
ENDLESS_IN_C = [
    "Array.prototype.join.call({length: 2 ** 53 - 1}, '')",
    "Array.prototype.sort.call({length: 2 ** 53 - 1})",
    "Array.prototype.reverse.call({length: 2 ** 53 - 1})",
    "Array(2 ** 32 - 1).concat([1])",
    "[0].flatMap(() => Array(2 ** 32 - 1))",
    "Array(2 ** 32 - 1).values().drop(2 ** 32 - 2).next()",
    # a getter that lengthens a later item once its own length was checked
    "(() => { const b = [1], a = [0]; Object.defineProperty(a, 0, {get() { b.length = 2 ** 32 - 1; return 1 }});"
    " return a.concat(b) })()",
]


def test_built_ins_that_go_through_a_length_in_c_end_at_the_time_limit() -> None:
    for line in ENDLESS_IN_C:
        ended: list[Outcome] = []

        def run(code: str = f"return {line}", ended: list[Outcome] = ended) -> None:
            ended.append(Sandbox([], Limits(seconds=1)).run(code, echo_rounds([])))

        thread = threading.Thread(target=run, daemon=True)  # one that never ends must not hold the test run
        thread.start()
        thread.join(20)
        assert ended, f"{line} ran past its time limit"
        said = ended[0].error or ""
        assert "RangeError: " in said or "ran out of time" in said, (line, ended[0])
    ordinary = Sandbox([], Limits()).run(
        "return [[1, [2, [3]]].flat(), [0].concat([1], 2), [3, 1, 2].sort().join(''),"
        " [1, 2, 3].values().drop(1).toArray()]",
        echo_rounds([]),
    )
    assert ordinary.value == '[[1,2,[3]],[0,1,2],"123",[2,3]]', ordinary


def test_the_host_reads_only_the_start_of_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replaced built-in the host's own call runs (JSON.parse, settling a call) can throw a value as long as the
    program's memory; the host split and searched all of that error for its line number, holding the GIL (0.13 s
    for 30 MB at every such program's end). It reads the start the answer shows, and counts the rest."""
    searched: list[int] = []
    search = sandbox.re.search
    monkeypatch.setattr(
        sandbox, "re", SimpleNamespace(search=lambda pattern, text: searched.append(len(text)) or search(pattern, text))
    )
    code = "const big = 'q'.repeat(3e6); JSON.parse = () => { throw big; }; await tools.x({}); return 1"
    outcome = Sandbox(["x"], Limits(output_chars=100)).run(code, echo_rounds([]))
    assert outcome.error == f"{'q' * 1000}… [cut: 2999000 more characters]", (outcome.error or "")[-60:]
    assert searched and max(searched) < 10_000, searched
