"""Tokens the model reads of `proxy-dispatch` answers, in each `dispatch_response` form.

Mini-A's walk-through against the config at the top of docs/dispatch.md (kitchen, numbers, words, clock;
``spill_threshold: 51200``): ``list``, ``search`` for "time", ``call`` of ``get_current_time``, and two
calls of docs/dispatch.md's spill section: ``document`` of 200,000 bytes (auto-spilled) and ``measure``
with that file as ``argumentsFile``. Each request is sent to a real gateway over stdio, once with
``dispatch_response: object`` (the default) and once with ``lean``.

What is counted is what a client shows its model of a tool result: the text of its content blocks, joined
with newlines (``_meta`` is not shown to models and not counted). Tokens are exact, offline, o200k_base,
from ``bpe-openai`` (the bench extra: ``.venv/bin/pip install -e '.[bench]'``).

Run: ``.venv/bin/python bench/dispatch_tokens.py``. Prints a table; writes nothing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ("kitchen", "numbers", "words", "clock")
WALK: list[tuple[str, dict[str, Any]]] = [
    ("list", {"action": "list"}),
    ("search time", {"action": "search", "query": "time"}),
    ("call get_current_time", {"action": "call", "tool": "get_current_time", "arguments": {}}),
    ("call document (spilled)", {"action": "call", "tool": "document", "arguments": {"size": 200000}}),
    ("call measure (argumentsFile)", {"action": "call", "tool": "measure", "argumentsFile": None}),
]


def config(directory: Path, form: str) -> Path:
    servers = {
        name: {"command": sys.executable, "args": [str(ROOT / "tests" / "servers" / f"{name}.py")]} for name in SERVERS
    }
    servers["kitchen"]["env"] = {"KITCHEN_EXTRAS": "1"}
    settings = {"expose": ["dispatch"], "spill_threshold": 51200, "dispatch_response": form, "data_dir": str(directory)}
    path = directory / f"{form}.json"
    path.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    return path


def shown(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def walk(path: Path) -> list[str]:
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path)]
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    texts = []
    spilled = None
    async with Client(params, mode="legacy") as client:
        for _, request in WALK:
            if "argumentsFile" in request:
                request = {**request, "argumentsFile": spilled}
            result = await client.call_tool("proxy-dispatch", request)
            assert not result.is_error, shown(result)
            spilled = (result.meta or {}).get("resultFile", spilled)
            texts.append(shown(result))
    return texts


async def main() -> None:
    from bpe_openai import get_encoding  # the bench extra

    encoding = get_encoding("o200k_base")
    with tempfile.TemporaryDirectory(prefix="manifold-dispatch-tokens-") as tmp:
        forms = {form: await walk(config(Path(tmp), form)) for form in ("object", "lean")}
    counts = {form: [len(encoding.encode_ordinary(text)) for text in texts] for form, texts in forms.items()}
    print(f"{'request':<30} {'object':>8} {'lean':>8} {'difference':>11}")
    for index, (label, _) in enumerate(WALK):
        obj, lean = counts["object"][index], counts["lean"][index]
        print(f"{label:<30} {obj:>8} {lean:>8} {obj - lean:>+11}")
    total_object, total_lean = sum(counts["object"]), sum(counts["lean"])
    print(f"{'total':<30} {total_object:>8} {total_lean:>8} {total_object - total_lean:>+11}")


if __name__ == "__main__":
    anyio.run(main)
