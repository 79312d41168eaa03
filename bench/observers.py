"""What the call path's observers cost per call, in-process: the audit line, the Prometheus series, the
dashboard's recent calls, and the record's argument size (bytes of the arguments as JSON).

Each is run `--records` times on one plain tool call's record, best of five rounds, in microseconds: the
steady state of a gateway whose tools have been called before (the first call of a tool also sets up its
Prometheus series).
For a before and after, run it with the other tree first on the path:
``PYTHONPATH=/other/checkout/src .venv/bin/python bench/observers.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

from mcp_manifold._core.router import Target
from mcp_manifold._front.dashboard import RecentCalls
from mcp_manifold._runtime.audit import AuditLog
from mcp_manifold._runtime.call_path import CallRecord, _json_size
from mcp_manifold._runtime.metrics import GatewayMetrics

ARGUMENTS = {"text": "hello world from the bench"}


def best_of(rounds: int, records: int, work: Callable[[], object]) -> float:
    """Microseconds per run of `work`, the best of `rounds` rounds of `records` runs."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(records):
            work()
        best = min(best, (time.perf_counter() - started) / records)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    args = parser.parse_args()
    target = Target("kitchen", "echo", "kitchen_echo", "direct")
    record = CallRecord("tool", target, "client-1", 0.0012345, "ok", None, False, 0.0009, "alice", "default", 30, 12)
    with tempfile.TemporaryDirectory() as folder:
        audit = AuditLog(folder, 1_000_000_000, 1)
        metrics = GatewayMetrics(None)  # type: ignore[arg-type]  # the per-call counting needs no gateway
        recent = RecentCalls()
        costs = {
            "audit line": best_of(5, args.records, lambda: audit(record)),
            "metrics": best_of(5, args.records, lambda: metrics.observe_call(record)),
            "recent calls": best_of(5, args.records, lambda: recent(record)),
            "argument size": best_of(5, args.records, lambda: _json_size(ARGUMENTS)),
        }
        audit.close()
    for name, micros in costs.items():
        print(f"{name:14} {micros:6.2f} us")
    print(f"{'together':14} {sum(costs.values()):6.2f} us")


if __name__ == "__main__":
    main()
