"""The code-mode sandbox on its own (no gateway): the loop that drives a program's promises, and its limits."""

from __future__ import annotations

import json
from collections.abc import Callable

from mcp_manifold._surfaces.code.sandbox import Limits, PendingCall, Sandbox, Settled
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
