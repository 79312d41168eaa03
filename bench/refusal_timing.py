"""How long the gateway takes to refuse a name the caller's profile hides, against a name that does not exist.

Both must take the same path (recorded as refusals, the same work), so that timing cannot tell them apart.
In process, with the audit on: a caller with a profile calls a hidden tool and a missing one, interleaved,
`--rounds` times each; prints the median and the quartiles of each, in milliseconds.

    python bench/refusal_timing.py --rounds 2000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from mcp_manifold._config import load_config
from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._runtime.gateway import Gateway

SERVERS = Path(__file__).parent.parent / "tests" / "servers"


async def measure(rounds: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as data:
        path = Path(data) / "mcp.json"
        servers = {
            name: {"command": sys.executable, "args": [str(SERVERS / f"{name}.py")]} for name in ("numbers", "words")
        }
        manifold = {"data_dir": data, "profile": "writer"}
        path.write_text(
            json.dumps({"mcpServers": servers, "manifold": manifold, "profiles": {"writer": {"servers": ["words"]}}})
        )
        async with Gateway(load_config(path)) as gateway:
            await gateway.ensure_catalog()
            caller = Caller()
            times: dict[str, list[float]] = {"hidden": [], "missing": []}
            names = {"hidden": "numbers_add", "missing": "numbers_adx"}
            for _ in range(50):  # warm up
                for name in names.values():
                    await gateway.call_tool_by_name(Request(caller), name, {})
            for _ in range(rounds):
                for label, name in names.items():
                    started = time.perf_counter()
                    result = await gateway.call_tool_by_name(Request(caller), name, {})
                    times[label].append((time.perf_counter() - started) * 1000)
                    assert result.is_error
            return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    times = anyio.run(measure, args.rounds)
    for label, values in times.items():
        q1, median, q3 = statistics.quantiles(values, n=4)
        print(f"{label:8} median {median:.3f} ms (quartiles {q1:.3f}-{q3:.3f}) over {len(values)} refusals")


if __name__ == "__main__":
    main()
