"""The `code` surface: the model writes a JavaScript program, tools are its functions, only its output returns.

Two tools:

- `search_tools(query, limit)`: the matching tools the caller may use, as TypeScript-style declarations;
- `execute_code(code)`: runs a program (sandbox.py) in which `await tools.<name>(args)` calls a tool.

Every call a program makes goes down the one call path with the program's own request, so the caller's
profile, pins and quarantine, rate and in-flight limits, audit, metrics and tracing hold as for a direct
call; `tools` holds only the names the caller's view has, and each call is checked against the view
again. The program runs on a worker thread; its tool calls run here on the event loop, a round of them
at a time (what the program started before it awaited), concurrently.

A tool's value is its structured content, else its text (parsed when it is JSON); results never spill
inside a program: a large one is an ordinary value up to `code_value_bytes`. A server that asks the
client something mid-call reaches a session-era client as with any call; a 2026-07-28 client cannot be
asked in the middle of a program, so that call throws an Error saying so.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp_types as types

from mcp_manifold._core.clients import Request
from mcp_manifold._core.programs import ProgramReport
from mcp_manifold._core.results import SpillPolicy, ToolAnswer
from mcp_manifold._core.router import Target, ToolCall, tool_target
from mcp_manifold._errors import InvalidRequest, ManifoldError
from mcp_manifold._surfaces.base import Surface
from mcp_manifold._surfaces.code.engine_processes import MODULE as ENGINE_MODULE
from mcp_manifold._surfaces.code.engine_processes import IsolatedSandbox
from mcp_manifold._surfaces.code.misnamed import with_name_hints
from mcp_manifold._surfaces.code.sandbox import (
    Limits,
    Outcome,
    PendingCall,
    ProgramStopped,
    Settled,
    load_engine,
)
from mcp_manifold._surfaces.code.signatures import declaration
from mcp_manifold._surfaces.code.slots import FairSlots, ProgramSlot

logger = logging.getLogger(__name__)

SEARCH = "search_tools"
EXECUTE = "execute_code"
_NEVER_SPILL = SpillPolicy()  # a program's values stay in the program
_CALLS_AT_ONCE = 8  # of one round of a program's calls


def tool_text(result: types.CallToolResult) -> str | None:
    """The tool's text when `await tools.x(...)` gives that (parsed by the program when it is JSON): a result
    of text blocks only, without structured content."""
    blocks = result.content
    if result.structured_content is None and blocks and all(isinstance(block, types.TextContent) for block in blocks):
        return "".join(block.text for block in blocks)  # type: ignore[union-attr]
    return None


def tool_value(result: types.CallToolResult) -> Any:
    """What `await tools.x(...)` gives otherwise: structured content, else the content blocks in wire form."""
    if result.structured_content is not None:
        return result.structured_content
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]


def error_text(result: types.CallToolResult) -> str:
    text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent)).strip()
    return text or "the tool failed without a message"


class CodeSurface(Surface):
    name = "code"
    needs_catalog = False  # it lists only its own two tools

    def __init__(self, host: Any) -> None:
        super().__init__(host)
        load_engine()  # a gateway with `expose: [code]` and no engine says so at start, not at the first call
        self._programs: FairSlots | None = None
        # Each program's engine runs in a process of its own, killed past its deadline (`engine_processes.py`).
        self._engines = host.worker_processes(ENGINE_MODULE, host.settings.code_max_programs)

    async def start(self) -> None:
        self._programs = FairSlots(self.host.settings.code_max_programs)

    async def run(self) -> None:
        """Keep an engine process ready for the first program, and stop every idle one with the gateway."""
        try:
            await anyio.to_thread.run_sync(self._engines.warm)
            await anyio.sleep_forever()
        finally:
            self._engines.close()

    def reserved_tool_names(self) -> list[str]:
        return [SEARCH, EXECUTE]

    def limits(self) -> Limits:
        settings = self.host.settings
        return Limits(
            seconds=settings.code_timeout,
            memory_bytes=settings.code_memory_mb * 1024 * 1024,
            output_chars=settings.code_output_chars,
            max_calls=settings.code_max_calls,
            value_bytes=settings.code_value_bytes,
        )

    # --- what the client sees --------------------------------------------------------------------

    def list_tools(self, request: Request) -> list[types.Tool]:
        limits = self.limits()
        search = types.Tool(
            name=SEARCH,
            description=(
                f"Find tools for a program run with {EXECUTE}: the best matches for what you want to do, as "
                "TypeScript declarations (call one as `await tools.<name>(args)`)."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in plain words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                },
                "required": ["query"],
            },
        )
        execute = types.Tool(
            name=EXECUTE,
            description=(
                "Run a JavaScript program (top-level await; `return` gives a value) where every tool found with "
                f"{SEARCH} is `await tools.<name>({{...args}})`. A tool gives its structured result, else its "
                "text (parsed when JSON); a failing tool throws an Error. Only what you console.log and what you "
                f"return comes back (first {limits.output_chars} characters), so filter, join and loop in the "
                f"program. No files, network, modules or timers; {limits.seconds:g} s and "
                f"{limits.memory_bytes // (1024 * 1024)} MB at most."
            ),
            input_schema={
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The program's JavaScript source."}},
                "required": ["code"],
            },
        )
        return [search, execute]

    def owns_tool(self, request: Request, name: str) -> bool:
        return name in (SEARCH, EXECUTE)

    async def call_tool(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        if name == SEARCH:  # a search costs the gateway work: under the caller's limits, audited
            return await self.work(request, SEARCH, "search", lambda: self._search(request, arguments))
        return await self._execute(request, arguments)

    # --- search_tools ----------------------------------------------------------------------------

    async def _search(self, request: Request, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest(f"{SEARCH} needs 'query': a non-empty string saying what you want to do")
        limit = arguments.get("limit", 10)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
            raise InvalidRequest(f"'limit' must be an integer from 1 to 50, got {limit!r}")
        await self.host.ensure_catalog(request)
        matches = await self.host.view(request).search(query, limit=limit)
        if not matches:
            return _text(f"No tools match {query!r}.")
        return _text("\n".join(declaration(match.entry.exposed) for match in matches))

    # --- execute_code ----------------------------------------------------------------------------

    async def _execute(self, request: Request, arguments: dict[str, Any]) -> types.CallToolResult:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            raise InvalidRequest(f"{EXECUTE} needs 'code': the JavaScript source of a program")
        await self.host.ensure_catalog(request)
        names = [entry.name for entry in self.host.view(request).tool_entries()]
        sandbox = IsolatedSandbox(self._engines, names, self.limits())
        answer: list[types.CallToolResult] = []

        async def run() -> ProgramReport:
            outcome = await self._run(request, sandbox, code)
            if not outcome.ok and outcome.error:  # a misspelt tool was only "TypeError: not a function"
                outcome = dataclasses.replace(outcome, error=with_name_hints(outcome.error, code, names))
            result = _answer(outcome, sandbox.limits)
            answer.append(result)
            size = sum(len(block.text) for block in result.content if isinstance(block, types.TextContent))
            return ProgramReport("ok" if outcome.ok else "error", outcome.error, outcome.calls, size)

        await self.host.calls.run_program(request, Target("", EXECUTE, EXECUTE, self.name), run)
        return answer[0]

    async def _run(self, request: Request, sandbox: IsolatedSandbox, code: str) -> Outcome:
        cancelled = anyio.get_cancelled_exc_class()

        def perform(batch: list[PendingCall], seconds_left: float) -> list[Settled]:
            try:
                return anyio.from_thread.run(self._round, request, sandbox, batch, seconds_left)
            except cancelled:  # the round was cancelled (the gateway stopping): it ends the program on its thread
                raise ProgramStopped from None

        if self._programs is None:  # made on the event loop, at the first program if `start` did not run
            self._programs = FairSlots(self.host.settings.code_max_programs)
        slot = ProgramSlot(self._programs, request.caller.principal)
        await slot.take()

        def run_in_its_slot() -> Outcome | None:
            if not slot.begin():
                return None  # its request gave up before the thread began: nothing runs
            try:
                return sandbox.run(code, perform)
            finally:
                slot.end()

        try:
            outcome = await anyio.to_thread.run_sync(run_in_its_slot, abandon_on_cancel=True)
        except BaseException:
            sandbox.stopped = True  # a cancelled request leaves its thread: the next slice ends it
            slot.give_up()
            raise
        slot.free()
        assert outcome is not None
        return outcome

    async def _round(
        self, request: Request, sandbox: IsolatedSandbox, batch: list[PendingCall], seconds_left: float
    ) -> list[Settled]:
        """One round of a program's calls, concurrently; calls still running at its deadline fail."""
        if sandbox.stopped:  # its request is gone: no call is made for it any more
            return [Settled(call.id, False, "the program was stopped") for call in batch]
        answers: dict[int, Settled] = {}
        limiter = anyio.CapacityLimiter(_CALLS_AT_ONCE)
        # The answers are held here, outside the program's heap limit, until the round ends: a round of a
        # thousand 8 MB values took gigabytes of the gateway's memory. A round may bring back half the heap
        # (the program holds all of it at once, beside its own data); the calls past that throw.
        room = [sandbox.limits.memory_bytes // 2]

        async def one(call: PendingCall) -> None:
            async with limiter:
                answer = await self._call(request, sandbox.limits, call)
            if len(answer.text) > room[0]:
                answer = _past_room(call, sandbox.limits)
            room[0] -= len(answer.text)
            answers[call.id] = answer

        with anyio.move_on_after(max(seconds_left, 0.0)):
            async with anyio.create_task_group() as group:
                for call in batch:
                    group.start_soon(one, call)
        late = f"the program ran out of time ({sandbox.limits.seconds:g} s) waiting for this call"
        return [answers.get(call.id) or Settled(call.id, False, late) for call in batch]

    async def _call(self, request: Request, limits: Limits, call: PendingCall) -> Settled:
        if not self.host.holds_profile(request.caller):
            # A reload gave its principal another profile, took its API key away or revoked its token: the session's
            # next request is refused, and so is its program's next call (before, a program went on to its end).
            return Settled(
                call.id,
                False,
                f"tools.{call.name}: this program's caller no longer holds profile {request.caller.profile!r} "
                "or its credential (an API key taken out, a token revoked: the configuration was reloaded); open a "
                "new session",
            )
        try:
            # The view again, now: a tool quarantined or no longer allowed since the program started is unknown.
            target = tool_target(self.host.view(request), call.name, self.name)
            # Without the client's progress token: each call's progress went out on it, so the client saw the
            # progress of calls made together interleaved and each later call's start over (1, 1, 2, 2, ...),
            # where a token's progress must increase (the proxy's batches strip it for the same reason).
            made = ToolCall(target, call.arguments, spill=_NEVER_SPILL)
            result = await self.host.calls.call_tool(request.without_progress(), made)
        except ManifoldError as exc:  # unknown or not allowed (worded alike), quarantined, rate limited
            return Settled(call.id, False, str(exc))
        except Exception:
            logger.exception("code mode: the call of %s failed", call.name)
            return Settled(call.id, False, f"tools.{call.name}: the gateway failed to make the call")
        if isinstance(result, types.InputRequiredResult):
            # No retry will come: a session-era server's call held for one (held_call_timeout, 300 s) kept
            # waiting on its question, so each such call of a program tied the server up for nothing.
            self.host.calls.give_up(result)
            return Settled(
                call.id,
                False,
                f"tools.{call.name} asked the client a question in the middle of the call, which a program "
                "cannot relay to a client on MCP 2026-07-28: call this tool directly",
            )
        if result.is_error:
            return Settled(call.id, False, error_text(result))
        # A text goes to the program as it is, which parses it: parsing and encoding it again here, on the
        # event loop, held every other client's calls (up to 0.76 s a call, for a text of 7.8 MB).
        text = tool_text(result)
        raw = text is not None
        if text is None:
            try:
                text = json.dumps(tool_value(result), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            except ValueError:  # NaN or Infinity: no JSON, and the program's parser would end the whole program
                return Settled(
                    call.id, False, f"tools.{call.name} returned a number that is not finite (NaN or Infinity)"
                )
        size = len(text.encode())
        if size > limits.value_bytes:
            return Settled(
                call.id,
                False,
                f"tools.{call.name} returned {size} bytes, more than a program takes as a value "
                f"({limits.value_bytes}, code_value_bytes)",
            )
        return Settled(call.id, True, text, raw)


def _past_room(call: PendingCall, limits: Limits) -> Settled:
    megabytes = limits.memory_bytes // (1024 * 1024)
    return Settled(
        call.id,
        False,
        f"tools.{call.name}: the values of the calls awaited together came to more than half the program's "
        f"memory ({megabytes} MB, code_memory_mb): await fewer at a time",
    )


def _answer(outcome: Outcome, limits: Limits) -> types.CallToolResult:
    """What the client gets: the output, a note when it was cut, then the return value or the error."""
    parts = [outcome.output.rstrip("\n")] if outcome.output else []
    if outcome.output_dropped:
        parts.append(
            f"[output cut: {outcome.output_dropped} more characters not shown; the limit is {limits.output_chars}]"
        )
    if not outcome.ok:
        parts.append(f"Error: {outcome.error}")
    elif outcome.value is not None:  # cut to the output limit already, saying so
        parts.append(f"Returned: {outcome.value}")
    if not parts:
        parts.append("(the program printed nothing and returned nothing)")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(parts))], is_error=not outcome.ok
    )


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
