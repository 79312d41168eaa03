"""A program's engine process: `python -m mcp_manifold._surfaces.code.engine_worker`, started by the gateway.

It runs programs one after another, each in a fresh engine context (`Sandbox`), and asks the gateway for each
round of tool calls. The gateway kills it when a program is past its deadline (`engine_processes.py`);
nothing here needs to stop on its own. Standard output is the gateway's channel: anything else printed goes
to standard error.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import Any, BinaryIO

from mcp_manifold._surfaces.code.engine_wire import read_plainly, write_message
from mcp_manifold._surfaces.code.sandbox import Limits, PendingCall, ProgramStopped, Sandbox, Settled


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    while (job := read_plainly(requests)) is not None:

        def perform(batch: list[PendingCall], seconds_left: float) -> list[Settled]:
            write_message(answers, {"round": [asdict(call) for call in batch], "left": seconds_left})
            reply = read_plainly(requests)
            if reply is None:  # the gateway went away
                raise SystemExit(0)
            if reply.get("stop"):  # the round was cancelled: the program ends as at its deadline
                raise ProgramStopped
            return [Settled(**answer) for answer in reply["answers"]]

        limits: dict[str, Any] = job["limits"]
        outcome = Sandbox(job["names"], Limits(**limits)).run(job["code"], perform)
        write_message(answers, {"done": asdict(outcome)})


def main() -> None:
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the channel
    serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
